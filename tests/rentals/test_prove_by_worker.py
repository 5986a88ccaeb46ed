"""The pre-rent gate through a real Celery worker process: the request enqueues the proof on commit, a
worker proves the run on the loopback box, and the rent moves on its own (tests/rentals/test_prove_before_rent.py
calls each step in-process)."""

import sys

import pytest

from rentals.models import RentalState
from tests.rentals.test_rent_flow import _ask, boxes  # noqa: F401 (the stub's boxes, the rent's form)
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_proves_the_run_and_a_failed_smoke_creates_nothing(
    project,
    bob,
    boxes,  # noqa: F811
    provider_api,
    instance,
    draft,
    celery_worker_process,
):
    _, client_key = boxes
    passing = _ask(project, bob, client_key, run=draft(command=[sys.executable, "-c", "print(1)"]).pk,
                   proving_box=instance.pk)  # fmt: skip
    failing = _ask(project, bob, client_key, run=draft(command=[sys.executable, "-c", "raise SystemExit(5)"]).pk,
                   proving_box=instance.pk)  # fmt: skip

    def settled(rental):
        rental.refresh_from_db()
        return rental.state != RentalState.PROVING

    wait_until(lambda: settled(passing) and settled(failing), 90, what="the worker's proofs")
    assert passing.state == RentalState.REQUESTED and passing.proof["smoke_exit_code"] == 0
    assert failing.state == RentalState.FAILED and "exit code 5" in failing.reason
    assert provider_api.creates() == []
