"""The last verified copy survives every sequence of consequences (DOMAIN §5).

Each reproduced path that destroyed the last copy is a test here, on the loopback box: the box's
files are real files, the node-side re-hash runs the wrapper over SSH.
"""

import threading

import pytest
from celery.exceptions import Retry
from django.db import connection
from django.urls import reverse

from console.dashboard import tiles_for
from core.states import IllegalTransition
from custody.models import EvidenceLocation
from custody.store import custody_dir
from delivery.actions.base import TeardownRefused, move
from delivery.actions.decisions import do_approve_teardown, do_cancel_teardown
from delivery.actions.requests import do_request_teardown
from delivery.models import TEARDOWN_TRANSITIONS, TeardownKind, TeardownRequest, TeardownStatus
from delivery.tasks import execute_teardown
from tests.custody import sealed
from tests.personas import join
from tests.waiting import wait_until
from tests.worker_env import NODE_ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _in_process_only(request):
    """Tests that run the session's worker say so; every other one executes consequences itself."""
    if "celery_worker_process" not in request.fixturenames:
        request.getfixturevalue("no_worker")


NODE, CUSTODY, MIRROR = EvidenceLocation.NODE, EvidenceLocation.CUSTODY, EvidenceLocation.MIRROR


def as_platform(instance, key: str, data_tier: str = "", mirror_tier: str = "") -> None:
    """The loopback box described as a box of another platform, its disks on the named tiers."""
    instance.profile_key, instance.data_root_override = key, NODE_ROOT
    instance.data_tier, instance.mirror_tier, instance.mirror_root = data_tier, mirror_tier, sealed.MIRROR_ROOT
    instance.save()


def delete(run, location, who, approver):
    request = do_request_teardown(run.instance_id, TeardownKind.DELETE_EVIDENCE, "space", run, location, actor=who)
    do_approve_teardown(request.pk, "ok", actor=approver)
    return request


def test_release_is_refused_after_the_custody_copy_was_deleted(alice, bob, instance, exported):
    run = exported()
    sealed.verify(run)
    first = delete(run, CUSTODY, bob, alice)
    assert execute_teardown(first.pk) == "deleted"
    assert not custody_dir(run).exists()
    with pytest.raises(TeardownRefused, match=f"A verified copy of {run.run_id} survives"):
        do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)
    assert sealed.export_dir(run).is_dir()


def test_a_mirror_on_a_surviving_tier_counts_only_while_it_rehashes_on_the_node(alice, bob, instance, exported):
    as_platform(instance, "runpod", data_tier="volume disk", mirror_tier="network volume")
    run = exported()
    record = sealed.verify(run, mirror=True)
    execute_teardown(delete(run, CUSTODY, bob, alice).pk)

    sealed.tamper(sealed.mirror_dir(run))
    with pytest.raises(TeardownRefused, match="no longer matches its SHA-256"):
        do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)
    sealed.write_tree(
        sealed.mirror_dir(run), {a.path: (sealed.export_dir(run) / a.path).read_bytes() for a in record.artifacts.all()}
    )
    request = do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)
    item = next(i for i in request.check_at_request["items"] if i["label"].startswith("A verified copy"))
    assert item["ok"] and "durable mirror on the box (network volume)" in item["detail"]
    do_cancel_teardown(request.pk, actor=bob)

    import shutil

    shutil.rmtree(sealed.mirror_dir(run))
    with pytest.raises(TeardownRefused, match="missing"):
        do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)


def test_a_mirror_on_a_tier_that_release_destroys_does_not_count(alice, bob, instance, exported):
    as_platform(instance, "runpod", data_tier="volume disk", mirror_tier="volume disk")
    run = exported()
    sealed.verify(run, mirror=True)
    execute_teardown(delete(run, CUSTODY, bob, alice).pk)
    with pytest.raises(TeardownRefused, match=r"durable mirror on the box \(volume disk\) is lost by release"):
        do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)


def test_two_deletions_each_leaving_the_other_cannot_both_be_approved(alice, erin, bob, instance, exported):
    join(instance.project, erin)  # a second approver of the box's project
    run = exported()
    sealed.verify(run)
    requests = [
        do_request_teardown(instance.pk, TeardownKind.DELETE_EVIDENCE, "space", run, location, actor=bob)
        for location in (NODE, CUSTODY)
    ]
    outcomes = []

    def approve(request, approver):
        try:
            do_approve_teardown(request.pk, "ok", actor=approver)
            outcomes.append("approved")
        except TeardownRefused as exc:
            outcomes.append(str(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=pair) for pair in zip(requests, (alice, erin), strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("approved") == 1, outcomes
    assert "Not approvable now" in next(o for o in outcomes if o != "approved")


def two_approved_deletions(run, requester, approver) -> list:
    """The export on the box and the custody copy, each deletion approved before the invariant held
    (as the issue reproduced, each approval seeing the other copy): only execution decides now."""
    requests = [
        do_request_teardown(run.instance_id, TeardownKind.DELETE_EVIDENCE, "space", run, location, actor=requester)
        for location in (NODE, CUSTODY)
    ]
    TeardownRequest.objects.filter(pk__in=[r.pk for r in requests]).update(
        status=TeardownStatus.APPROVED, approver=approver
    )
    return requests


def test_two_approved_deletions_executed_at_once_leave_one_copy(alice, bob, instance, exported):
    run = exported()
    record = sealed.verify(run)
    requests = two_approved_deletions(run, bob, alice)
    outcomes = []

    def execute(request):
        try:
            while True:
                try:
                    outcomes.append(execute_teardown(request.pk))
                    return
                except Retry:  # another consequence on the box is executing: wait for its end
                    pass
        finally:
            connection.close()

    threads = [threading.Thread(target=execute, args=(r,)) for r in requests for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(TeardownRequest.objects.filter(pk__in=[r.pk for r in requests]).values_list("status", flat=True))
    assert statuses == [TeardownStatus.DONE, TeardownStatus.FAILED], statuses
    assert outcomes.count("deleted") == 1 and outcomes.count("nothing to do") == 3, outcomes
    failed = TeardownRequest.objects.get(status=TeardownStatus.FAILED)
    assert "no verified copy survives" in failed.failure
    assert sealed.intact(sealed.export_dir(run), record) or sealed.intact(custody_dir(run), record)


def test_two_approved_deletions_in_two_worker_processes_leave_one_copy(
    alice, bob, instance, exported, celery_worker_process
):
    from tests.conftest import WorkerProcess, database_url

    second = WorkerProcess(database_url(), name="second", TEARDOWN_BUSY_RETRY_SECONDS="1")
    second.start()
    try:
        run = exported()
        record = sealed.verify(run)
        requests = two_approved_deletions(run, bob, alice)
        for request in requests:  # each delivered twice: both workers race for both
            execute_teardown.delay(request.pk)
            execute_teardown.delay(request.pk)
        final = {TeardownStatus.DONE, TeardownStatus.FAILED}
        from tests.delivery.test_teardown_e2e import wait_request

        done = [wait_request(request, final, timeout=60).status for request in requests]
    finally:
        second.stop()
    assert sorted(done) == [TeardownStatus.DONE, TeardownStatus.FAILED]
    assert sealed.intact(sealed.export_dir(run), record) or sealed.intact(custody_dir(run), record)


@pytest.mark.parametrize(("platform", "tier"), [("gpushare", "data disk"), ("runpod", "volume disk")])
def test_a_shutdown_that_loses_the_export_needs_a_surviving_verified_copy(
    alice, bob, instance, exported, platform, tier
):
    as_platform(instance, platform, data_tier=tier)
    run = exported()
    # The loopback data root is a plain directory of this machine's root disk, declared on a tier that is
    # a disk of its own and never measured there: its copy counts as the system disk, lost by the stop.
    with pytest.raises(TeardownRefused, match="export on the box \\(the system disk\\) was never verified"):
        do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "pause", actor=bob)
    sealed.verify(run)
    request = do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "pause", actor=bob)
    assert request.level == "L3" and request.needs_second_person and request.status == TeardownStatus.PENDING
    labels = {item["label"]: item for item in request.check_at_request["items"]}
    assert "custody copy (control host)" in labels[f"A verified copy of {run.run_id} survives"]["detail"]
    assert "released by" in labels["Release clock"]["detail"]
    alice_page = _page_of(request, alice)
    assert 'id="clock"' in alice_page and "clock after which the box is released" in alice_page


def _page_of(request, user) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.get(request.get_absolute_url()).content.decode()


def no_auto_execution(instance) -> None:
    """An L2 shutdown would execute at once through the session's worker: ask for a second person."""
    instance.project.shutdown_needs_approval = True
    instance.project.save()


def test_a_shutdown_that_keeps_every_disk_needs_no_custody(bob, instance, exported):
    no_auto_execution(instance)
    exported()  # never verified: a stop that keeps the disk leaves it where it is
    request = do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "pause", actor=bob)
    assert request.level == "L2" and request.status == TeardownStatus.PENDING
    assert request.check_at_request["ok"], request.check_at_request


def test_a_stale_request_says_so_and_its_requester_cancels_it(client, alice, bob, instance, exported):
    run = exported()
    sealed.verify(run)
    node = do_request_teardown(instance.pk, TeardownKind.DELETE_EVIDENCE, "space", run, NODE, actor=bob)
    custody = do_request_teardown(instance.pk, TeardownKind.DELETE_EVIDENCE, "space", run, CUSTODY, actor=bob)
    assert next(t for t in tiles_for(alice) if t.label == "Pending approvals").value == 2
    do_approve_teardown(node.pk, "ok", actor=alice)
    assert next(t for t in tiles_for(alice) if t.label == "Pending approvals").value == 0

    client.force_login(alice)
    queue = client.get(reverse("approval-queue")).content.decode()
    assert f'id="request-{custody.pk}"' in queue and "Not approvable now" in queue
    # The request's page says the same as the queue: the check as it stands now, failing, and no live
    # Approve button beside it (it once showed the filing's green ✓ and an Approve button under "Not
    # approvable now").
    page = client.get(custody.get_absolute_url()).content.decode()
    assert "Not approvable now" in page and 'id="check-now"' in page and 'id="approve-withheld"' in page
    assert 'id="approve"' not in page and 'id="reject"' in page
    now = page.split('id="check-now"', 1)[1].split("</ul>", 1)[0]
    assert 'class="lost"' in now
    client.force_login(bob)
    assert "Not approvable now" in client.get(custody.get_absolute_url()).content.decode()
    client.force_login(alice)
    assert client.post(reverse("teardown-cancel", args=[custody.pk])).status_code == 403
    client.force_login(bob)
    client.post(reverse("teardown-cancel", args=[custody.pk]))
    custody.refresh_from_db()
    assert custody.status == TeardownStatus.CANCELLED


def test_every_teardown_transition_outside_the_table_raises(bob, instance):
    request = TeardownRequest(instance=instance, kind=TeardownKind.SHUTDOWN, requester=bob, reason="r", level="L2")
    for start in TeardownStatus:
        for target in TeardownStatus:
            request.status = start
            if target in TEARDOWN_TRANSITIONS[start]:
                move(request, target)
                assert request.status == target
            else:
                with pytest.raises(IllegalTransition):
                    move(request, target)
    assert set(TEARDOWN_TRANSITIONS) == set(TeardownStatus)


def test_finishing_a_request_that_is_not_executing_is_refused(bob, instance):
    from delivery.actions.execution import do_finish_execution

    no_auto_execution(instance)
    request = do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "pause", actor=bob)
    with pytest.raises(TeardownRefused, match="not Executing"):
        do_finish_execution(request.pk, {})


def test_an_operator_closes_a_failed_runs_active_dir_and_release_no_longer_waits(
    client, bob, instance, make_run, node, celery_worker_process
):
    from runs.models import RunState

    run = make_run()
    (node.active(run) / "ckpt").mkdir(parents=True)
    (node.active(run) / "ckpt" / "latest.pth").write_bytes(b"weights")
    type(run).objects.filter(pk=run.pk).update(state=RunState.QUARANTINED)
    first = do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)
    unclosed = {i["label"]: i for i in first.check_at_request["items"]}["Every active/ directory closed or waived"]
    assert not unclosed["ok"] and run.run_id in unclosed["detail"]  # only an approver's waiver passed it
    do_cancel_teardown(first.pk, actor=bob)

    client.force_login(bob)
    assert "Close active/ into quarantine" in client.get(run.get_absolute_url()).content.decode()
    client.post(reverse("run-close-active", args=[run.run_id]), {"reason": "diverged; keep for a post-mortem"})
    wait_until(lambda: run.refresh_from_db() or run.active_closed_at, what="closing the run's active/")
    moved = list(node.root.glob(f"quarantine/{run.run_id}--closed-*"))
    assert run.active_closed_at and len(moved) == 1 and not node.active(run).exists()
    assert (moved[0] / "ckpt" / "latest.pth").read_bytes() == b"weights"
    assert (moved[0] / "reason.txt").read_text() == "diverged; keep for a post-mortem\n"
    assert run.events.filter(message__contains="active/ closed").exists()
    request = do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)
    assert "Every active/ directory closed or waived" not in [i["label"] for i in request.check_at_request["items"]]


def test_a_worker_killed_inside_the_provider_call_needs_a_person_and_never_calls_twice(
    client, alice, bob, instance, settings, provider_api, celery_worker_process
):
    from tests.delivery.test_teardown_e2e import as_runpod, wait_request

    as_runpod(instance, "pod-killed-1")  # a RunPod stop loses the container disk: L3, an approver
    held = threading.Event()
    provider_api.hold["pod-killed-1"] = held
    request = do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "night", actor=bob)
    do_approve_teardown(request.pk, "go", actor=alice)
    wait_request(request, {TeardownStatus.EXECUTING})
    wait_until(lambda: provider_api.calls_for("pod-killed-1", "stop"), interval=0.1, what="the provider call")
    celery_worker_process.kill()  # inside the provider call
    held.set()

    settings.TEARDOWN_EXECUTION_LEASE = 0
    from delivery.tasks import flag_stuck_teardowns

    assert flag_stuck_teardowns() == [request.pk]  # what beat runs
    request.refresh_from_db()
    assert request.status == TeardownStatus.NEEDS_ATTENTION and "may or may not have happened" in request.failure
    assert request.provider_answer["status_when_interrupted"]["status"] == "stopped"  # RunPod's EXITED
    celery_worker_process.start()
    execute_teardown.delay(request.pk)  # a redelivery finds a person's decision pending: nothing runs
    with pytest.raises(TeardownRefused, match="already Needs a person"):
        do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "again", actor=bob)
    client.force_login(alice)
    page = client.get(request.get_absolute_url()).content.decode()
    assert 'id="settle-retry"' in page and "The provider says: <strong>stopped" in page
    assert len(provider_api.calls_for("pod-killed-1", "stop")) == 1

    client.post(reverse("teardown-settle", args=[request.pk]), {"outcome": "retry", "comment": "console says running"})
    request = wait_request(request, {TeardownStatus.DONE, TeardownStatus.FAILED}, timeout=60)
    calls = provider_api.calls_for("pod-killed-1", "stop")
    assert request.status == TeardownStatus.DONE and len(calls) == 2
    assert {call["idempotency_key"] for call in calls} == {str(request.idempotency_key)}
