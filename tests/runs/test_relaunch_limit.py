"""Automatic relaunches stop at max_relaunches: a probe showing an interruption, applied by the action."""

import time

import pytest
from django.utils import timezone

from runs.models import RunState
from tests.runs.test_observe import THRESHOLDS, status
from watching.observation import do_observe_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]

REBOOTED = "interrupted: no process, no exit marker, and the box rebooted"


def interrupted_probe(attempt: int) -> dict:
    now = time.time()
    return status(
        attempt=attempt,
        now=now,
        heartbeat_at=now - 5,
        wrapper_alive=False,
        child_alive=False,
        rebooted=True,
        quarantine_reason=REBOOTED,
    )


def running(make_run, **fields):
    return make_run(state=RunState.RUNNING, launched_at=timezone.now(), auto_relaunch=True, **fields)


def test_an_interruption_within_the_limit_relaunches_the_next_attempt(make_run):
    run = running(make_run, max_relaunches=2, relaunches=1, attempt=2)
    run, _ = do_observe_run(run.pk, interrupted_probe(2), THRESHOLDS)
    assert (run.state, run.attempt, run.relaunches) == (RunState.LAUNCHING, 3, 2)
    assert run.events.filter(message__contains="automatic relaunch 2 of 2: attempt 3").exists()


def test_an_interruption_past_the_limit_stays_quarantined_and_says_relaunch_by_hand(make_run):
    run = running(make_run, max_relaunches=2, relaunches=2, attempt=3)
    run, _ = do_observe_run(run.pk, interrupted_probe(3), THRESHOLDS)
    assert (run.state, run.attempt, run.relaunches) == (RunState.QUARANTINED, 3, 2)
    assert run.failure_class == "interrupted"
    assert run.events.filter(message="Interrupted again; 2 automatic relaunches used: relaunch by hand").exists()


def test_no_relaunch_at_all_when_the_limit_is_zero(make_run):
    run = running(make_run, max_relaunches=0, attempt=1)
    run, _ = do_observe_run(run.pk, interrupted_probe(1), THRESHOLDS)
    assert (run.state, run.attempt, run.relaunches) == (RunState.QUARANTINED, 1, 0)
