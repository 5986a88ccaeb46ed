"""Every rent state that waits has a deadline: unanswered requests expire, a create task that was lost is
re-driven a bounded number of times and then failed with a next step, a boot is polled again."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.audit import record
from core.models import AuditAction
from rentals.actions import do_fail_rental, move
from rentals.models import Rental, RentalState


def do_expire_rentals(now=None) -> int:
    now = now or timezone.now()
    expired = 0
    with transaction.atomic(durable=True):
        for rental in Rental.objects.select_for_update().filter(state=RentalState.REQUESTED, expires_at__lte=now):
            move(rental, RentalState.EXPIRED)
            rental.save()
            message = f"rent #{rental.pk} {rental.name} expired unanswered: ask again"
            record(AuditAction.RENT_FAILED, message, project_id=rental.project_id, rental=rental.pk)
            expired += 1
    return expired


def do_redrive_stale(now=None) -> dict[str, list[int]]:
    """Approved or creating past RENT_CREATE_SECONDS with no progress: enqueued again (the task claims and
    looks for a box a lost create made before sending anything), up to RENT_MAX_REDRIVES; then failed.
    Booting rents are polled (a lost poll chain ends here)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.RENT_CREATE_SECONDS)
    redrive, fail = [], []
    with transaction.atomic(durable=True):
        waiting = Rental.objects.select_for_update().filter(
            state__in=(RentalState.APPROVED, RentalState.CREATING), changed_at__lte=stale
        )
        for rental in waiting:
            if rental.redrives >= settings.RENT_MAX_REDRIVES:
                fail.append(rental.pk)
                continue
            rental.redrives += 1
            rental.changed_at = now
            rental.save(update_fields=["redrives", "changed_at"])
            redrive.append(rental.pk)
    reason = (
        "the create task was lost {n} times. A box may exist at a candidate: the provider's list under the key "
        "shows it as drift; release it there or register it by hand, then ask again."
    )
    for pk in fail:
        do_fail_rental(pk, reason.format(n=settings.RENT_MAX_REDRIVES + 1))
    booting = list(Rental.objects.filter(state=RentalState.BOOTING).values_list("pk", flat=True))
    return {"redrive": redrive, "failed": fail, "poll": booting, "prove": _stale_proofs(now)}


def _stale_proofs(now) -> list[int]:
    """A proof whose worker was lost is taken again after RENT_PROVE_SECONDS (its claim lapses); one
    unanswered for twice that is failed: nothing was created, and the reason says to ask again."""
    proving = Rental.objects.filter(state=RentalState.PROVING)
    lost = now - timedelta(seconds=2 * settings.RENT_PROVE_SECONDS)
    for pk in proving.filter(changed_at__lte=lost).values_list("pk", flat=True):
        reason = (
            f"its run's proof gave no answer within {2 * settings.RENT_PROVE_SECONDS} s (the proving box or its "
            "worker was lost). Nothing was created: ask again."
        )
        do_fail_rental(pk, reason)
    lapsed = now - timedelta(seconds=settings.RENT_PROVE_SECONDS)
    return list(proving.filter(changed_at__gt=lost, changed_at__lte=lapsed).values_list("pk", flat=True))
