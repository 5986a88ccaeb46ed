"""Durable monitoring on the real loopback sshd, with real workers, beat and WebSockets."""

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection

from remotegpu_site.asgi import application
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.models import RunEvent, RunState, WatchLease
from tests.conftest import ARTIFACTS, REPO, WATCH_ENV, database_url, subprocess_env
from tests.runs.conftest import SETTLED, set_config, wait_health, wait_state
from tests.runs.test_live_channel import ORIGIN, session_cookie
from tests.waiting import wait_until
from watching.tasks import arm_watchers

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT_HEADER = "import os, sys, time\nif os.environ.get('REMOTEGPU_SMOKE') == '1':\n    sys.exit(0)\n"


@pytest.fixture
def source(standin_source):
    """Watching is about the run, not its arithmetic: tinyfit's contract without torch (tests/standin)."""
    return standin_source


def script_run(make_run, source, name, body, **fields):
    (source / name).write_text(SCRIPT_HEADER + body)
    return make_run(command=[sys.executable, name], **fields)


def transitions(run):
    return list(run.events.exclude(to_state="").values_list("to_state", flat=True))


async def test_websocket_hears_running_logs_and_exported_in_order(
    alice, bob, make_run, source, gate, celery_worker_process
):
    set_config(source, epochs=5, hold_file=gate.path)  # held after epoch 1 until its line reached the socket
    run = await sync_to_async(make_run)()
    cookie = await sync_to_async(session_cookie)(alice)
    path = f"/ws/runs/{run.run_id}/"
    communicator = WebsocketCommunicator(application, path, headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    await sync_to_async(do_start_preflight)(run.pk, actor=bob)
    messages = []
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        message = await communicator.receive_json_from(timeout=150)
        messages.append(message)
        if message.get("type") == "log" and any(line.startswith("epoch 1/5") for line in message["lines"]):
            gate.release()
        if message.get("type") == "event" and message.get("state") == "exported":
            break
    await communicator.disconnect()
    kinds = [(m["type"], m.get("state")) for m in messages]
    running_at = kinds.index(("event", "running"))
    exported_at = kinds.index(("event", "exported"))
    log_lines = [line for m in messages if m["type"] == "log" for line in m["lines"]]
    first_log_at = next(i for i, m in enumerate(messages) if m["type"] == "log")
    assert running_at < first_log_at < exported_at
    epochs = [line for line in log_lines if line.startswith("epoch ")]
    assert epochs == [f"epoch {n}/5" + line.split(f"epoch {n}/5", 1)[1] for n, line in enumerate(epochs, 1)]
    assert len(epochs) == 5 and len(set(log_lines)) == len(log_lines)
    event_ids = [m["id"] for m in messages if m["type"] == "event"]
    assert len(event_ids) == len(set(event_ids))
    curve_rows = [row for m in messages if m["type"] == "curve" for row in m["rows"]]
    assert [row["epoch"] for row in curve_rows] == [1, 2, 3, 4, 5]


class Beat:
    """A real `celery beat` arming watchers every second."""

    def __init__(self, tmp_path, database):
        log = (ARTIFACTS / "celery-beat.log").open("a")
        env = subprocess_env(DATABASE_URL=database, WATCH_ARM_INTERVAL="1", **WATCH_ENV)
        command = [sys.executable, "-m", "celery", "-A", "remotegpu_site", "beat"]
        command += ["--schedule", str(tmp_path / "beat-schedule"), "-l", "info"]
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=20)


def test_killed_worker_is_replaced_by_exactly_one_watcher(tmp_path, bob, make_run, source, gate, celery_worker_process):
    set_config(source, epochs=12, hold_file=gate.path)  # held after epoch 1 until a new watcher has it
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    wait_until(lambda: WatchLease.objects.filter(instance=run.instance).exists(), timeout=30, interval=0.2)
    first_owner = WatchLease.objects.get(instance=run.instance).owner
    celery_worker_process.kill()
    beat = Beat(tmp_path, celery_worker_process.database)
    try:
        celery_worker_process.start()
        taken = lambda: WatchLease.objects.filter(instance=run.instance).exclude(owner=first_owner).exists()  # noqa: E731
        wait_until(taken, 60, 0.2, what="a watcher of the new worker taking the lease")
        gate.release()
        run = wait_state(run, {RunState.EXPORTED}, timeout=180)
    finally:
        beat.stop()
    assert transitions(run) == ["preflight", "smoke", "launching", "running", "exited", "exported"]
    assert RunEvent.objects.filter(run=run, message="Export sealed on the node").count() == 1
    assert RunEvent.objects.filter(run=run, message__startswith="Exited with code 0").count() == 1
    lease = WatchLease.objects.filter(instance=run.instance).first()
    assert lease is None or lease.owner != first_owner
    assert [row["epoch"] for row in run.curve] == list(range(1, 13))  # every row once, none lost


@pytest.fixture
def private_sshd(tmp_path):
    from tests.sshd import Sshd

    server = Sshd(tmp_path / "sshd").start()
    yield server
    server.stop()


def test_lost_ssh_is_unreachable_not_failed_and_watching_resumes(
    client, bob, make_run, source, instance, private_sshd, gate, celery_worker_process
):
    for field, value in private_sshd.instance_fields(instance.project).items():
        setattr(instance, field, value)
    instance.save()
    set_config(source, epochs=14, hold_file=gate.path)  # held after epoch 1 until the box is back
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    private_sshd.stop()
    run = wait_health(run, "unreachable")
    assert run.health == "unreachable" and run.state == RunState.RUNNING
    assert run.events.filter(message__startswith="Unreachable since").count() == 1
    client.force_login(bob)
    page = lambda: client.get(instance.get_absolute_url()).content.decode()  # noqa: E731
    wait_until(lambda: 'id="unreachable"' in page(), 10, 0.3, what="the instance page saying the box is unreachable")
    private_sshd.start()
    back = lambda: run.events.filter(message__startswith="Reachable again").exists()  # noqa: E731
    wait_until(back, 60, 0.2, what="the watcher reaching the box again", between=arm_watchers)
    gate.release()
    run = wait_state(run, {RunState.EXPORTED}, timeout=180, refresh=True)
    assert run.events.filter(message__startswith="Reachable again").count() == 1
    assert run.health == "ok"


def test_silent_training_is_reported_stalled(bob, make_run, source, node, celery_worker_process):
    body = "print('started', flush=True)\ntime.sleep(120)\n"
    run = script_run(make_run, source, "silent.py", body, stall_seconds=3)
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    run = wait_health(run, "stalled")
    assert run.health == "stalled" and run.state == RunState.RUNNING
    assert run.events.filter(kind="alert", message__startswith="Stalled").count() == 1
    pids = (node.active(run) / "attempt-1" / "pid").read_text().split()
    os.kill(int(pids[1]), signal.SIGTERM)
    wait_state(run, {RunState.QUARANTINED}, timeout=60)


def test_raising_training_is_a_code_error_with_the_traceback(bob, make_run, source, celery_worker_process):
    body = "print('epoch 1/3 train_loss=0.9', flush=True)\nraise ValueError('labels and logits disagree')\n"
    run = script_run(make_run, source, "raises.py", body)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=120)
    assert run.exit_code == 1
    assert run.failure_class == "code_error"
    assert "Traceback" in run.failure_excerpt and "labels and logits disagree" in run.failure_excerpt
    assert run.events.filter(kind="failure", message__contains="Stop and fix").exists()
    said = "A Traceback appeared in the log — read it in the log"
    assert run.events.filter(kind="alert", message__startswith=said).count() == 1


def test_exit_137_is_classified_as_out_of_memory(bob, make_run, source, celery_worker_process):
    body = "import signal\nprint('allocating', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    run = script_run(make_run, source, "oom.py", body)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=120)
    assert run.exit_code == 137 and run.failure_class == "oom"


def test_dead_attempt_is_quarantined_and_offered_an_identical_retry(bob, make_run, source, node, celery_worker_process):
    body = "print('working', flush=True)\ntime.sleep(6)\n"
    run = script_run(make_run, source, "victim.py", body)
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    pid_file = node.active(run) / "attempt-1" / "pid"
    while not pid_file.exists():
        time.sleep(0.2)
    for pid in map(int, pid_file.read_text().split()):
        os.kill(pid, signal.SIGKILL)  # the wrapper too: no exit marker will ever be written
    run = wait_state(run, {RunState.QUARANTINED}, timeout=60)
    assert run.exit_code is None and run.failure_class == "probabilistic"
    assert "dead: no process and no exit marker" in run.close_reason
    do_retry_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=120)
    # The identical config ran again to completion; it writes no export, so closeout quarantines it.
    assert (run.attempt, run.exit_code) == (2, 0)
    assert "required file run.json is missing" in run.close_reason


def test_watchers_use_one_connection_and_one_probe_per_tick(bob, make_run, source, gate, celery_worker_process):
    # Held after their first epoch until the ticks are counted: once all three end, the lease is
    # released and its tick count is gone with it.
    set_config(source, epochs=3, hold_file=gate.path)
    runs = [make_run() for _ in range(3)]
    for run in runs:
        do_start_preflight(run.pk, actor=bob)
    for run in runs:
        settled = wait_state(run, SETTLED)
        assert settled.state == RunState.RUNNING, (settled.preflight_report.get("problems"), settled.smoke_output)
    # Two ticks on a loaded machine may take longer than two tick periods: wait for them, then count.
    ticked = WatchLease.objects.filter(instance=runs[0].instance, ticks__gte=2).first
    lease = wait_until(ticked, timeout=30, what="two ticks of the watcher")
    assert lease.connects == 1
    assert WatchLease.objects.count() == 1  # three live runs on one instance: one watcher
    gate.release()
    for run in runs:
        wait_state(run, {RunState.EXPORTED}, timeout=180, refresh=True)


def test_a_database_outage_skips_ticks_and_the_same_watcher_goes_on(bob, make_run, source, gate, celery_worker_process):
    """While PostgreSQL refuses new connections (ALLOW_CONNECTIONS false: every watcher burst opens
    one), each tick is skipped at its first read instead of failing the watcher's task; the same
    watcher (the same lease owner) probes again once the database is back."""
    if connection.vendor != "postgresql":
        pytest.skip("an outage of PostgreSQL")
    set_config(source, epochs=3, hold_file=gate.path)  # held after epoch 1 through the outage
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    wait_until(
        lambda: WatchLease.objects.filter(instance=run.instance, ticks__gte=2).exists(),
        timeout=15,
        interval=0.2,
        what="a watcher ticking twice",
    )
    owner = WatchLease.objects.get(instance=run.instance).owner
    name = connection.settings_dict["NAME"]
    log = ARTIFACTS / "celery-worker.log"
    logged_before = log.stat().st_size
    # From another database: PostgreSQL refuses to close the current one to new connections.
    admin = psycopg.connect(database_url().rsplit("/", 1)[0] + "/postgres", autocommit=True)
    admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    try:
        with pytest.raises(psycopg.OperationalError):  # the outage is real: a new connection is refused
            psycopg.connect(database_url(), connect_timeout=2).close()
        skipped = f"watcher of instance {run.instance_id} skipped a tick"
        wait_until(lambda: skipped in log.read_bytes()[logged_before:].decode(errors="replace"), 15, 0.2, what=skipped)
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
    back = time.time()
    probed = lambda: run.refresh_from_db() or (run.last_status or {}).get("now", 0) > back  # noqa: E731
    wait_until(probed, 10, 0.2, what="the watcher probing again after the outage")
    assert WatchLease.objects.get(instance=run.instance).owner == owner  # the same watcher, not a new one
    gate.release()
    assert wait_state(run, {RunState.EXPORTED}, timeout=180, refresh=True).state == RunState.EXPORTED
    with log.open("rb") as handle:
        handle.seek(logged_before)
        logged = handle.read().decode(errors="replace")
    assert f"watcher of instance {run.instance_id} skipped a tick" in logged
