"""Push a message to everyone watching a run page (best effort: the DB stays the truth)."""

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def run_group(run_id: str) -> str:
    return f"run-{run_id}"


def project_group(slug: str) -> str:
    return f"project-{slug}"


def push_run_update(run_id: str, payload: dict, project_slug: str | None = None) -> None:
    """Best effort: the database stays the truth; a page that reconnects re-reads it."""
    layer = get_channel_layer()
    message = {"type": "run.update", "payload": {**payload, "run_id": run_id}}
    try:
        async_to_sync(layer.group_send)(run_group(run_id), message)
        if project_slug and payload.get("type") in ("event", "status"):
            async_to_sync(layer.group_send)(project_group(project_slug), message)
    except Exception as exc:  # a Redis outage must not undo a committed state change
        log.warning("live update for %s not sent: %s", run_id, type(exc).__name__)
