"""A dataset on the box: its roster, what of it is already staged, and the one byte stream that stages it.

A staged dataset lives in `<project>/cache/data/<roster-sha>/`. A large file lands first under `.partial/`
(spliced from the stream by the kernel) and is renamed into place only when its SHA-256 matches the
roster; a small one is hashed in memory and written in place only on a match. `.complete` holds the
roster's hash once every file is there. A large file cut off halfway stays in `.partial/` and the next
stage resumes it at its size; until `.complete` exists, small files in place are hashed again.

The stream between a sender and a receiver is frames: a JSON header line {"path", "offset", "bytes"}
followed by exactly that many bytes, and a closing {"sent", "files"} line. The sender reads only regular
files strictly inside its root; the receiver writes only strictly inside its target.
"""

import hashlib
import json
import os
import stat
import time

from .files import atomic_write

HEADER_LIMIT = 65536
SMALL = 256 << 10  # a body this small travels and lands through memory: hashed there, written once
BLOCK = 4 << 20
MAX_FILES = 200000


class StageError(Exception):
    """The stage cannot go on; the message names the file where it stopped."""


def relative_ok(rel):
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and "" not in parts and "\0" not in rel


def roster_of_dir(root):
    """[{path, bytes, sha256}] of every file a sender may read under root (regular_files), sorted."""
    allowed = regular_files(root)
    if len(allowed) > MAX_FILES:
        raise StageError(f"more than {MAX_FILES} files under {root}")
    files = []
    for rel in sorted(allowed):
        fd = open_regular(root, rel, allowed[rel])
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "rb") as handle:
            for block in iter(lambda: handle.read(BLOCK), b""):
                digest.update(block)
                size += len(block)
        files.append({"path": rel, "bytes": size, "sha256": digest.hexdigest()})
    return files


def complete(target, roster_sha256):
    try:
        with open(os.path.join(target, ".complete")) as handle:
            return handle.read().strip() == roster_sha256
    except OSError:
        return False


def needed(target, files, rehash_small=True):
    """What is not yet in place: [{path, offset}], offset the bytes a cut-off stage left in .partial/.

    rehash_small=False: sizes only, for the end of a stage whose files this process has just hashed."""
    need = []
    for item in files:
        if not relative_ok(item["path"]):
            raise StageError(f"{item['path']}: not a path inside the dataset")
        path = os.path.join(target, item["path"])
        # A large file is in place only after its hash matched (renamed from .partial/); a small one is
        # written in place after its hash matched in memory, so a crash mid-write is caught here.
        there = os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) == item["bytes"]
        if there and (item["bytes"] > SMALL or not rehash_small or file_sha256(path) == item["sha256"]):
            continue
        partial = os.path.join(target, ".partial", item["path"])
        offset = os.path.getsize(partial) if os.path.isfile(partial) else 0
        need.append({"path": item["path"], "offset": offset if offset <= item["bytes"] else 0})
    return need


def regular_files(root):
    """{relative path: (device, inode)} of every file a sender may read: a regular file strictly inside root,
    reached without following a link, whose every hard link is inside root too. A fifo, a socket or a
    device would block or never end a read; a hard link to a file outside the root would send its bytes."""
    found, links, seen = {}, {}, {}
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(directory, d))]
        base = os.path.relpath(directory, root)
        for name in names:
            try:
                st = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = name if base == "." else f"{base}/{name}".replace(os.sep, "/")
            found[rel] = (st.st_dev, st.st_ino)
            links[found[rel]] = st.st_nlink
            seen[found[rel]] = seen.get(found[rel], 0) + 1
    return {rel: key for rel, key in found.items() if seen[key] >= links[key]}


def open_regular(root, rel, expected):
    """rel under root opened for reading as the very file regular_files saw: no link followed, no wait on
    a fifo swapped in since (O_NONBLOCK), and fstat says it is that regular file, every link inside root."""
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise StageError(f"{rel}: cannot be opened at the source ({error.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != tuple(expected):
        os.close(fd)
        raise StageError(f"{rel}: changed into something that is not the regular file listed")
    return fd


def send_frames(root, need, out, rate=0):
    """Frames of what is needed, read from root, written to the binary stream out; rate: bytes/s, 0 = as fast."""
    sent, started = 0, time.monotonic()
    allowed = regular_files(root)
    for item in need:
        if item["path"] not in allowed:
            out.write(json.dumps({"path": item["path"], "missing": True}).encode() + b"\n")
            continue
        offset = int(item.get("offset") or 0)
        try:
            fd = open_regular(root, item["path"], allowed[item["path"]])
        except StageError:
            out.write(json.dumps({"path": item["path"], "missing": True}).encode() + b"\n")
            continue
        with os.fdopen(fd, "rb", buffering=0) as handle:
            count = max(os.fstat(fd).st_size - offset, 0)
            header = json.dumps({"path": item["path"], "offset": offset, "bytes": count}).encode() + b"\n"
            if count <= SMALL:  # header and body in one buffered write: many small files per syscall
                body = os.pread(fd, count, offset)
                out.write(header + body + b"\0" * (count - len(body)))
                sent += count
            else:
                out.write(header)
                sent += copy_out(handle, offset, count, out, rate, sent, started)
    out.write(json.dumps({"sent": sent, "files": len(need)}).encode() + b"\n")
    out.flush()
    return sent


def copy_out(handle, offset, count, out, rate, sent_before, started):
    """count bytes of handle from offset to out: by sendfile (no copy through Python) where the kernel
    can, else read and write; a file that shrank meanwhile is padded (it fails its hash at the other end)."""
    out.flush()
    moved = 0
    while moved < count:
        want = min(BLOCK, count - moved)
        try:
            done = os.sendfile(out.fileno(), handle.fileno(), offset + moved, want)
        except (OSError, AttributeError, ValueError):
            handle.seek(offset + moved)
            block = handle.read(want)
            out.write(block)
            out.flush()
            done = len(block)
        if not done:
            out.write(b"\0" * want)
            out.flush()
            done = want
        moved += done
        if rate:
            ahead = (sent_before + moved) / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    return moved


class FrameStream:
    """The receiving end of a frame stream, on a raw file descriptor: headers are read through a small
    buffer of our own, and a file's body is spliced from the pipe into the file by the kernel (no copy
    through Python), then hashed from the page cache before it is accepted."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, b""

    def _fill(self):
        data = os.read(self.fd, 1 << 16)
        self.buffer += data
        return bool(data)

    def readline(self, limit):
        while b"\n" not in self.buffer and len(self.buffer) < limit and self._fill():
            pass
        cut = self.buffer.find(b"\n") + 1 or len(self.buffer)
        line, self.buffer = self.buffer[:cut], self.buffer[cut:]
        return line

    def body_into(self, out_fd, count):
        """Up to count bytes of the stream into out_fd; how many arrived (fewer: the stream ended)."""
        moved = 0
        if self.buffer:
            head, self.buffer = self.buffer[:count], self.buffer[count:]
            os.write(out_fd, head)
            moved = len(head)
        while moved < count:
            try:
                done = os.splice(self.fd, out_fd, min(BLOCK, count - moved))
            except (OSError, AttributeError):  # not a pipe, or no splice here: through Python
                data = os.read(self.fd, min(BLOCK, count - moved))
                done = os.write(out_fd, data) if data else 0
            if not done:
                break
            moved += done
        return moved

    def read(self, count):
        """Exactly count bytes, or fewer when the stream ends (a cut)."""
        while len(self.buffer) < count and self._fill():
            pass
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def skip(self, count):
        with open(os.devnull, "wb") as sink:
            return self.body_into(sink.fileno(), count)


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def receive_frames(stream, target, files, progress=None):
    """Frames from stream (a FrameStream) into target, each file hashed as it lands; {"received", "files"}.

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
            close_dirs()
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
    """One file's frame body: after what a cut-off stage left (offset), hashed whole, renamed on a match.

    The receiving side writes only below its own target: paths are checked plainly (relative_ok) and
    links are never followed where a file is opened."""
    if offset + count != entry["bytes"]:
        stream.skip(count)
        raise StageError(f"{entry['path']} is {offset + count} bytes at the source, the roster says {entry['bytes']}")
    if not relative_ok(entry["path"]):
        raise StageError(f"{entry['path']}: not a path inside the dataset")
    final = os.path.join(target, entry["path"])
    if count <= SMALL and offset == 0:  # through memory: hashed before a byte is written, written once
        body = stream.read(count)
        if len(body) < count:
            raise StageError(f"the stream was cut in {entry['path']} after {len(body)} bytes")
        got = hashlib.sha256(body).hexdigest()
        if got != entry["sha256"]:
            raise StageError(f"{entry['path']} does not match its roster: SHA-256 {got}, expected {entry['sha256']}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        fd = os.open(os.path.basename(final), flags, 0o644, dir_fd=opened_dir(os.path.dirname(final)))
        try:
            write_all(fd, body)
        finally:
            os.close(fd)
        return count
    partial = os.path.join(target, ".partial", entry["path"])
    made_dir(os.path.dirname(partial))
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.ftruncate(fd, offset)
        os.lseek(fd, offset, os.SEEK_SET)
        moved = stream.body_into(fd, count)
    finally:
        os.close(fd)
    if moved < count:
        raise StageError(f"the stream was cut in {entry['path']} after {offset + moved} bytes")
    got = file_sha256(partial)
    if got != entry["sha256"]:
        os.remove(partial)
        raise StageError(f"{entry['path']} does not match its roster: SHA-256 {got}, expected {entry['sha256']}")
    made_dir(os.path.dirname(final))
    os.replace(partial, final)
    return moved


def write_all(fd, data):
    view, written = memoryview(data), 0
    while written < len(data):
        written += os.write(fd, view[written:])
    return written


MADE = set()
OPENED = {}


def made_dir(path):
    """os.makedirs once per directory per process (10,000 files in a few directories ask 20,000 times)."""
    if path not in MADE:
        os.makedirs(path, exist_ok=True)
        MADE.add(path)


def opened_dir(path):
    """The directory made and held open: a small file is created relative to it, without walking its
    whole path again (half the cost of each of 10,000 creates on the benchmark box)."""
    if path not in OPENED:
        if len(OPENED) > 256:
            close_dirs()
        made_dir(path)
        OPENED[path] = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    return OPENED[path]


def close_dirs():
    for fd in OPENED.values():
        os.close(fd)
    OPENED.clear()


def finish(target, roster_sha256, files):
    """.complete once every file is in place with its roster size: the next stage is a size check."""
    if needed(target, files, rehash_small=False):
        return False
    atomic_write(os.path.join(target, ".complete"), roster_sha256 + "\n")
    return True
