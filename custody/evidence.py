"""Where verified copies of a run's sealed export live, and whether each is still intact."""

import hashlib
from pathlib import Path

from custody.models import CustodyRecord, CustodyStatus, EvidenceLocation


def latest_verified(run) -> CustodyRecord | None:
    return run.custody_records.filter(status=CustodyStatus.VERIFIED).order_by("-verified_at", "-id").first()


def custody_copy_problem(record: CustodyRecord) -> str | None:
    """Re-hash the custody copy against its artifacts; None when every file is intact."""
    root = Path(record.uri)
    for artifact in record.artifacts.all():
        path = root / artifact.path
        if not path.is_file():
            return f"{artifact.path} is missing from the custody copy"
        with open(path, "rb") as handle:
            if hashlib.file_digest(handle, "sha256").hexdigest() != artifact.sha256:
                return f"{artifact.path} in the custody copy no longer matches its recorded SHA-256"
    return None


def present_copies(run) -> list[str]:
    """Locations that still hold a copy (verified or not): what a deletion can target."""
    record = latest_verified(run)
    present = [] if run.export_deleted_at else [EvidenceLocation.NODE]
    if record and record.copy_deleted_at is None:
        present.append(EvidenceLocation.CUSTODY)
    if record and record.mirror_uri and record.mirror_deleted_at is None:
        present.append(EvidenceLocation.MIRROR)
    return present


def verified_copies(run, deep: bool) -> tuple[list[str], list[str]]:
    """(locations holding a verified copy, notes); deep re-hashes the custody copy."""
    record = latest_verified(run)
    if record is None:
        return [], ["no verified custody record"]
    copies, notes = [], []
    if run.export_deleted_at is None:
        copies.append(EvidenceLocation.NODE)
    if record.copy_deleted_at is None:
        problem = custody_copy_problem(record) if deep else None
        if problem:
            notes.append(problem)
        else:
            copies.append(EvidenceLocation.CUSTODY)
    if record.mirror_verified and record.mirror_deleted_at is None:
        copies.append(EvidenceLocation.MIRROR)
    return copies, notes
