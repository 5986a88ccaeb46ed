"""Compare runs: identities, resolved configs, recomputed metrics, curves, and what the comparison can claim.

Runs that differ in nothing but the seed are replicates of one configuration (a group); each group's
recomputed metrics are summarised over its seeds, and each pair of groups is labelled effect, noise or
unknown by the rule in console/stats.py. Every variable that differs between groups is listed.
"""

from pathlib import Path

import yaml
from django.utils import timezone

from console import stats
from console.history import duration_text, metric_columns, seconds_run
from custody.copies import latest_verified
from runs.models import SourceKind

IDENTITY_FIELDS = [
    ("resolved_commit", "commit"),
    ("source_tree_sha256", "source tree"),
    ("config_sha256", "config"),
    ("manifest_sha256", "data manifest"),
    ("data_sha256", "dataset"),
    ("hooks_sha256", "platform hooks"),
]
SEED_KEYS = ("seed", "random_seed", "seeds")
# What two results must share before a difference between them may be called an effect.
FAIRNESS = ("test population", "selection", "evaluation code", "budget")


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


def seed_of(run, config: dict | None) -> str:
    """The seed(s) the run used: as custody read them from its run.json, else its config's."""
    record = latest_verified(run)
    recorded = (record.evidence.get("reproducibility") or {}).get("seeds") if record else None
    if recorded:
        return ", ".join(f"{key}={value}" for key, value in sorted(recorded.items()))
    found = {key: (config or {}).get(key) for key in SEED_KEYS if (config or {}).get(key) is not None}
    return ", ".join(f"{key}={value}" for key, value in sorted(found.items())) or "—"


def _declared_gpu(instance) -> str:
    """A GPU nobody measured is what its box's page declares, said as such (never read as a measurement)."""
    return f"{instance.gpu_description} (declared, not measured)" if instance.gpu_description else "not measured"


def variables_of(run, config: dict | None) -> dict[str, str]:
    """Everything a result may depend on, but the seed and the box: config keys, code, data, GPU, environment,
    and what custody read of its test population, selection, evaluation code and budget (epochs)."""
    found = {f"config {key}": repr(value) for key, value in _flat(config or {}).items() if key not in SEED_KEYS}
    if config is None:
        found["config"] = f"unreadable ({run.run_id})"  # unknown: never grouped with another
    for field, label in IDENTITY_FIELDS:
        # The config hash changes with the seed (its keys count instead), and so does the tree, which
        # holds the config: the code's own hash (the tree without the config) counts instead.
        if field not in ("config_sha256", "source_tree_sha256"):
            found[label] = getattr(run, field) or "—"
    code = (run.preflight_report.get("hashes") or {}).get("code_sha256") if run.preflight_report else None
    found["code"] = code or run.source_tree_sha256 or "—"
    env = run.env_identity or {}
    # Not the box: replicates spread over boxes are still replicates. What makes two boxes' runs
    # incomparable is what was measured on them (GPU model, environment, data), each a variable of its own.
    found["GPU model"] = ", ".join(env.get("gpu_names") or []) or _declared_gpu(run.instance)
    for key, label in (("python", "Python"), ("torch", "torch"), ("cuda", "CUDA")):
        found[label] = str(env.get(key) or "—")
    # The whole environment: a numpy or a CUDA library that differs is a variable too (its hash, short).
    found["packages"] = (env.get("packages_sha256") or "—")[:12]
    found["lock file"] = (env.get("lock_sha256") or "—")[:12]
    found["image"] = run.instance.image or "—"  # a rented box's image as sent (a tag may name two images)
    record = latest_verified(run)
    for name in FAIRNESS:  # what custody read from its run.json (population.fairness)
        found[name] = str(((record.evidence.get("fairness") or {}) if record else {}).get(name, "unverified"))
    return found


def groups_of(runs: list, configs: list) -> list[dict]:
    """Runs that differ in nothing but the seed form one group (replicates), in the order first seen."""
    groups: dict[tuple, dict] = {}
    for run, config in zip(runs, configs, strict=True):
        variables = variables_of(run, config)
        key = tuple(sorted(variables.items()))
        group = groups.setdefault(key, {"runs": [], "members": [], "variables": variables})
        group["runs"].append(run)
        group["members"].append({"run": run, "seed": seed_of(run, config)})
    ordered = list(groups.values())
    for index, group in enumerate(ordered):
        group["label"] = chr(ord("A") + index) if index < 26 else f"G{index + 1}"
    return ordered


def differing(groups: list[dict]) -> list[dict]:
    """The variables whose values differ between groups, with each group's value."""
    names = sorted(set().union(*(group["variables"] for group in groups)))
    rows = []
    for name in names:
        values = [group["variables"].get(name, "—") for group in groups]
        if len(set(values)) > 1:
            rows.append({"name": name, "values": values})
    return rows


def replicate_stats(groups: list[dict]) -> list[dict]:
    """Per recomputed metric: each group's mean ± spread and 95% interval over its seeds, and what each
    pair of groups can claim (stats.RULE)."""
    per_run = {run.pk: metrics_of(run) for group in groups for run in group["runs"]}
    names = sorted(set().union(*per_run.values())) if per_run else []
    rows = []
    for name in names:
        direction = next((m[name].get("direction") for m in per_run.values() if name in m), None)
        summaries = [
            stats.summary([per_run[run.pk][name]["recomputed"] for run in group["runs"] if name in per_run[run.pk]])
            for group in groups
        ]
        pairs = [
            _pair(groups[i], groups[j], stats.verdict(a, b, direction))
            for i, a in enumerate(summaries)
            for j, b in enumerate(summaries)
            if i < j and a is not None and b is not None
        ]
        rows.append({"name": name, "direction": direction, "summaries": summaries, "pairs": pairs})
    return rows


def _pair(a: dict, b: dict, verdict) -> dict:
    """A pair's label: the verdict, unless the two differ in what a fair comparison holds equal."""
    unfair = [name for name in FAIRNESS if a["variables"].get(name) != b["variables"].get(name)]
    label = "unfair" if unfair else verdict.label
    return {"a": a["label"], "b": b["label"], "verdict": verdict, "label": label, "unfair": unfair}


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


def comparison_notes(runs, configs, variables, seeds, groups) -> list[str]:
    """What makes the comparison weaker than it looks, said above it."""
    notes = [
        f"The config of {run.run_id} could not be read: its differences are unknown."
        for run, config in zip(runs, configs, strict=True)
        if config is None
    ]
    if len(variables) > 1:
        notes.append(
            f"Not a one-variable comparison: besides the seed, {len(variables)} variables differ "
            f"({', '.join(variables[:6])}); an ablation should change exactly one."
        )
    if "—" in seeds:
        notes.append("Some runs record no seed: their replicates cannot be told apart from noise.")
    if all(len(group["runs"]) < 2 for group in groups) and len(groups) > 1:
        notes.append(
            "One seed per configuration: every difference is unknown (run replicates to tell effect from noise)."
        )
    return notes


def compare(runs: list) -> dict:
    configs = [resolved_config(run) for run in runs]
    diff = config_diff(configs)
    identities = []
    for field, label in IDENTITY_FIELDS:
        values = [getattr(run, field) or "—" for run in runs]
        identities.append({"label": label, "values": values, "differs": len(set(values)) > 1})
    metric_names = sorted(set().union(*(metrics_of(run) for run in runs)))
    metrics = [{"name": name, "values": [metrics_of(run).get(name) for run in runs]} for name in metric_names]
    groups = groups_of(runs, configs)
    varying = differing(groups)
    variables = [row["name"].removeprefix("config ") for row in varying]
    seeds = [seed_of(run, config) for run, config in zip(runs, configs, strict=True)]
    notes = comparison_notes(runs, configs, variables, seeds, groups)
    replicates = replicate_stats(groups)
    return {
        "runs": runs,
        "identities": identities,
        "diff": diff,
        "metrics": metrics,
        "groups": groups,
        "varying": varying,
        "stats": replicates,
        "has_pairs": any(row["pairs"] for row in replicates),
        "rule": stats.RULE,
        "seeds": seeds,
        "training": training(runs),
        "variables": variables,
        "notes": notes,
        # Each run's group (its replicates): the charts draw a group in one colour, named once per run.
        "curves": [
            {"run_id": run.run_id, "title": run.title, "rows": run.curve, "group": group["label"], "index": index}
            for index, group in enumerate(groups)
            for run in group["runs"]
        ],
    }


def as_dict(result: dict) -> dict:
    """The comparison as data: groups and their seeds, what differs, each metric over the seeds and each
    pair's label with the rule it follows."""
    return {
        "rule": result["rule"],
        "notes": result["notes"],
        "groups": [
            {
                "label": group["label"],
                "runs": [{"run_id": m["run"].run_id, "seed": m["seed"]} for m in group["members"]],
            }
            for group in result["groups"]
        ],
        "varying": result["varying"],
        "metrics": [
            {
                "name": row["name"],
                "direction": row["direction"],
                "groups": [
                    None if s is None else {"n": s.n, "mean": s.mean, "sd": s.sd, "low": s.low, "high": s.high}
                    for s in row["summaries"]
                ],
                "pairs": [
                    {
                        "a": pair["a"],
                        "b": pair["b"],
                        "label": pair["label"],
                        "delta": pair["verdict"].delta,
                        "half": pair["verdict"].half,
                        "unfair": pair["unfair"],
                    }
                    for pair in row["pairs"]
                ],
            }
            for row in result["stats"]
        ],
    }
