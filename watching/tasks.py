"""The watcher's Celery side: one watcher per box with live runs, re-armed at the end of its bounded life
and by beat; a stopping worker ends its watchers at once."""

import os
import socket

from celery import shared_task
from celery.signals import worker_shutting_down
from django.conf import settings

from watching import watch


@worker_shutting_down.connect
def _stop_watchers(**kwargs):
    """Warm or cold, a stopping worker ends its watchers now (their leases go; beat re-arms them elsewhere)."""
    watch.STOPPING.set()


@shared_task(
    acks_late=True,
    soft_time_limit=settings.WATCH_LIFETIME_SECONDS + 60,
    time_limit=settings.WATCH_LIFETIME_SECONDS + 90,
)
def watch_instance(instance_id: int, spread: bool = True) -> str:
    owner = f"{socket.gethostname()}:{os.getpid()}:{watch_instance.request.id}"
    reason = watch.watch_instance(instance_id, owner, spread)
    if reason == "lifetime":
        # Re-arm at once, without the start-up spread (this one was in step with nobody): the gap
        # without a watcher or a push stream stays one connect; beat's arm_watchers is the safety net.
        watch_instance.delay(instance_id, spread=False)
    return reason


@shared_task(acks_late=True, soft_time_limit=30, time_limit=60)
def arm_watchers() -> int:
    """Beat: start a watcher for every instance with live runs and no valid lease."""
    instance_ids = watch.instances_needing_a_watcher()
    for instance_id in instance_ids:
        watch_instance.delay(instance_id)
    return len(instance_ids)
