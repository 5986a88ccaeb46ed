"""What the dashboard home counts."""

from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from custody.models import TeardownRequest
from profiles.costs import danger_clocks
from profiles.models import Instance, InstanceState
from projects.models import Project
from runs.models import LIVE_STATES, Run


@dataclass(frozen=True)
class Tile:
    label: str
    value: int
    hint: str


def tiles_for(user) -> list[Tile]:
    projects = Project.objects.visible_to(user)
    from custody.queue import approvable_count

    requests = TeardownRequest.objects.filter(instance__in=Instance.objects.visible_to(user)).pending()
    pending = approvable_count(requests.select_related("instance__project", "run__project", "run__instance"))
    return [
        Tile("Projects", projects.count(), "lines of work"),
        Tile("Instances", Instance.objects.visible_to(user).billing().count(), "registered, not released"),
        Tile("Live runs", Run.objects.visible_to(user).live().count(), "preflight to exited"),
        Tile(
            "Pending approvals",
            pending,
            "consequences waiting for a second person",
        ),
    ]


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
