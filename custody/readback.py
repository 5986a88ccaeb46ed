"""The independent consumer: copy the canonical custody copy to a fresh place and prove it there.

A matching hash proves identity, a safe load proves structure, a fresh evaluator proves the
metric: none substitutes for another. Gates fail closed only where passing would make a
reported number wrong; missing paperwork is a warning recorded on the custody record.
"""

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import yaml

from custody.architecture import check_architecture
from custody.capsule import NO_GT, capsule_facts, without_ground_truth
from custody.checkpoint import safe_load
from custody.metrics import load_columns, recompute
from custody.population import content_overlap, coverage, declared, fairness
from custody.reproducibility import reproducibility
from custody.run_schema import problems as schema_problems
from custody.selection import selection_gates
from custody.visuals import coverage as visual_coverage


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _split_gates(consumer: Path, failures: list, warnings: list, hashes: dict, hardware: bool, manifest) -> dict:
    """The split and population gates; what run.json says of the seeds and determinism
    (reproducibility.py), each test's population and the result's fairness facts (population.py)."""
    run_json = consumer / "run.json"
    if not run_json.exists():
        failures.append("run.json is missing: the export has no scientific identity")
        return {}
    run = json.loads(run_json.read_text())
    if not isinstance(run, dict):
        failures.append("run.json is not an object: the export has no scientific identity")
        return {}
    failed, said = schema_problems(run, hashes)
    failures += failed
    warnings += said
    identity, said = reproducibility(run)
    warnings += said
    _overlap_gates(consumer, run, failures, warnings)
    populations = _population_gates(consumer, run, failures, warnings, hardware)
    selection, failed, said = selection_gates(run, manifest)
    failures += failed
    warnings += said
    facts = {"reproducibility": identity, "population": populations, "fairness": fairness(run, populations)}
    return {**facts, "selection": selection}


def _population_gates(consumer: Path, run: dict, failures: list, warnings: list, hardware: bool) -> dict:
    """Each test's results cover its declared population exactly; no test sample has a training
    sample's bytes. A hardware capsule's visuals are its evidence (its predictions are what it shows)."""
    populations = {}
    for results in sorted(consumer.glob("test/*/results.parquet")):
        test_id = results.parent.name
        columns = load_columns(results)
        rows = len(next(iter(columns.values()))) if columns else 0
        facts, failed, said = coverage(test_id, declared(run, test_id), columns.get("sample_id"), rows)
        populations[test_id] = facts
        failures += failed
        warnings += said
        visuals = run.get("visuals") if isinstance(run.get("visuals"), dict) else {}
        mine = visuals.get(test_id)
        if hardware:
            mine = {**mine, "evidence": True} if isinstance(mine, dict) else None
            if mine is None or "prediction" not in (mine.get("roles") or []):
                failures.append(f"test/{test_id}: a capsule declares its K prediction visuals (roles: prediction)")
        failed, said = visual_coverage(results.parent, mine, facts.get("declared"))
        failures += failed
        warnings += said
    if leak := content_overlap(run):
        failures.append(leak)
    return populations


def _overlap_gates(consumer: Path, run: dict, failures: list, warnings: list) -> None:
    selection = (run.get("selection") or {}).get("split")
    if selection == "test":
        failures.append("run.json declares model selection on the test split")
    elif selection is None:
        warnings.append("run.json does not say which split selected the checkpoint")
    train_ids = set((run.get("splits") or {}).get("train", []))
    if not train_ids:
        warnings.append("run.json lists no training sample ids: leakage not checked")
        return
    for results in sorted(consumer.glob("test/*/results.parquet")):
        columns = load_columns(results)
        if "sample_id" not in columns:
            warnings.append(f"{results.parent.name}: results have no sample_id: leakage not checked")
            continue
        overlap = train_ids & {int(i) for i in columns["sample_id"]}
        if overlap:
            failures.append(
                f"train/test overlap in {results.parent.name}: {len(overlap)} sample id(s), e.g. {sorted(overlap)[:5]}"
            )


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _architecture_gate(consumer: Path, state, failures: list, warnings: list) -> dict:
    declared = (_read_json(consumer / "run.json") or {}).get("architecture")
    try:
        config = yaml.safe_load((consumer / "config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        config = None
    if declared and config is None:
        warnings.append("config.yaml is missing or unreadable: checkpoint↔config not checked")
        return {"checked": False, "ok": True, "detail": "config.yaml unreadable"}
    check = check_architecture(state, config, declared)
    if not check.checked:
        warnings.append(check.detail)
    elif not check.ok:
        failures.append(f"best.pth does not match the config's architecture: {check.detail}")
    return check.__dict__


def read_back(
    canonical: Path, entries, tolerance: float, extra: dict | None = None, hardware: bool = False, manifest=None
) -> dict:
    """extra: the project's own metrics by name (project_metrics.extra_metrics). hardware: the export is
    a hardware capsule (capsule.py): no weights, and a test without ground truth recomputes nothing.
    manifest: the bytes of the selection manifest run.json binds, as read from the box (selection.py)."""
    consumer = Path(tempfile.mkdtemp(prefix="remotegpu-readback-"))
    failures, warnings, capsule = [], [], None
    try:
        _copy_checked(canonical, consumer, entries, failures)
        if hardware:
            run = _read_json(consumer / "run.json")
            capsule = capsule_facts(consumer, run if isinstance(run, dict) else {}, failures)
        elif not (consumer / "best.pth").exists():
            failures.append("best.pth is missing")
        loaded, architecture = _load_checkpoints(consumer, failures, warnings)
        metrics = _recompute_tests(consumer, capsule, tolerance, extra, failures, warnings)
        hashes = {entry.path: entry.sha256 for entry in entries}
        facts = _split_gates(consumer, failures, warnings, hashes, hardware, manifest)
    finally:
        shutil.rmtree(consumer, ignore_errors=True)
    return {
        "consumer": str(consumer),
        "loaded": loaded,
        "metrics": metrics,
        "architecture": architecture,
        **facts,
        "capsule": capsule,
        "failures": failures,
        "warnings": warnings,
    }


def _copy_checked(canonical: Path, consumer: Path, entries, failures: list) -> None:
    """The consumer's own copy of every file, each hashed again as it lands."""
    for entry in entries:
        target = consumer / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(canonical / entry.path, target)
        if _sha256(target) != entry.sha256:
            failures.append(f"hash mismatch on readback: {entry.path}")


def _load_checkpoints(consumer: Path, failures: list, warnings: list) -> tuple[list, dict | None]:
    """Every checkpoint loaded safely; best.pth's shapes checked against the config's architecture."""
    loaded, architecture = [], None
    for checkpoint in sorted(consumer.rglob("*.pth")):
        result = safe_load(checkpoint)
        loaded.append({"path": str(checkpoint.relative_to(consumer)), "ok": result.ok, "detail": result.detail})
        if not result.ok:
            failures.append(f"{checkpoint.relative_to(consumer)} does not load safely: {result.detail}")
        elif checkpoint.relative_to(consumer) == Path("best.pth"):
            architecture = _architecture_gate(consumer, result.state, failures, warnings)
    return loaded, architecture


def _recompute_tests(consumer: Path, capsule, tolerance: float, extra, failures: list, warnings: list) -> list:
    """Each test/<id>/'s metrics recomputed from its results; a drift past the tolerance fails."""
    metrics = []
    tests = sorted(path for path in consumer.glob("test/*") if path.is_dir())
    if not tests:
        warnings.append("no test/<test-id>/ results: no metric to recompute")
    for test in tests:
        claimed_path, results_path = test / "metrics.json", test / "results.parquet"
        if not claimed_path.exists() or not results_path.exists():
            failures.append(f"test/{test.name} lacks metrics.json or results.parquet")
            continue
        if not (test / "vis").is_dir():
            warnings.append(f"test/{test.name}: no vis/ (visuals are paperwork, not evidence)")
        if capsule and capsule["tests"][test.name]["ground_truth_status"] == NO_GT:
            capsule["tests"][test.name]["rows"] = without_ground_truth(test, failures)
            continue  # its metrics are declared not applicable: nothing to recompute
        rows, metric_warnings = recompute(results_path, json.loads(claimed_path.read_text()), tolerance, extra)
        warnings += [f"test/{test.name}: {warning}" for warning in metric_warnings]
        for row in rows:
            metrics.append({"test": test.name, **row.__dict__})
            if not row.within_tolerance:
                failures.append(
                    f"metric drift in test/{test.name}: {row.name} claimed {row.claimed:.6g}, "
                    f"recomputed {row.recomputed:.6g} (delta {row.delta:+.6g})"
                )
    return metrics
