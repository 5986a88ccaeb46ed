"""Cross-project history: filters, search and keyset pagination over the runs a user may see.

Keyset (created, id) pagination: a page costs the same at run 100,000 as at run 1, where OFFSET
would scan everything before it.
"""

import base64
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, time

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from custody.models import CustodyRecord, CustodyStatus
from fleet.models import Instance
from projects.models import Project
from runs import search
from runs.models import LIVE_STATES, InstanceTotals, ProjectTotals, Run, RunState

PAGE_SIZE = 50
METRIC_COLUMNS = 3
AXES = {"epoch", "seconds", "step"}
# What a history row never shows: a page of 50 runs must not carry 50 curves and node statuses.
HEAVY = ("curve", "last_status", "preflight_report", "smoke_output", "failure_excerpt", "env_identity")
CUSTODY_CHOICES = ("verified", "failed", "none")


@dataclass
class Page:
    runs: list
    next_cursor: str | None
    filters: dict


def _day(text: str, end: bool = False) -> datetime | None:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    return timezone.make_aware(datetime.combine(day, time.max if end else time.min))


def _custody_filter(custody: str) -> Q:
    """Runs whose custody is verified, failed (and never verified), or none: a WHERE, not a column.

    As a column, PostgreSQL computed it as a hashed subplan over every custody record (the planner
    costs it for every row the scan might return, not for the page's 51): the history page grew
    with the data (a 100k-run page 1.4x its 1k figure). The page's flags come from `mark_custody`."""
    verified = Exists(CustodyRecord.objects.filter(run=OuterRef("pk"), status=CustodyStatus.VERIFIED))
    failed = Exists(CustodyRecord.objects.filter(run=OuterRef("pk"), status=CustodyStatus.FAILED))
    if custody == "verified":
        return Q(verified)
    if custody == "failed":
        return ~Q(verified) & Q(failed)
    return ~Q(verified) & ~Q(failed)


def mark_custody(rows: list) -> None:
    """Set custody_verified / custody_failed on a page of runs, in one query for the page."""
    seen = set(
        CustodyRecord.objects.filter(run__in=rows, status__in=(CustodyStatus.VERIFIED, CustodyStatus.FAILED))
        .values_list("run_id", "status")
        .distinct()
    )
    for row in rows:
        row.custody_verified = (row.pk, CustodyStatus.VERIFIED) in seen
        row.custody_failed = (row.pk, CustodyStatus.FAILED) in seen


def filtered(user, params) -> tuple:
    """The runs matching params, and the filters that were understood (the rest are ignored)."""
    runs = Run.objects.visible_to(user)
    used = {}
    for key, lookup in (
        ("project", "project__slug"),
        ("instance", "instance__name"),
        ("platform", "instance__profile_key"),
    ):
        if params.get(key):
            runs, used[key] = runs.filter(**{lookup: params[key]}), params[key]
    if params.get("state") in RunState.values:
        runs, used["state"] = runs.filter(state=params["state"]), params["state"]
    custody = params.get("custody")
    if custody in CUSTODY_CHOICES:
        runs, used["custody"] = runs.filter(_custody_filter(custody)), custody
    if since := _day(params.get("since", "")):
        runs, used["since"] = runs.filter(created__gte=since), params["since"]
    if until := _day(params.get("until", ""), end=True):
        runs, used["until"] = runs.filter(created__lte=until), params["until"]
    if query := params.get("q", "").strip()[:200]:
        used["q"] = query
        runs = search.matching(runs, query)
    return runs, used


def encode_cursor(run, oldest_first: bool) -> str:
    raw = f"{'a' if oldest_first else 'd'}|{run.created.isoformat()}|{run.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_cursor(cursor: str):
    try:
        direction, created, pk = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        return direction == "a", datetime.fromisoformat(created), int(pk)
    except (ValueError, UnicodeDecodeError):
        return None


def page_of(user, params) -> Page:
    runs, used = filtered(user, params)
    oldest_first = params.get("sort") == "oldest"
    if oldest_first:
        used["sort"] = "oldest"
    cursor = decode_cursor(params.get("after", "")) if params.get("after") else None
    if cursor and cursor[0] == oldest_first:
        _, created, pk = cursor
        after = Q(created__gt=created) | Q(created=created, pk__gt=pk)
        before = Q(created__lt=created) | Q(created=created, pk__lt=pk)
        runs = runs.filter(after if oldest_first else before)
    order = ["created", "id"] if oldest_first else ["-created", "-id"]
    rows = list(runs.select_related("project", "instance").defer(*HEAVY).order_by(*order)[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    mark_custody(rows)
    return Page(rows, encode_cursor(rows[-1], oldest_first) if more else None, used)


def seconds_run(run, now) -> float | None:
    """Wall time of the run's latest attempt: launch to exit, or to now while it runs."""
    if not run.launched_at:
        return None
    end = run.exited_at or (now if run.state in LIVE_STATES else None)
    return max(0.0, (end - run.launched_at).total_seconds()) if end else None


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, hours = int(seconds // 60), int(seconds // 3600)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{minutes} min"
    if seconds < 86400:
        return f"{hours} h {minutes % 60:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def metric_columns(runs, limit: int = METRIC_COLUMNS) -> list[str]:
    """The metrics most of these runs log (from each run's latest curve row)."""
    counts = Counter(
        name
        for run in runs
        for name, value in run.last_metrics.items()
        if name not in AXES and isinstance(value, int | float) and not isinstance(value, bool)
    )
    return [name for name, _ in counts.most_common(limit)]


def describe(runs, now) -> list[str]:
    """Give each run its duration and latest metric values; returns the metric columns."""
    columns = metric_columns(runs)
    for run in runs:
        run.duration = duration_text(seconds_run(run, now))
        run.metric_values = [run.last_metrics.get(name) for name in columns]
    return columns


def totals(user, params) -> dict[str, list[dict]]:
    """Per project and per box: runs, GPU hours and verified results the user may see, narrowed by the
    project/instance/platform filters — read from the kept totals (`runs/rollups.py`), never a scan
    of the runs, so the page costs the same at 100,000 runs as at 100."""
    boxes = InstanceTotals.objects.filter(instance__in=Instance.objects.visible_to(user))
    projects = ProjectTotals.objects.filter(project__in=Project.objects.visible_to(user))
    if params.get("project"):
        boxes = boxes.filter(instance__project__slug=params["project"])
        projects = projects.filter(project__slug=params["project"])
    if params.get("instance"):
        boxes = boxes.filter(instance__name=params["instance"])
    if params.get("platform"):
        boxes = boxes.filter(instance__profile_key=params["platform"])

    def row(name, kept):
        return {"name": name, "runs": kept.runs, "gpu_hours": kept.gpu_seconds / 3600, "verified": kept.verified}

    return {
        "instance": [row(t.instance.name, t) for t in boxes.select_related("instance").order_by("instance__name")],
        "project": [row(t.project.name, t) for t in projects.select_related("project").order_by("project__name")],
    }
