"""Clocks that alarm: a stopped box's clocks, "N hours after stop" included, notify the
project once per threshold, never once per beat tick, by e-mail and its webhook, with a banner."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from fleet.actions import do_change_instance_state
from fleet.alarms import do_raise_clock_alarms, threshold_due
from fleet.costs import clock_deadlines
from fleet.models import ClockAlarm, Instance, InstanceEvent
from notifications.actions import do_add_channel
from notifications.models import Channel
from tests import factories
from tests.waiting import deliver_notifications, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gpushare(alice, bob, carol, settings):
    """A stopped Gpushare box: /hy-tmp is wiped 24 h after stop, the box released after 240 h."""
    settings.CLOCK_ALARM_HOURS = [72, 24, 6]
    settings.WEBHOOK_ALLOW_PRIVATE = settings.WEBHOOK_ALLOW_HTTP = True
    box = factories.box(factories.project(alice, bob, carol), "gpushare", state="running")
    return do_change_instance_state(box.pk, "stopped", "night", actor=bob)


def stopped_hours_ago(box, hours: float) -> None:
    """Move the stop back in time in the database: the clocks read its timestamp."""
    stop = box.events.filter(kind=InstanceEvent.Kind.STATE).latest("at")
    InstanceEvent.objects.filter(pk=stop.pk).update(at=timezone.now() - timedelta(hours=hours))


def test_thresholds_pick_the_tightest_one_inside():
    assert [threshold_due(h, [72, 24, 6]) for h in (100, 72, 30, 23, 5.9, 0, -3)] == [None, 72, 72, 24, 6, 0, 0]


def test_an_hours_after_stop_clock_counts(gpushare):
    clocks = {deadline.key: deadline for deadline in clock_deadlines(gpushare)}
    wipe = next(d for d in clocks.values() if "wiped 24 hours" in d.what)
    stop_at = gpushare.events.filter(kind=InstanceEvent.Kind.STATE).latest("at").at
    assert wipe.fires_at == stop_at + timedelta(hours=24)
    assert clocks["auto-release"].fires_at == stop_at + timedelta(hours=240)


def test_a_clock_23_hours_from_firing_alarms_once_per_threshold(client, bob, charlie, gpushare, no_worker):
    stopped_hours_ago(gpushare, 1)  # the 24 h wipe fires in 23 h
    assert len(do_raise_clock_alarms()) == 1  # the wipe's 24 h threshold; the release is 239 h away
    for _ in range(3):
        assert do_raise_clock_alarms() == []  # beat ticks again: nothing new
    alarm = ClockAlarm.objects.get()
    assert (alarm.threshold_hours, alarm.clock) == (24, "clock-0")
    assert deliver_notifications() == ["sent"]
    assert all("/hy-tmp is wiped 24 hours after the box stops" in message.body for message in mail.outbox)
    assert sorted(m.to[0] for m in mail.outbox) == ["alice@example.org", "bob@example.org", "carol@example.org"]

    stopped_hours_ago(gpushare, 18.5)  # 5.5 h left: the 6 h threshold
    do_raise_clock_alarms()
    stopped_hours_ago(gpushare, 25)  # fired
    do_raise_clock_alarms()
    do_raise_clock_alarms()
    thresholds = list(ClockAlarm.objects.filter(clock="clock-0").values_list("threshold_hours", flat=True))
    assert sorted(thresholds) == [0, 6, 24] and deliver_notifications() == ["sent", "sent"]
    assert len(mail.outbox) == 3 * 3  # three alarms, three members each

    client.force_login(bob)
    page = client.get("/").content.decode()
    assert 'id="clock-alarms"' in page and "fired" in page and gpushare.name in page
    client.force_login(charlie)  # the outsider sees no banner about alice's box
    assert gpushare.name not in client.get("/").content.decode()


def test_a_running_box_has_no_stopped_clocks_and_a_new_stop_alarms_again(bob, gpushare):
    stopped_hours_ago(gpushare, 1)
    assert len(do_raise_clock_alarms()) == 1
    do_change_instance_state(gpushare.pk, "running", "started again", actor=bob)
    assert do_raise_clock_alarms() == [] and clock_deadlines(Instance.objects.get(pk=gpushare.pk)) == []
    do_change_instance_state(gpushare.pk, "stopped", "night again", actor=bob)
    stopped_hours_ago(gpushare, 2)
    assert len(do_raise_clock_alarms()) == 1  # a new firing time: a new alarm
    assert ClockAlarm.objects.count() == 2


def test_the_project_webhook_hears_the_alarm(bob, gpushare, provider_stub, celery_worker_process):
    project = gpushare.project
    do_add_channel(project, "ops", Channel.Kind.WEBHOOK, f"{provider_stub.url}/hooks/{project.slug}", [], actor=bob)
    stopped_hours_ago(gpushare, 1)
    do_raise_clock_alarms()
    hooks = wait_until(
        lambda: [hook for hook in provider_stub.webhooks if hook["path"].endswith(project.slug)],
        what="the clock webhook",
    )
    assert hooks[0]["body"]["event"] == "clock.threshold" and hooks[0]["body"]["threshold_hours"] == 24


def test_a_platform_timer_on_a_running_box_alarms_before_it_stops_the_box(alice, bob, client, no_worker):
    """Auto-shutdown timers, rental ends and notebook caps are clocks of a running box."""
    project = factories.project(alice, bob)
    box = factories.box(project, "vastai", state="running", stops_at=timezone.now() + timedelta(hours=5))
    (deadline,) = clock_deadlines(box)
    assert deadline.key == "timer" and "vast.ai timer stops this box" in deadline.what
    assert len(do_raise_clock_alarms()) == 1 and do_raise_clock_alarms() == []
    assert ClockAlarm.objects.get(instance=box).threshold_hours == 6
    client.force_login(bob)
    assert box.name in client.get("/").content.decode()
    assert "timer stops this box at" in client.get(f"/instances/{box.pk}/").content.decode()
    do_change_instance_state(box.pk, "stopped", "done", actor=bob)
    assert box.name not in client.get("/").content.decode()  # a stopped box's timer no longer ticks


def test_two_readings_of_a_low_balance_at_once_tell_it_once(project):
    """Two reconciliations (beat ticks, or two workers) read the same falling balance at the same moment,
    the first reading ever and a later one: PostgreSQL's row lock lets one of each pair tell the project."""
    from fleet.alarms import do_observe_balance
    from fleet.models import ProviderBalance
    from notifications.models import Notification
    from tests.provider_stub import api_credential
    from tests.racing import at_once

    key = api_credential(project)
    first = at_once(*[lambda: do_observe_balance("vastai", key.pk, 20.0, 1.0) for _ in range(4)])
    assert sorted(first, key=str) == [24, None, None, None], first  # 20 h left: the 24 h threshold, once
    later = at_once(*[lambda: do_observe_balance("vastai", key.pk, 5.0, 1.0) for _ in range(4)])
    assert sorted(later, key=str) == [6, None, None, None], later
    assert ProviderBalance.objects.get().alarmed == [24, 6]
    assert Notification.objects.filter(project=project, event="clock.threshold").count() == 2
