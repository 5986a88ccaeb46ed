"""Compare runs: identities, resolved configs, recomputed metrics, curves, and what the comparison can claim."""

from pathlib import Path

import yaml
from django.utils import timezone

from console.history import duration_text, metric_columns, seconds_run
from custody.evidence import latest_verified
from runs.models import SourceKind

IDENTITY_FIELDS = [
    ("resolved_commit", "commit"),
    ("source_tree_sha256", "source tree"),
    ("config_sha256", "config"),
    ("manifest_sha256", "data manifest"),
    ("data_sha256", "dataset"),
    ("hooks_sha256", "platform hooks"),
]
SEED_KEYS = ("seed", "random_seed", "deterministic")


def resolved_config(run) -> dict | None:
    """The config as run: the sealed export's copy in custody, else the control-side source file with
    the run's overrides merged in (as they were shipped)."""
    record = latest_verified(run)
    candidates = [(Path(record.uri) / "config.yaml", {})] if record and not record.copy_deleted_at else []
    if run.source_kind == SourceKind.LOCAL_DIR:
        candidates.append((Path(run.source_path) / run.config_path, run.config_overrides))
    for path, overrides in candidates:
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict):
            return {**data, **overrides}
    return None


def _flat(config: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flat(value, name + "."))
        else:
            flat[name] = value
    return flat


def config_diff(configs: list[dict | None]) -> list[dict]:
    """Keys whose values differ between the runs (missing counts as a difference)."""
    flats = [_flat(config) if config else {} for config in configs]
    keys = sorted(set().union(*flats))
    rows = []
    for key in keys:
        values = [flat.get(key, "—") for flat in flats]
        if len({repr(value) for value in values}) > 1:
            rows.append({"key": key, "values": values})
    return rows


def metrics_of(run) -> dict:
    record = latest_verified(run)
    if not record:
        return {}
    return {f"{m['test']}/{m['name']}": m for m in record.evidence.get("metrics", [])}


def training(runs: list) -> list[dict]:
    """How long each run trained, how far it got, and where its logged metrics ended (unverified)."""
    now = timezone.now()
    rows = [
        {"label": "duration", "values": [duration_text(seconds_run(run, now)) for run in runs]},
        {"label": "epochs logged", "values": [len(run.curve) for run in runs]},
    ]
    for name in metric_columns(runs, limit=20):
        values = [run.last_metrics.get(name) for run in runs]
        rows.append({"label": name, "values": [f"{v:.4g}" if isinstance(v, int | float) else "—" for v in values]})
    return rows


def compare(runs: list) -> dict:
    configs = [resolved_config(run) for run in runs]
    diff = config_diff(configs)
    identities = []
    for field, label in IDENTITY_FIELDS:
        values = [getattr(run, field) or "—" for run in runs]
        identities.append({"label": label, "values": values, "differs": len(set(values)) > 1})
    metric_names = sorted(set().union(*(metrics_of(run) for run in runs)))
    metrics = [{"name": name, "values": [metrics_of(run).get(name) for run in runs]} for name in metric_names]
    # The config hash changes with any key, so config keys count one by one; other identities count once.
    variables = [row["key"] for row in diff]
    counted = ("commit", "data manifest", "dataset", "platform hooks")
    variables += [row["label"] for row in identities if row["differs"] and row["label"] in counted]
    seeds = [
        {key: (config or {}).get(key) for key in SEED_KEYS if (config or {}).get(key) is not None} for config in configs
    ]
    notes = [
        f"The config of {run.run_id} could not be read: its differences are unknown."
        for run, config in zip(runs, configs, strict=True)
        if config is None
    ]
    if len(variables) > 1:
        notes.append(
            f"This comparison changes {len(variables)} variables ({', '.join(variables[:6])}); "
            "an ablation should change exactly one."
        )
    if not all(seed.get("seed") is not None or seed.get("random_seed") is not None for seed in seeds):
        notes.append("Some runs record no seed: a difference in metrics may be noise.")
    elif len({repr(seed) for seed in seeds}) == 1 and len(runs) > 1 and not variables:
        notes.append("Same seed and config: any difference is nondeterminism.")
    return {
        "runs": runs,
        "identities": identities,
        "diff": diff,
        "metrics": metrics,
        "training": training(runs),
        "variables": variables,
        "notes": notes,
        "curves": [{"run_id": run.run_id, "title": run.title, "rows": run.curve} for run in runs],
    }
