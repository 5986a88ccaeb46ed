"""Watchers share a bounded number of database connections per worker process: at 500
runs a hundred watchers each opening one ran PostgreSQL (max_connections 100) out of connections.
Twenty threads each doing a watcher's burst at once never hold more than WATCH_DB_CONNECTIONS
backends, every burst completes, and none leaves its connection open behind it.

Only the bursts' own backends are counted (they connect under an application name of their own): a
stress pass counted 10 where the slots allow 8, another process's connections to the same database
among them. The test opens such a connection itself while the bursts run."""

import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection, connections

from runs.models import Run
from tests.waiting import wait_until
from watching import watch

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]


BURSTS = "remotegpu-watch-burst"  # the application name the bursts' connections carry


def backends(database: str) -> int:
    """The bursts' client backends only: neither another process's connection to the database nor an
    autovacuum worker visiting it (a clean-clone run once counted 10 where the slots allow 9)."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
            " AND application_name = %s",
            [database, BURSTS],
        )
        return cursor.fetchone()[0]


def as_a_burst() -> None:
    """This thread's connection (its own wrapper) names itself, before it opens."""
    options = {**connection.settings_dict.get("OPTIONS", {}), "application_name": BURSTS}
    connection.settings_dict = {**connection.settings_dict, "OPTIONS": options}


def test_twenty_watchers_at_once_hold_at_most_their_slots_of_connections():
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL backends")
    database = connection.settings_dict["NAME"]
    assert backends(database) == 0
    done, errors, peak, stop, wrappers = [], [], [0], threading.Event(), []
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    elsewhere = psycopg.connect(**params)  # another process's connection to the same database

    def burst():
        as_a_burst()
        wrappers.append(connections["default"])  # this thread's own wrapper (not the proxy): the sampler reads it
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
            peak[0] = max(peak[0], sum(1 for wrapper in list(wrappers) if wrapper.connection is not None))
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
    elsewhere.close()
    connection.close()
    assert not errors and done == [True] * 20
    assert 1 <= peak[0] <= settings.WATCH_DB_CONNECTIONS, peak[0]
    wait_until(lambda: backends(database) == 0, 30, 0.1, what="the bursts' backends gone")  # none left open
