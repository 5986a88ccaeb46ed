"""A filed request's proofs: a task starts on them, their deadline, their verdict, and a lost proof task
re-driven once."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from delivery import checks
from delivery.actions.base import enqueue_proofs, locked, refuse, save_request
from delivery.audit import audit
from delivery.models import (
    TeardownRequest,
    TeardownStatus,
)


def proof_budget(instance_id) -> float:
    """How long a started proof may take on this box: its last proofs' time with a margin (the mirror's
    worst case only on a box never proved), so a lost proof task is re-driven in minutes."""
    taken = TeardownRequest.objects.filter(instance_id=instance_id, proof_seconds__isnull=False)
    recent = list(taken.order_by("-id").values_list("proof_seconds", flat=True)[:5])
    if not recent:
        return float(settings.TEARDOWN_PROOF_SECONDS)
    budget = max(recent) * settings.TEARDOWN_PROOF_MARGIN
    return min(max(budget, settings.TEARDOWN_PROOF_MIN_SECONDS), settings.TEARDOWN_PROOF_SECONDS)


def do_start_proofs(request_pk) -> bool:
    """A proof task begins: its deadline becomes what a proof on this box takes. False when the request
    no longer waits on proofs (settled by another delivery, cancelled)."""
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.CHECKING:
            return False
        now = timezone.now()
        request.proof_started_at = now
        request.expires_at = now + timedelta(seconds=proof_budget(request.instance_id))
        request.save(update_fields=["proof_started_at", "expires_at"])
    return True


def do_settle_teardown_proofs(request_pk, proofs: dict, seconds: float | None = None) -> TeardownRequest:
    """The task's proofs, judged under the lock beside a fresh look at the database: the request goes on
    to its approver (or straight to execution at L2), or is refused saying what failed. A request no
    longer checking (cancelled, settled by a redelivered task) is left as it is."""
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.CHECKING:
            return request
        if seconds is not None:
            request.proof_seconds = seconds
            request.save(update_fields=["proof_seconds"])
        fresh = checks.checks_for(request, deep=False)
        refusal = "; ".join(why for why in (checks.refusal(proofs), checks.refusal(fresh)) if why)
        if refusal:
            refuse(request, refusal)
        else:
            request.check_at_request = proofs
            save_request(request)
    return request


def do_redrive_checking(now=None) -> list[int]:
    """Requests still checking past their deadline: their proof task was lost (a worker killed, an
    enqueue that failed) or the box did not answer in time. Each is proved again once, then refused
    with the reason, so no request waits on its proofs forever."""
    now = now or timezone.now()
    redriven = []
    for pk in TeardownRequest.objects.filter(status=TeardownStatus.CHECKING, expires_at__lte=now).values_list(
        "pk", flat=True
    ):
        with transaction.atomic(durable=True):
            request = locked(pk)
            if request.status != TeardownStatus.CHECKING or request.expires_at > now:
                continue
            lost = "its proof task never started" if request.proof_started_at is None else "its proofs were not in"
            if request.redrives >= 1:
                refuse(request, f"the box's proofs were not gathered twice ({lost}): ask again")
                continue
            request.redrives += 1
            request.proof_started_at = None
            request.expires_at = now + timedelta(seconds=settings.TEARDOWN_PROOF_START_SECONDS)
            request.save(update_fields=["redrives", "expires_at", "proof_started_at"])
            audit("redriven", f"Request #{request.pk}: {lost}: gathered again", None, request)
            enqueue_proofs(request.pk)
            redriven.append(pk)
    return redriven
