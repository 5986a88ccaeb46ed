"""One way to wait for something another process does: poll, with a deadline that fails the test."""

import asyncio
import time


def wait_until(check, timeout: float = 30.0, interval: float = 0.2, what="the condition", between=None):
    """check()'s first truthy value; AssertionError when the deadline passes first.

    what: what was waited for, or a callable saying what was seen instead (evaluated only on failure,
    so it may read the database). between: called after each miss, e.g. a page reload or a beat task."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(what() if callable(what) else f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)
        if between is not None:
            between()


async def await_until(check, timeout: float = 30.0, interval: float = 0.2, what: str = "the condition"):
    """wait_until for async tests: check is a coroutine function; the pause yields to the event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        await asyncio.sleep(interval)


def deliver_notifications() -> list[str]:
    """Deliver every pending notification in this process: the worker's code path, with the test
    process's mail outbox (a worker process has its own)."""
    from notifications.actions import do_deliver_notification
    from notifications.models import Notification

    pending = Notification.objects.filter(state=Notification.State.PENDING).order_by("pk")
    return [do_deliver_notification(pk) for pk in pending.values_list("pk", flat=True)]
