"""What every DELIVER state change shares: the refusals, the one move rule (TEARDOWN_TRANSITIONS), the
lock order (the box, then the request), saving a request for its approver, expiry, and the enqueues that
follow a commit."""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core.enqueue import after_commit
from core.states import IllegalTransition
from delivery.audit import audit
from delivery.models import (
    TEARDOWN_TRANSITIONS,
    TeardownRequest,
    TeardownStatus,
)
from fleet.models import Instance


class TeardownRefused(ValidationError):
    """A request, approval or execution that the rules forbid; the message says why."""


class RefusedMove(TeardownRefused, IllegalTransition):
    """A move that TEARDOWN_TRANSITIONS does not allow: refused like any teardown rule."""


class EvidenceBusy(Exception):
    """Another consequence on the same box is executing: this one waits its turn."""


class BoxUnconfirmed(EvidenceBusy):
    """The execution's proofs could not measure the box (it did not answer in time): nothing is known to
    have changed, so the request waits and is tried again, never failed as "custody changed"."""


def move(request, to: str) -> None:
    if not TEARDOWN_TRANSITIONS.allows(request.status, to):
        current = TeardownStatus(request.status).label
        raise RefusedMove(f"Request #{request.pk} cannot go from {current} to {TeardownStatus(to).label}.")
    request.status = to


def locked(request_pk) -> TeardownRequest:
    """The instance row first, then the request: one order in every teardown transaction. A
    transaction that locked only the request and then wrote an audit row (a foreign key to the
    instance takes a share lock on it) deadlocked against one holding the instance lock. The lock
    is FOR NO KEY UPDATE: it serialises consequences on the box without blocking the rows that
    merely refer to it (audit entries, GPU locks, probes)."""
    instance_id = TeardownRequest.objects.values_list("instance_id", flat=True).get(pk=request_pk)
    Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
    return TeardownRequest.objects.select_for_update(of=("self",)).select_related("instance", "run").get(pk=request_pk)


# Audit actions the project is told of: each in the transaction that audits it.
def enqueue_execution(request_id: int) -> None:

    after_commit("delivery.tasks.execute_teardown", request_id)


def enqueue_proofs(request_id: int) -> None:

    after_commit("delivery.tasks.prove_teardown", request_id)


def refuse(request, why: str) -> None:
    move(request, TeardownStatus.REFUSED)
    request.failure = why
    request.save(update_fields=["status", "failure"])
    audit("refused", f"{request.get_kind_display()} refused: {why}", None, request)


def failing(snapshot: dict) -> list[str]:
    return [item["label"] for item in snapshot["items"] if not item["ok"]]


def save_request(request) -> None:
    """Under the box's lock: the row, its audit entry, then notify or execute. A filed request comes here
    from CHECKING once its proofs are in; one asked with its proofs in hand, unsaved."""
    request.expires_at = timezone.now() + timedelta(hours=settings.TEARDOWN_APPROVAL_HOURS)
    if request.status == TeardownStatus.CHECKING:
        move(request, TeardownStatus.PENDING)
    if not request.needs_second_person:
        move(request, TeardownStatus.APPROVED)
        request.decided_at = timezone.now()
        request.decision_comment = f"{request.level}: no second person required"
    request.save()
    message = f"{request.get_kind_display()} of {request.target} requested ({request.level})"
    audit("requested", message, request.requester, request, reason=request.reason)
    if request.status == TeardownStatus.APPROVED:
        enqueue_execution(request.pk)


def expire_if_due(request) -> bool:
    if request.status == TeardownStatus.PENDING and request.expires_at <= timezone.now():
        move(request, TeardownStatus.EXPIRED)
        request.save(update_fields=["status"])
        audit("expired", f"Request #{request.pk} expired unapproved", None, request)
        return True
    return False


def expire_one(request_pk) -> None:
    """Its own transaction: the expiry stays recorded even though the decision is then refused."""
    with transaction.atomic(durable=True):
        expire_if_due(locked(request_pk))
