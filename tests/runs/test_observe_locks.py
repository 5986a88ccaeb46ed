"""Applying a probe locks the run's row alone: locking its instance and project rows too
made every probe of every run in a project wait in one line (at 500 runs, 78 transactions queued on
the project row and the watchers ticked at 0.43 of their rate). Row locks: PostgreSQL only."""

import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from fleet.models import Instance
from projects.models import Project
from runs.models import RunState
from tests.runs.test_kept_log import probe
from tests.runs.test_observe import THRESHOLDS
from watching.observation import do_observe_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]


def test_a_probe_is_applied_while_another_transaction_holds_its_project_and_instance(make_run):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no row locks")
    running = make_run(state=RunState.RUNNING, launched_at=timezone.now(), attempt=1)
    held, release = threading.Event(), threading.Event()

    def hold():
        try:
            with transaction.atomic():
                Project.objects.select_for_update().get(pk=running.project_id)
                Instance.objects.select_for_update().get(pk=running.instance_id)
                held.set()
                release.wait(15)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        run, dead = do_observe_run(running.pk, probe(running, "epoch 1/3\n"), THRESHOLDS)
        took = time.monotonic() - started
    finally:
        release.set()
        holder.join()
    assert took < 5, f"the probe waited {took:.1f} s for rows it does not change"
    assert run.log_offset == len(b"epoch 1/3\n") and not dead
