"""Spending is a cost action: a run whose expected cost exceeds what is left of its
project's envelope, or a per-run threshold, waits for an approver in the approval queue; its requester
never approves; a retry asks again. Spend is read from the boxes' state history in the database."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from fleet.models import Instance
from notifications.models import Notification
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.actions.redrive import do_continue_after_spend
from runs.actions.spending import SpendPending, do_decide_spend, do_expire_spend_requests
from runs.models import Run, RunState, SpendRequest, SpendStatus
from runs.spend import envelope_of, period_bounds
from tests import factories
from tests.personas import grant
from tests.racing import at_once

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def team(alice, bob, carol, no_worker):
    project = factories.project(alice, bob, carol, budget=Decimal("10.00"))
    box = factories.box(project, state="running", rate_running=Decimal(2))
    # The box has billed $2/h for three hours: $6 of the $10 spent (as long as that is this month).
    Instance.objects.filter(pk=box.pk).update(created=max(timezone.now() - timedelta(hours=3), _month_start()))
    return project


def _month_start():
    return period_bounds("month", timezone.now())[0]


def new_run(project, bob, minutes=360, state=RunState.DRAFT) -> Run:
    return factories.run(project.instances.get(), state=state, expected_minutes=minutes, created_by=bob)


def test_the_envelope_reads_spend_from_the_boxes_history(team):
    envelope = envelope_of(team)
    hours = (timezone.now() - Instance.objects.get(project=team).created).total_seconds() / 3600
    assert abs(envelope.spent - Decimal(2) * Decimal(str(hours))) < Decimal("0.02")
    assert envelope.left == (Decimal(10) - envelope.spent).quantize(Decimal("0.01")) and envelope.burn == 2


def test_a_run_over_what_is_left_waits_and_its_requester_cannot_approve(team, alice, bob, carol, client):
    run = new_run(team, bob)  # 6 h at $2/h = $12, more than the whole $10 envelope
    with pytest.raises(SpendPending, match="Waits for an approver"):
        do_start_preflight(run.pk, actor=bob)
    run.refresh_from_db()
    request = SpendRequest.objects.get(run=run)
    assert run.state == RunState.DRAFT and request.status == SpendStatus.PENDING and request.expected_cost == 12
    assert "left of the $10.00 envelope" in request.reason and request.requester == bob
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)  # asking again does not ask twice
    assert SpendRequest.objects.filter(run=run).count() == 1
    assert Notification.objects.filter(project=team, event="spend.approval").count() == 1

    grant(bob, team, "approver")  # even an approver cannot approve what they asked for
    with pytest.raises(PermissionDenied, match="never approves"):
        do_decide_spend(request.pk, True, "mine", actor=bob)
    with pytest.raises(PermissionDenied, match="Only an approver"):
        do_decide_spend(request.pk, True, "not an approver", actor=carol)

    client.force_login(alice)
    page = client.get("/approvals/").content.decode()
    assert f'id="spend-{request.pk}"' in page and f'id="approve-spend-{request.pk}"' in page
    assert "1" in client.get("/").content.decode()  # the pending tile counts it
    response = client.post(f"/spend/{request.pk}/decide/", {"decision": "approve", "comment": "worth it"})
    assert response.status_code == 302
    request.refresh_from_db()
    assert request.status == SpendStatus.APPROVED and request.approver == alice
    assert do_continue_after_spend(request.pk) == "preflight started"  # what the enqueued task runs
    run.refresh_from_db()
    assert run.state == RunState.PREFLIGHT


def test_a_run_above_the_threshold_waits_even_with_room_left(team, bob):
    team.budget, team.run_cost_threshold = None, Decimal("1.50")
    team.save()
    run = new_run(team, bob, minutes=60)  # $2
    with pytest.raises(SpendPending, match=r"above the project's per-run threshold of \$1.50"):
        do_start_preflight(run.pk, actor=bob)
    cheap = new_run(team, bob, minutes=30)  # $1
    do_start_preflight(cheap.pk, actor=bob)
    cheap.refresh_from_db()
    assert cheap.state == RunState.PREFLIGHT and not cheap.spend_requests.exists()


def test_a_retry_asks_the_envelope_again(team, alice, bob):
    run = new_run(team, bob, state=RunState.QUARANTINED)
    with pytest.raises(SpendPending):
        do_retry_run(run.pk, actor=bob)
    request = SpendRequest.objects.get(run=run)
    assert (request.why, request.attempt) == ("relaunch", 1)
    do_decide_spend(request.pk, True, "ok", actor=alice)
    assert do_continue_after_spend(request.pk) == "relaunched"
    run.refresh_from_db()
    assert run.state == RunState.LAUNCHING and run.attempt == 1


def test_a_rejection_leaves_the_run_and_an_unanswered_request_expires(team, alice, bob):
    first, second = new_run(team, bob), new_run(team, bob)
    for run in (first, second):
        with pytest.raises(SpendPending):
            do_start_preflight(run.pk, actor=bob)
    rejected = do_decide_spend(SpendRequest.objects.get(run=first).pk, False, "too dear", actor=alice)
    assert rejected.status == SpendStatus.REJECTED and do_continue_after_spend(rejected.pk) == "not approved"
    SpendRequest.objects.filter(run=second).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert do_expire_spend_requests() == 1
    assert SpendRequest.objects.get(run=second).status == SpendStatus.EXPIRED
    with pytest.raises(ValidationError, match="expired"):
        do_decide_spend(SpendRequest.objects.get(run=second).pk, True, "late", actor=alice)
    assert Run.objects.get(pk=second.pk).state == RunState.DRAFT


def test_two_approvers_at_once_decide_once(team, alice, bob, dave, erin):
    run = new_run(team, bob)
    for person in (dave, erin):
        grant(person, team, "approver")
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    request = SpendRequest.objects.get(run=run)
    outcomes = at_once(
        *[
            lambda person=person: do_decide_spend(request.pk, True, "go", actor=person).approver.username
            for person in (alice, dave, erin)
        ]
    )
    winners = [outcome for outcome in outcomes if outcome in ("alice", "dave", "erin")]
    assert len(outcomes) == 3 and len(winners) == 1
    assert all("is approved" in outcome for outcome in outcomes if outcome not in winners)
    assert SpendRequest.objects.get(pk=request.pk).approver.username == winners[0]


def test_the_api_answers_409_with_the_spend_request(team, bob):
    from django.test import Client

    from api.models import ApiToken

    run = new_run(team, bob)
    _, token = ApiToken.objects.issue(bob, "t")
    response = Client(HTTP_AUTHORIZATION=f"Token {token}").post(f"/api/runs/{run.run_id}/launch/")
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "needs_approval" and body["spend_request"] == SpendRequest.objects.get(run=run).pk


def test_the_dashboard_shows_the_envelope(team, client, bob, charlie):
    client.force_login(bob)
    page = client.get("/").content.decode()
    assert 'id="cost-envelopes"' in page and "$10.00" in page and "Forecast at period end" in page
    client.force_login(charlie)
    assert 'id="cost-envelopes"' not in client.get("/").content.decode()


def test_a_run_longer_than_expected_asks_the_envelope_again_once(team, alice, bob):
    from django.db import transaction

    from runs.actions.spending import ask_again_when_overrunning

    team.run_cost_threshold = Decimal("3.00")
    team.save()
    run = new_run(team, bob, minutes=60, state=RunState.RUNNING)  # $2 expected: under the threshold
    Run.objects.filter(pk=run.pk).update(launched_at=timezone.now() - timedelta(minutes=50))
    run = Run.objects.select_related("project", "instance").get(pk=run.pk)
    with transaction.atomic():
        ask_again_when_overrunning(run, timezone.now())  # inside its expected hour: nothing
    assert not run.spend_requests.exists()
    Run.objects.filter(pk=run.pk).update(launched_at=timezone.now() - timedelta(minutes=100))
    run = Run.objects.select_related("project", "instance").get(pk=run.pk)
    for _ in range(3):  # beat ticks again: asked once
        with transaction.atomic():
            ask_again_when_overrunning(run, timezone.now())
    request = run.spend_requests.get()
    assert request.why == "overrun" and "above the per-run threshold of $3.00" in request.reason
    assert "running 100 min of an expected 60: $3.33 so far" in request.reason
    rejected = do_decide_spend(request.pk, False, "stop it", actor=alice)
    assert rejected.status == SpendStatus.REJECTED
    assert Notification.objects.filter(project=team, event="spend.approval", subject__contains="stop it by hand")


def test_a_malformed_decision_decides_nothing(team, alice, bob, client):
    run = new_run(team, bob)
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    request = SpendRequest.objects.get(run=run)
    client.force_login(alice)
    page = client.post(f"/spend/{request.pk}/decide/", {"comment": "no button"}, follow=True).content.decode()
    assert "Choose Approve spend or Reject" in page
    assert SpendRequest.objects.get(pk=request.pk).status == SpendStatus.PENDING


def test_an_approval_whose_continuation_was_lost_lets_the_run_start_by_hand(team, alice, bob):
    """The worker that should start the run after the approval died: starting it again spends what was
    approved, without asking twice."""
    run = new_run(team, bob)
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    do_decide_spend(SpendRequest.objects.get(run=run).pk, True, "ok", actor=alice)  # its task never runs
    do_start_preflight(run.pk, actor=bob)
    run.refresh_from_db()
    assert run.state == RunState.PREFLIGHT and run.spend_requests.count() == 1


def test_an_edit_after_approval_cancels_it_and_asks_again(team, alice, bob):
    """A $12 approval, then the draft edited to run 5,000 hours, started with no new
    approval. An approval covers the terms it was given (box, rate, minutes, cost); an edit cancels it."""
    from runs.actions.lifecycle import do_edit_run

    run = new_run(team, bob)
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    approved = SpendRequest.objects.get(run=run)
    do_decide_spend(approved.pk, True, "ok for $12", actor=alice)
    assert do_edit_run(run.pk, {"expected_minutes": 300_000}, actor=bob) == ["expected_minutes"]
    approved.refresh_from_db()
    assert approved.status == SpendStatus.CANCELLED
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    run.refresh_from_db()
    assert run.state == RunState.DRAFT
    asked = run.spend_requests.get(status=SpendStatus.PENDING)
    assert asked.expected_cost == Decimal("10000.00") and asked.terms["expected_minutes"] == 300_000
    assert do_continue_after_spend(approved.pk) == "not approved"  # the lost continuation starts nothing
    assert any("cancelled: the run changed" in event.message for event in run.events.filter(kind="spend"))


def test_an_edit_while_pending_cancels_the_request_and_a_rate_change_voids_the_approval(team, alice, bob):
    from runs.actions.lifecycle import do_edit_run

    run = new_run(team, bob)
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    first = SpendRequest.objects.get(run=run)
    do_edit_run(run.pk, {"expected_minutes": 420}, actor=bob)
    first.refresh_from_db()
    assert first.status == SpendStatus.CANCELLED
    with pytest.raises(ValidationError, match="is cancelled"):
        do_decide_spend(first.pk, True, "too late", actor=alice)
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    second = run.spend_requests.get(status=SpendStatus.PENDING)
    # The box's rate rises while the approver reads the request: approving what they were shown is refused.
    Instance.objects.filter(pk=run.instance_id).update(rate_running=Decimal(50))
    with pytest.raises(ValidationError, match=r"rate \$/h 2.0000 → 50.0000"):
        do_decide_spend(second.pk, True, "ok", actor=alice)
    second.refresh_from_db()
    assert second.status == SpendStatus.CANCELLED and second.approver is None
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    assert run.spend_requests.get(status=SpendStatus.PENDING).expected_cost == Decimal("350.00")
