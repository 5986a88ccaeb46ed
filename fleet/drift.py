"""Reconciliation with the providers: what each API platform lists under a team's key,
against what the dashboard believes. Drift is a box the provider bills that no instance here names
(an orphan), a box released here that the provider still lists (a release that answered 200 and kept
billing), or a box stopped here that runs there. Beat runs it; new drift is notified once.
"""

import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.actions import do_observe_endpoint, do_observe_provider_state, do_observe_timer
from fleet.alarms import do_observe_balance
from fleet.costs import burn_rate
from fleet.models import (
    Credential,
    DriftKind,
    Instance,
    InstanceState,
    ProviderDrift,
    ProviderKeyUse,
    Resource,
)
from fleet.provider_calls import (
    account_balance,
    list_boxes,
    list_other_resources,
    provider_state,
)
from notifications.actions import do_notify
from notifications.models import Event
from platforms.resources import FACTS
from providers import APIS
from providers.http import ProviderError
from providers.interface import GONE, RUNNING, STOPPED

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Seen:
    provider_id: str
    kind: str
    instance: Instance | None
    detail: str
    rate: Decimal = Decimal(0)  # an orphan resource's $/h


def compare_resources(
    profile_key: str, listed: dict[str, dict[str, tuple[str, float | None]]], known_ids
) -> list[Seen]:
    """Pure: the volumes and filesystems the provider bills under the key that no resource here names."""
    drift = []
    for kind, items in sorted(listed.items()):
        label = FACTS[kind].label
        for provider_id, (name, rate) in sorted(items.items()):
            if provider_id not in known_ids:
                priced = f"at ${rate:.4f}/h" if rate is not None else "at a rate its answer does not tell"
                detail = (
                    f"{profile_key} bills the {label} {name} ({provider_id}) {priced};"
                    f" no resource here has that provider id ({FACTS[kind].clock})"
                )
                drift.append(Seen(provider_id, DriftKind.ORPHAN_RESOURCE, None, detail, Decimal(str(rate or 0))))
    return drift


def compare(profile_key: str, inventory: dict[str, str], instances) -> list[Seen]:
    """Pure: the drift between a provider's inventory and the instances registered under that key."""
    known = {instance.provider_id: instance for instance in instances if instance.provider_id}
    drift = []
    for provider_id, state in sorted(inventory.items()):
        if state == GONE:
            continue
        instance = known.get(provider_id)
        if instance is None:
            detail = f"{profile_key} lists {provider_id} ({state}); no instance here has that provider id"
            drift.append(Seen(provider_id, DriftKind.ORPHAN, None, detail))
        elif instance.state == InstanceState.RELEASED:
            detail = f"{instance.name} is released here; {profile_key} still lists it ({state})"
            drift.append(Seen(provider_id, DriftKind.STILL_BILLING, instance, detail))
        elif instance.state == InstanceState.STOPPED and state == RUNNING:
            detail = f"{instance.name} is stopped here; {profile_key} says it runs (billing at the running rate)"
            drift.append(Seen(provider_id, DriftKind.RUNNING_NOT_STOPPED, instance, detail))
    return drift


def keys_to_reconcile() -> list[tuple[str, int]]:
    """(platform, credential) pairs some instance uses: the keys the team bills under."""
    pairs = Instance.objects.filter(profile_key__in=APIS, api_credential__isnull=False)
    used = ProviderKeyUse.objects.filter(profile_key__in=APIS).values_list("profile_key", "credential_id")
    return sorted(set(pairs.values_list("profile_key", "api_credential_id")) | set(used))


def do_reconcile_provider(profile_key: str, credential_id: int) -> list[int]:
    """Ask the provider (outside any transaction), then record: the ids of drift seen for the first time."""
    credential = Credential.objects.get(pk=credential_id)
    listing = list_boxes(profile_key, credential)
    instances = list(Instance.objects.filter(profile_key=profile_key, api_credential=credential))
    seen = compare(profile_key, listing.inventory, instances)
    known = set(Resource.objects.filter(instance__profile_key=profile_key).values_list("provider_id", flat=True))
    try:
        seen += compare_resources(profile_key, list_other_resources(profile_key, credential), known)
        resources_read = True
    except ProviderError as exc:  # the boxes are still reconciled; the resources' open drift stays open
        log.warning("the %s resources (credential %s) could not be listed: %s", profile_key, credential_id, exc)
        resources_read = False
    new = _record_drift(profile_key, credential, seen, resources_read)
    for instance in instances:  # observed state: how the provider bills it now (after drift was recorded)
        _observe_listed(instance, listing, profile_key)
    _observe_balance(profile_key, credential, listing.burn, instances)
    return new


def _record_drift(profile_key: str, credential, seen: list, resources_read: bool) -> list[int]:
    """Open drift seen again is refreshed, new drift recorded and told, drift no longer seen resolved."""
    granted = list(credential.projects.all()[:2])
    owner = granted[0] if len(granted) == 1 else None  # several projects share the key: no one's spend
    now, new = timezone.now(), []
    with transaction.atomic(durable=True):
        open_rows = ProviderDrift.objects.select_for_update().filter(
            profile_key=profile_key, credential=credential, resolved_at__isnull=True
        )
        by_key = {(row.provider_id, row.kind): row for row in open_rows}
        for item in seen:
            row = by_key.pop((item.provider_id, item.kind), None)
            if row is not None:
                row.last_seen, row.detail, row.rate = now, item.detail, item.rate
                row.save(update_fields=["last_seen", "detail", "rate"])
                continue
            try:
                with transaction.atomic():
                    row = ProviderDrift.objects.create(
                        profile_key=profile_key,
                        provider_id=item.provider_id,
                        credential=credential,
                        instance=item.instance,
                        kind=item.kind,
                        detail=item.detail,
                        last_seen=now,
                        rate=item.rate,
                        project=owner if item.kind == DriftKind.ORPHAN_RESOURCE else None,
                    )
            except IntegrityError:
                continue  # a concurrent reconciliation recorded it first
            new.append(row.pk)
            notify_drift(row)
        for row in by_key.values():  # no longer seen: resolved
            if row.kind == DriftKind.ORPHAN_RESOURCE and not resources_read:
                continue  # not listed this time is not "gone"
            row.resolved_at = now
            row.save(update_fields=["resolved_at"])
    return new


def _observe_listed(instance, listing, profile_key: str) -> None:
    """What the provider's listing says of one box: its billing state, its SSH endpoint, its timer."""
    said = listing.inventory.get(instance.provider_id) if instance.provider_id else None
    if said is None and instance.provider_id and instance.state != InstanceState.RELEASED:
        # Not listed: gone only if its own status call says so too (a short page is not a termination).
        said = GONE if provider_state(instance) == GONE else None
    if said in (RUNNING, STOPPED, GONE):
        do_observe_provider_state(instance.pk, said, profile_key)
    if instance.provider_id in listing.endpoints:  # where it answers SSH now (a reset moves RunPod's port)
        do_observe_endpoint(instance.pk, *listing.endpoints[instance.provider_id], profile_key)
    if instance.provider_id in listing.ends:  # when the provider stops it (vast.ai's rental end): read, not typed
        do_observe_timer(instance.pk, listing.ends[instance.provider_id], profile_key)


def _observe_balance(profile_key: str, credential, burn: float | None, instances) -> None:
    """The account's balance under the key, against the burn the provider prices (else our boxes' rates):
    hours to zero, alarmed at each threshold (fleet.alarms.do_observe_balance)."""
    try:
        balance = account_balance(profile_key, credential)
    except ProviderError as exc:
        log.warning("the %s balance (credential %s) could not be read: %s", profile_key, credential.pk, exc)
        return
    if balance is None:
        return  # the provider's API has no balance call
    if burn is None:
        burn = float(sum(burn_rate(instance) for instance in instances if instance.state != InstanceState.RELEASED))
    do_observe_balance(profile_key, credential.pk, balance, burn)


def do_reconcile_providers() -> dict:
    """Beat: every key; a provider that cannot be asked is logged and asked again next time."""
    result = {"new": [], "failed": []}
    for profile_key, credential_id in keys_to_reconcile():
        try:
            result["new"] += do_reconcile_provider(profile_key, credential_id)
        except ProviderError as exc:
            log.warning("reconciliation with %s (credential %s) failed: %s", profile_key, credential_id, exc)
            result["failed"].append(profile_key)
    return result


def notify_drift(drift: ProviderDrift) -> None:
    """In the reconciliation's transaction, told once: a box's drift to the box's project only (its
    text names the box); a resource no project owns to every project granted the key."""
    data = {"kind": drift.kind, "platform": drift.profile_key, "provider_id": drift.provider_id}
    projects = [drift.instance.project] if drift.instance else drift.credential.projects.all()
    for project in projects:
        do_notify(project.pk, Event.DRIFT, f"provider drift: {drift.get_kind_display()}", drift.detail, data)
