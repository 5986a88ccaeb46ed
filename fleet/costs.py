"""Money and danger clocks from an instance's state history and its rates (DOMAIN §6)."""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from fleet.models import MAY_BE_ON, InstanceEvent, InstanceState

# "15 days after stop", "~10 days after stop", "24 h after stop", "6 hours after stop".
AFTER_STOP = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(days?|h|hours?)\s+after\s+stop", re.IGNORECASE)


@dataclass(frozen=True)
class ClockDeadline:
    key: str  # stable per profile clock: alarms already raised are recognised by it
    what: str
    fires_at: datetime


def hours_after_stop(clock: str) -> float | None:
    match = AFTER_STOP.search(clock)
    if not match:
        return None
    return float(match.group(1)) * (24 if match.group(2).lower().startswith("d") else 1)


def _timer_ticks(instance) -> bool:
    return bool(instance.stops_at) and instance.state in MAY_BE_ON


def clock_deadlines(instance, now=None) -> list[ClockDeadline]:
    """The clocks of a box that fire at a known time: a platform timer set for it (auto-shutdown, rental
    end), and for a stopped box each profile clock written "N days/hours after stop" and the platform's
    release of a stopped box (which takes its disks)."""
    deadlines = []
    if _timer_ticks(instance):
        what = f"a {instance.profile.name} timer stops this box (tmux and every run on it die)"
        deadlines.append(ClockDeadline("timer", what, instance.stops_at))
    if instance.state != InstanceState.STOPPED:
        return deadlines
    since = accrued_cost(instance, now).state_since
    profile = instance.profile
    for index, clock in enumerate(profile.danger_clocks):
        hours = hours_after_stop(clock["clock"])
        if hours is not None and hours != profile.stopped_released_after_hours:  # that one is below
            deadlines.append(ClockDeadline(f"clock-{index}", clock["what"], since + timedelta(hours=hours)))
    if profile.stopped_released_after_hours is not None:
        what = f"{profile.name} releases a stopped box, and with it every disk release destroys"
        deadlines.append(
            ClockDeadline("auto-release", what, since + timedelta(hours=profile.stopped_released_after_hours))
        )
    return deadlines


@dataclass(frozen=True)
class Cost:
    running_hours: float
    stopped_hours: float
    total: Decimal
    state_since: datetime


def _periods(instance, now):
    """(state, start, end) spans from creation to now, from the STATE events."""
    prefetched = getattr(instance, "state_events", None)  # InstanceQuerySet.with_state_events()
    events = (
        prefetched
        if prefetched is not None
        else list(instance.events.filter(kind=InstanceEvent.Kind.STATE).order_by("at", "id"))
    )
    state = events[0].data.get("old", instance.state) if events else instance.state
    start = instance.created
    for event in events:
        yield state, start, event.at
        state, start = event.data.get("new", state), event.at
    yield state, start, now


def accrued_cost(instance, now=None) -> Cost:
    now = now or timezone.now()
    hours = {InstanceState.RUNNING: 0.0, InstanceState.STOPPED: 0.0}
    since = instance.created
    for state, start, end in _periods(instance, now):
        if state in hours:
            hours[state] += max((end - start).total_seconds(), 0) / 3600
        since = start
    running, stopped = hours[InstanceState.RUNNING], hours[InstanceState.STOPPED]
    total = instance.rate_running * Decimal(str(running)) + instance.rate_stopped * Decimal(str(stopped))
    return Cost(running, stopped, total.quantize(Decimal("0.01")), since)


def _rates(instance) -> dict:
    """$/h by state: running bills the running rate, stopped the storage rate, nothing else bills."""
    return {InstanceState.RUNNING: instance.rate_running, InstanceState.STOPPED: instance.rate_stopped}


def cost_between(instance, start: datetime, end: datetime) -> Decimal:
    """What the box billed inside [start, end] (a period of a cost envelope)."""
    total, rates = Decimal(0), _rates(instance)
    for state, since, until in _periods(instance, end):
        overlap = (min(until, end) - max(since, start)).total_seconds()
        if state in rates and overlap > 0:
            total += rates[state] * Decimal(str(overlap / 3600))
    return total


def burn_rate(instance) -> Decimal:
    """Dollars per hour the box bills right now."""
    return _rates(instance).get(instance.state, Decimal(0))


def danger_clocks(instance, has_live_run: bool, now=None) -> list[str]:
    """Plain sentences for the clocks running on this box right now (the caller knows its runs)."""
    now = now or timezone.now()
    cost = accrued_cost(instance, now)
    name, lines = instance.profile.name, []
    hours = (now - cost.state_since).total_seconds() / 3600
    if instance.state == InstanceState.STOPPED:
        days = hours / 24
        spent = instance.rate_stopped * Decimal(str(hours))
        for clock in instance.profile.danger_clocks:
            after = hours_after_stop(clock["clock"])
            if after is not None:
                left = max(after - hours, 0)
                when = f"{left / 24:.0f} days left" if after >= 48 else f"{left:.0f} h left"
                lines.append(f"stopped {days:.0f} days — {name}: {clock['what']} ({when})")
            elif "continuous" in clock["clock"] and ("stop" in clock["what"] or "disk" in clock["what"]):
                lines.append(f"stopped on {name}: {clock['what']} (${spent:.2f} so far)")
    if instance.state == InstanceState.RUNNING and not has_live_run:
        spent = instance.rate_running * Decimal(str(hours))
        lines.append(f"running with no live run for {hours:.1f} h (${spent:.2f} at the running rate)")
    return lines


def timer_line(instance, now=None) -> str:
    """The platform timer set on a running box, as the instance page says it; "" when none ticks."""
    if not _timer_ticks(instance):
        return ""
    left = (instance.stops_at - (now or timezone.now())).total_seconds() / 3600
    when = f"{left:.1f} h left" if left > 0 else "it has fired"
    return f"a {instance.profile.name} timer stops this box at {instance.stops_at:%Y-%m-%d %H:%M} UTC ({when})"
