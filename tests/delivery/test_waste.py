"""A box that bills for nothing is an alarm: a verified box left running, an idle one, a stopped vast.ai
box whose disk still bills. Each reaches the project's webhook (the local receiver) once per threshold
of its duration, with the hourly and accrued cost and a link to the box's page where the suggested
request is prefilled beside its evaluated checks. A project that opted in gets the shutdown request
filed in the opting person's name, proved on the box (the loopback sshd) and waiting in the approval
queue for someone else; a release stays a person's request."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from core.models import AuditEntry
from delivery.models import TeardownKind, TeardownRequest, TeardownStatus, WasteAlarm
from delivery.tasks import prove_teardown
from delivery.waste import do_raise_waste_alarms, do_set_waste_shutdown
from fleet.models import InstanceEvent, InstanceState
from notifications.actions import do_add_channel, do_deliver_notification
from notifications.models import Channel, Event, Notification
from runs.models import RunState
from tests import factories
from tests.racing import at_once

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def webhook(project, provider_stub, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = settings.WEBHOOK_ALLOW_HTTP = True
    url = f"{provider_stub.url}/hooks/waste-{project.slug}"
    do_add_channel(project, "ops", Channel.Kind.WEBHOOK, url, [], actor=None)
    return lambda: [hook["body"] for hook in provider_stub.webhooks if f"waste-{project.slug}" in hook["path"]]


def deliver(project) -> None:
    for pk in Notification.objects.filter(project=project, state="pending").order_by("pk").values_list("pk", flat=True):
        assert do_deliver_notification(pk) == "sent"


def verified_run(instance, at):
    run = factories.run(instance, state=RunState.EXPORTED, state_changed_at=at)
    factories.verified_record(run, verified_at=at)
    return run


def test_a_verified_box_left_running_alarms_per_threshold_and_files_its_shutdown(
    client, alice, bob, project, instance, webhook, no_worker
):
    project.shutdown_needs_approval = True  # a second person decides it: it waits in the queue
    project.save()
    instance.rate_running = Decimal("2.5")
    instance.save()
    done = timezone.now()
    verified_run(instance, done)
    do_set_waste_shutdown(project.pk, True, actor=bob)

    assert do_raise_waste_alarms(done + timedelta(minutes=10)) == []  # not yet 30 minutes
    (first,) = do_raise_waste_alarms(done + timedelta(minutes=31))
    assert do_raise_waste_alarms(done + timedelta(minutes=40)) == []  # once per threshold
    alarm = WasteAlarm.objects.get(pk=first)
    assert alarm.kind == "verified" and alarm.suggested == TeardownKind.RELEASE and alarm.threshold_minutes == 30
    assert alarm.hourly == Decimal("2.5") and "every run on it (1) is exported and verified" in alarm.message

    request = alarm.request
    assert request.kind == TeardownKind.SHUTDOWN and request.requester == bob and "opted in by bob" in request.reason
    assert prove_teardown(request.pk)  # the box's proofs, over SSH to the loopback box
    request.refresh_from_db()
    assert request.status == TeardownStatus.PENDING, request.failure

    (second,) = do_raise_waste_alarms(done + timedelta(hours=6, minutes=1))
    assert WasteAlarm.objects.get(pk=second).request is None  # filed once for the episode
    assert TeardownRequest.objects.filter(instance=instance).count() == 1
    deliver(project)
    events = [body["event"] for body in webhook()]
    assert events == ["box.waste", "teardown.requested", "box.waste"]  # the approver hears of bob's request
    bodies = [body for body in webhook() if body["event"] == "box.waste"]
    assert [body["threshold_minutes"] for body in bodies] == [30, 360]
    assert bodies[1]["hourly"] == "2.5000" and Decimal(bodies[1]["accrued"]) >= Decimal("15.00")
    assert f"/instances/{instance.pk}/?waste={second}#consequence-release" in bodies[1]["link"]

    client.force_login(alice)  # the approver: the queue holds bob's request, the page the prefilled release
    queue = client.get(reverse("approval-queue")).content.decode()
    assert f"/teardown/{request.pk}/" in queue
    page = client.get(f"{instance.get_absolute_url()}?waste={second}").content.decode()
    assert 'class="prefilled"' in page and "bills for nothing" in page and f'id="waste-{second}"' in page


def test_a_stopped_vastai_box_whose_disk_bills_alarms_and_nothing_is_filed(project, bob, webhook, no_worker):
    box = factories.box(project, "vastai", state=InstanceState.STOPPED, rate_stopped=Decimal("0.12"))
    do_set_waste_shutdown(project.pk, True, actor=bob)
    later = box.created + timedelta(hours=25)
    (alarm_pk,) = do_raise_waste_alarms(later)  # first seen past every threshold: only the largest
    alarm = WasteAlarm.objects.get(pk=alarm_pk)
    assert alarm.kind == "stopped" and alarm.threshold_minutes == 1440 and alarm.suggested == TeardownKind.RELEASE
    assert alarm.request is None and not TeardownRequest.objects.filter(instance=box).exists()
    assert alarm.accrued == Decimal("3.00") and "disk bills forever" in alarm.message
    assert InstanceEvent.objects.filter(instance=box, kind="waste").count() == 1
    deliver(project)
    (body,) = webhook()
    assert body["kind"] == "stopped" and body["hourly"] == "0.1200"


def test_what_is_and_is_not_waste(project, instance, no_worker):
    now = timezone.now()
    factories.run(instance, state=RunState.QUARANTINED, state_changed_at=now)
    assert do_raise_waste_alarms(now + timedelta(hours=2)) == []  # a lab box with no rate: not known to bill
    instance.rate_running = Decimal("0.0")
    instance.rate_stopped = Decimal("0.01")  # a person says it bills (its disk, stopped)
    instance.save()
    live = factories.run(instance, state=RunState.RUNNING)
    assert do_raise_waste_alarms(now + timedelta(hours=2)) == []  # a live run: working
    live.state = RunState.QUARANTINED
    live.state_changed_at = now
    live.save()
    (idle,) = do_raise_waste_alarms(now + timedelta(hours=2))  # a failed run, nothing verified: idle
    alarm = WasteAlarm.objects.get(pk=idle)
    assert alarm.kind == "idle" and alarm.suggested == TeardownKind.SHUTDOWN
    assert "running with no live run" in alarm.message and "an hourly rate nobody set" in alarm.message  # 0 running
    lambda_box = factories.box(project, "lambda", state=InstanceState.RUNNING)
    (no_stop,) = do_raise_waste_alarms(lambda_box.created + timedelta(hours=1))
    assert WasteAlarm.objects.get(pk=no_stop).suggested == TeardownKind.RELEASE  # Lambda has no stop
    quiet = factories.box(project, "generic-ssh", state=InstanceState.STOPPED)  # a stop that bills nothing
    gone = factories.box(project, "runpod", state=InstanceState.RELEASED)
    verified_run(gone, now)
    later = do_raise_waste_alarms(now + timedelta(days=3))  # past a day: the largest threshold, once each
    assert sorted(WasteAlarm.objects.filter(pk__in=later).values_list("instance", "threshold_minutes")) == sorted(
        [(instance.pk, 1440), (lambda_box.pk, 1440)]
    )  # a stop that bills nothing and a released box never alarm
    assert not WasteAlarm.objects.filter(instance__in=[quiet, gone]).exists()


def test_two_ticks_at_once_raise_one_alarm_and_notify_once(project, no_worker):
    box = factories.box(project, "runpod", state=InstanceState.STOPPED, rate_stopped=Decimal("0.2"))
    later = box.created + timedelta(hours=1)
    outcomes = at_once(*[lambda: do_raise_waste_alarms(later)] * 4)
    assert sorted(len(outcome) for outcome in outcomes) == [0, 0, 0, 1], outcomes
    assert WasteAlarm.objects.filter(instance=box).count() == 1
    assert Notification.objects.filter(project=project, event=Event.WASTE).count() == 1


def test_only_an_operator_opts_the_project_in_and_it_is_audited(client, bob, carol, project):
    client.force_login(carol)  # a member without the operator role
    client.post(reverse("project-waste-shutdown", args=[project.slug]), {"on": "1"})
    project.refresh_from_db()
    assert project.waste_shutdown_by is None
    client.force_login(bob)
    client.post(reverse("project-waste-shutdown", args=[project.slug]), {"on": "1"})
    project.refresh_from_db()
    assert project.waste_shutdown_by == bob
    page = client.get(project.get_absolute_url()).content.decode()
    assert "in bob’s name" in page and 'id="button-waste-shutdown"' in page
    client.post(reverse("project-waste-shutdown", args=[project.slug]), {"on": "0"})
    project.refresh_from_db()
    assert project.waste_shutdown_by is None
    assert AuditEntry.objects.filter(project=project, action="project.waste_shutdown").count() == 2


def test_a_released_box_whose_filesystem_and_ip_still_bill_alarms_until_they_are_deleted(
    client, project, bob, webhook, no_worker
):
    """A resource's clock alarms like a box's: released, its registered filesystem and static IP bill on;
    told at each threshold with their $/h and what they billed, linking to the box's page where each has
    its own delete request; a deleted one stops counting, and with none left nothing is told."""
    from fleet.models import Resource

    box = factories.box(project, "lambda", state=InstanceState.RELEASED)
    fs = factories.resource(instance=box, kind="persistent_fs", name="ckpts", rate=Decimal("0.0137"))
    factories.resource(instance=box, kind="static_ip", name="198.51.100.7", rate=Decimal("0.0045"))
    factories.resource(instance=box, kind="snapshot", name="free", rate=0)  # bills nothing: not waste
    start = max(box.created, fs.created)
    assert do_raise_waste_alarms(start + timedelta(minutes=10)) == []
    (first,) = do_raise_waste_alarms(start + timedelta(hours=7))
    alarm = WasteAlarm.objects.get(pk=first)
    assert alarm.kind == "resources" and alarm.threshold_minutes == 360 and alarm.hourly == Decimal("0.0182")
    assert alarm.suggested == TeardownKind.DELETE_RESOURCE and alarm.accrued == Decimal("0.13")
    assert "static IP 198.51.100.7, persistent filesystem ckpts still bill until deleted" in alarm.message
    assert do_raise_waste_alarms(start + timedelta(hours=8)) == []  # told once per threshold
    deliver(project)
    (body,) = webhook()
    assert body["kind"] == "resources" and "#consequence-delete_resource" in body["link"]
    client.force_login(bob)
    assert client.get(f"/instances/{box.pk}/?waste={first}").status_code == 200

    Resource.objects.filter(instance=box).update(deleted_at=start + timedelta(hours=9))
    assert do_raise_waste_alarms(start + timedelta(hours=30)) == []  # nothing left billing


def test_a_worker_killed_between_the_alarm_and_its_filing_files_at_the_next_tick(project, bob, instance, no_worker):
    """The alarm commits in its own transaction and the shutdown request is filed after it: a worker that
    died in between left an alarm with no request. The next tick files it, once; a refusal is not retried
    at the same threshold (said on the box once)."""
    from delivery.waste import _raise, waste_of

    instance.rate_running = Decimal("1.0")
    instance.save()
    do_set_waste_shutdown(project.pk, True, actor=bob)
    when = timezone.now() + timedelta(minutes=31)
    box = type(instance).objects.with_state_events().get(pk=instance.pk)
    alarm = _raise(box, waste_of(box, [], {}), 30, when)  # the worker dies here, before the filing
    assert alarm is not None and alarm.request is None
    assert do_raise_waste_alarms(when + timedelta(minutes=1)) == []  # nothing new is told...
    alarm.refresh_from_db()
    assert alarm.request is not None and alarm.request.kind == TeardownKind.SHUTDOWN  # ...and it is filed
    do_raise_waste_alarms(when + timedelta(minutes=2))
    assert TeardownRequest.objects.filter(instance=instance).count() == 1


def test_a_refused_automatic_filing_is_said_once_per_threshold(project, alice, bob, instance, no_worker):
    from delivery.actions.requests import do_file_teardown

    instance.rate_running = Decimal("1.0")
    instance.save()
    do_set_waste_shutdown(project.pk, True, actor=bob)
    do_file_teardown(instance.pk, TeardownKind.SHUTDOWN, "alice's own", actor=alice)  # one is open already
    when = timezone.now() + timedelta(minutes=31)
    assert len(do_raise_waste_alarms(when)) == 1
    for minutes in (1, 2, 3):  # ticks at the same threshold: not asked again, not said again
        do_raise_waste_alarms(when + timedelta(minutes=minutes))
    said = InstanceEvent.objects.filter(instance=instance, message__startswith="The automatic shutdown request was not")
    assert said.count() == 1 and TeardownRequest.objects.filter(instance=instance).count() == 1
