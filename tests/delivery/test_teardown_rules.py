"""Who may decide, exactly-once execution, levels from the profile, holds, audit export, adapters."""

import csv
import io
import threading

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.urls import reverse

from core.models import AuditEntry
from delivery.actions.base import TeardownRefused
from delivery.actions.decisions import do_approve_teardown, do_reject_teardown
from delivery.actions.holds import do_place_hold
from delivery.actions.requests import do_request_teardown
from delivery.levels import consequence_of
from delivery.models import ReleaseHold, TeardownKind, TeardownRequest, TeardownStatus
from delivery.tasks import execute_teardown, prove_teardown
from fleet import provider_calls as calls
from fleet.models import Instance
from tests import factories
from tests.personas import join
from tests.provider_stub import KEY_ENV

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _in_process_only(no_worker):
    """These tests execute consequences themselves: an approval's enqueued execution must not race them."""


@pytest.fixture(autouse=True)
def _members(project, dave, erin):
    join(project, dave, erin)


@pytest.fixture
def pod(project):
    return factories.box(
        project, "runpod", api=True, host="203.0.113.9", user="root", provider_id="pod-rules", state="running"
    )


def test_the_requester_and_a_plain_operator_cannot_approve(client, alice, bob, dave, pod):
    client.force_login(bob)
    response = client.post(reverse("teardown-create", args=[pod.pk]), {"kind": "release", "reason": "finished"})
    request = TeardownRequest.objects.get()
    assert response.url == request.get_absolute_url()
    assert prove_teardown(request.pk) == "pending"
    page = client.get(request.get_absolute_url()).content.decode()
    assert 'id="approve"' not in page and "a second person must approve it" in page
    assert client.post(reverse("teardown-decide", args=[request.pk]), {"decision": "approve"}).status_code == 403
    client.force_login(dave)
    assert client.post(reverse("teardown-decide", args=[request.pk]), {"decision": "approve"}).status_code == 403
    request.refresh_from_db()
    assert request.status == TeardownStatus.PENDING and request.approver is None


def test_an_approver_who_requested_cannot_approve_their_own_request(client, alice, pod):
    """alice holds approve_cost: her own request still needs someone else (page, action and API)."""
    client.force_login(alice)
    client.post(reverse("teardown-create", args=[pod.pk]), {"kind": "release", "reason": "finished"})
    request = TeardownRequest.objects.get()
    assert prove_teardown(request.pk) == "pending"
    request.refresh_from_db()
    assert request.requester == alice and request.status == TeardownStatus.PENDING
    page = client.get(request.get_absolute_url()).content.decode()
    assert 'id="approve"' not in page and "a second person must approve it" in page
    assert client.post(reverse("teardown-decide", args=[request.pk]), {"decision": "approve"}).status_code == 403
    with pytest.raises(PermissionDenied, match="never approve or reject their own request"):
        do_approve_teardown(request.pk, "my own", actor=alice)
    request.refresh_from_db()
    assert request.status == TeardownStatus.PENDING and request.approver is None


def test_a_rejected_request_never_executes(client, alice, bob, pod, provider_api):
    client.force_login(bob)
    client.post(reverse("teardown-create", args=[pod.pk]), {"kind": "release", "reason": "finished"})
    request = TeardownRequest.objects.get()
    prove_teardown(request.pk)
    client.force_login(alice)
    client.post(reverse("teardown-decide", args=[request.pk]), {"decision": "reject", "comment": "not yet"})
    request.refresh_from_db()
    assert request.status == TeardownStatus.REJECTED and request.approver == alice
    assert execute_teardown(request.pk) == "nothing to do"
    assert provider_api.calls_for("pod-rules") == []
    with pytest.raises(TeardownRefused):
        do_approve_teardown(request.pk, "changed my mind", actor=alice)  # a rejection is final


def test_two_approvers_and_three_executors_terminate_once(alice, bob, erin, pod, provider_api):
    request = do_request_teardown(pod.pk, TeardownKind.RELEASE, "finished", actor=bob)

    def together(*calls) -> list:
        """Run the calls at once; each one's result or exception (none may vanish in a thread)."""
        barrier, results = threading.Barrier(len(calls)), [None] * len(calls)

        def one(index, call):
            barrier.wait()
            try:
                results[index] = ("ok", call())
            except Exception as exc:  # noqa: BLE001 — recorded and asserted on below
                results[index] = ("raised", exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=one, args=(i, call)) for i, call in enumerate(calls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert None not in results, results  # every thread finished
        return results

    approvals = together(
        *(lambda user=user: do_approve_teardown(request.pk, "yes", actor=user) for user in (alice, erin))
    )
    assert sorted(kind for kind, _ in approvals) == ["ok", "raised"], approvals
    refused = next(result for kind, result in approvals if kind == "raised")
    assert isinstance(refused, TeardownRefused)
    executions = together(*(lambda: execute_teardown(request.pk) for _ in range(3)))
    assert sorted(result for _, result in executions) == ["done", "nothing to do", "nothing to do"], executions
    request.refresh_from_db()
    assert request.status == TeardownStatus.DONE and request.attempts == 1
    assert len(provider_api.calls_for("pod-rules", "terminate")) == 1
    assert AuditEntry.objects.filter(request=request, action="executing").count() == 1


def test_levels_come_from_the_survival_matrix(project):
    def box(key, **fields):
        name = f"{project.slug}-{key}-20261129"
        return Instance.objects.get_or_create(name=name, project=project, profile_key=key, defaults=fields)[0]

    # A generic SSH box's power-off is a real machine's: without its command the stop is not offered.
    bare = consequence_of(TeardownKind.SHUTDOWN, Instance(name="bare", project=project, profile_key="generic-ssh"))
    assert bare.not_offered.startswith("No shutdown command is set")

    # RunPod's stop wipes the container disk: L3. A generic box keeps its disk on stop: L2.
    runpod = consequence_of(TeardownKind.SHUTDOWN, box("runpod"))
    generic = consequence_of(TeardownKind.SHUTDOWN, box("generic-ssh", shutdown_command="sudo -n poweroff"))
    assert runpod.level == "L3" and runpod.needs_second_person and runpod.data_lost
    assert "720 h clock" in runpod.clock and "volume disk (/workspace) when the clock runs out" in runpod.data_lost
    assert generic.level == "L2" and not generic.needs_second_person and not generic.clock
    assert generic.stops_billing.endswith("Runs on the box: sudo -n poweroff")
    # AutoDL keeps its disks on stop, but the stop starts the 15-day release clock: shown, L2 while
    # nothing sealed lives on a tier the clock destroys (the evidence tests cover the L3 case). Its data
    # disk counts as one only as measured (a preflight's mount of the data root): unmeasured, the card
    # takes the least-surviving reading and names it.
    unmeasured = consequence_of(TeardownKind.SHUTDOWN, box("autodl"))
    assert unmeasured.level == "L3" and "the data root /root/autodl-tmp (the system disk)" in unmeasured.data_lost
    data_disk = {"mountpoint": "/root/autodl-tmp", "device": "253:16", "fstype": "ext4", "source": "/dev/vdb"}
    Instance.objects.filter(profile_key="autodl", project=project).update(data_mounts={"data": data_disk})
    autodl = consequence_of(TeardownKind.SHUTDOWN, box("autodl"))  # as its box answered a preflight
    assert autodl.level == "L2" and "360 h clock" in autodl.clock
    project.shutdown_needs_approval = True
    project.save()
    assert consequence_of(TeardownKind.SHUTDOWN, box("generic-ssh")).needs_second_person
    for kind in (TeardownKind.RELEASE, TeardownKind.DELETE_EVIDENCE):
        assert consequence_of(kind, box("local")).level == "L3"


def test_a_hold_blocks_release_until_an_approved_release_retires_it(alice, bob, pod, provider_api):
    do_place_hold(pod.pk, "shared team box", actor=bob)
    with pytest.raises(TeardownRefused, match="never release"):
        do_request_teardown(pod.pk, TeardownKind.RELEASE, "done", actor=bob)
    request = do_request_teardown(pod.pk, TeardownKind.RELEASE, "done", retire_hold=True, actor=bob)
    do_approve_teardown(request.pk, "the hold is stale", actor=alice)
    execute_teardown(request.pk)
    hold = ReleaseHold.objects.get()
    assert hold.retired_by == alice and hold.retired_by_request == request and "stale" in hold.retired_reason
    assert AuditEntry.objects.filter(action="hold_retired").count() == 1


def test_a_duplicate_request_and_a_missing_reason_are_refused(bob, pod):
    with pytest.raises(TeardownRefused, match="Say why"):
        do_request_teardown(pod.pk, TeardownKind.RELEASE, "  ", actor=bob)
    first = do_request_teardown(pod.pk, TeardownKind.RELEASE, "done", actor=bob)
    with pytest.raises(TeardownRefused, match=f"#{first.pk}"):
        do_request_teardown(pod.pk, TeardownKind.RELEASE, "done again", actor=bob)


def test_expired_requests_cannot_be_approved(alice, bob, pod):
    from datetime import timedelta

    from django.utils import timezone

    request = do_request_teardown(pod.pk, TeardownKind.RELEASE, "done", actor=bob)
    TeardownRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    with pytest.raises(TeardownRefused, match="expired"):
        do_approve_teardown(request.pk, actor=alice)
    request.refresh_from_db()
    assert request.status == TeardownStatus.EXPIRED


def test_audit_log_filters_and_exports(client, alice, bob, pod):
    do_request_teardown(pod.pk, TeardownKind.RELEASE, "done", actor=bob)
    do_place_hold(pod.pk, "keep", actor=alice)
    client.force_login(alice)
    page = client.get(reverse("audit-log"), {"action": "hold_placed"}).content.decode()
    assert "“Never release” hold" in page and "requested (L3)" not in page
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("audit-log"), {"format": "csv"}).content.decode())))
    assert [row["action"] for row in rows] == ["hold_placed", "requested"]
    data = client.get(reverse("audit-log"), {"format": "json", "actor": "bob"}).json()
    assert [entry["action"] for entry in data] == ["requested"]
    with pytest.raises(ValueError, match="append-only"):
        AuditEntry.objects.first().delete()


def test_a_provider_that_cannot_answer_says_nothing_about_the_box(project, provider_api, monkeypatch):
    box = factories.box(project, "runpod", api=True, provider_id="p-quiet")
    monkeypatch.setenv(KEY_ENV, "wrong")  # the provider refuses: neither stopped nor running
    assert calls.provider_says_stopped(box) is None
    assert calls.provider_status(box)["status"].startswith("could not ask")


def test_lambda_has_no_stop_and_console_platforms_need_attestation(project, provider_api):
    lam = factories.box(project, "lambda")
    with pytest.raises(calls.ProviderError, match="no shutdown"):
        calls.execute(lam, "shutdown", "k")
    autodl = factories.box(project, "autodl")
    with pytest.raises(calls.NeedsAttestation) as steps:
        calls.execute(autodl, "shutdown", "k")
    assert any("关机" in step for step in steps.value.steps)


def test_a_wrong_api_key_is_a_clear_failure(project, provider_api, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "wrong")
    box = factories.box(project, "runpod", api=True, provider_id="p")
    with pytest.raises(calls.ProviderError, match="answered 401"):
        calls.execute(box, "release", "k")
    assert provider_api.calls_for("p") == []


def test_a_shutdown_whose_box_stays_up_is_not_called_stopped(bob, instance, settings, no_worker):
    """The power-off command did nothing: after TEARDOWN_OFFLINE_WAIT the box still answers."""
    from delivery import execution
    from fleet.models import InstanceEvent

    settings.TEARDOWN_OFFLINE_WAIT = 1
    instance.shutdown_command = "true"  # accepted, and the box keeps running
    instance.save()
    request = do_request_teardown(instance.pk, TeardownKind.SHUTDOWN, "night", actor=bob)
    assert request.status == TeardownStatus.APPROVED  # L2 on a generic box: no second person
    assert execution.execute(request.pk) == "done"
    request.refresh_from_db()
    instance.refresh_from_db()
    assert request.offline_verified is False
    assert AuditEntry.objects.filter(request=request, action="done", message__contains="NOT verified offline")
    assert instance.state == "unknown"  # never "stopped" while it answers
    event = InstanceEvent.objects.filter(instance=instance, kind="state").latest("at")
    assert "sent, but the box still answers" in event.message


def _unclosed_run(pod):
    """A quarantined run on the box whose active/ directory nobody closed."""
    from runs.models import RunState

    return factories.run(
        project=pod.project,
        instance=pod,
        run_id=f"{pod.project.slug}-unclosed",
        state=RunState.QUARANTINED,
        source_path="/nowhere",
        command=["python3", "train.py"],
    )


def test_an_unclosed_active_dir_blocks_approval_until_an_approver_waives_it(client, alice, bob, pod, provider_api):
    run = _unclosed_run(pod)
    request = do_request_teardown(pod.pk, TeardownKind.RELEASE, "finished", actor=bob)
    item = {i["label"]: i for i in request.check_at_request["items"]}["Every active/ directory closed or waived"]
    assert not item["ok"] and item["waivable"] and run.run_id in item["detail"]
    with pytest.raises(TeardownRefused, match="Every active/ directory closed or waived"):
        do_approve_teardown(request.pk, "looks done", actor=alice)  # not waived: refused
    request.refresh_from_db()
    assert request.status == TeardownStatus.PENDING and not request.waive_active

    client.force_login(alice)
    response = client.post(
        reverse("teardown-decide", args=[request.pk]), {"decision": "approve", "waive_active": "on"}, follow=True
    )
    assert "Approved." in response.content.decode()
    request.refresh_from_db()
    assert request.status == TeardownStatus.APPROVED and request.waive_active
    assert AuditEntry.objects.get(action="approved").message.endswith("approved (unclosed active/ waived)")
    assert execute_teardown(request.pk) == "done"  # the execution's re-check honours the waiver
    assert len(provider_api.calls_for("pod-rules", "terminate")) == 1


def test_the_expiry_sweep_expires_only_pending_requests_past_their_deadline(alice, bob, pod):
    from datetime import timedelta

    from django.utils import timezone

    from delivery.tasks import expire_teardown_requests

    other = factories.box(pod.project, "runpod")
    due = do_request_teardown(pod.pk, TeardownKind.RELEASE, "done", actor=bob)
    fresh = do_request_teardown(other.pk, TeardownKind.RELEASE, "done", actor=bob)
    third = factories.box(pod.project, "runpod")
    decided = do_request_teardown(third.pk, TeardownKind.RELEASE, "done", actor=bob)
    do_reject_teardown(decided.pk, "no", actor=alice)
    past = timezone.now() - timedelta(minutes=1)
    TeardownRequest.objects.filter(pk__in=[due.pk, decided.pk]).update(expires_at=past)

    assert expire_teardown_requests() == 1
    assert expire_teardown_requests() == 0  # nothing is expired twice
    states = dict(TeardownRequest.objects.values_list("pk", "status"))
    assert states == {due.pk: "expired", fresh.pk: "pending", decided.pk: "rejected"}
    assert list(AuditEntry.objects.filter(action="expired").values_list("request_id", flat=True)) == [due.pk]


def test_attesting_a_request_that_awaits_no_attestation_is_refused(client, alice, bob, pod):
    from delivery.actions.execution import do_attest_teardown

    request = do_request_teardown(pod.pk, TeardownKind.RELEASE, "done", actor=bob)
    with pytest.raises(TeardownRefused, match="is not waiting for an attestation"):
        do_attest_teardown(request.pk, actor=bob)
    client.force_login(bob)
    response = client.post(reverse("teardown-attest", args=[request.pk]), follow=True)
    assert "is not waiting for an attestation" in response.content.decode()
    request.refresh_from_db()
    assert request.status == TeardownStatus.PENDING and request.attested_by is None
    assert not AuditEntry.objects.filter(action="attested").exists()


def test_a_shutdown_approved_after_the_release_ran_is_refused(alice, bob, project, sshd, provider_api):
    """Found by the stateful test: a shutdown requested before a release, approved after it had run."""
    fields = {key: value for key, value in sshd.instance_fields(project).items() if key != "profile_key"}
    box = factories.box(project, "runpod", api=True, provider_id="pod-released", **fields)
    shutdown = do_request_teardown(box.pk, TeardownKind.SHUTDOWN, "night", actor=bob)
    release = do_request_teardown(box.pk, TeardownKind.RELEASE, "finished", actor=bob)
    do_approve_teardown(release.pk, "done with it", actor=alice)
    assert execute_teardown(release.pk) == "done"
    with pytest.raises(TeardownRefused, match="The box is not already released: released"):
        do_approve_teardown(shutdown.pk, "late", actor=alice)
    shutdown.refresh_from_db()
    assert shutdown.status == TeardownStatus.PENDING
    assert [call["verb"] for call in provider_api.calls_for("pod-released")] == ["terminate"]


@pytest.mark.parametrize("kind", ["release", "shutdown"])
def test_a_sweep_cell_queued_on_the_box_blocks_its_release_and_shutdown(bob, pod, kind):
    """Before: `_no_live_run` read LIVE_STATES only, so a box whose sweep cells were still to start (draft,
    waiting for a GPU slot) was released under them, and each cell then failed its preflight on no box."""
    from runs.models import Run, RunState, Sweep

    base = factories.run(pod)
    sweep = Sweep.objects.create(project=pod.project, name="lr", base_run=base, overrides=[{"lr": 0.1}])
    cell = factories.run(pod, sweep=sweep, cell=1, state=RunState.DRAFT)
    with pytest.raises(TeardownRefused, match=f"{cell.run_id} queued to start here"):
        do_request_teardown(pod.pk, kind, "done with it", actor=bob)
    assert not TeardownRequest.objects.exists()
    Run.objects.filter(pk=cell.pk).update(sweep=None)  # a draft nobody will start by itself: no block
    if kind == "release":  # (a shutdown's idle scan needs the box over SSH, which this row has not)
        assert do_request_teardown(pod.pk, kind, "done with it", actor=bob).pk
