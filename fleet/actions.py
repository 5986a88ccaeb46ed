"""Every state change of an instance: one function per verb, in a transaction, with a history event."""

from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from core.states import IllegalTransition
from fleet.live import instance_changed
from fleet.models import (
    INSTANCE_TRANSITIONS,
    MAY_BE_ON,
    Credential,
    Instance,
    InstanceEvent,
    InstanceProbe,
    InstanceState,
    PlatformAcknowledgement,
    Resource,
)
from platforms.resources import kinds_for
from projects.grants import grant_changes
from projects.roles import require


def _event(instance, kind, message, actor=None, **data) -> InstanceEvent:
    instance_changed(instance.pk)
    return InstanceEvent.objects.create(instance=instance, kind=kind, message=message, actor=actor, data=data)


def needs_acknowledgement(project, profile_key) -> bool:
    return not PlatformAcknowledgement.objects.filter(project=project, profile_key=profile_key).exists()


# The unit of custody is the provider's resource, not our row: a second box with a guarded pod's id
# passed every check (it had no exports) and its release terminated the real pod.
TWIN = (
    "Another live box already holds {platform} resource {provider_id}: one box per provider resource. "
    "Release or correct that box first, or ask an administrator."
)


def _twin_problem(instance: Instance) -> str | None:
    """Why instance may not hold its provider id: another live box holds it (in any project)."""
    if not instance.provider_id:
        return None
    others = Instance.objects.billing().filter(profile_key=instance.profile_key, provider_id=instance.provider_id)
    if others.exclude(pk=instance.pk).exists():
        return TWIN.format(platform=instance.profile.name, provider_id=instance.provider_id)
    return None


def _saved_alone(instance: Instance) -> None:
    """Save instance; the database's constraint refuses a twin that slipped past the check in a race."""
    problem = _twin_problem(instance)
    if problem:
        raise ValidationError(problem)
    try:
        with transaction.atomic():
            instance.save()
    except IntegrityError:
        raise ValidationError(TWIN.format(platform=instance.profile.name, provider_id=instance.provider_id)) from None


def do_create_instance(instance: Instance, acknowledged: bool, *, actor) -> Instance:
    """Save a validated, unsaved instance; the first box of a platform in a project needs acknowledgement."""
    require(actor, "projects.operate", instance.project)
    with transaction.atomic(durable=True):
        if needs_acknowledgement(instance.project, instance.profile_key):
            if not acknowledged:
                raise ValidationError("Read and acknowledge this platform's conveniences and danger clocks first.")
            # Two first boxes of a platform at once: one acknowledgement, not an IntegrityError for the other.
            PlatformAcknowledgement.objects.get_or_create(
                project=instance.project, profile_key=instance.profile_key, defaults={"user": actor}
            )
        register_instance(instance, actor=actor)
    return instance


def register_instance(instance: Instance, note: str = "", *, actor) -> Instance:
    """Inside the caller's transaction: save a validated instance, its history and audit entry (a rent
    registers the box it created in the same transaction as its own move)."""
    instance.created_by = actor
    _saved_alone(instance)
    _event(instance, InstanceEvent.Kind.CREATED, f"Registered on {instance.profile.name}{note}", actor)
    message = f"{instance.name} registered on {instance.profile.name}{note}"
    record(AuditAction.INSTANCE_CREATED, message, actor=actor, instance=instance)
    return instance


def do_change_instance_state(instance_id: int, new_state: str, reason: str = "", *, actor) -> Instance:
    """A person records the state (audited); the state it already has is a confirmation, not an error."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        if instance.state == new_state and new_state != InstanceState.RELEASED:
            message = f"Confirmed {instance.get_state_display()}" + (f": {reason}" if reason else "")
            _event(instance, InstanceEvent.Kind.NOTE, message, actor, confirmed=new_state)
        else:
            change_state_locked(instance, new_state, reason, actor=actor)
        message = f"{instance.name}: recorded {InstanceState(new_state).label}" + (f": {reason}" if reason else "")
        record(AuditAction.INSTANCE_STATE_RECORDED, message, actor=actor, instance=instance)
    return instance


def change_state_locked(instance: Instance, new_state: str, reason: str = "", *, actor) -> None:
    """The transition itself, for a caller that holds the instance row lock in its own transaction
    (a finished teardown moves its request and its box in one commit)."""
    old = InstanceState(instance.state)
    target = InstanceState(new_state)
    INSTANCE_TRANSITIONS.check(old, target)
    instance.state = target
    instance.save(update_fields=["state"])
    message = f"State {old.label} → {target.label}" + (f": {reason}" if reason else "")
    _event(instance, InstanceEvent.Kind.STATE, message, actor, old=old.value, new=target.value)


def _observe_running(instance: Instance, evidence: str) -> None:
    """Evidence that the box is on (a command ran on it): it bills at the running rate from now.

    Called with the instance row locked. Only UNKNOWN or STOPPED move; a released box never comes back,
    and silence proves nothing (an unreachable box may be a network fault), so nothing moves it down.
    """
    old = InstanceState(instance.state)
    if old not in (InstanceState.UNKNOWN, InstanceState.STOPPED):
        return
    instance.state = InstanceState.RUNNING
    instance.save(update_fields=["state"])
    message = f"State {old.label} → Running: observed ({evidence})"
    _event(instance, InstanceEvent.Kind.STATE, message, None, old=old.value, new="running", observed=evidence)


def do_observe_running(instance_id: int, evidence: str) -> Instance:
    """A run launched or a watcher's probe answered: the box is running (see _observe_running)."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        _observe_running(instance, evidence)
    return instance


def do_observe_provider_state(instance_id: int, provider_state: str, platform: str) -> Instance:
    """Beat asked the provider (the teardown adapters' status call): running or stopped there is how
    the box bills. A release is never inferred (a person or a teardown says so; drift shows the rest)."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        evidence = f"{platform} says {provider_state}"
        if provider_state == InstanceState.RUNNING:
            _observe_running(instance, evidence)
        elif provider_state == InstanceState.STOPPED and instance.state in MAY_BE_ON:
            change_state_locked(instance, InstanceState.STOPPED, f"observed ({evidence})", actor=None)
        _provider_down(instance, provider_state, evidence)
    return instance


def _provider_down(instance: Instance, provider_state: str, evidence: str) -> None:
    """Remember that the provider says the box is not running (a preempted spot box, a terminated pod):
    a run the watcher still believes running there has lost its box. A box's own probe answering proves
    nothing here (a stopped container's host may still answer); only the provider clears it."""
    if provider_state == InstanceState.RUNNING:
        if instance.provider_down:
            instance.provider_down = {}
            instance.save(update_fields=["provider_down"])
        return
    if instance.state == InstanceState.RELEASED or instance.provider_down.get("state") == provider_state:
        return
    instance.provider_down = {"state": provider_state, "since": timezone.now().isoformat(), "evidence": evidence}
    instance.save(update_fields=["provider_down"])
    _event(instance, InstanceEvent.Kind.NOTE, f"The provider says the box is not running: {evidence}", None)


def do_observe_endpoint(instance_id: int, host: str, port: int, platform: str) -> bool:
    """The provider reports the box's SSH endpoint (RunPod's port changes on every pod reset): the box
    follows it without a person editing it. The pinned host key stays: a box answering there with another
    key is refused until a person confirms it. True when the endpoint moved."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        if instance.state == InstanceState.RELEASED or (instance.host, instance.port) == (host, port):
            return False
        was = f"{instance.user}@{instance.host}:{instance.port}"
        instance.host, instance.port = host, port
        instance.save(update_fields=["host", "port"])
        message = (
            f"{platform} reports the SSH endpoint moved: {was} → {instance.address} (the pinned host key still decides)"
        )
        _event(instance, InstanceEvent.Kind.NOTE, message, None, endpoint=[host, port])
    return True


def do_observe_timer(instance_id: int, ends_at: float, platform: str) -> bool:
    """The provider says when it stops the box (vast.ai's rental end): the box's timer is that, whatever
    a person typed, so the timer alarms fire on the provider's clock. True when the timer changed."""
    stops_at = datetime.fromtimestamp(ends_at, tz=UTC).replace(microsecond=0)
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        if instance.state == InstanceState.RELEASED or instance.stops_at == stops_at:
            return False
        was = f"{instance.stops_at:%Y-%m-%d %H:%M} UTC" if instance.stops_at else "none"
        instance.stops_at = stops_at
        instance.save(update_fields=["stops_at"])
        message = f"{platform} says this box stops at {stops_at:%Y-%m-%d %H:%M} UTC (the timer was {was})"
        _event(instance, InstanceEvent.Kind.NOTE, message, None, stops_at=stops_at.isoformat())
    return True


def do_request_probe(instance_id: int, kind: str, trigger: str = InstanceProbe.Trigger.BUTTON, *, actor) -> None:

    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        if instance.state == InstanceState.RELEASED:
            raise IllegalTransition("A released instance cannot be probed.")
        label = InstanceProbe.Kind(kind).label
        _event(instance, InstanceEvent.Kind.PROBE, f"{label} requested", actor, trigger=trigger)
        after_commit("fleet.tasks.probe_instance", instance.pk, kind, trigger)


def do_record_probe(instance_id: int, outcome, trigger: str) -> InstanceProbe:
    """Store a probe; a host key seen on first contact waits for a person to confirm it."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        previous = instance.probes.first()
        probe = InstanceProbe.objects.create(
            instance=instance,
            kind=outcome.kind,
            trigger=trigger,
            reachable=outcome.reachable,
            ok=outcome.ok,
            error=outcome.error,
            raw=outcome.raw,
            parsed=outcome.parsed,
            warnings=outcome.warnings,
            duration_ms=outcome.duration_ms,
        )
        instance_changed(instance.pk)
        key = outcome.seen_host_key
        if key and (key.key_type, key.key_base64) != (instance.seen_key_type, instance.seen_key_base64):
            instance.seen_key_type, instance.seen_key_base64 = key.key_type, key.key_base64
            instance.save(update_fields=["seen_key_type", "seen_key_base64"])
            _event(instance, InstanceEvent.Kind.HOST_KEY, f"Host key seen: {key.fingerprint}; confirm it to connect")
        if probe.ok:
            _observe_running(instance, f"{probe.get_kind_display().lower()} ran a command on it")
        # Reachability is news only when it changes: "unreachable" says nothing about runs or billing.
        if previous is None or previous.reachable != probe.reachable:
            word = "reachable" if probe.reachable else f"unreachable: {probe.error}"
            _event(instance, InstanceEvent.Kind.PROBE, f"Node {word}", probe_id=probe.pk)
    return probe


def do_confirm_host_key(instance_id: int, fingerprint: str, *, actor) -> Instance:
    """Pin the key seen on first contact, but only the exact one the person was shown."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        seen = instance.seen_host_key
        if seen is None:
            raise ValidationError("No host key has been seen yet: run a connection test first.")
        if seen.fingerprint != fingerprint:
            raise ValidationError("The host key changed since this page was shown; review the new fingerprint.")
        if instance.pinned_host_key is not None:
            raise ValidationError("A host key is already pinned; a changed key needs a new instance record.")
        instance.host_key_type, instance.host_key_base64 = seen.key_type, seen.key_base64
        instance.host_key_confirmed_at = timezone.now()
        instance.host_key_confirmed_by = actor
        instance.save()
        _event(instance, InstanceEvent.Kind.HOST_KEY, f"Host key pinned: {fingerprint}", actor)
        message = f"{instance.name}: host key pinned: {fingerprint}"
        record(AuditAction.INSTANCE_KEY_PINNED, message, actor=actor, instance=instance)
    return instance


def do_save_credential(credential: Credential, projects, *, actor) -> Credential:
    """Register or change a credential and its grants, with an append-only event saying what changed.

    The event names the projects granted and revoked and whether the location changed, never the
    location's value on a change (a path or variable name is for administrators' eyes only).
    """
    with transaction.atomic(durable=True):
        before = None
        if credential.pk:
            before = Credential.objects.select_for_update().get(pk=credential.pk)
        old_projects = set(before.projects.values_list("slug", flat=True)) if before else set()
        credential.created_by = before.created_by if before else actor
        credential.save()
        credential.projects.set(projects)
        new_projects = {project.slug for project in projects}
        granted, revoked, parts = grant_changes(old_projects, new_projects, registered=before is None)
        moved = before is not None and before.reference != credential.reference
        parts += ["location changed"] if moved else []
        message = f"{credential.name}: {'; '.join(parts)}"
        data = {"granted": granted, "revoked": revoked, "location_changed": moved}
        record(AuditAction.CREDENTIAL_CHANGED, message, actor=actor, credential=credential, **data)
    return credential


def do_register_resource(instance_id: int, kind: str, name: str, tier: str, rate, provider_id: str = "", *, actor):
    """A resource the provider bills beside the box; it counts in spend until it is deleted (an L3
    consequence of its own, requested like any teardown)."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        return register_resource(instance, kind, name, tier, rate, provider_id, actor=actor)


def register_resource(instance, kind: str, name: str, tier: str, rate, provider_id: str = "", *, actor):
    """The registration itself, in the caller's transaction with the box's row locked or just made (a
    rent registers the volume it created with the box it created, in one commit)."""
    name, provider_id, tier = name.strip(), provider_id.strip(), tier.strip()
    if kind not in dict(kinds_for(instance.profile_key)):
        offered = ", ".join(label for _, label in kinds_for(instance.profile_key)) or "none"
        raise ValidationError(f"{instance.profile.name} bills no such resource separately (it bills: {offered}).")
    if not name:
        raise ValidationError("Name the resource as the provider's console shows it.")
    twins = Resource.objects.filter(
        kind=kind, provider_id=provider_id, deleted_at__isnull=True, instance__profile_key=instance.profile_key
    )
    if provider_id and twins.exists():
        raise ValidationError(
            f"Another box already holds {instance.profile.name} {kind} {provider_id}: one box per provider resource."
        )
    if tier and not any(t["name"] == tier for t in instance.profile.tiers):
        raise ValidationError(f"{instance.profile.name} has no storage tier named “{tier}”.")
    if rate is None or rate < 0:
        raise ValidationError("The hourly rate is zero or more dollars.")
    if instance.resources.filter(name=name).exists():
        raise ValidationError(f"{instance.name} already has a resource named “{name}”.")
    resource = Resource.objects.create(
        instance=instance, kind=kind, name=name, provider_id=provider_id, tier=tier, rate=rate, created_by=actor
    )
    _event(instance, InstanceEvent.Kind.NOTE, f"Billable {resource} registered at ${rate}/h", actor)
    message = f"{instance.name}: billable {resource} registered at ${rate}/h"
    record(AuditAction.RESOURCE_REGISTERED, message, actor=actor, instance=instance)
    return resource


# Reaching the box somewhere else voids the pinned host key: the new address must be confirmed again.
REPINNED_BY = {"host", "port"}


def do_edit_instance(instance_id: int, changes: dict, *, actor) -> list[str]:
    """Apply an operator's edit (validated by InstanceEditForm); the fields that changed, audited."""
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        require(actor, "projects.operate", instance.project)
        changed = [field for field, value in changes.items() if getattr(instance, field) != value]
        if not changed:
            return []
        lines = [f"{field}: {getattr(instance, field) or '—'} → {changes[field] or '—'}" for field in changed]
        if "provider_id" in changed and instance.provider_id and instance.runs.exists():
            raise ValidationError(
                f"This box holds evidence of its runs at {instance.provider_id}: its provider id cannot change "
                "(a box with another id is another resource: register it as a new box)."
            )
        for field in changed:
            setattr(instance, field, changes[field])
        if REPINNED_BY & set(changed):
            instance.host_key_type, instance.host_key_base64, instance.host_key_confirmed_at = "", "", None
            lines.append("the pinned host key was cleared: test the connection and confirm the new one")
        _saved_alone(instance)
        _event(instance, InstanceEvent.Kind.NOTE, "Edited: " + "; ".join(lines), actor, fields=changed)
        message = f"{instance.name} edited: " + "; ".join(lines)
        record(AuditAction.INSTANCE_EDITED, message, actor=actor, fields=changed, instance=instance)
    return changed
