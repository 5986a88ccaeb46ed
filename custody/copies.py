"""The copies of each sealed export (DOMAIN §5): on the box, in custody on the control host, and the mirror;
each with the tier it is on, how it was verified, and whether it is gone. What a consequence does to them
is DELIVER's (delivery/evidence.py: the one rule).
"""

from dataclasses import dataclass

from custody.models import CustodyRecord, CustodyStatus, EvidenceLocation
from custody.store import custody_dir
from platforms.catalog import UNKNOWN_TIER
from platforms.layout import layout_for
from runs.models import RunState

CONTROL_HOST = {"name": "control host", "path": "", "survives": {}, "note": "No box consequence touches it."}
# The order in which copies are re-hashed: the cheapest proof first.
PREFERENCE = [EvidenceLocation.CUSTODY, EvidenceLocation.MIRROR, EvidenceLocation.NODE]


@dataclass(frozen=True)
class Copy:
    run_id: int
    location: str
    path: str
    instance_id: int | None  # None: on the control host, beyond any box consequence
    tier: dict
    verified: str  # how it was verified against the sealed roster; "" = never
    gone: str = ""  # why it no longer counts; "" = present

    @property
    def label(self) -> str:
        return f"{EvidenceLocation(self.location).label} ({self.tier['name']})"


def export_tier(run) -> dict:
    """The tier the export's copy on the box is on, as the run's preflight measured its data root's mount
    (a tier that is a disk of its own counts only where the root measured on that disk)."""
    instance = run.instance
    mounts = (run.preflight_report or {}).get("mounts")
    return instance.profile.measured_tier(instance.data_root, mounts, instance.data_tier)


def latest_verified(run) -> CustodyRecord | None:
    if hasattr(run, "verified_records"):  # prefetched by delivery.facts.verified_first
        return run.verified_records[0] if run.verified_records else None
    return run.custody_records.filter(status=CustodyStatus.VERIFIED).order_by("-verified_at", "-id").first()


def copies_of(run) -> list[Copy]:
    """Every copy of the run's sealed export that was ever made, gone or not."""
    record = latest_verified(run)
    instance = run.instance
    export = layout_for(run).export
    how = f"custody #{record.pk}, {record.verified_at:%Y-%m-%d %H:%M}" if record else ""
    copies = [
        Copy(
            run.pk,
            EvidenceLocation.NODE,
            export,
            instance.pk,
            export_tier(run),
            how,
            _gone(run.export_deleted_at),
        )
    ]
    if record is None:
        return copies
    copies.append(
        Copy(
            run.pk,
            EvidenceLocation.CUSTODY,
            str(custody_dir(run)),
            None,
            CONTROL_HOST,
            how,
            _gone(record.copy_deleted_at),
        )
    )
    if record.mirror_uri:
        # Only a measured mirror is on its tier; one recorded before mounts were measured is not.
        measured = bool(record.mirror_mount)
        tier = (instance.profile.tier_named(record.mirror_tier) if measured else None) or UNKNOWN_TIER
        copies.append(
            Copy(
                run.pk,
                EvidenceLocation.MIRROR,
                record.mirror_uri,
                instance.pk,
                tier,
                how if record.mirror_verified else "",
                _gone(record.mirror_deleted_at),
            )
        )
    return copies


def _gone(deleted_at) -> str:
    return f"deleted {deleted_at:%Y-%m-%d %H:%M}" if deleted_at else ""


def present_copies(run) -> list[str]:
    """Locations that still hold a copy (verified or not): what a deletion can target."""
    return [copy.location for copy in copies_of(run) if not copy.gone]


def present_on(instance) -> list[Copy]:
    """Every present copy of a sealed export that lives on this box (what cache cleanup must spare)."""
    runs = instance.runs.filter(state=RunState.EXPORTED).select_related("project", "instance")
    return [copy for run in runs for copy in copies_of(run) if copy.instance_id == instance.pk and not copy.gone]
