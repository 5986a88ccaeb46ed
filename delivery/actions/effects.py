"""What a done consequence changes beyond its request: holds retired, and the evidence it wiped marked gone
(delivery.evidence.wiped_by, the one rule)."""

from django.utils import timezone

from custody.copies import copies_of, latest_verified
from custody.models import EvidenceLocation
from delivery.audit import audit
from delivery.evidence import Consequence, touched, wiped_by
from delivery.models import (
    ReleaseHold,
    TeardownKind,
)
from runs.models import RunState


def apply_effects(request) -> None:
    now = timezone.now()
    if request.kind == TeardownKind.RELEASE and request.retire_hold:
        for hold in ReleaseHold.objects.select_for_update().filter(instance=request.instance, retired_at__isnull=True):
            hold.retired_at, hold.retired_by, hold.retired_by_request = now, request.approver, request
            hold.retired_reason = f"retired by L3-approved release #{request.pk}: {request.decision_comment}"
            hold.save()
            audit("hold_retired", hold.retired_reason, request.approver, request)
    if request.kind == TeardownKind.DELETE_EVIDENCE:
        _mark_gone(request.run, [request.location], now)
        return
    if request.kind == TeardownKind.DELETE_RESOURCE:
        type(request.resource).objects.filter(pk=request.resource_id).update(deleted_at=now)
        planned = Consequence.of(request)
        for run in request.instance.runs.filter(state=RunState.EXPORTED).select_related("project", "instance"):
            _mark_gone(run, [copy.location for copy in touched(run, planned)], now)
        return
    # What the consequence wiped is gone for good (delivery.evidence.wiped_by, the one rule).
    happened, profile = Consequence.of(request), request.instance.profile
    for run in request.instance.runs.filter(state=RunState.EXPORTED).select_related("project", "instance"):
        _mark_gone(run, [c.location for c in copies_of(run) if wiped_by(happened, c, profile)], now)


def _mark_gone(run, locations, now) -> None:
    record = latest_verified(run)
    if EvidenceLocation.NODE in locations:
        type(run).objects.filter(pk=run.pk).update(export_deleted_at=now)
    if record and EvidenceLocation.CUSTODY in locations:
        type(record).objects.filter(pk=record.pk).update(copy_deleted_at=now)
    if record and EvidenceLocation.MIRROR in locations:
        type(record).objects.filter(pk=record.pk).update(mirror_deleted_at=now)
