"""The population a metric was computed over is a gate: the readback of a real tinyfit export fails
closed when its results miss, repeat or add test samples against the population its run.json declares,
and when a test sample has a training sample's bytes. It records the seeds, determinism and the
fairness facts a comparison needs equal."""

import hashlib
import json
import shutil
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from custody.population import content_overlap, coverage, declared
from custody.readback import read_back
from tests import factories
from tests.custody.test_verification_parts import tinyfit_output  # noqa: F401


@dataclass(frozen=True)
class Entry:
    path: str
    sha256: str
    bytes: int


def roster(root) -> list[Entry]:
    return [
        Entry(str(path.relative_to(root)), hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    ]


@pytest.fixture
def export(tinyfit_output, tmp_path):  # noqa: F811
    copy = tmp_path / "export"
    shutil.copytree(tinyfit_output, copy)
    return copy


def rewrite_results(export, keep) -> None:
    """results.parquet with the rows keep() returns, and metrics.json recomputed to match (so only the
    population can fail)."""
    path = export / "test" / "synthetic" / "results.parquet"
    table = pq.read_table(path)
    table = keep(table)
    pq.write_table(table, path)
    columns = {name: table.column(name).to_numpy() for name in table.column_names}
    accuracy = float((columns["prediction"] == columns["target"]).mean())
    metrics = json.loads((path.parent / "metrics.json").read_text())
    metrics = {"accuracy": accuracy}  # loss needs every prob_ column: kept out of this claim
    (path.parent / "metrics.json").write_text(json.dumps(metrics))


def test_a_complete_export_covers_its_population_and_says_its_identity(export):
    evidence = read_back(export, roster(export), 1e-6)
    assert evidence["failures"] == [], evidence["failures"]
    population = evidence["population"]["synthetic"]
    assert population["declared"] == population["covered"] == 307 and len(population["sha256"]) == 64
    assert evidence["reproducibility"]["seeds"] == {"seed": 7, "torch": 7, "data": 7}
    assert evidence["reproducibility"]["determinism"]["cudnn_benchmark"] is False
    assert set(evidence["fairness"]) == {"test population", "selection", "evaluation code", "budget"}
    assert not any("population" in warning for warning in evidence["warnings"])


def test_a_truncated_test_set_fails_closed(export):
    rewrite_results(export, lambda table: table.slice(0, table.num_rows - 7))
    failures = read_back(export, roster(export), 1e-6)["failures"]
    assert any("results cover 300 of 307 declared test samples (7 missing" in f for f in failures), failures


def test_a_repeated_sample_fails_closed(export):
    rewrite_results(export, lambda table: pa.concat_tables([table, table.slice(0, 2)]))
    failures = read_back(export, roster(export), 1e-6)["failures"]
    assert any("2 sample id(s) appear more than once" in f for f in failures), failures


def test_a_test_sample_with_a_training_samples_bytes_is_leakage(export):
    run = json.loads((export / "run.json").read_text())
    run["content_sha256"] = {"train": ["a" * 64, "b" * 64], "test": ["c" * 64, "b" * 64]}
    (export / "run.json").write_text(json.dumps(run))
    failures = read_back(export, roster(export), 1e-6)["failures"]
    assert any("leakage by content: 1 test sample(s)" in f for f in failures), failures


def test_coverage_by_size_ids_or_undeclared():
    assert declared({"population": {"t": {"size": 3}}}, "t") == {"size": 3}
    assert declared({"population": {"t": {"ids": [1, 2]}}, "splits": {"test": [9]}}, "t") == {"ids": [1, 2]}
    assert declared({"splits": {"test": [9, "x"]}}, "t") == {"ids": [9, "x"]}
    assert declared({"splits": {"test": [9, None]}}, "t") is None  # not ids: undeclared, never half-read
    facts, failures, warnings = coverage("t", {"size": 3}, [1, 2, 3], 3)
    assert failures == [] and facts["covered"] == 3
    _, failures, _ = coverage("t", {"size": 4}, [1, 2, 3], 3)
    assert failures == ["test/t: results cover 3 samples; the run declares 4"]
    _, failures, _ = coverage("t", {"ids": [1, 2]}, [1, 2, 5], 3)
    assert failures == ["test/t: 1 result(s) for undeclared samples, e.g. ['5']"]
    _, failures, warnings = coverage("t", None, [1], 1)
    assert failures == [] and warnings == ["test/t: no declared test population: coverage not checked"]
    assert content_overlap({"content_sha256": {"train": ["a"], "test": ["b"]}}) is None


def declare_visuals(export, evidence: bool, k: int = 100) -> list:
    run = json.loads((export / "run.json").read_text())
    ids = run["splits"]["test"][:k]
    run["visuals"] = {"synthetic": {"sample_ids": ids, "conditions": ["clean"], "roles": ["input", "prediction"]}}
    run["visuals"]["synthetic"]["evidence"] = evidence
    (export / "run.json").write_text(json.dumps(run))
    return ids


def draw(export, ids, roles=("input", "prediction")) -> None:
    for role in roles:
        folder = export / "test" / "synthetic" / "vis" / "clean" / role
        folder.mkdir(parents=True, exist_ok=True)
        for sample in ids:
            (folder / f"{sample}.png").write_bytes(b"\x89PNG\r\n\x1a\n")


def test_visuals_declared_as_evidence_must_cover_every_condition_role_and_sample(export):
    ids = declare_visuals(export, evidence=True)
    draw(export, ids, roles=("input",))  # the prediction role never drawn
    failures = read_back(export, roster(export), 1e-6)["failures"]
    assert any("100 of 200 visuals (conditions × roles × K) are missing" in f for f in failures), failures
    draw(export, ids)
    assert read_back(export, roster(export), 1e-6)["failures"] == []


def test_a_visual_selection_must_be_k_of_the_population_and_paperwork_only_warns(export):
    ids = declare_visuals(export, evidence=True, k=50)
    draw(export, ids)
    failures = read_back(export, roster(export), 1e-6)["failures"]
    assert any("the visual selection has 50 samples; K = min(100, 307) = 100" in f for f in failures), failures
    declare_visuals(export, evidence=False, k=50)
    evidence = read_back(export, roster(export), 1e-6)
    assert evidence["failures"] == [] and any("K = min(100, 307)" in w for w in evidence["warnings"])


def test_run_json_is_checked_field_by_field(export):
    run = json.loads((export / "run.json").read_text())
    best = hashlib.sha256((export / "best.pth").read_bytes()).hexdigest()
    run["checkpoints"] = {"best.pth": {"sha256": best}}
    manifest = json.dumps({"sample_ids": list(range(100))}).encode()
    run["selection"]["selection_id"] = "synthetic-k100"
    run["selection"]["manifest_sha256"] = hashlib.sha256(manifest).hexdigest()
    (export / "run.json").write_text(json.dumps(run))
    assert read_back(export, roster(export), 1e-6, manifest=manifest)["failures"] == []  # bound, byte for byte
    # The manifest is read from the box, not taken on its hash: a binding to nothing fails.
    failures = read_back(export, roster(export), 1e-6)["failures"]
    assert failures == [
        "run.json binds selection synthetic-k100, but the box has no _trust/selections/synthetic-k100.json"
    ]
    broken = {
        "checkpoints": {"best.pth": {"sha256": "0" * 64}},
        "selection": {**run["selection"], "manifest_sha256": "short"},
        "files": [{"path": "best.pth", "sha256": best}],
        "splits": {"test": "all of them"},
    }
    (export / "run.json").write_text(json.dumps({**run, **broken}))
    failures = read_back(export, roster(export), 1e-6)["failures"]
    for expected in (
        "run.json binds best.pth to 000000000000…",
        "selection_id is not bound to its manifest",
        "carries a file inventory (files)",
        "splits is not a mapping of split names to id lists",
    ):
        assert any(expected in failure for failure in failures), (expected, failures)


@pytest.mark.django_db
def test_the_custody_record_keeps_the_seeds_population_and_fairness_it_read(export):
    """Found on a read: the record kept five keys of the readback and dropped these, so the run page said
    "none recorded" and every comparison's fairness facts were "unverified" on both sides (never unfair)."""
    from custody.actions import do_finish_verification
    from custody.models import CustodyStatus

    run = factories.run(factories.box(factories.project()))
    record = factories.pulling_record(run)
    evidence = read_back(export, roster(export), 1e-6)
    do_finish_verification(record.pk, {**evidence, "pull": {"bytes": 1}})
    record.refresh_from_db()
    assert record.status == CustodyStatus.VERIFIED, record.failure
    assert record.evidence["reproducibility"]["seeds"] == {"seed": 7, "torch": 7, "data": 7}
    assert record.evidence["population"]["synthetic"]["covered"] == 307
    assert (
        record.evidence["fairness"] == evidence["fairness"] and "unverified" not in record.evidence["fairness"].values()
    )
