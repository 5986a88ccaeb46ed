"""A hardware capsule read back (artifact-layout.md): its own kind of export. Pure.

The readback checks it again, independently of the box's wrapper: no weights anywhere; run.json binds
the capture, its decode and the closed model run by id and SHA-256, and the best.pth that model run
applied by its SHA-256; each test declares its ground-truth branch. A test without machine-readable
ground truth has complete finite-forward rows (every number finite), no metric values (its metrics are
declared not applicable, so none is recomputed) and no ground-truth or error visuals. Whether the bound
model run is a verified run of this project with that best.pth is checked where the database is
(custody.capsule_binding).
"""

import json
import re
from pathlib import Path

import numpy

from custody.metrics import load_columns

SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
WEIGHTS = (".pth", ".pt", ".ckpt", ".safetensors", ".bin", ".h5", ".onnx", ".pkl")
BINDINGS = ("capture", "decode", "model_run")
NO_GT = "unavailable_no_machine_readable_gt"
WITH_GT = "available"
NOT_APPLICABLE = "not_applicable"
GT_ROLES = ("ground_truth", "groundtruth", "gt", "target", "label", "error", "residual", "difference")
COUNTS = ("n", "rows", "samples", "count")


def capsule_facts(consumer: Path, run: dict, failures: list) -> dict:
    """The capsule's bindings and each test's declared branch; what breaks the contract is a failure."""
    for path in sorted(consumer.rglob("*")):
        if path.is_file() and path.name.lower().endswith(WEIGHTS):
            failures.append(f"{path.relative_to(consumer)}: a hardware capsule holds no weights")
    extra = sorted(path.name for path in consumer.iterdir() if path.name not in ("run.json", "test"))
    if extra:
        failures.append(f"a hardware capsule holds run.json and test/ only, not {', '.join(extra)}")
    bindings = {}
    for key in BINDINGS:
        binding = run.get(key) if isinstance(run.get(key), dict) else {}
        if not isinstance(binding.get("id"), str) or not binding["id"] or not SHA256.match(str(binding.get("sha256"))):
            failures.append(f"run.json does not bind the {key} by an id and a SHA-256")
        bindings[key] = {name: str(binding.get(name, ""))[:200] for name in ("id", "sha256")}
    best = (
        str((run.get("model_run") or {}).get("best_pth_sha256", "")) if isinstance(run.get("model_run"), dict) else ""
    )
    if not SHA256.match(best):
        failures.append("run.json does not bind the best.pth it applied by its SHA-256 (model_run.best_pth_sha256)")
    bindings["model_run"]["best_pth_sha256"] = best[:64]
    declared = run.get("tests") if isinstance(run.get("tests"), dict) else {}
    tests = {}
    for test in sorted(path for path in consumer.glob("test/*") if path.is_dir()):
        branch = declared.get(test.name) if isinstance(declared.get(test.name), dict) else {}
        status, applicability = branch.get("ground_truth_status"), branch.get("metric_applicability")
        if status not in (NO_GT, WITH_GT):
            failures.append(f"run.json does not declare test {test.name}'s ground-truth branch")
        elif status == NO_GT and applicability != NOT_APPLICABLE:
            failures.append(f"test {test.name} has no ground truth: its metrics must be declared not applicable")
        tests[test.name] = {"ground_truth_status": str(status), "metric_applicability": str(applicability)}
    return {"kind": "hardware", **bindings, "tests": tests}


def without_ground_truth(test: Path, failures: list) -> int:
    """A test without ground truth: its finite-forward rows (counted), no metric values, no ground-truth
    visuals. Returns the rows read."""
    columns = load_columns(test / "results.parquet")
    rows = len(next(iter(columns.values()))) if columns else 0
    if not rows:
        failures.append(f"test/{test.name}: no forward rows")
    for name, values in sorted(columns.items()):
        if values.dtype.kind == "f":
            bad = int((~numpy.isfinite(values)).sum())
            if bad:
                failures.append(f"test/{test.name}: {bad} row(s) of {name} are not finite")
    try:
        metrics = json.loads((test / "metrics.json").read_text())
    except (OSError, ValueError):
        metrics = None
    if not isinstance(metrics, dict) or metrics.get("metric_applicability") != NOT_APPLICABLE:
        failures.append(f"test/{test.name}/metrics.json does not declare its metrics not applicable")
    else:
        stated = [key for key, value in metrics.items() if _number(value) and key.lower() not in COUNTS]
        if stated:
            failures.append(f"test/{test.name}/metrics.json states {', '.join(stated)} without ground truth")
    for role in sorted(test.glob("vis/*/*")):
        if role.is_dir() and role.name.lower() in GT_ROLES:
            failures.append(f"test/{test.name}/vis/{role.parent.name}/{role.name} needs ground truth it does not have")
    return rows


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
