"""DELIVER state changes: one function per verb, each in a transaction with an audit entry.

pending → approved / rejected / expired → executing → done / failed (→ approved again on retry).
Execution is claimed under a row lock, so a double click, two approvers or two workers run a
consequence once; its idempotency key also travels to the provider.
"""

from datetime import timedelta
from functools import partial

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from custody import checks, notify
from custody.levels import consequence_of
from custody.models import (
    OPEN_TEARDOWN,
    AuditEntry,
    EvidenceLocation,
    ReleaseHold,
    TeardownKind,
    TeardownRequest,
    TeardownStatus,
)
from profiles.models import Instance


class TeardownRefused(ValidationError):
    """A request, approval or execution that the rules forbid; the message says why."""


def audit(action: str, message: str, actor=None, request=None, instance=None, **data) -> AuditEntry:
    instance = instance or (request.instance if request else None)
    return AuditEntry.objects.create(
        action=action, message=message, actor=actor, request=request, instance=instance, data=data
    )


def _enqueue_execution(request_id: int) -> None:
    from custody.tasks import execute_teardown

    transaction.on_commit(partial(execute_teardown.delay, request_id))


def _refusal(snapshot: dict) -> str:
    failing = [i for i in snapshot["items"] if not i["ok"] and i["label"] in snapshot["blocking"]]
    return "; ".join(f"{item['label']}: {item['detail']}" for item in failing)


def do_request_teardown(instance_pk, kind, actor, reason, run=None, location="", retire_hold=False):
    """Create a request after its custody check passes; an L2 that needs no second person is approved."""
    if not reason.strip():
        raise TeardownRefused("Say why: the reason is part of the audit trail.")
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update().get(pk=instance_pk)
        if instance.state == "released":
            raise TeardownRefused("This box is already released.")
        duplicate = TeardownRequest.objects.filter(
            instance=instance, kind=kind, run=run, location=location, status__in=OPEN_TEARDOWN
        ).first()
        if duplicate:
            raise TeardownRefused(f"Request #{duplicate.pk} for this is already {duplicate.get_status_display()}.")
        request = TeardownRequest(
            instance=instance, kind=kind, run=run, location=location, requester=actor, reason=reason.strip()
        )
        request.retire_hold = retire_hold and kind == TeardownKind.RELEASE
        consequence = consequence_of(kind, instance.profile, instance.project)
        request.level, request.needs_second_person = consequence.level, consequence.needs_second_person
        request.check_at_request = checks.checks_for(request)
        refusal = _refusal(request.check_at_request) if request.check_at_request["blocking"] else ""
        if not refusal:
            _save_request(request)
    if refusal:
        # Recorded in its own transaction: a refusal is audited, and nothing else is written.
        audit(
            "refused", f"{request.get_kind_display()} refused: {refusal}", actor, instance=request.instance, kind=kind
        )
        raise TeardownRefused(f"Refused: {refusal}")
    return request


def _save_request(request) -> None:
    """Inside do_request_teardown's transaction: the row, its audit entry, then notify or execute."""
    request.expires_at = timezone.now() + timedelta(hours=settings.TEARDOWN_APPROVAL_HOURS)
    if not request.needs_second_person:
        request.status = TeardownStatus.APPROVED
        request.decided_at = timezone.now()
        request.decision_comment = f"{request.level}: no second person required"
    request.save()
    message = f"{request.get_kind_display()} of {request.target} requested ({request.level})"
    audit("requested", message, request.requester, request, reason=request.reason)
    if request.status == TeardownStatus.APPROVED:
        _enqueue_execution(request.pk)
    else:
        transaction.on_commit(partial(notify.approvers_of, request.pk))


def _expire_if_due(request) -> bool:
    if request.status == TeardownStatus.PENDING and request.expires_at <= timezone.now():
        request.status = TeardownStatus.EXPIRED
        request.save(update_fields=["status"])
        audit("expired", f"Request #{request.pk} expired unapproved", None, request)
        return True
    return False


def _decide(request_pk, approver, comment):
    request = TeardownRequest.objects.select_for_update().select_related("instance").get(pk=request_pk)
    if request.requester_id == approver.pk:
        raise PermissionDenied("The requester can never approve or reject their own request: ask a second person.")
    if not approver.has_perm("runs.approve_cost"):
        raise PermissionDenied("Only an approver may approve or reject a teardown request.")
    if request.status == TeardownStatus.EXPIRED:
        raise TeardownRefused(f"Request #{request.pk} has expired; request it again.")
    if request.status != TeardownStatus.PENDING:
        raise TeardownRefused(f"Request #{request.pk} is {request.get_status_display()}, not pending.")
    request.approver, request.decided_at, request.decision_comment = approver, timezone.now(), comment.strip()
    return request


def _expire_one(request_pk) -> None:
    """Its own transaction: the expiry stays recorded even though the decision is then refused."""
    with transaction.atomic(durable=True):
        _expire_if_due(TeardownRequest.objects.select_for_update().get(pk=request_pk))


def do_approve_teardown(request_pk, approver, comment="", waive_active=False):
    _expire_one(request_pk)
    with transaction.atomic(durable=True):
        request = _decide(request_pk, approver, comment)
        request.waive_active = waive_active
        # From the database only: re-hashing custody copies (or asking the box) belongs to the
        # request and to the execution, not to an approver's page request in between.
        fresh = checks.checks_for(request, deep=False)
        if not fresh["ok"]:
            raise TeardownRefused(f"Not approvable now: {_refusal({**fresh, 'blocking': _failing(fresh)})}")
        request.status = TeardownStatus.APPROVED
        request.save()
        waived = " (unclosed active/ waived)" if waive_active else ""
        audit("approved", f"Request #{request.pk} approved{waived}", approver, request, comment=comment)
        _enqueue_execution(request.pk)
    return request


def _failing(snapshot: dict) -> list[str]:
    return [item["label"] for item in snapshot["items"] if not item["ok"]]


def do_reject_teardown(request_pk, approver, comment=""):
    _expire_one(request_pk)
    with transaction.atomic(durable=True):
        request = _decide(request_pk, approver, comment)
        request.status = TeardownStatus.REJECTED
        request.save()
        audit("rejected", f"Request #{request.pk} rejected", approver, request, comment=comment)
    return request


def do_begin_execution(request_pk) -> TeardownRequest | None:
    """Claim an approved request exactly once and re-check custody; None when there is nothing to run."""
    with transaction.atomic(durable=True):
        request = (
            TeardownRequest.objects.select_for_update(of=("self",)).select_related("instance", "run").get(pk=request_pk)
        )
        if request.status != TeardownStatus.APPROVED:
            return None  # already executing, done, or never approved: a second caller does nothing
        request.check_at_execution = checks.checks_for(request)
        if not request.check_at_execution["ok"]:
            request.status = TeardownStatus.FAILED
            why = _refusal({**request.check_at_execution, "blocking": _failing(request.check_at_execution)})
            request.failure = f"Custody changed since approval; refusing to execute: {why}"
            request.save()
            audit("refused", request.failure, None, request)
            return None
        request.status = TeardownStatus.EXECUTING
        request.attempts += 1
        request.started_at = timezone.now()
        request.save()
        audit("executing", f"Executing request #{request.pk} (attempt {request.attempts})", None, request,
              idempotency_key=str(request.idempotency_key))  # fmt: skip
    return request


def do_await_attestation(request_pk, steps: list[str]) -> None:
    with transaction.atomic(durable=True):
        request = TeardownRequest.objects.select_for_update().get(pk=request_pk)
        request.status = TeardownStatus.AWAITING_ATTESTATION
        request.provider_answer = {"console_steps": steps}
        request.save()
        audit("awaiting_attestation", f"Request #{request.pk}: console-only; steps shown", None, request)


def do_attest_teardown(request_pk, actor) -> TeardownRequest:
    with transaction.atomic(durable=True):
        request = TeardownRequest.objects.select_for_update().get(pk=request_pk)
        if request.status != TeardownStatus.AWAITING_ATTESTATION:
            raise TeardownRefused(f"Request #{request.pk} is not waiting for an attestation.")
        request.status, request.attested_by = TeardownStatus.EXECUTING, actor
        request.save()
        audit("attested", f"{actor} attests the console steps of #{request.pk} were done", actor, request)
        _enqueue_execution(request.pk)
    return request


def do_finish_execution(request_pk, answer: dict, offline: bool | None = None) -> TeardownRequest:
    from profiles.actions import do_change_instance_state

    with transaction.atomic(durable=True):
        request = (
            TeardownRequest.objects.select_for_update(of=("self",)).select_related("instance", "run").get(pk=request_pk)
        )
        request.status, request.finished_at = TeardownStatus.DONE, timezone.now()
        request.provider_answer = {**request.provider_answer, **answer}
        request.offline_verified = offline
        request.failure = ""
        request.save()
        _apply_effects(request)
        offline_note = {True: "; verified offline", False: "; NOT verified offline", None: ""}[offline]
        audit("done", f"Request #{request.pk} done{offline_note}", None, request, answer=answer)
    target = {TeardownKind.SHUTDOWN: "stopped", TeardownKind.RELEASE: "released"}.get(request.kind)
    if target and request.instance.state != target:
        do_change_instance_state(request.instance_id, target, None, f"teardown request #{request.pk}")
    return request


def _apply_effects(request) -> None:
    now = timezone.now()
    if request.kind == TeardownKind.RELEASE and request.retire_hold:
        for hold in ReleaseHold.objects.select_for_update().filter(instance=request.instance, retired_at__isnull=True):
            hold.retired_at, hold.retired_by, hold.retired_by_request = now, request.approver, request
            hold.retired_reason = f"retired by L3-approved release #{request.pk}: {request.decision_comment}"
            hold.save()
            audit("hold_retired", hold.retired_reason, request.approver, request)
    if request.kind == TeardownKind.DELETE_EVIDENCE:
        record = checks.latest_verified(request.run)
        if request.location == EvidenceLocation.NODE:
            type(request.run).objects.filter(pk=request.run_id).update(export_deleted_at=now)
        elif request.location == EvidenceLocation.CUSTODY:
            type(record).objects.filter(pk=record.pk).update(copy_deleted_at=now)
        else:
            type(record).objects.filter(pk=record.pk).update(mirror_deleted_at=now)


def do_fail_execution(request_pk, error: str) -> TeardownRequest:
    with transaction.atomic(durable=True):
        request = TeardownRequest.objects.select_for_update().get(pk=request_pk)
        request.status, request.failure, request.finished_at = TeardownStatus.FAILED, error, timezone.now()
        request.save()
        audit("failed", f"Request #{request.pk} failed: {error}", None, request)
    return request


def do_retry_execution(request_pk, actor) -> TeardownRequest:
    """A failed execution of an approved request may run again (same idempotency key)."""
    with transaction.atomic(durable=True):
        request = TeardownRequest.objects.select_for_update().get(pk=request_pk)
        if request.status != TeardownStatus.FAILED or request.decided_at is None:
            raise TeardownRefused("Only a failed execution of an approved request can be retried.")
        request.status = TeardownStatus.APPROVED
        request.save(update_fields=["status"])
        audit("retried", f"Retry of request #{request.pk}", actor, request)
        _enqueue_execution(request.pk)
    return request


def do_place_hold(instance_pk, actor, reason) -> ReleaseHold:
    if not reason.strip():
        raise TeardownRefused("Say why this box must never be released.")
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update().get(pk=instance_pk)
        hold = ReleaseHold.objects.create(instance=instance, created_by=actor, reason=reason.strip())
        audit("hold_placed", f"“Never release” hold on {instance.name}: {hold.reason}", actor, instance=instance)
    return hold


def do_expire_requests() -> int:
    with transaction.atomic(durable=True):
        due = list(TeardownRequest.objects.select_for_update().filter(status=TeardownStatus.PENDING,
                                                                     expires_at__lte=timezone.now()))  # fmt: skip
        for request in due:
            _expire_if_due(request)
    return len(due)
