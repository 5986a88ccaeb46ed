"""A sweep's advance takes the one lock order every transaction touching a box takes: the cells' boxes, the
project, then the sweep and its cells (runs/actions/base.py: locked_sweep). Before: it took the sweep and all
its cells first, while a watcher changing a cell's state held the cell's box and project and waited for the
cell: a PostgreSQL deadlock in every sweep tried. Here a transaction holds the box as the watcher's does, and
the advance is seen waiting for it while holding nothing of the sweep."""

import threading

import pytest
from django.db import connection, transaction

from fleet.models import Instance
from runs.actions.sweeps import do_advance_sweep
from runs.models import Run, RunState, Sweep
from tests import factories
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite serialises every writer"),
]


def lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_the_advance_waits_for_a_cells_box_before_it_holds_the_sweep_or_a_cell(bob, box_row, no_worker):
    base = factories.run(box_row)
    sweep = Sweep.objects.create(project=box_row.project, name="lr", base_run=base, overrides=[{"lr": 1}])
    cell = factories.run(box_row, sweep=sweep, cell=1, state=RunState.EXITED)  # holds nothing to start
    held, release, outcome = threading.Event(), threading.Event(), {}

    def watcher():  # the watcher's state change: the box, then the project, then the run
        try:
            with transaction.atomic():
                Instance.objects.select_for_update(no_key=True).get(pk=box_row.pk)
                held.set()
                release.wait(60)
        finally:
            connection.close()

    def advance():
        try:
            outcome["started"] = do_advance_sweep(sweep.pk)
        except Exception as exc:  # every thread's outcome is checked
            outcome["error"] = repr(exc)
        finally:
            connection.close()

    holder = threading.Thread(target=watcher)
    holder.start()
    assert held.wait(30)
    advancing = threading.Thread(target=advance)
    advancing.start()
    try:
        wait_until(lambda: lock_waiters() >= 1, 30, 0.05, what="the advance waiting for the cell's box")
        with transaction.atomic():  # the sweep and its cell are free while it waits: no cycle can close
            assert Sweep.objects.select_for_update(nowait=True).get(pk=sweep.pk) == sweep
            assert Run.objects.select_for_update(nowait=True).get(pk=cell.pk) == cell
    finally:
        release.set()
        holder.join(60)
        advancing.join(60)
    assert not holder.is_alive() and not advancing.is_alive()
    assert outcome == {"started": []}, outcome
