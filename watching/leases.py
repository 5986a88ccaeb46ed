"""Watch leases: claimed with one conditional UPDATE (or a unique INSERT), renewed by the owner only."""

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from runs.models import WatchLease


def claim(instance_id: int, owner: str, seconds: float) -> bool:
    """Take the instance's lease if it is free or expired; False when another watcher holds it."""
    now = timezone.now()
    expires = now + timedelta(seconds=seconds)
    taken = (
        WatchLease.objects.filter(instance_id=instance_id)
        .filter(Q(expires_at__lt=now) | Q(owner=owner))
        .update(owner=owner, expires_at=expires, started_at=now, ticks=0, connects=0)
    )
    if taken:
        return True
    try:
        with transaction.atomic():
            WatchLease.objects.create(instance_id=instance_id, owner=owner, expires_at=expires, started_at=now)
    except IntegrityError:
        return False  # someone holds a live lease
    return True


def renew(instance_id: int, owner: str, seconds: float, connected: bool = False) -> bool:
    now = timezone.now()
    changes = {"expires_at": now + timedelta(seconds=seconds), "ticks": F("ticks") + 1}
    if connected:
        changes["connects"] = F("connects") + 1
    return bool(WatchLease.objects.filter(instance_id=instance_id, owner=owner, expires_at__gte=now).update(**changes))


def still_held(instance_id: int, owner: str, seconds: float) -> bool:
    """Extend the lease only if this owner still holds it unexpired (no tick counted): before
    applying a probe's answer, a watcher that waited on a slow box proves it was not superseded."""
    now = timezone.now()
    extended = WatchLease.objects.filter(instance_id=instance_id, owner=owner, expires_at__gte=now)
    return bool(extended.update(expires_at=now + timedelta(seconds=seconds)))


def release(instance_id: int, owner: str) -> None:
    WatchLease.objects.filter(instance_id=instance_id, owner=owner).delete()


def set_unreachable(instance_id: int, owner: str, since) -> None:
    WatchLease.objects.filter(instance_id=instance_id, owner=owner).update(unreachable_since=since)
