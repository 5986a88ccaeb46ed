"""Platform profiles: loaded from platforms/profiles/*.yaml and validated once at start-up."""

from dataclasses import dataclass
from pathlib import Path

import yaml

from platforms.schema import PROFILE_SCHEMA, ProfileError, validate

VERBS = ("stop", "release", "destroy")


@dataclass(frozen=True)
class Profile:
    data: dict
    source: str

    @property
    def key(self) -> str:
        return self.data["identity"]["key"]

    @property
    def name(self) -> str:
        return self.data["identity"]["name"]

    @property
    def box_name(self) -> str:
        """ "RunPod box", and "Generic SSH box" (never "Generic SSH box box")."""
        return self.name if self.name.lower().endswith(" box") else f"{self.name} box"

    @property
    def kind(self) -> str:
        return self.data["identity"]["kind"]

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def runs_jobs(self) -> bool:
        """A cluster's login node: a run is a scheduler's job (sbatch), not a session on the box."""
        return self.data["daemon"]["detach"] == "sbatch"

    @property
    def data_root(self) -> str:
        return self.data["storage"]["data_root"]

    @property
    def durable_root(self) -> str | None:
        return self.data["storage"]["durable_root"]

    @property
    def default_user(self) -> str | None:
        return self.data["network"]["ssh_user"]

    @property
    def hooks(self) -> dict:
        return self.data["hooks"]

    @property
    def tiers(self) -> list[dict]:
        return self.data["storage"]["tiers"]

    @property
    def danger_clocks(self) -> list[dict]:
        return self.data["surface"]["danger_clocks"]

    @property
    def conveniences(self) -> list[str]:
        return self.data["surface"]["conveniences"]

    def tiers_lost_on(self, verb: str) -> list[dict]:
        """Tiers that a verb wipes (survives is false); None ("no such verb") is not a loss."""
        return [tier for tier in self.tiers if tier["survives"][verb] is False]

    @property
    def tiers_lost_on_stop(self) -> list[dict]:
        return self.tiers_lost_on("stop")

    @property
    def stopped_released_after_hours(self) -> int | None:
        return self.data["billing"]["stopped_released_after_hours"]

    @property
    def stopped_bills(self) -> bool:
        return self.data["billing"]["stopped_bills"]

    def tier_named(self, name: str) -> dict | None:
        return next((tier for tier in self.tiers if tier["name"] == name), None)

    def tier_of(self, path: str, declared: str = "") -> dict:
        """The tier a path sits on: the declared one, else the longest tier path that contains it.

        Tiers sharing that path (RunPod's volume disk and network volume are both /workspace)
        resolve to the one that survives least, and a path on no known tier to UNKNOWN_TIER:
        not knowing where evidence lives must never make it look safer than it is.
        """
        if declared and self.tier_named(declared):
            return self.tier_named(declared)
        matches = [tier for tier in self.tiers if contains(tier["path"], path)]
        if not matches:
            return UNKNOWN_TIER
        longest = max(len(tier["path"].rstrip("/")) for tier in matches)
        candidates = [tier for tier in matches if len(tier["path"].rstrip("/")) == longest]
        return min(candidates, key=lambda tier: sum(tier["survives"][verb] is not False for verb in VERBS))

    def measured_tier(self, path: str, mounts, declared: str = "") -> dict:
        """The tier a data root is on, as the box measured it (a preflight's `mounts`: the data root's
        mount, and the declared tier's). A tier that is a disk of its own (`mount`) counts only where it
        was measured so: the data root on the tier's mount, or, declared, on the same disk as the
        declared tier's path, itself mounted there. Otherwise (a plain directory of the system disk
        where the tier should be mounted, nothing measured) NOT_ON_ITS_MOUNT: lost by every consequence.
        A tier that is no mount of its own is what its path says."""
        tier = self.tier_of(path, declared)
        return tier if tier.get("mount") is not True else on_its_mount(tier, mounts, bool(declared))

    def loses(self, tier: dict, consequence: str) -> bool:
        """Does a shutdown or release lose this tier, now or by a clock that the stop starts?"""
        survives = tier["survives"]
        released = survives["release"] is False or (survives["release"] is None and survives["destroy"] is False)
        if consequence == "release":
            return released
        return survives["stop"] is False or (self.stopped_released_after_hours is not None and released)

    def survival_rows(self) -> list[dict]:
        return [{"tier": tier, "cells": [tier["survives"][verb] for verb in VERBS]} for tier in self.tiers]


UNKNOWN_TIER = {
    "name": "a disk of unknown tier",
    "path": "",
    "survives": dict.fromkeys(VERBS, False),
    "note": "Not on any tier the profile lists: assumed lost by every consequence.",
}


NOT_ON_ITS_MOUNT = {
    "name": "the system disk",
    "path": "",
    "survives": dict.fromkeys(VERBS, False),
    "note": "Where the {tier} should be mounted, the box measured a plain directory of another disk: assumed lost "
    "by every consequence.",
}


def on_its_mount(tier: dict, mounts, declared: bool) -> dict:
    """tier where the measured mounts put the data root on it, else NOT_ON_ITS_MOUNT (pure)."""
    mounts = mounts if isinstance(mounts, dict) else {}
    data, own = mounts.get("data"), mounts.get("declared_tier") if declared else mounts.get("data")
    measured = isinstance(data, dict) and isinstance(own, dict)
    if measured and data.get("device") == own.get("device") and mount_problem(tier, own) is None:
        return tier
    # Which tier it might still be on, unmeasured: deleting that tier's resource counts as destroying it too.
    return {**NOT_ON_ITS_MOUNT, "note": NOT_ON_ITS_MOUNT["note"].format(tier=tier["name"]), "path_tier": tier["name"]}


def mount_problem(tier: dict, mount: dict) -> str | None:
    """Why a measured mount is not on tier: the tier's disk is mounted at or below its path."""
    point, path = str(mount.get("mountpoint") or ""), str(tier.get("path") or "")
    if not point or not path:
        return f"its disk cannot be matched to the {tier.get('name', 'unknown')} tier"
    if not contains(path, point):
        return (
            f"it is on {mount.get('fstype')} mounted at {point} (device {mount.get('device')}), "
            f"not on the {tier['name']} tier at {path}"
        )
    return None


def contains(root: str, path: str) -> bool:
    """path is root or below it (a root of "/" holds everything)."""
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/") or root == ""


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read(path: Path) -> dict:
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(path.name, "(file)", f"is not valid YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ProfileError(path.name, "(top)", "must be a mapping")
    return document


def _profiles_in(path: Path) -> list[Profile]:
    document = _read(path)
    if "family" not in document:
        validate(document, PROFILE_SCHEMA, path.name)
        return [Profile(document, path.name)]
    rows = document.get("platforms")
    if not isinstance(rows, dict) or not rows:
        raise ProfileError(path.name, "platforms", "a family file needs a mapping of platform rows")
    profiles = []
    for row_key, row in rows.items():
        if not isinstance(row, dict):
            raise ProfileError(path.name, f"platforms.{row_key}", "must be a mapping")
        merged = _merge(document.get("defaults") or {}, row)
        validate(merged, PROFILE_SCHEMA, f"{path.name} (platforms.{row_key})")
        profiles.append(Profile(merged, path.name))
    return profiles


def load_catalog(directory: Path) -> dict[str, Profile]:
    """Every profile under directory, keyed by identity.key; raises ProfileError on the first fault."""
    catalog: dict[str, Profile] = {}
    files = sorted(Path(directory).glob("*.yaml"))
    if not files:
        raise ProfileError(str(directory), "(directory)", "holds no *.yaml profile")
    for path in files:
        for profile in _profiles_in(path):
            if profile.key in catalog:
                raise ProfileError(path.name, "identity.key", f"{profile.key!r} is already defined")
            catalog[profile.key] = profile
    return catalog


_catalog: dict[str, Profile] = {}


def install(catalog: dict[str, Profile]) -> None:
    _catalog.clear()
    _catalog.update(catalog)


def all_profiles() -> list[Profile]:
    return sorted(_catalog.values(), key=lambda profile: profile.name.lower())


def get_profile(key: str) -> Profile:
    return _catalog[key]


def local_keys() -> list[str]:
    """The platforms whose box is the control host itself."""
    return [profile.key for profile in all_profiles() if profile.is_local]


def choices() -> list[tuple[str, str]]:
    return [(profile.key, profile.name) for profile in all_profiles()]
