"""What the dashboard home counts."""

from dataclasses import dataclass

from custody.models import TeardownRequest
from profiles.models import Instance
from runs.models import Project, Run


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
