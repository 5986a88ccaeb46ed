"""An approval made while the broker is down was approved forever. The approval commits,
then its `on_commit` enqueue fails; nothing re-drove an APPROVED request and no transition let anyone
cancel it, so the copy it targets counted as gone. Here the approval is made in a process whose broker
is a closed port, as a web process sees a Redis outage."""

import subprocess
import sys
from decimal import Decimal

import pytest

from core.models import AuditEntry
from delivery.actions.decisions import do_cancel_teardown
from delivery.actions.execution import do_redrive_approved
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownRequest, TeardownStatus
from runs.models import RunState, SpendRequest, SpendStatus
from runs.tasks import reconcile_runs
from tests import factories
from tests.conftest import REPO, database_url, subprocess_env
from tests.personas import grant
from tests.sshd import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


def with_the_broker_down(code: str, **settings_env: str) -> subprocess.CompletedProcess:
    """code, run in a Django process whose broker (and cache) is a port nothing listens on; settings_env:
    settings the process reads from its environment."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    env = subprocess_env(DATABASE_URL=database_url(), REDIS_URL=dead, **settings_env)
    script = "import django; django.setup()\nfrom django.contrib.auth import get_user_model\n" + code
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )


def test_an_approval_whose_enqueue_failed_is_driven_again_then_failed_and_cancelled(
    alice, bob, instance, no_worker, settings
):
    instance.project.shutdown_needs_approval = True
    instance.project.save()
    request = do_request_teardown(instance.pk, "shutdown", "finished with it", actor=bob)
    assert request.status == TeardownStatus.PENDING
    approving = with_the_broker_down(
        "from delivery.actions.decisions import do_approve_teardown\n"
        f"do_approve_teardown({request.pk}, 'ok', actor=get_user_model().objects.get(username='alice'))\n"
    )
    assert approving.returncode != 0, approving.stdout  # the enqueue after commit failed
    request.refresh_from_db()
    assert request.status == TeardownStatus.APPROVED  # committed: before, approved forever

    settings.TEARDOWN_REDRIVE_SECONDS, settings.TEARDOWN_MAX_REDRIVES = 0, 1
    assert do_redrive_approved() == [request.pk]  # enqueued again on the broker that answers now
    request.refresh_from_db()
    assert (request.status, request.redrives) == (TeardownStatus.APPROVED, 1)
    assert AuditEntry.objects.filter(request=request, action="redriven").count() == 1
    assert do_redrive_approved() == []  # no worker took it again: it fails, with what to do
    request.refresh_from_db()
    assert request.status == TeardownStatus.FAILED and "retry it, or cancel it" in request.failure
    do_cancel_teardown(request.pk, actor=alice)  # an approver, not the requester: a way out
    assert TeardownRequest.objects.get(pk=request.pk).status == TeardownStatus.CANCELLED


def test_an_approved_request_can_be_cancelled_before_a_worker_takes_it(alice, bob, carol, instance, no_worker):
    from django.core.exceptions import PermissionDenied

    from delivery.actions.decisions import do_approve_teardown

    instance.project.shutdown_needs_approval = True
    instance.project.save()
    request = do_request_teardown(instance.pk, "shutdown", "finished with it", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    with pytest.raises(PermissionDenied):
        do_cancel_teardown(request.pk, actor=carol)  # neither its requester nor an approver
    outsider = type(alice).objects.create_user("outside-approver", password="outside-pass-1234")
    grant(outsider, factories.project(name="Elsewhere", slug="elsewhere"), "approver")  # of another project
    with pytest.raises(PermissionDenied):
        do_cancel_teardown(request.pk, actor=outsider)
    do_cancel_teardown(request.pk, actor=bob)
    assert TeardownRequest.objects.get(pk=request.pk).status == TeardownStatus.CANCELLED


def test_a_spend_approval_whose_continuation_was_lost_is_continued_by_the_reconciler(
    alice, bob, project, make_run, no_worker, settings
):
    project.budget = Decimal("1.00")
    project.save()
    type(project.instances.first()).objects.filter(pk=project.instances.first().pk).update(rate_running=Decimal(60))
    run = make_run(expected_minutes=60)
    from runs.actions.lifecycle import do_start_preflight
    from runs.actions.spending import SpendPending

    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    spend = SpendRequest.objects.get(run=run)
    approving = with_the_broker_down(
        "from runs.actions.spending import do_decide_spend\n"
        f"do_decide_spend({spend.pk}, True, 'ok', actor=get_user_model().objects.get(username='alice'))\n"
    )
    assert approving.returncode != 0, approving.stdout
    assert SpendRequest.objects.get(pk=spend.pk).status == SpendStatus.APPROVED
    run.refresh_from_db()
    assert run.state == RunState.DRAFT
    settings.TEARDOWN_REDRIVE_SECONDS = 0
    assert reconcile_runs()[f"spend {spend.pk}"] == "preflight started"
    run.refresh_from_db()
    assert run.state == RunState.PREFLIGHT
    assert reconcile_runs().get(f"spend {spend.pk}") is None  # nothing waits on it any more
