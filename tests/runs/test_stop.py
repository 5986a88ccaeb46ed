"""A person's Stop of a running run, on the real loopback box through a real worker: the
command gets SIGTERM (SIGKILL after the grace, 3 s here through RUN_STOP_GRACE_SECONDS), the attempt is
quarantined "stopped by <person>" with its checkpoint, its GPUs are freed, and a retry resumes it."""

import csv
import json

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from runs.actions import stops
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.box_spec import run_node
from runs.models import GpuLock, Run, RunState
from runs.tasks import deliver_stop
from tests import factories
from tests.personas import join
from tests.racing import at_once
from tests.runs.conftest import SETTLED, edit_train, set_config, wait_file, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


def running(run, node, epochs: int) -> None:
    """Wait until the run has checkpointed this many epochs on the box."""
    train_csv = node.active(run) / "output" / "train.csv"
    wait_file(train_csv)
    wait_until(lambda: len(train_csv.read_text().splitlines()) > epochs, 60, 0.05, what=f"{epochs} epochs logged")


def test_a_stopped_run_is_quarantined_with_its_checkpoint_and_a_retry_resumes(
    bob, make_run, node, source, gate, celery_worker_process
):
    set_config(source, epochs=20, hold_file=gate.path)  # held after epoch 1, checkpointed, until stopped
    run = make_run(gpus=[])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.RUNNING
    running(run, node, 1)

    stops.do_stop_run(run.pk, actor=bob)
    with pytest.raises(ValidationError, match="already on its way"):
        stops.do_stop_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.QUARANTINED}, refresh=True)
    assert run.exit_code == 143  # SIGTERM: it ended within the grace
    assert run.close_reason.startswith("stopped by bob: the command ended after SIGTERM"), run.close_reason
    assert run.failure_class == "stopped" and not GpuLock.objects.filter(run=run).exists()
    assert "stopped by bob" in (node.quarantine(run, 1) / "reason.txt").read_text()
    assert (node.active(run) / "ckpt" / "latest.pth").exists()  # kept for the retry
    messages = list(run.events.values_list("message", flat=True))
    assert any(m.startswith("Stop asked by bob") for m in messages)
    assert any(m.startswith("Stop delivered") for m in messages)
    assert run.relaunches == 0  # a stop is never relaunched on its own

    gate.release()
    do_retry_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.EXPORTED}, timeout=180, refresh=True)
    assert run.attempt == 2 and run.stop_asked_at is None
    log = (node.active(run) / "attempt-2" / "log.txt").read_text()
    assert int(log.split("resumed from epoch ")[1].split()[0]) == 1  # where the stop found it
    with open(node.export(run) / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 21))


def test_a_command_that_ignores_sigterm_is_killed_when_the_grace_runs_out(
    bob, make_run, node, source, gate, celery_worker_process
):
    edit_train(source, "import time\n", "import signal\nimport time\n\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n")
    set_config(source, epochs=40, hold_file=gate.path)
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.RUNNING
    running(run, node, 1)
    stops.do_stop_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=60, refresh=True)
    assert run.exit_code == 137
    assert "by SIGKILL when the 3 s grace ran out" in run.close_reason
    assert run.failure_class == "stopped"  # not "out of memory": the 137 is the stop's


def test_only_a_running_run_is_stopped_and_only_by_its_operators(bob, carol, dave, make_run, no_worker):
    run = make_run()
    with pytest.raises(ValidationError, match="Only a running run can be stopped; this one is Draft"):
        stops.do_stop_run(run.pk, actor=bob)
    Run.objects.filter(pk=run.pk).update(state=RunState.EXPORTED)
    with pytest.raises(ValidationError, match="this one is Closed: exported"):
        stops.do_stop_run(run.pk, actor=bob)
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING, attempt=1)
    join(factories.project(name="Elsewhere", slug="elsewhere"), dave)  # dave operates there only
    with pytest.raises(PermissionDenied):
        stops.do_stop_run(run.pk, actor=carol)  # a member without the operator role
    with pytest.raises(PermissionDenied):
        stops.do_stop_run(run.pk, actor=dave)  # an operator of other projects

    pages = {user: Client() for user in (carol, dave, bob)}
    for user, client in pages.items():
        client.force_login(user)
    url = f"/runs/{run.run_id}/stop/"
    assert pages[carol].post(url).status_code == 403
    assert pages[dave].post(url).status_code == 404
    api = pages[carol].post(f"/api/runs/{run.run_id}/stop/")
    assert api.status_code == 403
    assert pages[dave].post(f"/api/runs/{run.run_id}/stop/").status_code == 404
    Run.objects.filter(pk=run.pk).update(state=RunState.EXITED)
    refused = pages[bob].post(f"/api/runs/{run.run_id}/stop/")
    assert refused.status_code == 409 and "Exited" in json.dumps(refused.json())  # the state refuses it
    assert Run.objects.get(pk=run.pk).stop_asked_at is None


def test_a_stop_for_an_unreachable_box_is_sent_again_then_expires(bob, make_run, settings, no_worker):
    run = make_run()
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING, attempt=1)
    port = run.instance.port
    type(run.instance).objects.filter(pk=run.instance.pk).update(port=1)  # nothing listens: unreachable
    stops.do_stop_run(run.pk, actor=bob)
    assert deliver_stop(run.pk, 1).startswith("not delivered")
    assert stops.overdue_stops() == [(run.pk, 1, False)]  # the reconciler sends it again

    # The box answers again: the stop reaches it (the attempt's spec is there, as after a launch; nothing
    # runs in this test, and the wrapper says so).
    type(run.instance).objects.filter(pk=run.instance.pk).update(port=port)
    with run_node(Run.objects.get(pk=run.pk)) as session:
        session.prepare()
        session.attempt_spec(1)
    answer = json.loads(deliver_stop(run.pk, 1))
    assert answer["stopped"] is False and "not running" in answer["reason"]
    assert Run.objects.get(pk=run.pk).stop_delivered_at is not None and stops.overdue_stops() == []

    # A second run's stop never reaches its box before the deadline: it expires, with what to do next.
    other = make_run()
    Run.objects.filter(pk=other.pk).update(state=RunState.RUNNING, attempt=1)
    type(run.instance).objects.filter(pk=run.instance.pk).update(port=1)
    stops.do_stop_run(other.pk, actor=bob)
    settings.RUN_STOP_DEADLINE_SECONDS = 0
    assert stops.overdue_stops() == [(other.pk, 1, True)]
    from runs.tasks import reconcile_runs

    assert reconcile_runs()[f"stop {other.pk}"] == "expired"
    other.refresh_from_db()
    assert other.stop_asked_at is None and other.state == RunState.RUNNING
    expired = other.events.filter(kind="stop").last().message
    assert "expired" in expired and "Stop it again once the box answers" in expired


def test_two_stops_at_once_ask_the_box_once(alice, bob, make_run, no_worker):
    """Two operators press Stop together (PostgreSQL, row locks): one stop is asked, the other is told it
    is already on its way; one event, one delivery."""
    run = make_run()
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING, attempt=1)
    outcomes = at_once(
        *[lambda person=person: stops.do_stop_run(run.pk, actor=person).run_id for person in (alice, bob)]
    )
    assert len(outcomes) == 2 and outcomes.count(run.run_id) == 1, outcomes
    assert any("already on its way" in outcome for outcome in outcomes), outcomes
    run.refresh_from_db()
    assert run.stop_asked_by in (alice, bob) and run.events.filter(message__startswith="Stop asked by").count() == 1
    assert stops.overdue_stops() == [(run.pk, 1, False)]
