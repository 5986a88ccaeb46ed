"""The one way an action or a view starts a Celery task: by its name, once the transaction commits.

Tasks import the actions they run; an action that imported its app's tasks back made every app with
tasks a circle (actions ↔ tasks). Sending by name keeps the arrow one way: `tasks.py` on top of
`actions.py`, views below nothing of Celery. `tests/site/test_enqueue.py` checks every name sent is a
registered task, so a renamed task fails the suite instead of a queue.
"""

from functools import partial

from celery import current_app
from django.db import transaction


def send(task: str, *args, countdown: float | None = None) -> None:
    """Now: from an on_commit callback, a reconciler, or a request with nothing to commit."""
    current_app.send_task(task, args=args, countdown=countdown)


def after_commit(task: str, *args, countdown: float | None = None) -> None:
    """Once the current transaction commits (at once outside one): a worker never reads a row not yet there."""
    transaction.on_commit(partial(send, task, *args, countdown=countdown))
