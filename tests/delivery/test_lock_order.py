"""A teardown request and a run's state change on the same box deadlocked in PostgreSQL.
`do_request_teardown` holds the instance row while its checks run over SSH, then at COMMIT its deferred
foreign-key checks take KEY SHARE on the run and project; the run side locked run, project and
instance FOR UPDATE in one statement, holding the project and waiting for the instance. Every
transaction touching a box now takes no-key locks in one order: instance, project, run."""

import threading
import time

import pytest
from django.db import connection

from custody.actions import do_start_verification
from custody.models import EvidenceLocation
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownKind, TeardownRequest
from runs.models import RunState
from tests.custody import sealed
from tests.runs.test_protocol_garbage import valid_status
from watching.observation import do_observe_run
from watching.watch import thresholds

pytestmark = pytest.mark.django_db(transaction=True)


def race(first, second, delay: float) -> list[str]:
    """first, then second once first holds its locks; every thread's outcome, as text."""
    outcomes: list[str] = []

    def run(call):
        try:
            outcomes.append(call())
        except Exception as exc:  # every thread's outcome is checked
            outcomes.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in (first, second)]
    threads[0].start()
    time.sleep(delay)
    threads[1].start()
    for thread in threads:
        thread.join(60)
    return outcomes


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite serialises every writer")
def test_a_deletion_request_and_a_verification_of_its_run_never_deadlock(alice, bob, instance, exported, no_worker):
    """The deletion holds the box while it re-hashes the copies over SSH, then its rows' deferred
    foreign keys take KEY SHARE on the run at COMMIT; the verification locked the run FOR UPDATE and
    waited for the box."""
    run = exported()
    sealed.verify(run)  # a verified custody copy: deleting the copy on the box is allowed
    for round_, delay in enumerate((0.02, 0.05, 0.1, 0.2, 0.3)):

        def request(reason=f"round {round_}"):
            do_request_teardown(
                instance.pk, TeardownKind.DELETE_EVIDENCE, reason, run, EvidenceLocation.NODE, actor=bob
            )
            return "requested"

        def verify():
            do_start_verification(run.pk, actor=bob)
            return "verifying"

        outcomes = race(request, verify, delay)
        assert sorted(outcomes) == ["requested", "verifying"], outcomes  # no deadlock, no refusal
        TeardownRequest.objects.filter(instance=instance).update(status="cancelled")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite serialises every writer")
def test_a_probe_that_ends_a_run_and_a_teardown_request_never_deadlock(bob, instance, exported, make_run, no_worker):
    exported(state=RunState.EXPORTED, attempt=1)
    running = make_run(state=RunState.RUNNING, attempt=1)
    status = valid_status(running, wrapper_alive=False, child_alive=False, exit_code=0, exported=True, now=time.time())

    def request():
        do_request_teardown(instance.pk, "shutdown", "race", actor=bob)
        return "requested"

    def probe():
        do_observe_run(running.pk, status, thresholds())
        return "observed"

    outcomes = race(request, probe, delay=0.15)
    assert not any("deadlock" in outcome for outcome in outcomes), outcomes
    assert "observed" in outcomes, outcomes
    running.refresh_from_db()
    assert running.state == RunState.EXPORTED
