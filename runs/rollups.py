"""Per-project and per-box totals of runs, GPU hours and verified results, kept as they change.

Every action that changes one calls `add` (or `move`) inside its own transaction, with atomic
`UPDATE … SET n = n + d` so concurrent actions never lose an increment; `mismatches` recomputes
everything from the runs and says where the kept totals differ, `rebuild` makes them equal.
"""

from django.db.models import Count, F, Sum

from runs.models import InstanceTotals, ProjectTotals, Run

FIELDS = ("runs", "gpu_seconds", "verified")
VERIFIED = "verified"  # custody.models.CustodyStatus.VERIFIED


def _bump(model, key: dict, change: dict) -> None:
    model.objects.bulk_create([model(**key)], ignore_conflicts=True)  # the row exists from here on
    model.objects.filter(**key).update(**{field: F(field) + delta for field, delta in change.items()})


def add(run: Run, *, runs: int = 0, gpu_seconds: float = 0.0, verified: int = 0) -> None:
    change = {name: delta for name, delta in zip(FIELDS, (runs, gpu_seconds, verified), strict=True) if delta}
    if change:
        _bump(ProjectTotals, {"project_id": run.project_id}, change)
        _bump(InstanceTotals, {"instance_id": run.instance_id}, change)


def move(run: Run, from_instance_id: int, verified: bool) -> None:
    """The run now belongs to run.instance_id instead of from_instance_id (an edit before it ran)."""
    change = {"runs": 1, "gpu_seconds": run.gpu_seconds, "verified": int(verified)}
    change = {name: delta for name, delta in change.items() if delta}
    _bump(InstanceTotals, {"instance_id": from_instance_id}, {name: -delta for name, delta in change.items()})
    _bump(InstanceTotals, {"instance_id": run.instance_id}, change)


def recomputed() -> dict[tuple[str, int], dict]:
    """Every total from the runs themselves: {("project"|"instance", pk): {runs, gpu_seconds, verified}}."""
    totals = {}
    # Through the reverse relation, so runs/ imports nothing of custody/ (the app above it).
    verified_runs = Run.objects.filter(custody_records__status=VERIFIED).values("pk")
    for kind, column in (("project", "project_id"), ("instance", "instance_id")):
        rows = Run.objects.order_by().values(column).annotate(runs=Count("id"), gpu_seconds=Sum("gpu_seconds"))
        for row in rows:
            totals[kind, row[column]] = {"runs": row["runs"], "gpu_seconds": row["gpu_seconds"] or 0.0, "verified": 0}
        verified = Run.objects.filter(pk__in=verified_runs).order_by().values(column).annotate(n=Count("id"))
        for row in verified:
            totals[kind, row[column]]["verified"] = row["n"]
    return totals


def kept() -> dict[tuple[str, int], dict]:
    rows = {("project", t.project_id): t for t in ProjectTotals.objects.all()}
    rows |= {("instance", t.instance_id): t for t in InstanceTotals.objects.all()}
    return {key: {name: getattr(row, name) for name in FIELDS} for key, row in rows.items()}


def _same(a: dict, b: dict) -> bool:
    # GPU seconds are float sums added in another order: equal within a millionth of a second per hour.
    return a["runs"] == b["runs"] and a["verified"] == b["verified"] and abs(a["gpu_seconds"] - b["gpu_seconds"]) < 1e-3


def _differing():
    """(kind, pk, recomputed, kept) for every total whose kept value is not its recomputation."""
    want, have = recomputed(), kept()
    zero = dict.fromkeys(FIELDS, 0)
    for kind, pk in sorted(set(want) | set(have)):
        should, stored = want.get((kind, pk), zero), have.get((kind, pk), zero)
        if not _same(should, stored):
            yield kind, pk, should, stored


def mismatches() -> list[str]:
    return [f"{kind} {pk}: kept {stored}, recomputed {should}" for kind, pk, should, stored in _differing()]


def rebuild() -> int:
    """Make every kept total equal to its recomputation; returns how many rows changed."""
    changed = 0
    for kind, pk, should, _ in _differing():
        model, key = (ProjectTotals, "project_id") if kind == "project" else (InstanceTotals, "instance_id")
        model.objects.update_or_create(**{key: pk}, defaults=should)
        changed += 1
    return changed
