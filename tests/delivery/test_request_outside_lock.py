"""A teardown request's deep proofs are gathered before its box's row is locked: a box that is slow to
answer its idle scan once held that lock for as long as SSH waited, blocking every other consequence
of the box (and a web worker) meanwhile."""

import socket
import threading

import pytest
from django.db import connection, transaction

from delivery.actions.base import TeardownRefused
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownRequest
from fleet.models import Instance
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def silent_box(project, sshd, settings, day: str):
    """A box whose port accepts and never says a word of SSH (settings: a 5 s connect timeout), and that port."""
    settings.SSH_CONNECT_TIMEOUT = 5
    silent = socket.create_server(("127.0.0.1", 0))
    silent.settimeout(30)
    box = factories.box(
        name=f"{project.slug}-silent-{day}",
        project=project,
        **{**sshd.instance_fields(project), "port": silent.getsockname()[1]},
    )
    return box, silent


def row_free_while_waiting(box, silent, call) -> None:
    """call in a thread; once its SSH waits on the silent box, the box's row is not locked; then its end."""

    def run():
        try:
            call()
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    waiting, _ = silent.accept()  # the idle scan waits on the box now
    try:
        with transaction.atomic():
            assert Instance.objects.select_for_update(nowait=True).get(pk=box.pk) == box  # not locked
    finally:
        worker.join(timeout=60)
        waiting.close()
        silent.close()
    assert not worker.is_alive()


def test_a_silent_box_never_holds_its_row_while_its_request_is_checked(bob, project, sshd, settings, no_worker):
    box, silent = silent_box(project, sshd, settings, "20261201")
    outcome = {}

    def ask():
        try:
            do_request_teardown(box.pk, "shutdown", "finished with it", actor=bob)
            outcome["filed"] = True
        except TeardownRefused as exc:
            outcome["refused"] = str(exc)

    row_free_while_waiting(box, silent, ask)
    assert "could not confirm the box is idle" in outcome.get("refused", ""), outcome
    assert not TeardownRequest.objects.filter(instance=box).exists()


def test_an_approved_shutdowns_proofs_hold_no_row_and_a_silent_box_is_a_retry(bob, alice, project, sshd, settings):
    """Before: do_begin_execution ran the deep check under the box's row lock: the lock was held for the
    whole SSH wait, and the approved shutdown then failed "Custody changed since approval … could not
    confirm the box is idle (timeout)" though custody had not changed."""
    from django.utils import timezone

    from delivery.actions.base import BoxUnconfirmed
    from delivery.actions.execution import do_fail_unconfirmed
    from delivery.execution import execute
    from delivery.models import TeardownStatus

    box, silent = silent_box(project, sshd, settings, "20261207")
    request = factories.teardown_request(
        box, bob, "shutdown", level="L2", status=TeardownStatus.APPROVED, approver=alice, decided_at=timezone.now()
    )
    outcome = {}

    def run():
        try:
            outcome["said"] = execute(request.pk)
        except BoxUnconfirmed as exc:
            outcome["retry"] = str(exc)

    row_free_while_waiting(box, silent, run)
    assert "could not confirm the box is idle" in outcome.get("retry", ""), outcome
    request.refresh_from_db()
    assert request.status == TeardownStatus.APPROVED and request.failure == ""  # waiting, not failed
    do_fail_unconfirmed(request.pk, outcome["retry"], 7)
    request.refresh_from_db()
    assert request.status == TeardownStatus.FAILED and "custody did not change" in request.failure
    assert "Custody changed" not in request.failure
