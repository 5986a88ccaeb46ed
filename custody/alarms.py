"""Clocks that alarm: beat evaluates every stopped box's danger clocks and tells the project once per
threshold (CLOCK_ALARM_HOURS, e.g. 72 h, 24 h, 6 h before, and when it has fired).

A clock first seen already inside several thresholds raises only the tightest one; a looser one
crossed later is covered by it. Alarms are rows under a unique constraint: two beat ticks (or two
workers) racing raise one.
"""

import logging
from functools import partial

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from custody.models import ClockAlarm
from profiles.costs import clock_deadlines
from profiles.models import Instance, InstanceEvent

log = logging.getLogger(__name__)


def threshold_due(hours_left: float, thresholds: list[int]) -> int | None:
    """The tightest threshold the clock is inside (0 once it has fired); None while outside all."""
    if hours_left <= 0:
        return 0
    inside = [threshold for threshold in thresholds if hours_left <= threshold]
    return min(inside) if inside else None


def message(instance, alarm: ClockAlarm) -> str:
    when = f"{alarm.fires_at:%Y-%m-%d %H:%M} UTC"
    if alarm.threshold_hours == 0:
        return f"{instance.name}: the clock has fired ({when}): {alarm.what}"
    return f"{instance.name}: within {alarm.threshold_hours} h ({when}): {alarm.what}"


def do_raise_clock_alarms(now=None) -> list[int]:
    """Beat: the alarms raised this tick (their ids)."""
    now = now or timezone.now()
    raised = []
    for instance in Instance.objects.filter(state="stopped").with_state_events():
        for deadline in clock_deadlines(instance, now):
            hours_left = (deadline.fires_at - now).total_seconds() / 3600
            threshold = threshold_due(hours_left, settings.CLOCK_ALARM_HOURS)
            if threshold is not None:
                alarm = _raise(instance, deadline, threshold)
                raised += [alarm.pk] if alarm else []
    return raised


def _raise(instance, deadline, threshold: int) -> ClockAlarm | None:
    covered = ClockAlarm.objects.filter(
        instance=instance, clock=deadline.key, fires_at=deadline.fires_at, threshold_hours__lte=threshold
    )
    if covered.exists():
        return None
    try:
        with transaction.atomic(durable=True):
            alarm = ClockAlarm.objects.create(
                instance=instance,
                clock=deadline.key,
                what=deadline.what,
                fires_at=deadline.fires_at,
                threshold_hours=threshold,
            )
            text = message(instance, alarm)
            InstanceEvent.objects.create(
                instance=instance,
                kind=InstanceEvent.Kind.CLOCK,
                message=text,
                data={"alarm": alarm.pk, "threshold_hours": threshold},
            )
            transaction.on_commit(partial(notify_project, alarm.pk))
    except IntegrityError:
        return None  # another tick raised it first
    return alarm


def notify_project(alarm_id: int) -> None:
    alarm = ClockAlarm.objects.select_related("instance__project").get(pk=alarm_id)
    text = message(alarm.instance, alarm)
    data = {
        "event": "clock.threshold",
        "instance": alarm.instance.name,
        "clock": alarm.what,
        "fires_at": alarm.fires_at.isoformat(),
        "threshold_hours": alarm.threshold_hours,
    }
    notify_members(alarm.instance.project, f"[RemoteGPU] clock: {text}"[:200], text, data)


def notify_members(project, subject: str, text: str, data: dict) -> None:
    """Best effort, after commit: e-mail to the project's members who have one, and its webhook."""
    from custody.tasks import post_webhook

    recipients = sorted(set(project.members.exclude(email="").values_list("email", flat=True)))
    if recipients:
        try:
            send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, recipients)
        except OSError as exc:
            log.warning("%s: mail not sent: %s", subject, exc)
    if project.approval_webhook:
        post_webhook.delay(project.approval_webhook, data)
