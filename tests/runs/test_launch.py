"""Launch without tmux (setsid nohup), a redelivered launch task that must not start a second copy, and
a tmux launch on a server of its own."""

import subprocess
import time

import pytest

from runs import shipping
from runs.box_spec import run_node
from runs.models import Run, RunState
from runs.tasks import launch_run
from tests.runs.conftest import set_config, wait_file

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


def launched_run(make_run, tmux: bool) -> Run:
    """Attempt 1 of a run whose preflight found tmux (or not), prepared, shipped and launched in this
    process over real SSH."""
    run = make_run(state=RunState.LAUNCHING, attempt=1, preflight_report={"tmux": tmux})
    with run_node(run) as session:
        session.prepare()
        shipping.ship_source(session)
    launch_run(run.pk, 1)
    run.refresh_from_db()
    return run


def test_nohup_launch_detaches_and_a_redelivered_task_does_not_relaunch(make_run, node, source, gate):
    """The training held at its gate: the launch returns at once, not when the run ends (the SSH session was
    held by the launch's background shell until the run ended or the command timeout failed the launch)."""
    set_config(source, epochs=3, hold_file=gate.path)
    began = time.monotonic()
    run = launched_run(make_run, tmux=False)
    assert time.monotonic() - began < 15  # shipped and launched; the run itself goes on, held
    assert (run.state, run.detach) == (RunState.RUNNING, "nohup"), run.events.values_list("message", flat=True)
    assert "exec setsid nohup" in run.launched_command
    pids = wait_file(node.active(run) / "attempt-1" / "pid").read_text()

    # The broker redelivers the task (acks_late): it must see the attempt on the node and not start another.
    # The first worker died before it recorded how it launched: the adoption reads that back from the node.
    launched = run.launched_command
    Run.objects.filter(pk=run.pk).update(state=RunState.LAUNCHING, detach="", launched_command="")
    launch_run(run.pk, 1)
    run.refresh_from_db()
    assert run.state == RunState.RUNNING
    assert (run.detach, run.launched_command) == ("nohup", launched)
    assert (node.active(run) / "attempt-1" / "pid").read_text() == pids
    gate.release()
    wait_file(node.export(run) / "best.pth", timeout=120)
    assert len(list((node.root / "active" / run.run_id).glob("attempt-*"))) == 1


def test_a_tmux_launch_has_a_tmux_server_of_its_own(make_run, node, source, gate):
    """Every run's session was on the box's default tmux server, shared with every other run and every
    person there: a launch while that server was exiting (its last session just ended) failed with
    "server exited unexpectedly" (found by make test-stress), and one `tmux kill-server` ended every run."""
    set_config(source, epochs=3, hold_file=gate.path)
    run = launched_run(make_run, tmux=True)
    assert (run.state, run.detach) == (RunState.RUNNING, "tmux")
    name = f"rgpu-{run.run_id}-1"
    own = subprocess.run(["tmux", "-L", name, "has-session", "-t", name], capture_output=True, timeout=30)
    shared = subprocess.run(["tmux", "has-session", "-t", name], capture_output=True, timeout=30)
    assert own.returncode == 0, own.stderr
    assert shared.returncode != 0  # not on the default server
    gate.release()
    wait_file(node.export(run) / "best.pth", timeout=120)


def test_runs_preparing_the_same_project_root_at_once_all_succeed(make_run, node):
    import shutil
    import threading

    from django.db import connection

    runs = [make_run() for _ in range(6)]
    sessions = [run_node(run).__enter__() for run in runs]  # connect first: race only on prepare
    errors = []
    try:
        for _ in range(8):
            shutil.rmtree(node.root / ".remotegpu", ignore_errors=True)
            barrier = threading.Barrier(len(sessions))

            def prepare(session, barrier=barrier):
                barrier.wait()
                try:
                    session.prepare()
                except Exception as exc:  # noqa: BLE001  collected and asserted below
                    errors.append(exc)

            threads = [threading.Thread(target=prepare, args=(session,)) for session in sessions]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        for session in sessions:
            session.__exit__(None, None, None)
        connection.close()
    assert errors == []
    assert len(list((node.root / ".remotegpu").glob("wrapper-*.py"))) == 1
    assert not list((node.root / ".remotegpu").glob("*.upload*"))
