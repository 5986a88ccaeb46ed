"""One way to wait for something another process does: poll, with a deadline that fails the test."""

import time


def wait_until(check, timeout: float = 30.0, interval: float = 0.2, what: str = "the condition"):
    """check()'s first truthy value; AssertionError naming what when the deadline passes first."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)


def deliver_notifications() -> list[str]:
    """Deliver every pending notification in this process: the worker's code path, with the test
    process's mail outbox (a worker process has its own)."""
    from notifications.actions import do_deliver_notification
    from notifications.models import Notification

    pending = Notification.objects.filter(state=Notification.State.PENDING).order_by("pk")
    return [do_deliver_notification(pk) for pk in pending.values_list("pk", flat=True)]
