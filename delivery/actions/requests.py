"""Asking for a consequence: a request filed under the box's lock (its deep proofs left to a task), or
asked with its proofs in hand."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from delivery import checks
from delivery.actions.base import TeardownRefused, enqueue_proofs, save_request
from delivery.audit import audit
from delivery.levels import consequence_of
from delivery.models import (
    OPEN_TEARDOWN,
    TeardownKind,
    TeardownRequest,
    TeardownStatus,
)
from fleet.models import Instance, InstanceState
from projects.roles import require


def do_request_teardown(instance_pk, kind, reason, run=None, location="", retire_hold=False, resource=None, *, actor):
    """Create a request after its custody check passes; an L2 that needs no second person is approved.

    Two phases: the deep proofs (the box's idle scan over SSH, re-hashing copies where they live)
    are gathered first, outside any transaction, so a slow box never holds its row lock; then, under
    the lock, everything is checked again from the database and the request is filed only if both
    the proofs and that fresh check pass."""
    if not reason.strip():
        raise TeardownRefused("Say why: the reason is part of the audit trail.")
    instance = Instance.objects.select_related("project").get(pk=instance_pk)
    request = _new_request(instance, kind, reason, run, location, retire_hold, resource, actor)
    proofs = checks.checks_for(request)  # deep: may take as long as the box does; nothing is locked
    refusal = checks.refusal(proofs)
    if not refusal:
        with transaction.atomic(durable=True):
            instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_pk)
            request = _new_request(instance, kind, reason, run, location, retire_hold, resource, actor)
            fresh = checks.checks_for(request, deep=False)  # what changed while the proofs were gathered
            refusal = checks.refusal(fresh)
            if not refusal:
                request.check_at_request = proofs
                save_request(request)
    if refusal:
        # Recorded in its own transaction: a refusal is audited, and nothing else is written.
        audit(
            "refused", f"{request.get_kind_display()} refused: {refusal}", actor, instance=request.instance, kind=kind
        )
        raise TeardownRefused(f"Refused: {refusal}")
    return request


def do_file_teardown(
    instance_pk, kind, reason, run=None, location="", retire_hold=False, resource=None, batch=None, *, actor
):
    """What a person's button or API call does: file the request and leave its deep proofs to a task.

    The rules that need no box (who may ask, duplicates, holds, verified custody, what the database
    knows) are checked here, under the box's lock, and refuse at once. What the box must prove (that
    nothing works under the root, that the copies still hash) takes as long as the box does, so a
    task gathers it outside any transaction (`prove_teardown`) and `do_settle_teardown_proofs` decides;
    until then the request is CHECKING, with a deadline the reconciler holds it to."""
    if not reason.strip():
        raise TeardownRefused("Say why: the reason is part of the audit trail.")
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_pk)
        request = _new_request(instance, kind, reason, run, location, retire_hold, resource, actor)
        request.batch = batch if kind == TeardownKind.DELETE_EVIDENCE else None
        fresh = checks.checks_for(request, deep=False)
        refusal = checks.refusal(fresh)
        if not refusal:
            request.status = TeardownStatus.CHECKING
            # Until a task starts on its proofs: a lost enqueue is re-driven within a minute, not an hour.
            request.expires_at = timezone.now() + timedelta(seconds=settings.TEARDOWN_PROOF_START_SECONDS)
            request.check_at_request = fresh  # the database's part, until the box's proofs arrive
            request.save()
            message = f"{request.get_kind_display()} of {request.target} filed ({request.level}): checking the box"
            audit("filed", message, actor, request, reason=request.reason)
            enqueue_proofs(request.pk)
    if refusal:
        audit("refused", f"{request.get_kind_display()} refused: {refusal}", actor, instance=instance, kind=kind)
        raise TeardownRefused(f"Refused: {refusal}")
    return request


def _new_request(instance, kind, reason, run, location, retire_hold, resource, actor) -> TeardownRequest:
    """The unsaved request, if the rules allow asking for it at all (refused with the reason if not)."""
    require(actor, "projects.operate", instance.project)
    if instance.state == InstanceState.RELEASED and kind != TeardownKind.DELETE_RESOURCE:
        raise TeardownRefused("This box is already released.")  # its volumes may still bill
    if (kind == TeardownKind.DELETE_RESOURCE) != (resource is not None) or (
        resource is not None and resource.instance_id != instance.pk
    ):
        raise TeardownRefused("A resource deletion names one resource of this box; no other consequence does.")
    duplicate = TeardownRequest.objects.filter(
        instance=instance, kind=kind, run=run, location=location, resource=resource, status__in=OPEN_TEARDOWN
    ).first()
    if duplicate:
        raise TeardownRefused(f"Request #{duplicate.pk} for this is already {duplicate.get_status_display()}.")
    request = TeardownRequest(
        instance=instance,
        kind=kind,
        run=run,
        location=location,
        resource=resource,
        requester=actor,
        reason=reason.strip(),
    )
    request.retire_hold = retire_hold and kind == TeardownKind.RELEASE
    consequence = consequence_of(kind, instance, resource)
    if consequence.not_offered:
        raise TeardownRefused(consequence.not_offered)
    request.level, request.needs_second_person = consequence.level, consequence.needs_second_person
    return request
