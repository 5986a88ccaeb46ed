"""Spend approval: an attempt over its project's envelope or threshold waits for an approver."""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from notifications.models import Event
from projects.roles import require_second_approver
from runs import notices, spend
from runs.actions.base import run_event
from runs.models import (
    RETRYABLE_STATES,
    SPEND_TRANSITIONS,
    Run,
    RunState,
    SpendRequest,
    SpendStatus,
)


class SpendPending(ValidationError):
    def __init__(self, request: SpendRequest):
        self.request = request
        super().__init__(f"Waits for an approver (spend request #{request.pk}): {request.reason}.")


def spend_gate(run: Run, attempt: int, why: str, actor) -> SpendRequest | None:
    """None when this attempt may spend; else its pending spend request (created and announced once).

    An approval covers the attempt only on the terms it was given (box, rate, minutes, cost); a request
    asked on other terms is cancelled and asked again."""
    terms = spend.terms_of(run)
    covered = run.spend_requests.filter(attempt=attempt, status=SpendStatus.APPROVED, terms=terms).exists()
    reason = None if covered else spend.needs_approval(run)
    if reason is None:
        return None
    pending = run.spend_requests.filter(attempt=attempt, status=SpendStatus.PENDING).first()
    if pending is not None and pending.terms == terms:
        return pending
    if pending is not None:
        _cancel_spend(run, pending, spend.terms_changed(pending.terms, terms), actor)
    said = (
        f"Attempt {attempt} waits for an approver: {reason}",
        f"attempt {attempt} waits for a spend approval: {reason}",
    )
    return _ask_spend(run, attempt, why, reason, actor, said)


def _move(request: SpendRequest, target: SpendStatus) -> None:
    SPEND_TRANSITIONS.check(request.status, target, f"Spend request #{request.pk}")
    request.status = target


def _cancel_spend(run: Run, request: SpendRequest, changed: str, actor) -> None:
    _move(request, SpendStatus.CANCELLED)
    request.save(update_fields=["status"])
    text = f"Spend request #{request.pk} cancelled: the run changed since it was asked ({changed}); starting asks again"
    run_event(run, "spend", text, actor, spend_request=request.pk)


def cancel_unspent_approvals(run: Run, changed: str, actor) -> None:
    """An edit of a run that has not spent yet: what was asked or approved for it no longer holds."""
    open_requests = run.spend_requests.select_for_update().filter(
        attempt__gt=run.attempt, status__in=(SpendStatus.PENDING, SpendStatus.APPROVED)
    )
    for request in open_requests:
        _cancel_spend(run, request, changed, actor)


def _ask_spend(run: Run, attempt: int, why: str, reason: str, actor, said: tuple[str, str]) -> SpendRequest:
    """The request in the approval queue, its run event and the project's notification (said: their texts)."""
    request = SpendRequest.objects.create(
        run=run,
        attempt=attempt,
        why=why,
        expected_cost=spend.expected_cost(run),
        terms=spend.terms_of(run),
        reason=reason,
        requester=actor or run.created_by,  # an automatic relaunch is asked for by whoever launched the run
        expires_at=timezone.now() + timedelta(hours=settings.SPEND_APPROVAL_HOURS),
    )
    event_text, headline = said
    run_event(run, "spend", event_text, actor, spend_request=request.pk)
    notices.announce(run, Event.SPEND, headline, awaits_approval=True, asked_by=request.requester_id)
    return request


def ask_again_when_overrunning(run: Run, now) -> None:
    """Longer than expected changes the run's cost: the envelope is asked again, once per attempt.
    Nothing stops the run by itself (that would destroy its evidence): an approver acknowledges, or
    rejects and the project is told to stop it."""
    if not spend.overrunning(run, now):  # no query: this runs on every probe of every running run
        return
    if run.spend_requests.filter(attempt=run.attempt, why=SpendRequest.Why.OVERRUN).exists():
        return
    reason = spend.overrun_reason(run, now)
    if reason is not None:
        said = (f"Asked again: {reason}", f"asks the envelope again: {reason}")
        _ask_spend(run, run.attempt, SpendRequest.Why.OVERRUN, reason, None, said)


def do_decide_spend(request_pk: int, approve: bool, comment: str, *, actor) -> SpendRequest:
    """An approver (never the requester) lets the attempt spend, or refuses; approval continues it.
    An approval is of the terms the request was asked on: if the run has other terms now, it is cancelled."""
    with transaction.atomic(durable=True):
        request = (
            SpendRequest.objects.select_for_update(of=("self",))
            .select_related("run__project", "run__instance")
            .get(pk=request_pk)
        )
        run = request.run
        require_second_approver(actor, run.project, request.requester_id, "its spending", "a spend")
        if request.status != SpendStatus.PENDING:
            raise ValidationError(f"Spend request #{request.pk} is {request.get_status_display().lower()}.")
        if request.expires_at <= timezone.now():
            raise ValidationError(f"Spend request #{request.pk} has expired; start the run again to ask again.")
        changed = spend.terms_changed(request.terms, spend.terms_of(run)) if approve else ""
        if changed:  # the approver was shown other terms than the run has now (a box's rate was edited)
            _cancel_spend(run, request, changed, actor)
        else:
            _move(request, SpendStatus.APPROVED if approve else SpendStatus.REJECTED)
            request.approver, request.comment, request.decided_at = actor, comment.strip(), timezone.now()
            _record_decision(run, request, approve, comment, actor)
    if changed:  # raised after commit: the cancellation is kept
        raise ValidationError(
            f"Spend request #{request.pk} was cancelled: the run changed since it was asked ({changed})."
        )
    return request


def _record_decision(run: Run, request: SpendRequest, approve: bool, comment: str, actor) -> None:

    request.save()
    verdict = "approved" if approve else "rejected"
    run_event(run, "spend", f"Spend of attempt {request.attempt} {verdict}: {comment.strip()}", actor)
    action = AuditAction.SPEND_APPROVED if approve else AuditAction.SPEND_REJECTED
    message = (
        f"{run.run_id}: spend of attempt {request.attempt} (${request.expected_cost}) {verdict}: {comment.strip()}"
    )
    record(action, message, actor=actor, run=run, spend=request.pk)
    if not approve and request.why == SpendRequest.Why.OVERRUN:
        notices.announce(run, Event.SPEND, f"its overrun was rejected by {actor.get_username()}: stop it by hand")
    if approve:
        after_commit("runs.tasks.continue_after_spend", request.pk)


def lost_spend_continuations(now=None) -> list[int]:
    """Approved spend requests whose run still waits on them TEARDOWN_REDRIVE_SECONDS after the decision:
    their continuation task was lost (an enqueue that failed after the approval committed)."""
    now = now or timezone.now()
    approved = SpendRequest.objects.filter(
        status=SpendStatus.APPROVED,
        decided_at__lte=now - timedelta(seconds=settings.TEARDOWN_REDRIVE_SECONDS),
        decided_at__gte=now - timedelta(hours=settings.SPEND_APPROVAL_HOURS),
        attempt=F("run__attempt") + 1,
    )
    launch = approved.filter(why=SpendRequest.Why.LAUNCH, run__state=RunState.DRAFT, run__sweep__isnull=True)
    relaunch = approved.filter(why=SpendRequest.Why.RELAUNCH, run__state__in=RETRYABLE_STATES)
    return sorted({*launch.values_list("pk", flat=True), *relaunch.values_list("pk", flat=True)})


def do_expire_spend_requests(now=None) -> int:
    now = now or timezone.now()
    expired = 0
    with transaction.atomic(durable=True):
        pending = SpendRequest.objects.select_for_update().filter(status=SpendStatus.PENDING, expires_at__lte=now)
        for request in pending:
            _move(request, SpendStatus.EXPIRED)
            request.save(update_fields=["status"])
            run = Run.objects.select_related("project", "instance").get(pk=request.run_id)
            run_event(run, "spend", f"Spend request #{request.pk} expired unanswered: start the run again to ask again")
            expired += 1
    return expired
