"""A project's cost envelope after creation: operators and approvers of the project set or
change it, each change audited; a forecast above the budget is told once per period. No HTTP here.

An operator may only tighten it (lower a limit, set one where there was none): a wider envelope lets
runs start without an approver, so widening it is an approver's decision."""

from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from core.audit import record
from core.models import AuditAction
from notifications.actions import do_notify
from notifications.models import Event
from projects.models import IDLE_BOUNDS, Project
from runs.spend import envelope_of, envelopes_for

FIELDS = ("budget", "budget_period", "run_cost_threshold", "gpu_idle_percent", "gpu_idle_minutes")
# The idle-GPU alarm's settings (delivery/waste.py) change what the project is told, not what it may
# spend: an operator changes them either way, within projects.models.IDLE_BOUNDS.
PERIODS = {"month", "week"}


def may_change_envelope(user, project) -> bool:
    return user.has_perm("projects.operate", project) or user.has_perm("projects.approve_cost", project)


def widens(project, values: dict) -> list[str]:
    """The fields whose new value would let more spend through without an approver."""
    wider = ["budget_period"] if values["budget_period"] != project.budget_period else []
    for field in ("budget", "run_cost_threshold"):
        before, after = getattr(project, field), values[field]
        if before is not None and (after is None or after > before):
            wider.append(field)
    return wider


def do_set_envelope(project_id: int, values: dict, *, actor) -> list[str]:
    """The envelope becomes values (budget, budget_period, run_cost_threshold; None: no limit); returns
    what changed. Refused to anyone who is neither an operator nor an approver of the project."""
    _check(values)
    with transaction.atomic(durable=True):
        project = Project.objects.select_for_update(no_key=True).get(pk=project_id)
        if not may_change_envelope(actor, project):
            raise PermissionDenied("Only an operator or an approver of the project changes its cost envelope.")
        wider = widens(project, values)
        if wider and not actor.has_perm("projects.approve_cost", project):
            names = ", ".join(field.replace("_", " ") for field in wider)
            raise PermissionDenied(
                f"Widening the envelope ({names}) lets runs start without an approver: an approver of the"
                " project makes that change. An operator may lower a limit or set one."
            )
        changed = []
        for field in (field for field in FIELDS if field in values):  # absent: unchanged
            before, after = getattr(project, field), values[field]
            if before != after:
                setattr(project, field, after)
                was, now = _text(before), _text(after)
                message = f"{field.replace('_', ' ')}: {was or 'none'} → {now or 'none'}"
                record(
                    AuditAction.ENVELOPE_CHANGED,
                    message,
                    actor=actor,
                    project=project,
                    field=field,
                    before=was,
                    after=now,
                )
                changed.append(field)
        if changed:
            project.forecast_warned_for = None  # a new envelope is warned about afresh
            project.save(update_fields=[*changed, "forecast_warned_for"])
    return changed


def _check(values: dict) -> None:
    if values.get("budget_period") not in PERIODS:
        raise ValidationError("The budget period is a month or a week.")
    for field in ("budget", "run_cost_threshold"):
        value = values.get(field)
        if value is not None and (not isinstance(value, Decimal) or value < 0 or value >= Decimal("1e8")):
            raise ValidationError("A spend limit is zero or more dollars, below $100,000,000.")
    for field, (low, high) in IDLE_BOUNDS.items():
        value = values.get(field, low)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValidationError(f"The {field.replace('_', ' ')} is a whole number from {low} to {high}.")


def _text(value) -> str:
    return "none" if value is None else str(value)


def do_warn_forecasts(now=None) -> list[str]:
    """Beat: each project whose forecast at period end exceeds its budget is told once per period.

    Every envelope is read at once (envelopes_for: a fixed number of queries); only the projects that
    look overrun and not yet told are locked and measured again, as the envelope may have changed."""
    now = now or timezone.now()
    candidates = [
        project.pk
        for project, envelope in envelopes_for(Project.objects.filter(budget__isnull=False), now)
        if envelope.forecast(now) > envelope.budget and project.forecast_warned_for != envelope.start
    ]
    warned = []
    for project_id in candidates:
        with transaction.atomic(durable=True):
            project = Project.objects.select_for_update(no_key=True).get(pk=project_id)
            if project.budget is None:
                continue
            envelope = envelope_of(project, now)
            forecast = envelope.forecast(now)
            if forecast <= project.budget or project.forecast_warned_for == envelope.start:
                continue
            project.forecast_warned_for = envelope.start
            project.save(update_fields=["forecast_warned_for"])
            period = project.get_budget_period_display()
            text = (
                f"{project.name}: at the current burn of ${envelope.burn:.2f}/h the period ends at ${forecast}, "
                f"above its ${project.budget} budget {period} (spent so far ${envelope.spent}). "
                "Stop or release what is not needed, or raise the budget on the project page."
            )
            do_notify(
                project.pk, Event.BUDGET, f"{project.name}: forecast ${forecast} > budget ${project.budget}", text
            )
            warned.append(project.slug)
    return warned
