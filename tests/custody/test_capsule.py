"""A hardware capsule is its own kind of export: a real one (tinyfit's closed run applied to captures by
examples/tinyfit/capture.py) seals on the wrapper and reads back with its metrics declared not
applicable; each variant that breaks one rule of its contract is refused at sealing with the rule named,
and the readback, independent of the wrapper, refuses it too. A capsule read as a software export fails
(the kind is declared by the run, never inferred from absent files). The bound model run is measured
against custody: verified, with that run.json and best.pth, or the capsule fails closed."""

import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from custody.actions import do_finish_verification
from custody.model_run import model_run_gates
from custody.models import Artifact
from custody.readback import read_back
from runs.models import Capsule
from tests import factories
from tests.box_specs import spec_with
from tests.custody.test_population import roster
from tests.custody.test_verification_parts import REPO, tinyfit_output  # noqa: F401
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()
NO_GT = "unavailable_no_machine_readable_gt"


@pytest.fixture(scope="module")
def made_capsule(tinyfit_output, tmp_path_factory):  # noqa: F811
    """The capsule capture.py writes for the closed tinyfit export (in the example's own directory, so
    it imports train.py as it does on a box)."""
    work = tmp_path_factory.mktemp("capsule")
    config = work / "capture.yaml"
    config.write_text(
        f"model_export: {tinyfit_output}\ncapture_seed: 3\ncaptures: 150\ncondition: lab\ntest_id: bench\n"
    )
    env = dict(os.environ, REMOTEGPU_OUTPUT_DIR=str(work / "output"), REMOTEGPU_RUN_ID="t-capsule")
    subprocess.run(
        [sys.executable, "capture.py", "--config", str(config)],
        cwd=REPO / "examples" / "tinyfit",
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return work / "output"


@pytest.fixture
def capsule(made_capsule, tmp_path):
    copy = tmp_path / "capsule"
    shutil.copytree(made_capsule, copy)
    return copy


def sealing_problem(partial):
    return WRAPPER.validate_export(spec_with(WRAPPER, **{"capsule": "hardware"}), str(partial))


def test_a_real_capsule_seals_and_reads_back_with_its_metrics_not_applicable(capsule, tinyfit_output):  # noqa: F811
    assert sealing_problem(capsule) is None
    evidence = read_back(capsule, roster(capsule), 1e-6, hardware=True)
    assert evidence["failures"] == [], evidence["failures"]
    facts = evidence["capsule"]
    assert facts["tests"]["bench"] == {
        "ground_truth_status": NO_GT,
        "metric_applicability": "not_applicable",
        "rows": 150,
    }
    model_run = facts["model_run"]
    assert model_run["id"] == tinyfit_output.name
    assert model_run["best_pth_sha256"] == roster_sha(tinyfit_output, "best.pth")
    assert evidence["metrics"] == [] and evidence["population"]["bench"]["covered"] == 150
    assert not list(capsule.rglob("*.pth"))
    # Read as a software export it fails: a capsule is what the run declares, never what files lack.
    software = read_back(capsule, roster(capsule), 1e-6)
    assert "best.pth is missing" in software["failures"]


def roster_sha(root, name) -> str:
    return next(entry.sha256 for entry in roster(root) if entry.path == name)


def with_weights(capsule):
    shutil.copyfile(capsule / "test" / "bench" / "results.parquet", capsule / "test" / "bench" / "model.pth")


def with_config(capsule):
    (capsule / "config.yaml").write_text("seed: 3\n")


def without_branch(capsule):
    run = json.loads((capsule / "run.json").read_text())
    del run["tests"]["bench"]["ground_truth_status"]
    (capsule / "run.json").write_text(json.dumps(run))


def with_a_metric(capsule):
    metrics = capsule / "test" / "bench" / "metrics.json"
    metrics.write_text(json.dumps({**json.loads(metrics.read_text()), "accuracy": 0.9}))


def with_ground_truth_visuals(capsule):
    role = capsule / "test" / "bench" / "vis" / "lab" / "ground_truth"
    role.mkdir()
    (role / "0.png").write_bytes(b"\x89PNG")


def without_best_binding(capsule):
    run = json.loads((capsule / "run.json").read_text())
    del run["model_run"]["best_pth_sha256"]
    (capsule / "run.json").write_text(json.dumps(run))


@pytest.mark.parametrize(
    ("variant", "at_sealing", "at_readback"),
    [
        (with_weights, "looks like model weights", "holds no weights"),
        (with_config, "config.yaml is not allowed in a hardware capsule", "not config.yaml"),
        (without_branch, "does not declare test bench's ground-truth branch", "ground-truth branch"),
        (with_a_metric, "states accuracy without ground truth", "states accuracy without ground truth"),
        (with_ground_truth_visuals, "vis/lab/ground_truth needs ground truth", "vis/lab/ground_truth needs"),
        (without_best_binding, "model_run.best_pth_sha256", "model_run.best_pth_sha256"),
    ],
)
def test_each_broken_rule_is_refused_at_sealing_and_at_readback(capsule, variant, at_sealing, at_readback):
    variant(capsule)
    problem = sealing_problem(capsule)
    assert problem is not None and at_sealing in problem, problem
    failures = read_back(capsule, roster(capsule), 1e-6, hardware=True)["failures"]
    assert any(at_readback in failure for failure in failures), failures


def test_a_capsule_whose_run_json_is_not_an_object_fails_closed(capsule):
    (capsule / "run.json").write_text("[1, 2]")
    failures = read_back(capsule, roster(capsule), 1e-6, hardware=True)["failures"]
    assert "run.json does not bind the capture by an id and a SHA-256" in failures
    assert sealing_problem(capsule) == f"{WRAPPER.CONTRACT} (1 problem): run.json is not an object"


def test_non_finite_forward_rows_and_missing_prediction_visuals_fail_the_readback(capsule):
    results = capsule / "test" / "bench" / "results.parquet"
    table = pq.read_table(results)
    probabilities = table.column("prob_0").to_pylist()
    probabilities[5] = float("nan")
    pq.write_table(table.set_column(table.column_names.index("prob_0"), "prob_0", pa.array(probabilities)), results)
    shutil.rmtree(capsule / "test" / "bench" / "vis" / "lab" / "prediction")
    (capsule / "test" / "bench" / "vis" / "lab" / "prediction").mkdir()
    failures = read_back(capsule, roster(capsule), 1e-6, hardware=True)["failures"]
    assert "test/bench: 1 row(s) of prob_0 are not finite" in failures
    assert any("100 of 100 visuals (conditions × roles × K) are missing" in failure for failure in failures), failures


@pytest.mark.django_db
def test_the_bound_model_run_must_be_verified_in_custody_with_those_bytes(capsule, tinyfit_output):  # noqa: F811
    project = factories.project()
    box = factories.box(project)
    hardware = factories.run(box, capsule=Capsule.HARDWARE)
    facts = read_back(capsule, roster(capsule), 1e-6, hardware=True)["capsule"]
    failures, warnings = model_run_gates(hardware, facts)
    assert failures == [] and "is not a run of this project" in warnings[0]

    model = factories.run(box, run_id=tinyfit_output.name)
    failures, _ = model_run_gates(hardware, facts)
    assert failures == [f"the model run {tinyfit_output.name} is not verified in custody: verify it before its capsule"]

    record = factories.pulling_record(model)
    for entry in roster(tinyfit_output):
        Artifact.objects.create(record=record, path=entry.path, bytes=entry.bytes, sha256=entry.sha256)
    do_finish_verification(record.pk, None, "")
    assert model_run_gates(hardware, facts) == ([], [])

    facts["model_run"]["best_pth_sha256"] = "0" * 64  # a capsule that says it applied other weights
    failures, _ = model_run_gates(hardware, facts)
    assert failures == [
        f"the capsule binds the model run's best.pth to 000000000000…, custody #{record.pk} holds"
        f" {roster_sha(tinyfit_output, 'best.pth')[:12]}…"
    ]
