"""Tell everyone watching a box's page that it changed (best effort: the page re-reads the database)."""

import logging
from functools import partial

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


def instance_group(instance_id: int) -> str:
    return f"instance-{instance_id}"


def send(group: str, payload: dict) -> None:
    """One message to a live group; a Redis outage must not undo a committed change."""
    try:
        async_to_sync(get_channel_layer().group_send)(group, {"type": "live.update", "payload": payload})
    except Exception as exc:
        log.warning("live update for %s not sent: %s", group, type(exc).__name__)


def instance_changed(instance_id: int) -> None:
    """After the surrounding transaction commits: the box's page refreshes its state-driven parts."""
    transaction.on_commit(partial(send, instance_group(instance_id), {"type": "changed", "instance": instance_id}))
