"""Watchers share a bounded number of database connections per worker process: at 500
runs a hundred watchers each opening one ran PostgreSQL (max_connections 100) out of connections.
Twenty threads each doing a watcher's burst at once never hold more than WATCH_DB_CONNECTIONS
backends, every burst completes, and none leaves its connection open behind it."""

import threading
import time

import pytest
from django.conf import settings
from django.db import connection, connections

from runs.models import Run
from watching import watch

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]


def backends(database: str) -> int:
    with connections["default"].cursor() as cursor:
        # Client backends only: an autovacuum worker visiting the database is nobody's connection (a
        # clean-clone run once counted 10 where the slots allow 9; a background backend is one way).
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'", [database]
        )
        return cursor.fetchone()[0]


def test_twenty_watchers_at_once_hold_at_most_their_slots_of_connections():
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL backends")
    database = connection.settings_dict["NAME"]
    idle = backends(database)  # this test's own connection
    done, errors, peak, stop = [], [], [0], threading.Event()

    def burst():
        try:
            with watch.database():
                list(Run.objects.all()[:1])  # a query: the thread's connection opens here
                time.sleep(0.2)  # a tick's apply, held open
            done.append(connection.connection is None)  # closed when the slot was given back
        except Exception as exc:  # noqa: BLE001 - every thread's outcome is checked below
            errors.append(exc)
        finally:
            connection.close()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], backends(database) - idle)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=burst) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    sampler.join()
    connection.close()
    assert not errors and done == [True] * 20
    # The sampler's own connection counts once; the bursts may add no more than the slots.
    assert 1 <= peak[0] - 1 <= settings.WATCH_DB_CONNECTIONS, peak[0]
