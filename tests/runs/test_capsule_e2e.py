"""A hardware capsule end to end on the loopback box: tinyfit trains, seals and verifies; then
capture.py applies that closed run's best.pth to captures with no ground truth, as a run created as a
hardware capsule: it seals under export/hardware/<run-id> (never beside the software exports), holds no
weights, and custody verifies it with its metrics declared not applicable and its model run measured
against custody's own record of it. The run page says what it is."""

import json

import pytest

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from runs.actions.lifecycle import do_start_preflight
from runs.models import Capsule, RunState
from tests.custody.test_custody_e2e import exported, wait_record
from tests.runs.conftest import wait_state

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_hardware_capsule_of_a_verified_run_seals_apart_and_verifies(
    client, bob, make_run, source, node, celery_worker_process
):
    model = exported(make_run, source, bob)
    assert model.state == RunState.EXPORTED, model.close_reason
    assert wait_record(do_start_verification(model.pk, actor=bob)).status == CustodyStatus.VERIFIED
    model_export = node.export(model)
    # The project's fixed visual selection, on the box beside its exports: custody reads it back there.
    selections = node.root / "_trust" / "selections"
    selections.mkdir(parents=True, exist_ok=True)
    manifest = selections / "bench-k100.json"
    manifest.write_text(json.dumps({"selection_id": "bench-k100", "sample_ids": list(range(20, 120))}))
    (source / "capture.yaml").write_text(
        f"model_export: {model_export}\ncapture_seed: 5\ncaptures: 120\ncondition: lab\ntest_id: bench\n"
        f"selection_manifest: {manifest}\n"
    )
    capsule = make_run(
        capsule=Capsule.HARDWARE,
        command=[*model.command[:1], "capture.py", "--config", "capture.yaml"],
        config_path="capture.yaml",
    )
    do_start_preflight(capsule.pk, actor=bob)
    capsule = wait_state(capsule, {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_SMOKE}, timeout=180)
    assert capsule.state == RunState.EXPORTED, capsule.close_reason
    sealed = node.root / "export" / "hardware" / capsule.run_id
    assert sealed.is_dir() and not node.export(capsule).exists()
    assert sorted(path.name for path in sealed.iterdir()) == ["run.json", "test"]
    assert not [path for path in sealed.rglob("*") if path.suffix in (".pth", ".pt")]

    record = wait_record(do_start_verification(capsule.pk, actor=bob))
    assert record.status == CustodyStatus.VERIFIED, record.failure
    facts = record.evidence["capsule"]
    assert facts["kind"] == "hardware" and facts["model_run"]["id"] == model.run_id
    assert (
        facts["tests"]["bench"]["metric_applicability"] == "not_applicable" and facts["tests"]["bench"]["rows"] == 120
    )
    assert record.evidence["metrics"] == [] and record.artifacts.filter(path__endswith=".png").count() == 100
    assert record.evidence["selection"]["read"] and record.evidence["selection"]["samples"] == 100
    assert record.artifacts.filter(path="test/bench/vis/lab/prediction/119.png").exists()
    client.force_login(bob)
    page = client.get(capsule.get_absolute_url()).content.decode()
    assert 'id="capsule"' in page and f"export/hardware/{capsule.run_id}" in page

    # The manifest changed on the box since: the binding no longer holds, and custody says so.
    manifest.write_text(json.dumps({"selection_id": "bench-k100", "sample_ids": list(range(100))}))
    again = wait_record(do_start_verification(capsule.pk, actor=bob))
    assert again.status == CustodyStatus.FAILED and "is not the manifest run.json binds" in again.failure
