"""Approver notifications, console attestation, money and danger clocks."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from delivery.actions.decisions import do_approve_teardown
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownKind, TeardownStatus
from fleet.costs import accrued_cost, danger_clocks
from fleet.models import Instance, InstanceEvent
from notifications.actions import recipients
from notifications.models import Channel, Notification
from tests import factories
from tests.delivery.test_teardown_e2e import wait_request
from tests.sshd import free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_approvers_and_the_approval_webhook_hear_of_a_request_through_the_outbox(
    alice, bob, project, provider_stub, celery_worker_process
):
    """One path: the request's notification is delivered by a worker to its approvers
    (whatever they chose, never the requester) and to the project's approval webhook channel."""
    alice.email, bob.email = "alice@example.org", "bob@example.org"
    alice.save(), bob.save()
    Channel.objects.create(
        project=project,
        name="Approval webhook",
        kind="webhook",
        url=f"{provider_stub.url}/hooks/{project.slug}",
        events=["teardown.requested"],
    )
    box = factories.box(name=f"{project.slug}-box-20261129", project=project, profile_key="runpod")
    request = do_request_teardown(box.pk, TeardownKind.RELEASE, "finished", actor=bob)
    told = Notification.objects.get(project=project, event="teardown.requested")
    assert told.data["awaits_approval"] and told.data["request"] == request.pk and "Reason: finished" in told.text
    assert recipients(told) == ["alice@example.org"]  # never the requester, though bob is a member
    sent = wait_until(lambda: Notification.objects.filter(pk=told.pk, state="sent").first(), what="the outbox row sent")
    assert sent.results == {"email:alice@example.org": "sent", "webhook:Approval webhook": "sent"}, sent.results
    hook = next(hook for hook in provider_stub.webhooks if hook["path"].endswith(project.slug))
    assert hook["body"]["event"] == "teardown.requested" and hook["body"]["request"] == request.pk


def test_a_console_only_release_waits_for_attestation_then_verifies_offline(
    client, alice, bob, project, sshd, celery_worker_process
):
    fields = {**sshd.instance_fields(project), "port": free_port()}  # pinned, but nothing listens: powered off
    box = factories.box(name=f"{project.slug}-adl-20261129", project=project, **{**fields, "profile_key": "autodl"})
    request = do_request_teardown(box.pk, TeardownKind.RELEASE, "finished", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    request = wait_request(request, {TeardownStatus.AWAITING_ATTESTATION, TeardownStatus.FAILED})
    assert request.status == TeardownStatus.AWAITING_ATTESTATION, request.failure
    assert any("AutoDL console" in step for step in request.provider_answer["console_steps"])
    client.force_login(bob)
    page = client.get(request.get_absolute_url()).content.decode()
    assert (
        "I did this in the console" in page
        and "Choose “释放实例 (release the instance)” for that exact instance only." in page
    )
    client.post(reverse("teardown-attest", args=[request.pk]))
    request = wait_request(request, {TeardownStatus.DONE, TeardownStatus.FAILED})
    assert request.status == TeardownStatus.DONE and request.offline_verified is True
    assert request.attested_by == bob


def test_cost_accrues_per_state_and_clocks_name_the_deadline(project, client, alice):
    now = timezone.now()
    box = factories.box(
        name=f"{project.slug}-adl-20261129",
        project=project,
        profile_key="autodl",
        state="stopped",
        rate_running=Decimal("2.00"),
        rate_stopped=Decimal("0.10"),
    )
    Instance.objects.filter(pk=box.pk).update(created=now - timedelta(days=12, hours=10))
    stop = InstanceEvent.objects.create(
        instance=box, kind="state", message="stopped", data={"old": "running", "new": "stopped"}
    )
    InstanceEvent.objects.filter(pk=stop.pk).update(at=now - timedelta(days=12))
    box.refresh_from_db()
    cost = accrued_cost(box, now)
    assert round(cost.running_hours, 3) == 10 and round(cost.stopped_hours, 3) == 288
    assert cost.total == Decimal("48.80")  # 10 h × $2 + 288 h × $0.10
    clocks = danger_clocks(box, has_live_run=False, now=now)
    assert any(line.startswith("stopped 12 days — AutoDL") and "(3 days left)" in line for line in clocks)

    vast = factories.box(
        name=f"{project.slug}-vast-20261129",
        project=project,
        profile_key="vastai",
        state="stopped",
        rate_stopped=Decimal("0.50"),
    )
    Instance.objects.filter(pk=vast.pk).update(created=now - timedelta(hours=10))
    vast.refresh_from_db()
    assert any(
        "disk bills until you destroy it" in line and "$5.00 so far" in line
        for line in danger_clocks(vast, has_live_run=False, now=now)
    )
    client.force_login(alice)
    page = client.get(reverse("dashboard")).content.decode()
    assert "Idle but billing" in page and vast.name in page and box.name in page


def test_an_attested_release_of_a_box_that_still_answers_is_not_released(
    alice, bob, project, sshd, no_worker, settings
):
    """A console-attested release of a box that still answered SSH ended "Done — Offline:
    still answering", the box shown Released and its burn $0/h. It needs a person and stays in spend."""
    from delivery.actions.execution import do_attest_teardown
    from delivery.execution import execute

    settings.TEARDOWN_OFFLINE_WAIT = 1
    box = factories.box(
        name=f"{project.slug}-adl-20261201",
        project=project,
        **{**sshd.instance_fields(project), "profile_key": "autodl"},
    )
    request = do_request_teardown(box.pk, TeardownKind.RELEASE, "finished", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    assert execute(request.pk) == "awaiting attestation"
    do_attest_teardown(request.pk, actor=bob)
    assert execute(request.pk) == "attested"
    request.refresh_from_db()
    box.refresh_from_db()
    assert request.status == TeardownStatus.NEEDS_ATTENTION and "still answers SSH" in request.failure
    assert box.state == "running"  # not released: it stays in spend and keeps being probed
