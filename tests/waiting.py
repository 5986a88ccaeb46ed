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
