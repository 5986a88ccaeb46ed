"""What the dashboard home counts."""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from delivery.models import TeardownRequest
from fleet.costs import danger_clocks
from fleet.models import MAY_BE_ON, ClockAlarm, Instance, InstanceState, ProviderDrift, Resource
from projects.models import Project
from runs.models import LIVE_STATES, Run, SpendRequest, SpendStatus


@dataclass(frozen=True)
class Tile:
    label: str
    value: int
    hint: str


def tiles_for(user) -> list[Tile]:
    projects = Project.objects.visible_to(user)
    from delivery.queue import approvable_count

    requests = TeardownRequest.objects.visible_to(user).pending()
    pending = approvable_count(requests.select_related("instance__project", "run__project", "run__instance"))
    pending += SpendRequest.objects.filter(status=SpendStatus.PENDING, run__in=Run.objects.visible_to(user)).count()
    attention = TeardownRequest.objects.visible_to(user).needs_person().count()
    return [
        Tile("Projects", projects.count(), "lines of work"),
        Tile("Instances", Instance.objects.visible_to(user).billing().count(), "registered, not released"),
        Tile("Live runs", Run.objects.visible_to(user).live().count(), "preflight to exited"),
        Tile(
            "Pending approvals",
            pending,
            "consequences and spending waiting for a second person",
        ),
        Tile("Needs a person", attention, "teardowns whose outcome an approver must settle"),
    ]


def clock_alarms(instances) -> list[ClockAlarm]:
    """The banner: alarms of boxes still stopped whose clock fires from a day ago onwards, soonest first."""
    since = timezone.now() - timedelta(days=1)
    # Clocks still ticking: a stopped box's clocks, a running box's platform timer.
    stopped = Q(instance__in=instances.filter(state=InstanceState.STOPPED)) & ~Q(clock="timer")
    timed = Q(clock="timer", instance__in=instances.filter(state__in=MAY_BE_ON))
    alarms = ClockAlarm.objects.filter(stopped | timed, fires_at__gt=since)
    latest = {}
    for alarm in alarms.select_related("instance").order_by("fires_at", "threshold_hours"):
        latest.setdefault((alarm.instance_id, alarm.clock, alarm.fires_at), alarm)  # the tightest per clock
    return list(latest.values())


def open_drift(user) -> list[ProviderDrift]:
    """Provider drift a user may see (every row for an admin): a resource no project owns, under a key
    granted to one of the user's projects, or drift of a box of the user's own projects. Under a key
    shared by two projects, B's dashboard once showed the names and states of A's boxes."""
    drift = ProviderDrift.objects.filter(resolved_at__isnull=True).select_related("instance")
    if not user.is_superuser:
        visible = Project.objects.visible_to(user)
        unowned = Q(instance__isnull=True, credential__projects__in=visible)
        drift = drift.filter(unowned | Q(instance__project__in=visible)).distinct()
    return list(drift.order_by("-first_seen", "-id")[:50])


def idle_billing(instances) -> list[tuple]:
    """(instance, its clocks) for boxes that bill while nothing of ours runs on them."""
    live = Exists(Run.objects.filter(instance=OuterRef("pk"), state__in=LIVE_STATES))
    billing = instances.exclude(state=InstanceState.RELEASED).select_related("project").annotate(has_live_run=live)
    rows = []
    for instance in billing:
        if instance.state == InstanceState.STOPPED and not instance.rate_stopped:
            continue
        clocks = danger_clocks(instance, instance.has_live_run)
        if clocks:
            rows.append((instance, clocks))
    return rows


def orphan_resources(instances) -> list:
    """Resources still billing after their box was released: the orphan bleed."""
    released = instances.filter(state=InstanceState.RELEASED)
    return list(Resource.objects.filter(instance__in=released, deleted_at__isnull=True).select_related("instance")[:50])
