"""The suite's own PostgreSQL flush (tests/template_db.py) holds against a process still writing.

A transactional test's teardown empties every table while a Celery worker or stack the test started may
still be finishing a task. A flush of plain DELETEs deleted a child table, then a writer committed a row
in it referencing a parent, then the flush deleted that parent: the deferred foreign key check failed
the flush at commit ("couldn't be flushed") and left every row to the next test (CI of stop 55: a
duplicate 'alice' in the next test, two more failed on the rows left behind).
"""

import threading

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection, connections, transaction

from accounts.models import PasswordDuty
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the DELETE flush is PostgreSQL's"),
]


class OpenTransaction(threading.Thread):
    """work() in a transaction on a connection of its own (as a worker process has), held open until
    finish(); its outcome kept."""

    def __init__(self, work):
        super().__init__()
        self.work, self.opened, self.release, self.outcome = work, threading.Event(), threading.Event(), None
        self.start()
        assert self.opened.wait(30) and self.outcome is None, self.outcome

    def run(self):
        try:
            with transaction.atomic():
                self.work()
                self.opened.set()
                self.release.wait(30)
            self.outcome = "committed"
        except Exception as exc:  # every thread's outcome is checked
            self.outcome = repr(exc)
        finally:
            self.opened.set()
            connection.close()

    def finish(self) -> str:
        self.release.set()
        self.join(30)
        return self.outcome


def _lock_waiters() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_a_flush_holds_when_a_writer_commits_a_row_between_its_deletes(django_user_model):
    user = django_user_model.objects.create(username="writer")
    group = Group.objects.create(name="held")
    # accounts_passwordduty < auth_group < auth_user: the flush deletes in that order. The writer's row
    # is not yet committed when the child table is emptied; a row lock on the group stops the flush
    # between its deletes until the writer has committed.
    writer = OpenTransaction(lambda: PasswordDuty.objects.create(user_id=user.pk))
    holder = OpenTransaction(lambda: list(Group.objects.select_for_update().filter(pk=group.pk)))
    flushed = {}

    def flush():
        try:
            # As a transactional test's teardown calls it.
            call_command("flush", verbosity=0, interactive=False, reset_sequences=False, allow_cascade=False)
            flushed["outcome"] = "flushed"
        except Exception as exc:  # every thread's outcome is checked
            flushed["outcome"] = repr(exc)
        finally:
            connection.close()

    flushing = threading.Thread(target=flush)
    flushing.start()
    wait_until(lambda: _lock_waiters() == 1, what="the flush waiting on the group's row lock")
    assert writer.finish() == "committed"
    assert holder.finish() == "committed"
    flushing.join(30)
    assert flushed == {"outcome": "flushed"}
    assert not django_user_model.objects.exists() and not PasswordDuty.objects.exists()
    assert not Group.objects.exists()


def test_a_migration_tests_copy_leaves_the_connections_of_other_threads_working():
    """A migration test migrates a copy (tests/template_db.py scratch_copy): replacing the worker's own
    database instead cut the connection asgiref's executor thread keeps, and the next async test on that
    worker failed with 'terminating connection due to administrator command'."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.template_db import scratch_copy

    def one():
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_database()")
            return cursor.fetchone()[0]

    kept = ThreadPoolExecutor(1)  # one long-lived thread with its own connection, as asgiref's
    try:
        before = kept.submit(one).result(30)
        with scratch_copy() as copied:
            assert copied and one() == f"{before}_scratch"
        assert one() == before
        assert kept.submit(one).result(30) == before  # the same connection, still open
    finally:
        kept.submit(lambda: connection.close()).result(30)
        kept.shutdown()
