"""Billable resources beyond the instance: what each kind is, on which platforms, what
deleting it destroys, and the clock it runs. Facts from ../shared/reference/profiles/*.md. Pure."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceFacts:
    label: str
    platforms: tuple[str, ...]
    holds_files: bool  # deleting it destroys files (durable files, a storage subscription)
    delete_verb: str
    clock: str


FACTS = {
    "network_volume": ResourceFacts(
        "network volume",
        ("runpod",),
        True,
        "delete the network volume (its durable files; the storage subscription ends)",
        "bills per GB every hour it exists, attached to a pod or not",
    ),
    "persistent_fs": ResourceFacts(
        "persistent filesystem",
        ("lambda",),
        True,
        "delete the filesystem (its durable files)",
        "bills until deleted, after every instance is terminated; region-locked",
    ),
    "volume": ResourceFacts(
        "volume",
        ("vastai",),
        True,
        "delete the volume (its files)",
        "bills after its instance is destroyed, even with a negative balance",
    ),
    "block_storage": ResourceFacts(
        "block storage",
        ("paperspace",),
        True,
        "delete the storage (its files; cancels the storage subscription)",
        "bills until deleted, machine destroyed or not (monthly cap)",
    ),
    "static_ip": ResourceFacts(
        "static IP",
        ("paperspace",),
        False,
        "release the static IP (the address is gone for good)",
        "bills until released (about $3 a month), machine destroyed or not",
    ),
    "shared_drive": ResourceFacts(
        "shared drive",
        ("paperspace",),
        True,
        "delete the shared drive (its files, for every machine on its network)",
        "bills its storage until deleted, machine destroyed or not",
    ),
    "snapshot": ResourceFacts(
        "snapshot",
        ("paperspace", "matpool"),
        True,
        "delete the snapshot",
        "bills after the machine is destroyed until deleted (Matpool: counts against the 5 GB netdisk)",
    ),
}


def kinds_for(profile_key: str) -> list[tuple[str, str]]:
    """(kind, label) of the resources this platform bills separately."""
    return [(kind, facts.label) for kind, facts in FACTS.items() if profile_key in facts.platforms]
