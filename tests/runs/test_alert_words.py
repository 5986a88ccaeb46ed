"""Alerts worth reading (issue 49): each alert kind says what a person should do, and a normal run that
finishes before its guessed duration gets a note, not an alert (the "Fast finish" alert fired on most
normal runs and taught people to ignore alerts)."""

import time

import pytest
from django.utils import timezone

from runs.models import RunState
from runs.signals import SIGNAL_ADVICE, SIGNAL_MESSAGES, alert_message
from tests.runs.test_observe import THRESHOLDS, status
from watching.observation import do_observe_run


def test_every_alert_kind_says_what_to_do():
    assert set(SIGNAL_ADVICE) == set(SIGNAL_MESSAGES)
    for name, words in SIGNAL_MESSAGES.items():
        assert alert_message(name, "7 s") == f"{words}: 7 s — {SIGNAL_ADVICE[name]}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_worker")
def test_a_run_finishing_early_gets_a_note_not_an_alert(make_run):
    run = make_run(state=RunState.RUNNING, launched_at=timezone.now(), attempt=1, expected_minutes=60)
    now = time.time()
    ended = status(now=now, heartbeat_at=now - 1, wrapper_alive=False, child_alive=False, exit_code=0)
    run, _ = do_observe_run(run.pk, ended, THRESHOLDS)
    assert run.state == RunState.EXITED
    assert not run.events.filter(kind="alert").exists() and run.alerts == []
    note = run.events.get(kind="note", message__startswith="Finished in")
    assert "of an expected 60 min" in note.message
