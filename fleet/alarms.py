"""Clocks that alarm: beat evaluates every stopped box's danger clocks, and every platform timer set on
a running box, and tells the project once per threshold (CLOCK_ALARM_HOURS, e.g. 72 h, 24 h, 6 h
before, and when it has fired).

A clock first seen already inside several thresholds raises only the tightest one; a looser one
crossed later is covered by it. Alarms are rows under a unique constraint: two beat ticks (or two
workers) racing raise one.
"""

from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from fleet.costs import clock_deadlines
from fleet.models import MAY_BE_ON, ClockAlarm, Instance, InstanceEvent, InstanceState
from notifications.actions import do_notify
from notifications.models import Event


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
    timed = Q(stops_at__isnull=False, state__in=MAY_BE_ON)
    for instance in Instance.objects.filter(Q(state=InstanceState.STOPPED) | timed).with_state_events():
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
            data = {
                "instance": instance.name,
                "clock": alarm.what,
                "fires_at": alarm.fires_at.isoformat(),
                "threshold_hours": threshold,
            }
            do_notify(instance.project_id, Event.CLOCK, f"clock: {text}", text, data)
    except IntegrityError:
        return None  # another tick raised it first
    return alarm


def do_observe_balance(profile_key: str, credential_id: int, balance: float, burn: float, now=None) -> int | None:
    """The provider's balance under a key: hours to zero at the burn, told to every project granted the
    key at each CLOCK_ALARM_HOURS threshold once (the tightest when first seen inside several; 0 when
    the balance is gone), again from the start after a top-up. Returns the threshold told, if any."""
    from fleet.models import Credential, ProviderBalance

    now = now or timezone.now()
    amount = Decimal(str(balance)).quantize(Decimal("0.01"))
    rate = Decimal(str(max(burn, 0.0))).quantize(Decimal("0.0001"))
    hours_left = None if rate <= 0 and amount > 0 else (0.0 if amount <= 0 else float(amount / rate))
    with transaction.atomic(durable=True):
        row, _ = ProviderBalance.objects.select_for_update().get_or_create(
            profile_key=profile_key,
            credential_id=credential_id,
            defaults={"balance": amount, "burn": rate, "read_at": now},
        )
        if amount > row.balance:
            row.alarmed = []  # topped up: every threshold may be crossed again
        row.balance, row.burn, row.hours_left, row.read_at = amount, rate, hours_left, now
        due = None if hours_left is None else threshold_due(hours_left, settings.CLOCK_ALARM_HOURS)
        told = due is not None and any(threshold <= due for threshold in row.alarmed)
        if due is not None and not told:
            row.alarmed = [*row.alarmed, due]
            _tell_balance(Credential.objects.get(pk=credential_id), profile_key, amount, rate, hours_left, due)
        row.save()
    return due if due is not None and not told else None


def _tell_balance(credential, profile_key, amount, rate, hours_left, due) -> None:
    from platforms.catalog import get_profile

    name = get_profile(profile_key).name
    when = "it is gone" if due == 0 else f"about {hours_left:.0f} h to zero (within {due} h)"
    text = (
        f"{name} balance ${amount} at ${rate:.2f}/h under key {credential.name}: {when}. At zero {name}"
        " stops and then deletes instances, volumes and their data: top up, or pull and release first."
    )
    data = {"platform": profile_key, "balance": str(amount), "burn": str(rate), "threshold_hours": due}
    for project in credential.projects.all():
        do_notify(project.pk, Event.CLOCK, f"balance: {name}", text, data)
