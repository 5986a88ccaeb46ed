"""Races on PostgreSQL: callables started together, every thread's outcome kept."""

import threading

from django.core.exceptions import ValidationError


def at_once(*calls, timeout: float = 30) -> list[str]:
    """Each call in a thread of its own, released together by a barrier; the outcomes as text: a
    call's return value, a ValidationError's messages, or any other exception's repr."""
    barrier, outcomes = threading.Barrier(len(calls)), []

    def run(call):
        from django.db import connection

        try:
            barrier.wait()
            outcomes.append(call())
        except ValidationError as exc:
            outcomes.append(" ".join(exc.messages))
        except Exception as exc:  # every thread's outcome is checked
            outcomes.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return outcomes
