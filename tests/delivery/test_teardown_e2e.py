"""DELIVER end to end on the loopback sshd with the example training and a real worker."""

import pytest
from django.core.exceptions import PermissionDenied

from core.models import AuditEntry
from custody.actions import do_start_verification
from custody.store import custody_dir
from delivery.actions.base import TeardownRefused
from delivery.actions.decisions import do_approve_teardown
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownKind, TeardownRequest, TeardownStatus
from delivery.tasks import execute_teardown
from fleet.models import InstanceState
from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.custody.test_custody_e2e import exported, wait_record
from tests.provider_stub import api_credential
from tests.runs.conftest import set_config, wait_state
from tests.sshd import Sshd
from tests.waiting import wait_until
from tests.worker_env import NODE_ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """Teardown is about the box, the export's copies and the people: tinyfit's contract without torch."""
    return standin_source


def wait_request(request: TeardownRequest, statuses, timeout: float = 60) -> TeardownRequest:
    stayed = lambda: f"request #{request.pk} stayed {request.status}: {request.failure}"  # noqa: E731
    wait_until(lambda: request.refresh_from_db() or request.status in statuses, timeout, 0.3, what=stayed)
    return request


def as_runpod(instance, pod: str) -> None:
    """The loopback box, described as a RunPod pod whose API is the local stub."""
    instance.profile_key, instance.provider_id = "runpod", pod
    instance.api_credential = api_credential(instance.project)
    instance.data_root_override = NODE_ROOT
    instance.save()


def refused_while_live(make_run, source, bob, instance, kind, gate):
    """A run trains on the box, held after epoch 1: the consequence is refused while it is live;
    released, it is returned once exported."""
    set_config(source, epochs=4, hold_file=gate.path)
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    wait_state(run, {RunState.RUNNING}, timeout=120)
    with pytest.raises(TeardownRefused, match="still live"):
        do_request_teardown(instance.pk, kind, "done with it", actor=bob)
    gate.release()
    return wait_state(run, {RunState.EXPORTED}, timeout=120)


def test_release_waits_for_the_run_and_custody_then_a_second_person(
    alice, bob, make_run, source, instance, provider_stub, gate, celery_worker_process
):
    as_runpod(instance, "pod-release-1")
    run = refused_while_live(make_run, source, bob, instance, TeardownKind.RELEASE, gate)
    with pytest.raises(TeardownRefused, match="export on the box \\(container disk\\) was never verified"):
        do_request_teardown(instance.pk, TeardownKind.RELEASE, "done with it", actor=bob)

    assert wait_record(do_start_verification(run.pk, actor=bob)).status == "verified"
    request = do_request_teardown(instance.pk, TeardownKind.RELEASE, "done with it", actor=bob)
    assert (request.level, request.status) == ("L3", TeardownStatus.PENDING)
    with pytest.raises(PermissionDenied, match="never approve"):
        do_approve_teardown(request.pk, "my own", actor=bob)
    do_approve_teardown(request.pk, "custody verified, go", actor=alice)

    request = wait_request(request, {TeardownStatus.DONE, TeardownStatus.FAILED})
    assert request.status == TeardownStatus.DONE, request.failure
    calls = provider_stub.calls_for("pod-release-1")
    assert [call["verb"] for call in calls] == ["terminate"]
    assert calls[0]["idempotency_key"] == str(request.idempotency_key)
    instance.refresh_from_db()
    assert instance.state == InstanceState.RELEASED


def test_evidence_deletion_needs_a_verified_replica_and_refuses_a_tampered_one(
    alice, bob, make_run, source, node, instance, celery_worker_process
):
    run = exported(make_run, source, bob)
    assert wait_record(do_start_verification(run.pk, actor=bob)).status == "verified"

    # Approved while no worker runs; the custody copy (the only replica) is tampered before execution.
    celery_worker_process.stop()
    first = do_request_teardown(instance.pk, TeardownKind.DELETE_EVIDENCE, "free the disk", run, "node", actor=bob)
    do_approve_teardown(first.pk, "the custody copy is verified", actor=alice)
    best = custody_dir(run) / "best.pth"
    data = bytearray(best.read_bytes())
    data[len(data) // 2] ^= 0xFF
    best.write_bytes(bytes(data))
    execute_teardown(first.pk)
    first.refresh_from_db()
    assert first.status == TeardownStatus.FAILED
    assert "Custody changed since approval" in first.failure and "best.pth" in first.failure
    assert node.export(run).is_dir()  # nothing was deleted

    # The export on the node is still verified: it is the replica that lets the custody copy go.
    celery_worker_process.start()
    second = do_request_teardown(instance.pk, TeardownKind.DELETE_EVIDENCE, "bad copy", run, "custody", actor=bob)
    do_approve_teardown(second.pk, "node export stays", actor=alice)
    assert wait_request(second, {TeardownStatus.DONE, TeardownStatus.FAILED}).status == TeardownStatus.DONE
    assert not custody_dir(run).exists()

    with pytest.raises(TeardownRefused, match="no verified copy survives"):
        do_request_teardown(instance.pk, TeardownKind.DELETE_EVIDENCE, "all of it", run, "node", actor=bob)
    assert node.export(run).is_dir()
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"requested", "approved", "executing", "refused", "done"} <= actions
    assert AuditEntry.objects.filter(request=second, action="done").count() == 1


def test_shutdown_waits_for_idle_then_powers_off_once_and_verifies_offline(
    bob, make_run, source, instance, tmp_path, gate, celery_worker_process
):
    box = Sshd(tmp_path / "box").start()  # this box really goes offline
    marker = tmp_path / "poweroff-calls"
    instance.__dict__.update(box.instance_fields(instance.project))
    instance.shutdown_command = f"bash -c 'echo once >> {marker}; kill {box.process.pid}'"
    instance.save()
    try:
        refused_while_live(make_run, source, bob, instance, TeardownKind.SHUTDOWN, gate)

        request = do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "night", actor=bob)
        assert request.level == "L2" and request.status == TeardownStatus.APPROVED  # no second person
        labels = {item["label"]: item["ok"] for item in request.check_at_request["items"]}
        assert labels["No writer under the run roots"] is True
        request = wait_request(request, {TeardownStatus.DONE, TeardownStatus.FAILED}, timeout=90)
        assert request.status == TeardownStatus.DONE, request.failure
        assert request.offline_verified is True
        assert marker.read_text() == "once\n"
        instance.refresh_from_db()
        assert instance.state == InstanceState.STOPPED
    finally:
        box.stop()
