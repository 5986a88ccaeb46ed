"""The cost envelope: what a project has spent this period, what its live runs are
expected to add, and whether one more attempt of a run needs an approver. No HTTP, no Celery."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from fleet.costs import burn_rate, cost_between
from fleet.models import DriftKind, Instance, ProviderDrift, Resource

CENT = Decimal("0.01")


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the calendar month or the week (from Monday 00:00 UTC) holding now."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    start = day.replace(day=1)
    return start, (start + timedelta(days=32)).replace(day=1)


def running_rate(run) -> Decimal:
    """What the run bills per hour while it runs: its box's rate, plus every other box's of a run over
    several boxes (the cost of a multi-node run is the sum of its boxes)."""
    rate = run.instance.rate_running
    if run.is_multinode:
        rate += sum((peer.instance.rate_running for peer in run.peers.select_related("instance")), Decimal(0))
    return rate


def expected_cost(run) -> Decimal:
    """One attempt: its expected duration at its boxes' running rate."""
    return (running_rate(run) * Decimal(run.expected_minutes) / 60).quantize(CENT)


def terms_of(run) -> dict:
    """What a spend approval is bound to: the box, its running rate, the expected minutes and so the
    cost. An approval of $10 once covered whatever the draft was edited into ($16,666)."""
    return {
        "instance": run.instance_id,
        "rate_running": str(running_rate(run)),
        "expected_minutes": run.expected_minutes,
        "expected_cost": str(expected_cost(run)),
    }


def terms_changed(then: dict, now: dict) -> str:
    """What differs between two terms, as a person reads it ("" when nothing)."""
    names = {"instance": "box", "rate_running": "rate $/h", "expected_minutes": "expected minutes"}
    names["expected_cost"] = "expected cost $"
    return "; ".join(f"{names[key]} {then.get(key)} → {now[key]}" for key in now if then.get(key) != now[key])


@dataclass(frozen=True)
class Envelope:
    budget: Decimal | None
    period: str
    start: datetime
    end: datetime
    spent: Decimal  # billed by the project's boxes inside the period so far
    committed: Decimal  # what its live runs are still expected to cost
    burn: Decimal  # $/h its boxes bill right now

    @property
    def left(self) -> Decimal | None:
        return None if self.budget is None else (self.budget - self.spent - self.committed).quantize(CENT)

    def forecast(self, now: datetime) -> Decimal:
        """Spend at period end if every box keeps billing as it does now."""
        hours_left = max((self.end - now).total_seconds(), 0) / 3600
        return (self.spent + self.burn * Decimal(str(hours_left))).quantize(CENT)

    @property
    def forecast_now(self) -> Decimal:
        return self.forecast(timezone.now())

    @property
    def forecast_over(self) -> bool:
        """The period ends above the budget if the boxes keep billing as now (a warning, not a gate)."""
        return self.budget is not None and self.forecast_now > self.budget

    @property
    def used_percent(self) -> int | None:
        if not self.budget:
            return None
        return min(100, int((self.spent + self.committed) * 100 / self.budget))


def _remaining(run, now) -> Decimal:
    elapsed = (now - run.launched_at).total_seconds() / 60 if run.launched_at else 0
    minutes = max(run.expected_minutes - elapsed, 0)
    return running_rate(run) * Decimal(str(minutes / 60))


def _orphan_cost(drift, start, now) -> Decimal:
    """What an orphan resource billed inside [start, now]: its rate from first seen until resolved."""
    until = min(drift.resolved_at or now, now)
    hours = max((until - max(drift.first_seen, start)).total_seconds(), 0) / 3600
    return drift.rate * Decimal(str(hours))


def _envelope(project, boxes, live_runs, now, resources=(), orphans=()) -> Envelope:
    """Boxes by their state history; resources (volumes, IPs, snapshots) from registration to deletion;
    orphan resources the provider bills under the project's key, from first seen until resolved."""
    start, end = period_bounds(project.budget_period, now)
    spent = sum((cost_between(box, start, now) for box in boxes), Decimal(0))
    spent += sum((resource.cost_between(start, now) for resource in resources), Decimal(0))
    spent += sum((_orphan_cost(drift, start, now) for drift in orphans), Decimal(0))
    committed = sum((_remaining(run, now) for run in live_runs), Decimal(0))
    burn = sum((burn_rate(box) for box in boxes), Decimal(0))
    burn += sum((resource.rate for resource in resources if resource.deleted_at is None), Decimal(0))
    burn += sum((drift.rate for drift in orphans if drift.resolved_at is None), Decimal(0))
    return Envelope(
        project.budget, project.budget_period, start, end, spent.quantize(CENT), committed.quantize(CENT), burn
    )


def _live_runs(projects):
    from runs.models import LIVE_STATES, Run, RunState

    return Run.objects.filter(project__in=projects, state__in=LIVE_STATES - {RunState.EXITED}).select_related(
        "instance"
    )


def envelope_of(project, now=None, exclude_run=None) -> Envelope:
    live = _live_runs([project])
    if exclude_run is not None:
        live = live.exclude(pk=exclude_run.pk)
    boxes = Instance.objects.filter(project=project).with_state_events()
    resources = Resource.objects.filter(instance__project=project)
    orphans = ProviderDrift.objects.filter(project=project, kind=DriftKind.ORPHAN_RESOURCE)
    return _envelope(project, list(boxes), list(live), now or timezone.now(), list(resources), list(orphans))


def envelopes_for(projects, now=None) -> list[tuple]:
    """(project, envelope) for each project with a budget, in four queries however many there are."""
    now = now or timezone.now()
    projects = [project for project in projects if project.budget is not None]
    boxes, live, resources, orphans = defaultdict(list), defaultdict(list), defaultdict(list), defaultdict(list)
    for box in Instance.objects.filter(project__in=projects).with_state_events():
        boxes[box.project_id].append(box)
    for resource in Resource.objects.filter(instance__project__in=projects).select_related("instance"):
        resources[resource.instance.project_id].append(resource)
    for run in _live_runs(projects):
        live[run.project_id].append(run)
    for drift in ProviderDrift.objects.filter(project__in=projects, kind=DriftKind.ORPHAN_RESOURCE):
        orphans[drift.project_id].append(drift)
    return [
        (
            project,
            _envelope(project, boxes[project.pk], live[project.pk], now, resources[project.pk], orphans[project.pk]),
        )
        for project in projects
    ]


def needs_approval(run, now=None) -> str | None:
    """Why one more attempt of run must wait for an approver, or None."""
    project, cost = run.project, expected_cost(run)
    if project.run_cost_threshold is not None and cost > project.run_cost_threshold:
        return f"expected ${cost} is above the project's per-run threshold of ${project.run_cost_threshold}"
    if project.budget is None:
        return None
    envelope = envelope_of(project, now, exclude_run=run)
    if cost > envelope.left:
        return (
            f"expected ${cost} exceeds the ${envelope.left} left of the ${project.budget} envelope "
            f"{project.get_budget_period_display()} (spent ${envelope.spent}, live runs ${envelope.committed})"
        )
    return None


def overrunning(run, now) -> bool:
    """Past its expected duration, in a project with an envelope or a threshold (no query)."""
    project = run.project
    if run.launched_at is None or (project.budget is None and project.run_cost_threshold is None):
        return False
    return (now - run.launched_at).total_seconds() > run.expected_minutes * 60


def overrun_reason(run, now=None) -> str | None:
    """An overrunning attempt whose cost so far is above the threshold, or has taken the envelope
    past its budget: why the envelope is asked again (None: it need not be)."""
    project, now = run.project, now or timezone.now()
    if not overrunning(run, now):
        return None
    elapsed = (now - run.launched_at).total_seconds() / 60
    so_far = (run.instance.rate_running * Decimal(str(elapsed / 60))).quantize(CENT)
    running = f"running {elapsed:.0f} min of an expected {run.expected_minutes}: ${so_far} so far"
    if project.run_cost_threshold is not None and so_far > project.run_cost_threshold:
        return f"{running}, above the per-run threshold of ${project.run_cost_threshold}"
    if project.budget is not None:
        envelope = envelope_of(project, now)
        if envelope.left < 0:
            return f"{running}; the ${project.budget} envelope is overspent by ${-envelope.left}"
    return None
