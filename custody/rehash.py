"""Deep checks: re-hash copies of a sealed export where they live, against the verified roster.

The custody copy is hashed on the control host; the export and the mirror on the box by the node
wrapper's `rehash` subcommand, against the roster custody verified (never the box's own roster).
A copy that cannot be re-hashed does not count. The first intact copy is enough: the rest are
left alone, so a release of a box with many exports does not read every byte of every copy.
"""

import hashlib
from pathlib import Path

from custody.copies import latest_verified
from custody.models import EvidenceLocation
from fleet.node_client import NodeClient
from node.transport import TransportError
from platforms.layout import resolve_home


def custody_copy_problem(record) -> str | None:
    """Re-hash the custody copy against its artifacts; None when every file is intact."""
    root = Path(record.uri)
    try:
        for artifact in record.artifacts.all():
            path = root / artifact.path
            if not path.is_file() or path.is_symlink():
                return f"{artifact.path} is missing from the custody copy"
            with open(path, "rb") as handle:
                if hashlib.file_digest(handle, "sha256").hexdigest() != artifact.sha256:
                    return f"{artifact.path} in the custody copy no longer matches its recorded SHA-256"
    except OSError as exc:
        return f"the custody copy is unreadable: {exc}"
    return None


def rehash(run, copies) -> dict[str, str | None]:
    """{location: None when intact, else the problem}; locations left out were not needed."""
    record = latest_verified(run)
    if record is None:
        return {copy.location: "no verified roster to hash against" for copy in copies}
    problems = {}
    for copy in copies:
        if copy.location == EvidenceLocation.CUSTODY:
            problems[copy.location] = custody_copy_problem(record)
            if problems[copy.location] is None:
                return problems
    on_box = [copy for copy in copies if copy.instance_id is not None]
    if on_box:
        problems.update(_rehash_on_box(run, record, on_box))
    return problems


def _rehash_on_box(run, record, copies) -> dict[str, str | None]:
    files = [{"path": a.path, "bytes": a.bytes, "sha256": a.sha256} for a in record.artifacts.all()]
    try:
        with NodeClient(run.instance) as node:
            roots = [resolve_home(copy.path, node.home) for copy in copies]
            # The mirror is re-measured too: still on the disk it was verified on, or not on its tier.
            mounts = [record.mirror_mount if copy.location == EvidenceLocation.MIRROR else None for copy in copies]
            request = [{"root": root, "files": files, "mount": m} for root, m in zip(roots, mounts, strict=True)]
            answers = node.rehash(run, request)
    except TransportError as exc:
        return {copy.location: f"could not be re-hashed on the box: {exc}" for copy in copies}
    return {
        copy.location: None if answer.get("intact") is True else str(answer.get("problem") or "not intact")[:300]
        for copy, answer in zip(copies, answers, strict=True)
    }
