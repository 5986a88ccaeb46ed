"""Consequence levels come from the profile's survival matrix, not from a button's label (DOMAIN §5)."""

from dataclasses import dataclass

from custody.models import TeardownKind


@dataclass(frozen=True)
class Consequence:
    level: str
    needs_second_person: bool
    stops_billing: str
    data_lost: list[str]


def consequence_of(kind: str, profile, project) -> Consequence:
    billing = profile.data["billing"]
    if kind == TeardownKind.SHUTDOWN:
        lost = [f"{tier['name']} ({tier['path']})" for tier in profile.tiers_lost_on("stop")]
        if lost:
            return Consequence("L3", True, billing["stop_effect"], lost)
        return Consequence("L2", project.shutdown_needs_approval, billing["stop_effect"], [])
    if kind == TeardownKind.RELEASE:
        lost = [f"{tier['name']} ({tier['path']})" for tier in profile.tiers_lost_on("release")]
        return Consequence("L3", True, f"{billing['meter_stop_verb']} and every charge of this box", lost)
    return Consequence("L3", True, "nothing (storage of this copy only)", ["the chosen copy of the export"])
