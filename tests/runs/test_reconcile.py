"""Nothing stranded: every state that waits on a task has a deadline and a way out.

Real parts: the loopback box, the tinyfit example, a real worker that is SIGKILLed, PostgreSQL
backends terminated under the worker. Deadlines are shortened through the same settings a
deployment uses; the reconciler (beat's `reconcile_runs`) is called where beat would call it.
"""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs import shipping
from runs.actions.lifecycle import do_start_preflight
from runs.box_spec import run_node
from runs.models import RunState
from runs.tasks import reconcile_runs
from tests.conftest import WORKER_APPLICATION
from tests.runs.conftest import set_config, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


@pytest.fixture
def short_deadlines(settings):
    """Longer than each task takes on the loopback box, as the defaults are longer than the task limits."""
    settings.RECONCILE_PREFLIGHT_SECONDS, settings.RECONCILE_SMOKE_SECONDS = 15, 20
    settings.RECONCILE_LAUNCH_SECONDS, settings.RECONCILE_EXITED_SECONDS = 8, 20
    return settings


def started_until(make_run, source, bob, state):
    """A short tinyfit run started through the worker, caught the moment it enters `state`."""
    set_config(source, epochs=2)
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    wait_until(lambda: run.refresh_from_db() or run.state == state, 120, 0.02, what=f"{run.run_id} {state}")
    return run


def back_date(run, seconds: float) -> None:
    """The run entered its state that long ago: a deadline passes without the test sleeping through it."""
    type(run).objects.filter(pk=run.pk).update(state_changed_at=timezone.now() - timedelta(seconds=seconds))


def reconcile_until(run, states, timeout=120):
    """Beat's reconciler every second, the watchers armed as beat would, until the run settles."""
    from watching.tasks import arm_watchers

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in states:
            return run
        reconcile_runs()
        arm_watchers()
        time.sleep(1)
    events = list(run.events.values_list("message", flat=True))
    raise AssertionError(f"{run.run_id} stayed {run.state}; events: {events}")


def test_a_launch_whose_database_write_was_lost_is_adopted_from_the_node(
    make_run, node, short_deadlines, celery_worker_process
):
    """The attempt runs on the box but the control side never recorded it (a terminated backend)."""
    short_deadlines.RECONCILE_LAUNCH_SECONDS = 1
    short_deadlines.SSH_COMMAND_TIMEOUT = 120  # the launch below runs in this process, on a loaded CI box
    run = make_run(state=RunState.LAUNCHING, attempt=1)
    with run_node(run) as session:
        session.prepare()
        shipping.ship_source(session)
        session.launch(1, use_tmux=False)
    back_date(run, seconds=2)  # past its 1 s deadline, with no sleep
    assert reconcile_runs() == {run.pk: "re-driven"}
    assert run.events.filter(message__contains="re-driving it (1 of").exists()
    # The re-driven task now has the time a loaded CI machine needs: it must adopt, not relaunch.
    short_deadlines.RECONCILE_LAUNCH_SECONDS = 60
    run = reconcile_until(run, {RunState.RUNNING, RunState.EXITED, RunState.EXPORTED})
    run = wait_state(run, {RunState.EXPORTED}, refresh=True)
    assert [p.name for p in node.active(run).iterdir() if p.name.startswith("attempt-")] == ["attempt-1"]
    assert not node.quarantine(run, 1).exists() and node.export(run).is_dir()
    assert run.events.filter(message__contains="launched detached").count() == 1  # adopted, never started twice


def test_a_run_whose_task_never_answers_fails_with_its_next_step(make_run, short_deadlines):
    short_deadlines.RECONCILE_PREFLIGHT_SECONDS = 1
    run = make_run(state=RunState.PREFLIGHT)
    type(run).objects.filter(pk=run.pk).update(redrives=short_deadlines.RECONCILE_MAX_REDRIVES)
    back_date(run, seconds=2)
    assert reconcile_runs() == {run.pk: "failed"}
    run.refresh_from_db()
    assert run.state == RunState.FAILED_PREFLIGHT and run.failure_class == "stranded"
    last = run.events.filter(kind="state").order_by("-pk").first().message
    assert "preflight never finished" in last and "start preflight again" in last
    assert reconcile_runs() == {}  # a final state: nothing more to do


@pytest.mark.parametrize("moment", [RunState.PREFLIGHT, RunState.LAUNCHING])
def test_a_worker_killed_mid_task_leaves_no_run_stranded(
    bob, make_run, source, short_deadlines, celery_worker_process, moment
):
    run = started_until(make_run, source, bob, moment)
    celery_worker_process.kill()
    run.refresh_from_db()
    killed_in = run.state
    celery_worker_process.start()
    run = reconcile_until(run, {RunState.EXPORTED, RunState.FAILED_PREFLIGHT, RunState.FAILED_LAUNCH}, timeout=180)
    assert run.state == RunState.EXPORTED, (killed_in, list(run.events.values_list("message", flat=True)))


def test_terminated_database_backends_during_launch_do_not_strand_the_run(
    bob, make_run, source, short_deadlines, celery_worker_process
):
    if connection.vendor != "postgresql":
        pytest.skip("terminating backends is a PostgreSQL fault")
    run = started_until(make_run, source, bob, RunState.LAUNCHING)
    # The worker's backends, terminated as a failover or an admin would, for the 3 s around the launch.
    until = time.monotonic() + 3
    while time.monotonic() < until:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                [WORKER_APPLICATION],
            )
        time.sleep(0.05)
    run = reconcile_until(run, {RunState.EXPORTED, RunState.FAILED_LAUNCH}, timeout=180)
    assert run.state == RunState.EXPORTED, list(run.events.values_list("message", flat=True))


def test_a_sweep_whose_advance_was_lost_starts_its_queued_cells(alice, make_run, instance, no_worker):
    from remotegpu_site.celery import app
    from runs.actions.sweeps import do_create_sweep
    from runs.models import Run

    base = make_run()
    sweep = do_create_sweep(base, "lost advance", [{"lr": 0.1}, {"lr": 0.2}], [instance], 1, True, actor=alice)
    app.control.purge()  # the advance (and any preflight) died with its worker: nothing is queued
    Run.objects.filter(sweep=sweep).update(state=RunState.DRAFT)
    outcomes = reconcile_runs()
    started = Run.objects.filter(sweep=sweep, state=RunState.PREFLIGHT)
    assert started.count() == 1 and outcomes == {started.get().run_id: "sweep cell started"}


def test_a_preflight_still_staging_bytes_is_not_overdue_until_its_progress_stops(settings):
    """Staging a large dataset is part of preflight: its deadline counts from the last bytes moved."""
    import time as clock
    from datetime import timedelta as delta

    from django.utils import timezone as tz

    from runs.models import Run, RunState
    from runs.reconcile import overdue

    settings.RECONCILE_PREFLIGHT_SECONDS = 900
    long_ago = tz.now() - delta(hours=2)
    moving = Run(state=RunState.PREFLIGHT, state_changed_at=long_ago, staging={"at": clock.time() - 30})
    stuck = Run(state=RunState.PREFLIGHT, state_changed_at=long_ago, staging={"at": clock.time() - 1000})
    assert overdue(moving) is None
    assert overdue(stuck).failure == RunState.FAILED_PREFLIGHT
    assert overdue(Run(state=RunState.PREFLIGHT, state_changed_at=long_ago, staging={"at": "garbage"})) is not None
