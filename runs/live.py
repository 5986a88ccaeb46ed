"""Push a message to everyone watching a run page (best effort: the DB stays the truth)."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def run_group(run_id: str) -> str:
    return f"run-{run_id}"


def push_run_update(run_id: str, payload: dict) -> None:
    layer = get_channel_layer()
    async_to_sync(layer.group_send)(run_group(run_id), {"type": "run.update", "payload": payload})
