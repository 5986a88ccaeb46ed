"""A dataset roster (pure): validated entry by entry, hashed canonically, compared with files found.

A roster is untrusted input (typed by a person, sent by a client, or answered by a box): each path is
relative, inside its root, named once; each size a non-negative integer; each hash 64 hex digits.
"""

import hashlib
import json
import re
from pathlib import Path, PurePosixPath

from wrapper.staging import StageError, roster_of_dir

SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_FILES = 200_000
MAX_PATH = 1000


class RosterError(ValueError):
    """The roster is not well formed; the message names the entry."""


def check(roster) -> list[dict]:
    """The roster as it is kept: sorted by path, each entry {path, bytes, sha256}; RosterError otherwise."""
    if not isinstance(roster, list) or not roster:
        raise RosterError("A roster is a non-empty list of {path, bytes, sha256}.")
    if len(roster) > MAX_FILES:
        raise RosterError(f"A roster holds at most {MAX_FILES:,} files.")
    kept, seen = [], set()
    for index, entry in enumerate(roster):
        if not isinstance(entry, dict) or set(entry) != {"path", "bytes", "sha256"}:
            raise RosterError(f"entry {index}: exactly path, bytes and sha256.")
        path, size, digest = entry["path"], entry["bytes"], entry["sha256"]
        problem = path_problem(path) if isinstance(path, str) else "a path is text"
        if problem:
            raise RosterError(f"entry {index}: {problem}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RosterError(f"{path}: bytes is a whole number, 0 or more.")
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise RosterError(f"{path}: sha256 is 64 lowercase hex digits.")
        if path in seen:
            raise RosterError(f"{path}: named twice.")
        seen.add(path)
        kept.append({"path": path, "bytes": size, "sha256": digest})
    return sorted(kept, key=lambda item: item["path"])


def path_problem(path: str) -> str | None:
    pure = PurePosixPath(path)
    if not path or len(path) > MAX_PATH or pure.is_absolute() or path != str(pure):
        return f"{path[:80]!r}: a relative path inside the dataset, written plainly."
    if ".." in pure.parts or any(ord(char) < 32 for char in path):
        return f"{path[:80]!r}: no '..' and no control characters."
    return None


def identity(roster: list[dict]) -> str:
    """SHA-256 of the canonical JSON of the sorted roster: the dataset's identity."""
    return hashlib.sha256(json.dumps(roster, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def data_identity(rosters: list[str]) -> str:
    """A run's data identity: its one dataset's roster hash, or the hash of its datasets' hashes."""
    if len(rosters) == 1:
        return rosters[0]
    return hashlib.sha256("\n".join(sorted(rosters)).encode()).hexdigest() if rosters else ""


def first_difference(declared: list[dict], found: list[dict]) -> str | None:
    """Where a declared roster and the files found part ways, naming the first file; None when they agree."""
    found_by = {item["path"]: item for item in found}
    for entry in declared:
        there = found_by.pop(entry["path"], None)
        if there is None:
            return f"{entry['path']} is in the roster but not in the directory"
        if there["bytes"] != entry["bytes"]:
            return f"{entry['path']} is {there['bytes']} bytes, the roster says {entry['bytes']}"
        if there["sha256"] != entry["sha256"]:
            return f"{entry['path']} has SHA-256 {there['sha256']}, the roster says {entry['sha256']}"
    if found_by:
        return f"{sorted(found_by)[0]} is in the directory but not in the roster"
    return None


def of_directory(root: Path) -> list[dict]:
    """The roster of a control-host directory, by the same walk a box makes of its own (the wrapper's
    roster_of_dir: every regular file, links never followed)."""
    try:
        files = roster_of_dir(str(root))
    except StageError as exc:
        raise RosterError(f"{exc}.") from None
    if not files:
        raise RosterError(f"{root} holds no files.")
    return files
