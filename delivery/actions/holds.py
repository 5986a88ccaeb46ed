"""“Never release” holds on a box."""

from django.db import transaction

from delivery.actions.base import TeardownRefused
from delivery.audit import audit
from delivery.models import (
    ReleaseHold,
)
from fleet.models import Instance


def do_place_hold(instance_pk, reason, *, actor) -> ReleaseHold:
    if not reason.strip():
        raise TeardownRefused("Say why this box must never be released.")
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_pk)
        hold = ReleaseHold.objects.create(instance=instance, created_by=actor, reason=reason.strip())
        audit("hold_placed", f"“Never release” hold on {instance.name}: {hold.reason}", actor, instance=instance)
    return hold
