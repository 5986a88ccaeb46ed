"""Launch without tmux (setsid nohup) and a redelivered launch task that must not start a second copy."""

import pytest

from runs.models import Run, RunState
from runs.remote import NodeSession
from runs.tasks import launch_run
from tests.runs.conftest import set_config, wait_file

pytestmark = pytest.mark.django_db(transaction=True)


def test_nohup_launch_detaches_and_a_redelivered_task_does_not_relaunch(make_run, node, source):
    set_config(source, epochs=3)
    run = make_run(state=RunState.LAUNCHING, attempt=1, preflight_report={"tmux": False})
    with NodeSession(run) as session:
        session.prepare()
        session.ship_source()
    launch_run(run.pk, 1)  # in this process, over real SSH
    run.refresh_from_db()
    assert (run.state, run.detach) == (RunState.RUNNING, "nohup")
    assert "setsid nohup" in run.launched_command
    pids = wait_file(node.active(run) / "attempt-1" / "pid").read_text()

    # The broker redelivers the task (acks_late): it must see the attempt on the node and not start another.
    Run.objects.filter(pk=run.pk).update(state=RunState.LAUNCHING)
    launch_run(run.pk, 1)
    run.refresh_from_db()
    assert run.state == RunState.RUNNING
    assert (node.active(run) / "attempt-1" / "pid").read_text() == pids
    wait_file(node.export(run) / "best.pth", timeout=120)
    assert len(list((node.root / "active" / run.run_id).glob("attempt-*"))) == 1
