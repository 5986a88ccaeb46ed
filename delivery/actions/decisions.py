"""A second person's decision on a pending request, its withdrawal, and its expiry unapproved."""

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from delivery import checks
from delivery.actions.base import TeardownRefused, enqueue_execution, expire_one, failing, locked, move
from delivery.audit import audit
from delivery.models import (
    TeardownRequest,
    TeardownStatus,
)


def _decide(request_pk, approver, comment):
    request = locked(request_pk)
    if request.requester_id == approver.pk:
        raise PermissionDenied("The requester can never approve or reject their own request: ask a second person.")
    if not approver.has_perm("projects.approve_cost", request.instance.project):
        raise PermissionDenied("Only an approver of the box's project may approve or reject its teardown.")
    if request.status == TeardownStatus.EXPIRED:
        raise TeardownRefused(f"Request #{request.pk} has expired; request it again.")
    if request.status != TeardownStatus.PENDING:
        raise TeardownRefused(f"Request #{request.pk} is {request.get_status_display()}, not pending.")
    request.approver, request.decided_at, request.decision_comment = approver, timezone.now(), comment.strip()
    return request


def do_approve_teardown(request_pk, comment="", waive_active=False, *, actor):
    expire_one(request_pk)
    with transaction.atomic(durable=True):
        request = _decide(request_pk, actor, comment)
        request.waive_active = waive_active
        # From the database only: re-hashing custody copies (or asking the box) belongs to the
        # request and to the execution, not to an approver's page request in between. Under the
        # instance lock, so two approvals that each leave the other's copy cannot both pass.
        fresh = checks.checks_for(request, deep=False)
        if not fresh["ok"]:
            raise TeardownRefused(f"Not approvable now: {checks.refusal({**fresh, 'blocking': failing(fresh)})}")
        move(request, TeardownStatus.APPROVED)
        request.save()
        waived = " (unclosed active/ waived)" if waive_active else ""
        audit("approved", f"Request #{request.pk} approved{waived}", actor, request, comment=comment)
        enqueue_execution(request.pk)
    return request


def do_reject_teardown(request_pk, comment="", *, actor):
    expire_one(request_pk)
    with transaction.atomic(durable=True):
        request = _decide(request_pk, actor, comment)
        move(request, TeardownStatus.REJECTED)
        request.save()
        audit("rejected", f"Request #{request.pk} rejected", actor, request, comment=comment)
    return request


def do_cancel_teardown(request_pk, *, actor) -> TeardownRequest:
    """The requester withdraws a pending request (e.g. one whose check no longer passes); an approved
    request no worker took, or a failed one, is cancelled by its requester or an approver."""
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        settled = request.status in (TeardownStatus.APPROVED, TeardownStatus.FAILED)
        approver = settled and actor.has_perm("projects.approve_cost", request.instance.project)
        if request.requester_id != actor.pk and not approver:
            raise PermissionDenied("Only the requester may cancel a request; an approver rejects it.")
        move(request, TeardownStatus.CANCELLED)
        if not settled:
            request.decided_at = timezone.now()
        request.save(update_fields=["status", "decided_at"])
        who = "its requester" if request.requester_id == actor.pk else actor.get_username()
        audit("cancelled", f"Request #{request.pk} cancelled by {who}", actor, request)
    return request


def do_expire_requests() -> int:
    due = TeardownRequest.objects.filter(status=TeardownStatus.PENDING, expires_at__lte=timezone.now())
    pks = list(due.values_list("pk", flat=True))
    for pk in pks:
        expire_one(pk)  # each under its instance lock, like every other move
    return len(pks)
