"""Pull a sealed export with SHA-256 custody: one stream, hashed while it is written, renamed on a match.

Large files travel one by one (`cat`, or `tail -c +N` to resume a killed pull from what already
arrived); small files travel together in one tar stream, so 10,000 files cost one round-trip,
not 10,000. Every file lands as `<name>.partial` and takes its final name only when its bytes
and hash match the roster: no partially written file is ever visible under its final name.
"""

import fcntl
import hashlib
import os
import tarfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from node.transport.stream import StreamError

CHUNK = 1 << 20
BATCH_LIMIT = 4 << 20  # files below this size share one tar stream


class HashMismatch(Exception):
    pass


@contextmanager
def only_puller(lock_path: Path):
    """One pull into a place at a time: True when this one holds the lock, False when another does. The
    kernel drops the lock when a killed worker dies, so a lost pull never blocks the next."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Pace:
    """Keeps a pull at or under max_rate bytes a second (0: unbounded), so it can share a box's uplink:
    advance() is a pull's progress callback and sleeps while the pull is ahead of the rate."""

    def __init__(self, max_rate: int = 0):
        self.max_rate, self.moved, self.started = max_rate, 0, time.monotonic()

    def advance(self, moved: int, files: int = 0) -> None:
        self.moved += moved
        if self.max_rate:
            ahead = self.moved / self.max_rate - (time.monotonic() - self.started)
            if ahead > 0:
                time.sleep(ahead)


@dataclass
class PullStats:
    files_moved: int = 0
    bytes_moved: int = 0
    files_kept: int = 0  # already in custody with the right hash (a resumed or repeated pull)


def _hash_file(path: Path) -> tuple["hashlib._Hash", int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
            size += len(block)
    return digest, size


def _in_custody(final: Path, entry) -> bool:
    """A file under its final name is trusted only after its hash is checked again."""
    if not final.exists():
        return False
    if final.stat().st_size == entry.bytes and _hash_file(final)[0].hexdigest() == entry.sha256:
        return True
    final.unlink()
    return False


def _copy_hashing(source, sink, digest, progress, limit: int, view: memoryview | None = None) -> int:
    """Copy and hash in one pass through one reused buffer, never more than `limit` bytes: the box
    is untrusted, and a roster entry of 5 bytes must not let it write 64 MiB here. view: a buffer of
    CHUNK bytes to reuse (a batch of 10,000 small files otherwise maps and unmaps 10,000 of them)."""
    view = view if view is not None else memoryview(bytearray(CHUNK))
    moved = 0
    while count := source.readinto(view[: max(1, min(CHUNK, limit - moved + 1))]):
        if moved + count > limit:
            raise HashMismatch(f"the node sent more than the roster's {limit} bytes")
        digest.update(view[:count])
        sink.write(view[:count])
        moved += count
        if progress:
            progress(count, 0)
    return moved


def _seal(partial: Path, final: Path, entry, digest, size: int) -> None:
    if size != entry.bytes or digest.hexdigest() != entry.sha256:
        partial.unlink()
        raise HashMismatch(
            f"hash mismatch for {entry.path}: expected {entry.sha256[:16]}… ({entry.bytes} bytes), "
            f"got {digest.hexdigest()[:16]}… ({size} bytes)"
        )
    os.replace(partial, final)


def partial_of(final: Path) -> Path:
    return final.with_name(final.name + ".partial")


def pull_one(transport, remote_root: str, entry, canonical: Path, progress=None) -> int:
    """One file, resuming from its .partial; bytes moved now."""
    final = canonical / entry.path
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_of(final)
    digest, offset = _hash_file(partial) if partial.exists() else (hashlib.sha256(), 0)
    if offset > entry.bytes:
        partial.unlink()
        digest, offset = hashlib.sha256(), 0
    if offset and progress:
        progress(offset, 0)
    remote = f"{remote_root}/{entry.path}"
    argv = ["tail", "-c", f"+{offset + 1}", remote] if offset else ["cat", remote]
    try:
        with transport.stream(argv) as source, open(partial, "ab", buffering=0) as sink:
            moved = _copy_hashing(source, sink, digest, progress, entry.bytes - offset)
    except HashMismatch as exc:
        partial.unlink(missing_ok=True)
        raise HashMismatch(f"{entry.path}: {exc}") from None
    _seal(partial, final, entry, digest, offset + moved)
    if progress:
        progress(0, 1)
    return moved


def pull_batch(transport, remote_root: str, entries, canonical: Path, progress=None) -> int:
    """Many small files in one tar stream; only the members asked for, only regular files."""
    wanted = {entry.path: entry for entry in entries}
    names = "\0".join(wanted).encode()
    argv = ["tar", "-C", remote_root, "--null", "--no-recursion", "-T", "-", "-cf", "-"]
    counted = Counted(transport.stream(argv, stdin=names))
    try:
        moved = _unpack(counted, wanted, canonical, progress)
    except tarfile.TarError as exc:
        if counted.hostile():
            raise HashMismatch(
                f"the node answered a tar stream with something that is not a tar ({exc}) after"
                f" {counted.received} bytes: refused, and nothing of it kept"
            ) from None
        # A session dropped mid-stream ends the tar early (or before its first block): what arrived whole
        # is in custody under its final name, and the next pull asks only for the rest.
        raise StreamError(f"the tar stream of {len(wanted)} small file(s) broke ({exc}); the pull resumes") from None
    if wanted:
        raise HashMismatch(f"{len(wanted)} file(s) never arrived, e.g. {sorted(wanted)[0]}")
    return moved


class Counted:
    """A node's byte stream, counted as tarfile reads it: whether it ended (a dropped session: the pull
    resumes) or went on with bytes that are no tar (a hostile answer: refused, never retried as a drop)."""

    def __init__(self, stream):
        self.stream, self.received, self.ended, self.first = stream, 0, False, b""

    def __enter__(self):
        self.source = self.stream.__enter__()
        return self

    def __exit__(self, *exc):
        return self.stream.__exit__(*exc)

    def read(self, size=-1) -> bytes:
        data = self.source.read(size)
        self.ended = self.ended or not data
        if len(self.first) < tarfile.BLOCKSIZE:
            self.first += data[: tarfile.BLOCKSIZE - len(self.first)]
        self.received += len(data)
        return data

    def hostile(self) -> bool:
        """Garbage, not a cut: the stream went on past the break, or its whole first block is no header."""
        if not self.ended:
            return True
        if len(self.first) < tarfile.BLOCKSIZE:
            return False  # cut before its first block was whole: what a dropped session leaves
        try:
            tarfile.TarInfo.frombuf(self.first, tarfile.ENCODING, "surrogateescape")
        except tarfile.EOFHeaderError:
            return False
        except tarfile.HeaderError:
            return True
        return False


def _unpack(stream, wanted: dict, canonical: Path, progress) -> int:
    """The members of one tar stream into canonical, each popped from wanted as it lands whole."""
    moved, made, view = 0, set(), memoryview(bytearray(CHUNK))
    with stream as source, tarfile.open(fileobj=source, mode="r|") as archive:
        for member in archive:
            entry = wanted.pop(member.name, None)
            if entry is None or not member.isreg() or member.issparse():
                raise HashMismatch(f"the node sent {member.name!r}, which is not a pending file of the roster")
            if member.size != entry.bytes:  # refused before a byte is written (a sparse or padded member)
                raise HashMismatch(f"{member.name}: the node sent {member.size} bytes, the roster says {entry.bytes}")
            final = canonical / entry.path
            if final.parent not in made:  # a shard's directory once, not once per file
                final.parent.mkdir(parents=True, exist_ok=True)
                made.add(final.parent)
            digest, partial = hashlib.sha256(), partial_of(final)
            with archive.extractfile(member) as data, open(partial, "wb", buffering=0) as sink:
                size = _copy_hashing(data, sink, digest, progress, entry.bytes, view)
            _seal(partial, final, entry, digest, size)
            moved += size
            if progress:
                progress(0, 1)
    return moved


def pull_export(transport, remote_root: str, entries, canonical: Path, progress=None, flush=True) -> PullStats:
    """Everything in the roster into canonical; what is already there is re-hashed and kept."""
    stats = PullStats()
    large, small = [], []
    for entry in entries:
        final = canonical / entry.path
        if _in_custody(final, entry):
            stats.files_kept += 1
            if progress:
                progress(entry.bytes, 1)
        elif entry.bytes >= BATCH_LIMIT or partial_of(final).exists():
            large.append(entry)
        else:
            small.append(entry)
    for entry in large:
        stats.bytes_moved += pull_one(transport, remote_root, entry, canonical, progress)
    if small:
        stats.bytes_moved += pull_batch(transport, remote_root, small, canonical, progress)
    stats.files_moved = len(large) + len(small)
    # One flush for the whole pull instead of an fsync per file: a file torn by a crash after its
    # rename is caught by the re-hash above on the next pull and fetched again.
    if flush:
        os.sync()
    return stats
