"""Consequence levels come from the profile's survival matrix, not from a button's label (DOMAIN §5).

A shutdown is L3 when the stop loses a tier, or when it starts a release clock that destroys a
tier holding a sealed export or an unclosed active/ directory of this box.
"""

from dataclasses import dataclass

from delivery.models import TeardownKind
from runs.models import UNCLOSED_STATES


@dataclass(frozen=True)
class Consequence:
    level: str
    needs_second_person: bool
    stops_billing: str
    data_lost: list[str]
    clock: str = ""
    not_offered: str = ""  # why this platform has no such verb (the panel shows it instead of a button)


def _names(tiers) -> list[str]:
    return [f"{tier['name']} ({tier['path']})" for tier in tiers]


def consequence_of(kind: str, instance, resource=None) -> Consequence:
    profile, project = instance.profile, instance.project
    billing = profile.data["billing"]
    if kind == TeardownKind.DELETE_RESOURCE:
        return _resource_consequence(resource)
    if kind == TeardownKind.SHUTDOWN and profile.data["teardown"]["shutdown"]["via"] == "none":
        why = f"{profile.name} has no stop that keeps the box: its meter stops at {billing['meter_stop_verb']}."
        return Consequence("L3", True, "nothing (not offered)", [], "", why)
    powered_off_over_ssh = profile.data["teardown"]["shutdown"]["via"] == "ssh"
    if kind == TeardownKind.SHUTDOWN and powered_off_over_ssh and not instance.shutdown_command:
        why = "No shutdown command is set: on this box it powers off a real machine; set it on Edit first."
        return Consequence("L3", True, "nothing (not offered)", [], "", why)
    if kind == TeardownKind.SHUTDOWN:
        lost = _names(profile.tiers_lost_on("stop")) + _unknown_disks(instance, "shutdown")
        clock = ""
        if profile.stopped_released_after_hours is not None:
            clock = f"stopping starts a {profile.stopped_released_after_hours} h clock after which the box is released"
        if lost or (clock and _holds_evidence(instance)):
            if clock:
                lost += [
                    f"{name} when the clock runs out"
                    for name in _names(
                        t for t in profile.tiers if profile.loses(t, "release") and t["survives"]["stop"] is not False
                    )
                ]
            return Consequence("L3", True, _stop_effect(instance), list(dict.fromkeys(lost)), clock)
        return Consequence("L2", project.shutdown_needs_approval, _stop_effect(instance), [], clock)
    if kind == TeardownKind.RELEASE and profile.data["teardown"]["release"]["via"] == "none":
        # Nothing to release (your own workstation has no meter): no step a person could take or attest.
        why = f"{profile.name} has nothing to release: {profile.data['teardown']['release']['verb']}."
        return Consequence("L3", True, "nothing (not offered)", [], "", why)
    if kind == TeardownKind.RELEASE:
        lost = _names(t for t in profile.tiers if profile.loses(t, "release")) + _unknown_disks(instance, "release")
        return Consequence("L3", True, f"{billing['meter_stop_verb']} and every charge of this box", lost)
    return Consequence("L3", True, "nothing (storage of this copy only)", ["the chosen copy of the export"])


def _unknown_disks(instance, consequence: str) -> list[str]:
    """The box's own roots on no tier of its platform: the evidence model counts them lost by every
    consequence, so the card says so too ("Data that dies: none" once sat beside a check that said
    the export on the box dies with the shutdown)."""
    roots = [("data root", instance.data_root, instance.measured_data_tier)]
    if instance.mirror_root:
        roots.append(("durable root", instance.mirror_root, instance.mirror_tier_info))
    return [
        f"the {what} {path} ({tier['name']})"
        for what, path, tier in roots
        if tier not in instance.profile.tiers and instance.profile.loses(tier, consequence)
    ]


def _holds_evidence(instance) -> bool:
    """A sealed export or an unclosed active/ on a tier this box's shutdown loses (by its clock)."""
    from delivery.evidence import Consequence as Planned
    from delivery.evidence import touched
    from delivery.facts import verified_first
    from runs.models import RunState

    unclosed = instance.runs.filter(state__in=UNCLOSED_STATES, active_closed_at__isnull=True)
    if instance.profile.loses(instance.measured_data_tier, "shutdown") and unclosed.exists():
        return True
    planned = Planned(TeardownKind.SHUTDOWN, instance.pk)
    # Their verified records come with them: one query for every export, not one per run.
    exported = verified_first(instance.runs.filter(state=RunState.EXPORTED))
    return any(touched(run, planned) for run in exported)


def resource_data_lost(resource) -> list[str]:
    """What deleting the resource destroys: the box tier it is, else its files, else nothing."""
    tier = resource.instance.profile.tier_named(resource.tier) if resource.tier else None
    if tier:
        return [f"{tier['name']} ({tier['path']}) of {resource.instance.name}"]
    return [f"every file on the {resource.facts.label} {resource.name}"] if resource.facts.holds_files else []


def _resource_consequence(resource) -> Consequence:
    """Always L3, with the custody rules of evidence deletion (DOMAIN §5)."""
    facts = resource.facts
    stops = f"the {facts.label}'s ${resource.rate}/h ({facts.clock})"
    lost = resource_data_lost(resource)
    return Consequence("L3", True, stops, lost, "", "" if resource.deleted_at is None else "already deleted")


def _stop_effect(instance) -> str:
    effect = instance.profile.data["billing"]["stop_effect"]
    if instance.profile.data["teardown"]["shutdown"]["via"] == "ssh":
        effect += f" Runs on the box: {instance.shutdown_command}"
    return effect
