"""A roster from the node, checked before any byte is trusted: confined paths, sane sizes, hex digests."""

import posixpath
import re
from dataclasses import dataclass

SHA256 = re.compile(r"[0-9a-f]{64}")


class RosterError(ValueError):
    pass


@dataclass(frozen=True)
class RosterEntry:
    path: str
    bytes: int
    sha256: str


def entry_problem(path: str) -> str | None:
    if not path or path.startswith("/") or "\x00" in path or "\n" in path:
        return f"{path!r} is not a relative path"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts) or posixpath.normpath(path) != path:
        return f"{path!r} escapes or is not normalised (path traversal)"
    if parts[0] in ("active", "cache", ".partial") or "latest.pth" in parts:
        return f"{path!r} does not belong in a sealed export"
    return None


def parse_roster(document: dict) -> list[RosterEntry]:
    """Validated entries, or RosterError naming the first bad one (the box's answer is untrusted)."""
    if not isinstance(document, dict):
        raise RosterError("the node's roster is not a JSON object")
    if "error" in document:
        raise RosterError(str(document["error"])[:300])
    files = document.get("files", [])
    if not isinstance(files, list) or not all(isinstance(item, dict) for item in files):
        raise RosterError("the node's roster lists something other than files")
    entries, seen = [], set()
    for item in files:
        path = item.get("path", "")
        if not isinstance(path, str):
            raise RosterError("a roster entry has no path")
        problem = entry_problem(path)
        if problem:
            raise RosterError(problem)
        if path in seen:
            raise RosterError(f"{path!r} is listed twice")
        size, digest = item.get("bytes"), str(item.get("sha256", ""))
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RosterError(f"{path!r} has no valid size")
        if not SHA256.fullmatch(digest):
            raise RosterError(f"{path!r} has no valid SHA-256")
        seen.add(path)
        entries.append(RosterEntry(path, size, digest))
    if not entries:
        raise RosterError("the export is empty")
    _refuse_file_and_directory(seen)
    # Fail closed: without the roster recorded at sealing, nothing proves these are the sealed bytes.
    sealed = document.get("sealed")
    if sealed is None:
        raise RosterError("no sealed roster on the node: the export cannot be proven to be what was sealed")
    if not isinstance(sealed, list) or not all(isinstance(item, dict) for item in sealed):
        raise RosterError("the sealed roster on the node is malformed")
    _compare_with_sealed(entries, sealed)
    return entries


def _refuse_file_and_directory(paths: set[str]) -> None:
    """No filesystem holds a file x and a file x/y: a roster listing both is a lie that made the pull
    crash (FileExistsError) with the record left pulling."""
    for path in sorted(paths):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in paths:
                raise RosterError(f"{parent!r} is listed both as a file and as the directory of {path!r}")


def _compare_with_sealed(entries: list[RosterEntry], sealed: list[dict]) -> None:
    """The export must still be exactly what the wrapper sealed: any change is a hash mismatch."""
    try:
        then = {item["path"]: (item["bytes"], item["sha256"]) for item in sealed}
    except (KeyError, TypeError):
        raise RosterError("the sealed roster on the node is malformed") from None
    now = {entry.path: (entry.bytes, entry.sha256) for entry in entries}
    for path in sorted(set(then) | set(now)):
        if path not in now:
            raise RosterError(f"hash mismatch: {path} was sealed but is gone")
        if path not in then:
            raise RosterError(f"hash mismatch: {path} appeared after sealing")
        if then[path] != now[path]:
            raise RosterError(
                f"hash mismatch: {path} changed since sealing (sealed {then[path][1][:16]}…, now {now[path][1][:16]}…)"
            )
