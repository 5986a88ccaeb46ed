"""A dataset on the box: its roster, what of it is already staged, and the one byte stream that stages it.

A staged dataset lives in `<project>/cache/data/<roster-sha>/`, each file landing first under `.partial/`
and renamed into place only when its size and SHA-256 match the roster (hashed as it lands), so what sits
in place is always what the roster says; `.complete` holds the roster's hash once every file does.
A file cut off halfway stays in `.partial/` and the next stage resumes it at its size.

The stream between a sender and a receiver is frames: a JSON header line {"path", "offset", "bytes"}
followed by exactly that many bytes, and a closing {"sent", "files"} line. The sender reads only regular
files strictly inside its root; the receiver writes only strictly inside its target.
"""

import hashlib
import json
import os
import time

from .files import atomic_write

HEADER_LIMIT = 65536
BLOCK = 1 << 20
MAX_FILES = 200000


class StageError(Exception):
    """The stage cannot go on; the message names the file where it stopped."""


def relative_ok(rel):
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and "" not in parts and "\0" not in rel


def inside(root, rel):
    """root/rel when rel stays strictly inside root (no '..', no link out of it), else None."""
    if not relative_ok(rel):
        return None
    path = os.path.join(root, rel)
    real_root = os.path.realpath(root).rstrip("/") + "/"
    return path if os.path.realpath(path).startswith(real_root) else None


def roster_of_dir(root):
    """[{path, bytes, sha256}] of every regular file under root, sorted; links are never followed."""
    files = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(directory, d)))
        for name in sorted(names):
            full = os.path.join(directory, name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            if len(files) >= MAX_FILES:
                raise StageError(f"more than {MAX_FILES} files under {root}")
            digest = hashlib.sha256()
            with open(full, "rb") as handle:
                for block in iter(lambda: handle.read(BLOCK), b""):
                    digest.update(block)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            files.append({"path": rel, "bytes": os.path.getsize(full), "sha256": digest.hexdigest()})
    return sorted(files, key=lambda item: item["path"])


def complete(target, roster_sha256):
    try:
        with open(os.path.join(target, ".complete")) as handle:
            return handle.read().strip() == roster_sha256
    except OSError:
        return False


def needed(target, files):
    """What is not yet in place: [{path, offset}], offset the bytes a cut-off stage left in .partial/."""
    need = []
    for item in files:
        path = inside(target, item["path"])
        if path is None:
            raise StageError(f"{item['path']}: not a path inside the dataset")
        if os.path.isfile(path) and os.path.getsize(path) == item["bytes"]:
            continue  # in place only after its hash matched as it landed
        partial = os.path.join(target, ".partial", item["path"])
        offset = os.path.getsize(partial) if os.path.isfile(partial) else 0
        need.append({"path": item["path"], "offset": offset if offset <= item["bytes"] else 0})
    return need


def send_frames(root, need, out, rate=0):
    """Frames of what is needed, read from root, written to the binary stream out; rate: bytes/s, 0 = as fast."""
    sent, started = 0, time.monotonic()
    for item in need:
        path = inside(root, item["path"])
        if path is None or os.path.islink(path) or not os.path.isfile(path):
            out.write(json.dumps({"path": item["path"], "missing": True}).encode() + b"\n")
            continue
        offset = int(item.get("offset") or 0)
        size = os.path.getsize(path)
        count = max(size - offset, 0)
        out.write(json.dumps({"path": item["path"], "offset": offset, "bytes": count}).encode() + b"\n")
        with open(path, "rb") as handle:
            handle.seek(offset)
            left = count
            while left:
                block = handle.read(min(BLOCK, left)) or b"\0" * min(BLOCK, left)  # a file shrunk: fails its hash
                out.write(block)
                left -= len(block)
                sent += len(block)
                if rate:
                    ahead = sent / rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
    out.write(json.dumps({"sent": sent, "files": len(need)}).encode() + b"\n")
    out.flush()
    return sent


def read_exactly(stream, count):
    data = b""
    while len(data) < count:
        block = stream.read(count - len(data))
        if not block:
            break
        data += block
    return data


def receive_frames(stream, target, files, progress=None):
    """Frames from stream into target, each file hashed as it lands; {"received", "files", "complete"}.

    StageError naming the first file that does not match its roster entry (its partial is removed) or
    the stream's end before the closing line (a cut: what arrived stays in .partial/ for the next stage)."""
    by_path = {item["path"]: item for item in files}
    received = landed = 0
    while True:
        line = stream.readline(HEADER_LIMIT)
        if not line:
            raise StageError(f"the stream ended before the stage finished ({received} bytes arrived)")
        try:
            header = json.loads(line)
        except ValueError:
            raise StageError("the sender sent something that is not a frame") from None
        if not isinstance(header, dict):
            raise StageError("the sender sent something that is not a frame")
        if "sent" in header:
            return {"received": received, "files": landed}
        entry = by_path.get(header.get("path"))
        if entry is None:
            raise StageError(f"the sender sent {str(header.get('path'))[:200]!r}, which is not in the roster")
        if header.get("missing"):
            raise StageError(f"{entry['path']} is missing at the source")
        received += land(stream, target, entry, int(header.get("offset") or 0), int(header.get("bytes") or 0))
        landed += 1
        if progress:
            progress(received, landed)


def land(stream, target, entry, offset, count):
    """One file's frame body: appended to its partial from offset, hashed with what was there, renamed on a match."""
    if offset + count != entry["bytes"]:
        read_exactly(stream, count)
        raise StageError(f"{entry['path']} is {offset + count} bytes at the source, the roster says {entry['bytes']}")
    partial = inside(os.path.join(target, ".partial"), entry["path"])
    final = inside(target, entry["path"])
    os.makedirs(os.path.dirname(partial), exist_ok=True)
    digest = hashlib.sha256()
    with open(partial, "a+b") as handle:
        handle.truncate(offset)
        handle.seek(0)
        left = offset
        while left:  # what a cut-off stage left: hashed again, so the whole file is checked
            block = handle.read(min(BLOCK, left))
            digest.update(block)
            left -= len(block)
        handle.seek(offset)
        left, moved = count, 0
        while left:
            block = stream.read(min(BLOCK, left))
            if not block:
                handle.flush()
                raise StageError(f"the stream was cut in {entry['path']} after {offset + moved} bytes")
            handle.write(block)
            digest.update(block)
            left -= len(block)
            moved += len(block)
        handle.flush()
        os.fsync(handle.fileno())
    if digest.hexdigest() != entry["sha256"]:
        os.remove(partial)
        got = digest.hexdigest()
        raise StageError(f"{entry['path']} does not match its roster: SHA-256 {got}, expected {entry['sha256']}")
    os.makedirs(os.path.dirname(final), exist_ok=True)
    os.replace(partial, final)
    return moved


def finish(target, roster_sha256, files):
    """.complete once every file is in place with its roster size: the next stage is a size check."""
    if needed(target, files):
        return False
    atomic_write(os.path.join(target, ".complete"), roster_sha256 + "\n")
    return True
