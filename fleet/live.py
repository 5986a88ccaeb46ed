"""Tell everyone watching a box's page that it changed (best effort: the page re-reads the database)."""

import asyncio
import logging
import os
import threading
from functools import partial

from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


def instance_group(instance_id: int) -> str:
    return f"instance-{instance_id}"


SEND_TIMEOUT = 5.0  # seconds a sender waits for Redis (its connect timeout is 2 s) before it gives up
_sender = {"loop": None, "thread": None, "pid": None}
_sender_lock = threading.Lock()


def _sender_loop() -> asyncio.AbstractEventLoop:
    """This process's one event loop for live messages, on a thread of its own.

    `async_to_sync` from a plain thread starts a thread and an event loop per call, and the Redis
    channel layer keeps its connections per event loop: every message cost a thread, a loop and a
    new Redis connection (about 14 thread starts per box per tick at 100 watched runs). One loop
    keeps one pool of connections for the process's life; a forked child (a prefork worker)
    starts its own."""
    with _sender_lock:
        if _sender["pid"] != os.getpid() or not _sender["thread"].is_alive():  # none yet, or forked
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="live-sender", daemon=True)
            thread.start()
            _sender.update(loop=loop, thread=thread, pid=os.getpid())
        return _sender["loop"]


def send(group: str, payload: dict, kind: str = "live.update") -> None:
    """One message to a live group, sent before this returns (messages from one thread stay in
    order); a Redis outage must not undo a committed change. kind: the consumers' handler."""
    message = {"type": kind, "payload": payload}
    future = None
    try:
        future = asyncio.run_coroutine_threadsafe(get_channel_layer().group_send(group, message), _sender_loop())
        future.result(timeout=SEND_TIMEOUT)
    except Exception as exc:
        if future is not None:
            future.cancel()
        log.warning("live update for %s not sent: %s", group, type(exc).__name__)


def user_group(user_id: int) -> str:
    """Every live socket a person has open, whatever page it serves."""
    return f"user-{user_id}"


def access_reduced(user_id: int) -> None:
    """After commit: the person's open sockets re-check their access now and close where it is gone."""
    transaction.on_commit(partial(send, user_group(user_id), {"user": user_id}, "access.reduced"))


def instance_changed(instance_id: int) -> None:
    """After the surrounding transaction commits: the box's page refreshes its state-driven parts."""
    transaction.on_commit(partial(send, instance_group(instance_id), {"type": "changed", "instance": instance_id}))
