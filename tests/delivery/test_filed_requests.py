"""A person's teardown request is filed in the web request, never proved there: the box's deep proofs
(the idle scan, re-hashing copies) are gathered by a task outside any lock, then judged under it. A
request whose proofs never come is proved once more, then refused, so none waits forever.

Before, the idle scan ran in the HTTP request: a box that accepts a connection and never speaks held
the web worker for the whole SSH timeout (and the person's page with it)."""

import select
import socket
import subprocess
import threading
import time

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from core.models import AuditEntry
from delivery.actions.base import TeardownRefused
from delivery.actions.decisions import do_cancel_teardown
from delivery.actions.holds import do_place_hold
from delivery.actions.proofs import do_redrive_checking, do_settle_teardown_proofs, do_start_proofs, proof_budget
from delivery.actions.requests import do_file_teardown
from delivery.models import TeardownKind, TeardownRequest, TeardownStatus
from delivery.tasks import prove_teardown
from tests import factories
from tests.delivery.test_lost_enqueues import with_the_broker_down
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SILENCE = 2  # seconds the silent box makes every SSH connection wait (SSH_CONNECT_TIMEOUT here)


@pytest.fixture(autouse=True)
def _in_process_only(no_worker):
    """The proofs are gathered here, by calling the task: no worker takes the enqueued one."""


@pytest.fixture
def silent_server():
    """A box that accepts TCP and never sends an SSH banner: the slowest box there is."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server
    server.close()


@pytest.fixture
def silent_port(silent_server):
    return silent_server.getsockname()[1]


def asked(server) -> bool:
    """Whether anyone has connected to the silent box (a connection waits in its backlog)."""
    return bool(select.select([server], [], [], 0)[0])


@pytest.fixture
def pod(project, silent_port, settings, tmp_path):
    settings.SSH_CONNECT_TIMEOUT = SILENCE
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    credential = factories.ssh_key(project, str(key))
    key_type, key_base64 = (tmp_path / "id_ed25519.pub").read_text().split()[:2]  # pinned: it never gets that far
    reaches = {"host": "127.0.0.1", "port": silent_port, "user": "root", "credential": credential}
    pinned = {"host_key_type": key_type, "host_key_base64": key_base64}
    return factories.box(project, "runpod", api=True, provider_id="pod-filed", state="running", **reaches, **pinned)


def test_the_web_request_only_files_and_the_task_proves(client, bob, pod, silent_server):
    client.force_login(bob)
    response = client.post(reverse("teardown-create", args=[pod.pk]), {"kind": "shutdown", "reason": "night"})
    # The box was not asked anything yet: nothing connected to it (a timing bound here failed under load).
    assert not asked(silent_server)
    request = TeardownRequest.objects.get()
    assert response.url == request.get_absolute_url() and request.status == TeardownStatus.CHECKING
    assert AuditEntry.objects.filter(request=request, action="filed").count() == 1
    page = client.get(request.get_absolute_url()).content.decode()
    assert 'id="checking"' in page and "request_checking.js" in page and 'id="approve"' not in page

    started = time.monotonic()
    assert prove_teardown(request.pk) == TeardownStatus.REFUSED
    assert asked(silent_server)  # the task asked the box
    assert time.monotonic() - started >= SILENCE  # the box's slowness is the task's, not a web worker's
    request.refresh_from_db()
    assert "could not confirm the box is idle" in request.failure
    assert AuditEntry.objects.filter(request=request, action="refused").count() == 1
    assert not AuditEntry.objects.filter(request=request, action="requested").exists()  # no approver was asked
    assert "Refused by its checks" in client.get(request.get_absolute_url()).content.decode()


def test_proving_holds_no_lock_on_the_box(bob, alice, pod, silent_server):
    request = do_file_teardown(pod.pk, TeardownKind.SHUTDOWN, "night", actor=bob)
    outcome = {}

    def prove():
        try:
            outcome["status"] = prove_teardown(request.pk)
        finally:
            connection.close()  # this thread's own connection

    prover = threading.Thread(target=prove)
    prover.start()
    wait_until(lambda: asked(silent_server), 10, 0.02, "the prover connecting to the silent box")
    started = time.monotonic()
    do_place_hold(pod.pk, "keep it", actor=alice)  # takes the box's row lock
    held_for = time.monotonic() - started
    prover.join(timeout=SILENCE * 10)
    assert not prover.is_alive() and outcome == {"status": TeardownStatus.REFUSED}
    assert held_for < SILENCE / 2
    assert pod.holds.filter(retired_at__isnull=True).exists()


def test_a_request_whose_proofs_never_come_is_proved_again_once_then_refused(bob, pod):
    request = do_file_teardown(pod.pk, TeardownKind.RELEASE, "finished", actor=bob)
    past = timezone.now() - timezone.timedelta(seconds=1)
    TeardownRequest.objects.filter(pk=request.pk).update(expires_at=past)  # its task was lost
    assert do_redrive_checking() == [request.pk]
    request.refresh_from_db()
    assert (request.status, request.redrives) == (TeardownStatus.CHECKING, 1) and request.expires_at > timezone.now()
    assert AuditEntry.objects.filter(request=request, action="redriven").count() == 1
    TeardownRequest.objects.filter(pk=request.pk).update(expires_at=past)  # lost again
    assert do_redrive_checking() == []
    request.refresh_from_db()
    assert request.status == TeardownStatus.REFUSED and "were not gathered twice" in request.failure
    assert prove_teardown(request.pk) == "nothing to do"  # the late task changes nothing


def test_a_filing_whose_enqueue_failed_is_driven_again_within_a_minute_not_an_hour(bob, pod):
    """Filed while Redis was down: the commit stands, the enqueue after it fails, no task exists. The
    request's first deadline is for a task to start (TEARDOWN_PROOF_START_SECONDS, 60 s), not for the
    proofs to finish (TEARDOWN_PROOF_SECONDS, 3,900 s by default: 'checking' 120 s after Redis was back)."""
    filing = with_the_broker_down(
        "from delivery.actions.requests import do_file_teardown\n"
        f"do_file_teardown({pod.pk}, 'release', 'done', actor=get_user_model().objects.get(username='bob'))\n",
        TEARDOWN_PROOF_START_SECONDS="0",  # the minute, passed at once: no test waits for it
    )
    assert filing.returncode != 0 and "Error" in filing.stderr  # the enqueue after the commit failed
    request = TeardownRequest.objects.get()
    assert request.status == TeardownStatus.CHECKING and request.proof_started_at is None
    assert do_redrive_checking() == [request.pk]  # on the broker that answers now
    entry = AuditEntry.objects.get(request=request, action="redriven")
    assert "its proof task never started" in entry.message
    assert prove_teardown(request.pk) in (TeardownStatus.PENDING, TeardownStatus.REFUSED)  # settled, not waiting
    request.refresh_from_db()
    assert request.status != TeardownStatus.CHECKING and request.proof_seconds is not None


def test_a_filed_request_waits_a_minute_for_its_task_to_start(bob, pod, settings):
    request = do_file_teardown(pod.pk, TeardownKind.RELEASE, "finished", actor=bob)
    assert (request.expires_at - request.created).total_seconds() <= settings.TEARDOWN_PROOF_START_SECONDS + 1


def test_a_started_proof_has_what_proofs_on_its_box_take_not_the_worst_case(bob, pod, settings):
    settings.TEARDOWN_PROOF_MIN_SECONDS, settings.TEARDOWN_PROOF_MARGIN = 5, 3.0
    first = do_file_teardown(pod.pk, TeardownKind.RELEASE, "finished", actor=bob)
    assert do_start_proofs(first.pk)
    first.refresh_from_db()
    never_proved = (first.expires_at - first.proof_started_at).total_seconds()
    assert never_proved == pytest.approx(settings.TEARDOWN_PROOF_SECONDS)
    do_settle_teardown_proofs(first.pk, {"ok": False, "items": [], "blocking": ["gone"]}, seconds=2.5)
    second = do_file_teardown(pod.pk, TeardownKind.SHUTDOWN, "night", actor=bob)
    assert do_start_proofs(second.pk)
    second.refresh_from_db()
    assert (second.expires_at - second.proof_started_at).total_seconds() == pytest.approx(7.5)  # 2.5 s × 3
    settings.TEARDOWN_PROOF_MIN_SECONDS = 60
    assert proof_budget(pod.pk) == 60  # never less than the floor


def test_the_proof_task_retries_database_and_broker_errors():
    from django.db import DatabaseError
    from kombu.exceptions import OperationalError

    assert {DatabaseError, OperationalError} <= set(prove_teardown.autoretry_for)
    assert prove_teardown.max_retries >= 5 and prove_teardown.acks_late


def test_proofs_settle_once_and_a_cancelled_request_is_left_alone(bob, pod):
    release = do_file_teardown(pod.pk, TeardownKind.RELEASE, "finished", actor=bob)
    assert prove_teardown(release.pk) == TeardownStatus.PENDING
    assert prove_teardown(release.pk) == "nothing to do"  # a redelivered task
    assert AuditEntry.objects.filter(request=release, action="requested").count() == 1  # approvers told once
    do_cancel_teardown(release.pk, actor=bob)

    shutdown = do_file_teardown(pod.pk, TeardownKind.SHUTDOWN, "night", actor=bob)
    do_cancel_teardown(shutdown.pk, actor=bob)  # the requester withdraws it while it is checked
    assert prove_teardown(shutdown.pk) == "nothing to do"
    shutdown.refresh_from_db()
    assert shutdown.status == TeardownStatus.CANCELLED


def test_what_the_database_refuses_is_refused_at_once_with_nothing_filed(bob, alice, pod):
    do_place_hold(pod.pk, "keep it", actor=alice)
    started = time.monotonic()
    with pytest.raises(TeardownRefused, match="hold"):
        do_file_teardown(pod.pk, TeardownKind.RELEASE, "finished", actor=bob)
    assert time.monotonic() - started < SILENCE / 2
    assert not TeardownRequest.objects.exists()
