"""The pages that combine what the apps below hold: the dashboard, the history page, comparison, the
instance page, the sweep grid and the approval queue. Thin: each reads through the apps' own queries."""

from decimal import Decimal

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from console import compare, history
from console.dashboard import clock_alarms, idle_billing, open_drift, orphan_resources, tiles_for
from core.audit import export_audit, filter_audit
from core.health import system_health
from core.models import AuditAction, AuditEntry
from custody.models import CustodyStatus
from delivery.facts import verified_first
from delivery.models import TeardownRequest, TeardownStatus
from delivery.panel import teardown_panel
from delivery.queue import waiting
from fleet.costs import accrued_cost, danger_clocks, timer_line
from fleet.forms import StateForm
from fleet.models import Instance, InstanceProbe, InstanceState, ProviderBalance
from platforms import catalog
from platforms.resources import kinds_for
from projects.models import Project, Role
from rentals.models import Rental, RentalState
from runs.gpu_use import idle_past_window
from runs.models import Run, RunState, SpendRequest, SpendStatus, Sweep, WatchLease
from runs.spend import envelopes_for
from wrapper.digits import ascii_int


def dashboard(request):
    context = {
        "tiles": tiles_for(request.user),
        "projects": Project.objects.visible_to(request.user)[:50],
        "checks": system_health(),
        "can_create_project": request.user.has_perm("projects.add_project"),
        "idle_billing": idle_billing(Instance.objects.visible_to(request.user).with_state_events()),
        "clock_alarms": clock_alarms(Instance.objects.visible_to(request.user)),
        "idle_gpus": idle_past_window(
            Run.objects.visible_to(request.user)
            .live()
            .filter(gpu_idle_since__isnull=False)
            .select_related("project", "instance")
            .order_by("gpu_idle_since")[:50],
            timezone.now(),
        ),
        "drift": open_drift(request.user),
        "orphan_resources": orphan_resources(Instance.objects.visible_to(request.user)),
        "envelopes": envelopes_for(Project.objects.visible_to(request.user).filter(budget__isnull=False)[:50]),
        "rents": Rental.objects.visible_to(request.user).in_flight().select_related("project")[:20],
        "first_steps": first_steps(request.user),
    }
    return render(request, "runs/dashboard.html", context)


def first_steps(user) -> list[dict] | None:
    """Until someone has a run: the three first steps (a project, a box, a run) as links, each marked
    done once it is; None after (one query then)."""
    if Run.objects.visible_to(user).exists():
        return None
    has_project = Project.objects.visible_to(user).exists()
    has_box = has_project and Instance.objects.visible_to(user).exists()
    return [
        {"done": has_project, "label": "Create a project", "url": reverse("project-create")},
        {"done": has_box, "label": "Register a box (any SSH box, or rent one)", "url": reverse("instance-create")},
        {"done": False, "label": "Create a run and start its preflight", "url": reverse("run-create")},
    ]


def run_list(request):
    """Cross-project history: every run the user may see, filtered, searched, keyset-paginated."""
    page = history.page_of(request.user, request.GET)
    context = {
        "page": page,
        "metric_columns": history.describe(page.runs, timezone.now()),
        "states": RunState.choices,
        "projects": Project.objects.visible_to(request.user),
        "platforms": catalog.choices(),
        "custody_choices": history.CUSTODY_CHOICES,
        "query": request.GET,
        **totals_with_cost(request.user, request.GET),
        "can_create": request.user.has_perm("projects.operate"),
    }
    return render(request, "runs/run_list.html", context)


def totals_with_cost(user, params) -> dict:
    """Per project and per instance: runs, GPU hours, verified results, and what the boxes cost so far."""
    cost = {
        box.name: (box.project.name, accrued_cost(box).total)
        for box in Instance.objects.visible_to(user).select_related("project").with_state_events()
    }
    grouped = history.totals(user, params)
    by_instance, by_project = grouped["instance"], grouped["project"]
    for row in by_instance:
        row["cost"] = cost.get(row["name"], (None, 0))[1]
    for row in by_project:
        row["cost"] = sum(total for project, total in cost.values() if project == row["name"])
    return {"by_project": by_project, "by_instance": by_instance}


COMPARE_LIMIT = 24  # runs on one compare page: a sweep of a few cells × seeds


def run_compare(request):
    ids = [run_id for run_id in request.GET.getlist("run") if run_id][:COMPARE_LIMIT]
    visible = Run.objects.visible_to(request.user).filter(run_id__in=ids)
    runs = {r.run_id: r for r in verified_first(visible)}  # one query for every run's verified records
    chosen = [runs[run_id] for run_id in dict.fromkeys(ids) if run_id in runs]
    if len(chosen) < 2:
        messages.error(request, "Pick at least two runs you can see to compare.")
        return redirect("run-list")
    result = compare.compare(chosen)
    if request.GET.get("format") == "json":
        return JsonResponse(compare.as_dict(result), json_dumps_params={"indent": 2})
    template = "runs/compare_report.html" if request.GET.get("report") else "runs/compare.html"
    return render(request, template, result)


def sweep_detail(request, pk):
    sweep = get_object_or_404(Sweep.objects.filter(project__in=Project.objects.visible_to(request.user)), pk=pk)
    grid = sweep_grid(sweep)
    if request.GET.get("format") == "json":
        cells = [
            {
                "run_id": row["run"].run_id,
                "state": row["run"].state,
                "label": row["run"].get_state_display(),
                "metric": row["metric"],
                "custody": row["custody"],
            }
            for row in grid
        ]
        return JsonResponse({"cells": cells})
    return render(request, "runs/sweep_detail.html", {"sweep": sweep, "grid": grid})


def sweep_grid(sweep) -> list[dict]:
    """Each cell with its newest verified metric; custody records come in one query for every cell."""
    rows = []
    for run in sweep.cells.select_related("instance").prefetch_related("custody_records").order_by("cell"):
        records = run.custody_records.all()
        verified = [r for r in records if r.status == CustodyStatus.VERIFIED]
        record = max(verified, key=lambda r: (r.verified_at, r.pk)) if verified else None
        metric = (record.evidence.get("metrics") or [None])[0] if record else None
        custody = "verified" if record else ("failed" if any(r.status == CustodyStatus.FAILED for r in records) else "")
        rows.append({"run": run, "metric": metric, "custody": custody})
    return rows


def instance_detail(request, pk):
    instance = get_object_or_404(Instance.objects.visible_to(request.user).select_related("project"), pk=pk)
    probes = list(instance.probes.all()[:20])
    teardown = teardown_panel(instance, all_exports=request.GET.get("exports") == "all")
    has_live_run = bool(teardown["live"] or teardown["queued"])  # the teardown checks' own reading
    latest_audit = instance.probes.filter(kind=InstanceProbe.Kind.AUDIT, ok=True).first()
    can_operate = request.user.has_perm("projects.operate", instance.project)
    context = {
        "instance": instance,
        "profile": instance.profile,
        "events": instance.events.select_related("actor")[:50],
        "probes": probes,
        "latest_audit": latest_audit,
        "state_form": StateForm(initial={"state": instance.state}),
        "can_operate": can_operate,
        # A released box has nothing left to delete evidence from: no selection, no form.
        "may_select_evidence": can_operate and instance.state != "released",
        "teardown": teardown,
        "waste_alarms": list(instance.waste_alarms.all()[:5]),
        "balance": _balance_of(instance),
        "prefill": _prefill(instance, request.GET.get("waste", "")),
        "clocks": [
            *danger_clocks(instance, has_live_run),
            *filter(None, [timer_line(instance)]),
        ],
        "cost": accrued_cost(instance),
        "watch": _watch_of(instance),
        "resources": _resources_of(instance),
        "confirm_with_console": _confirm_with_console(instance, has_live_run),
        "console_states": [("running", "Running (billing)"), ("stopped", "Stopped")],
        "resource_kinds": kinds_for(instance.profile_key),
        "durable_tiers": [t["name"] for t in instance.profile.tiers if not instance.profile.loses(t, "release")],
    }
    return render(request, "fleet/instance_detail.html", context)


def _balance_of(instance):
    """The account balance under the box's API key, as its provider last said (none without a key)."""
    if not instance.api_credential_id:
        return None
    return ProviderBalance.objects.filter(
        profile_key=instance.profile_key, credential=instance.api_credential_id
    ).first()


def _prefill(instance, alarm_pk: str) -> dict | None:
    """The request a waste alarm's link suggests, prefilled in the teardown panel beside its checks."""
    pk = ascii_int(alarm_pk)
    alarm = instance.waste_alarms.filter(pk=pk).first() if pk is not None else None
    if alarm is None or alarm.kind == "gpu_idle":  # a run's idle GPUs: the run is stopped, not the box
        return None
    return {"kind": alarm.suggested, "reason": alarm.message}


def _confirm_with_console(instance, has_live_run: bool) -> bool:
    """No provider API tells us how a console-only box bills: ask a person when it matters (its state
    is unknown, or it runs with nothing of ours on it)."""
    if instance.profile.data["teardown"]["release"]["via"] == "api" or instance.profile.is_local:
        return False
    return instance.state == InstanceState.UNKNOWN or (instance.state == InstanceState.RUNNING and not has_live_run)


def _resources_of(instance) -> list[tuple]:
    """(resource, what it billed so far) for the box's billable resources, deleted ones last."""
    now = timezone.now()
    resources = sorted(instance.resources.all(), key=lambda r: (r.deleted_at is not None, r.name))
    return [
        (resource, resource.cost_between(resource.created, now).quantize(Decimal("0.01"))) for resource in resources
    ]


def _watch_of(instance):
    """The watcher's lease, if one holds it: it knows when the box stopped answering its probes."""
    return WatchLease.objects.filter(instance=instance).first()


def approval_queue(request):
    pending = waiting(
        TeardownRequest.objects.visible_to(request.user)
        .pending()
        .select_related("instance__project", "requester", "run__project", "run__instance")
    )
    decided = (
        TeardownRequest.objects.visible_to(request.user)
        .exclude(status=TeardownStatus.PENDING)
        .select_related("instance", "requester", "approver")[:30]
    )
    spends = SpendRequest.objects.filter(run__in=Run.objects.visible_to(request.user)).select_related(
        "run__project", "run__instance", "requester", "approver"
    )
    attention = (
        TeardownRequest.objects.visible_to(request.user)
        .needs_person()
        .select_related("instance__project", "requester", "approver")
    )
    # Evidence deletions filed from one selection are decided as one (each still on its own check).
    batches: dict = {}
    for item in pending:
        if item.request.batch:
            batches.setdefault(item.request.batch, []).append(item)
    batches = {batch: items for batch, items in batches.items() if len(items) > 1}
    context = {
        "pending": [item for item in pending if item.request.batch not in batches],
        "batches": [
            {"batch": batch, "items": items, "first": items[0].request, "approvable": sum(i.approvable for i in items)}
            for batch, items in batches.items()
        ],
        "attention": attention,
        "decided": decided,
        # Which of these projects this person decides for (one query): an approver of another project
        # sees a request of this one, as a member, but never a button to decide it.
        "approver_of": set(Project.objects.where_role(request.user, Role.APPROVER).values_list("pk", flat=True)),
        "spends_pending": spends.filter(status=SpendStatus.PENDING),
        "spends_decided": spends.exclude(status=SpendStatus.PENDING)[:10],
        "rents_pending": Rental.objects.visible_to(request.user)
        .filter(state=RentalState.REQUESTED)
        .select_related("project", "requester"),
    }
    return render(request, "delivery/approval_queue.html", context)


AUDIT_PAGE = 100


def audit_log(request):
    """Every change to access, credentials, money and evidence, from the one log: an admin sees all of
    it, a member what touched their projects; filtered, and exported as CSV or JSON."""
    entries = AuditEntry.objects.select_related("actor", "subject", "project", "instance", "run")
    if not request.user.is_superuser:
        entries = entries.filter(project__in=Project.objects.visible_to(request.user))
    entries = filter_audit(entries, request.GET)
    if request.GET.get("format") in ("csv", "json"):
        return export_audit(entries, request.GET["format"])
    # A page of the newest entries, then older ones by id (keyset: the log only grows, and a page never
    # shifts under a reader while entries are added); the exports hold every entry the filters match.
    query = request.GET.copy()
    before = ascii_int(query.pop("before", [""])[-1])
    if before is not None:
        entries = entries.filter(id__lt=before)
    rows = list(entries.order_by("-id")[: AUDIT_PAGE + 1])
    newest = query.urlencode() if before is not None else None
    older = None
    if len(rows) > AUDIT_PAGE:
        rows = rows[:AUDIT_PAGE]
        query["before"] = rows[-1].id
        older = query.urlencode()
    context = {"entries": rows, "areas": AuditAction.areas(), "older": older, "newest": newest}
    return render(request, "console/audit_log.html", {**context, "query": request.GET})
