"""Celery wrappers: SSH happens here, outside any transaction; results go through actions."""

from celery import shared_task

from fleet.actions import do_record_probe
from fleet.models import Instance, InstanceProbe
from fleet.probe import run_probe


@shared_task(acks_late=True, soft_time_limit=150, time_limit=180)
def probe_instance(instance_id: int, kind: str, trigger: str = InstanceProbe.Trigger.BUTTON) -> int | None:
    instance = Instance.objects.filter(pk=instance_id).first()
    if instance is None:
        return None  # deleted since it was queued: nothing to probe
    outcome = run_probe(instance, kind)
    return do_record_probe(instance_id, outcome, trigger).pk


@shared_task(acks_late=True, soft_time_limit=30, time_limit=60)
def probe_running_instances() -> int:
    """Beat: a light probe of every instance that may bill (all but released): a box that answers is
    running, whatever its recorded state said (a box started again in a console starts billing)."""
    ids = list(Instance.objects.billing().values_list("pk", flat=True))
    for instance_id in ids:
        probe_instance.delay(instance_id, InstanceProbe.Kind.LIGHT, InstanceProbe.Trigger.SCHEDULE)
    return len(ids)


@shared_task(acks_late=True, soft_time_limit=300, time_limit=330)
def reconcile_providers() -> dict:
    """Beat: what each API platform lists under the team's keys, against the dashboard."""
    from fleet.drift import do_reconcile_providers

    return do_reconcile_providers()


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def raise_clock_alarms() -> list[int]:
    """Beat: the danger clocks of every box, alarmed at each threshold once."""
    from fleet.alarms import do_raise_clock_alarms

    return do_raise_clock_alarms()
