"""Reading and writing on the box: paths, atomic and reserved writes, hashes, sizes, mounts."""

import contextlib
import errno
import hashlib
import os
import re


def expand(path):
    if path == "$HOME" or path.startswith("$HOME/"):
        path = "~" + path[len("$HOME") :]
    return os.path.abspath(os.path.expanduser(path))


def atomic_write(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


RESERVE = ".reserve"  # pre-allocated at launch, so the last markers need no new inode or block


def reserve_markers(attempt):
    """Files (with a block each) and a directory the wrapper may need when the disk is full."""
    reserve = os.path.join(attempt, RESERVE)
    os.makedirs(os.path.join(reserve, "quarantine"), exist_ok=True)
    for name in ("exit_code", "reason.txt"):
        with open(os.path.join(reserve, name), "w") as handle:
            handle.write(" " * 4096)
            handle.flush()
            os.fsync(handle.fileno())
    return reserve


def durable_write(path, text, reserved):
    """atomic_write, or, when the disk is full, the reserved file rewritten in place and renamed."""
    try:
        atomic_write(path, text)
        return
    except OSError as exc:
        if exc.errno not in DISK_FULL or not os.path.exists(reserved):
            raise
        with contextlib.suppress(OSError):
            os.remove(f"{path}.tmp-{os.getpid()}")
    with open(reserved, "r+") as handle:
        handle.write(text)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(reserved, path)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_hash(root, skip=()):
    """SHA-256 over (relative path, file SHA-256) of every file, sorted: the source identity. skip:
    relative paths left out (the run's config, for the code's own identity)."""
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
        for name in sorted(files):
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel in skip:
                continue
            digest.update((f"{rel}\0{sha256_file(full)}\n").encode())
    return digest.hexdigest()


def measure(path):
    """Bytes and inodes free on the device that will hold path (its nearest existing ancestor)."""
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    info = os.statvfs(probe)
    return {
        "measured_at": probe,
        "device_id": os.stat(probe).st_dev,
        "free_bytes": info.f_bavail * info.f_frsize,
        "total_bytes": info.f_blocks * info.f_frsize,
        "free_inodes": info.f_favail,
        "total_inodes": info.f_files,
    }


MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")


def mount_of(path):
    """The mount that holds path (its nearest existing ancestor), as /proc/self/mountinfo says: mount
    point, file system type, device (major:minor) and source. None where the kernel does not say.

    A tier is a disk, not a path string: a "durable" root that is a plain directory on the system
    disk (AutoDL without file storage, a Gpushare box not marked 内网存储) measures as that disk."""
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    real = os.path.realpath(probe)
    try:
        with open("/proc/self/mountinfo") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        point = MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = point == "/" or real == point or real.startswith(point.rstrip("/") + "/")
        # The later of two mounts on one point is the one on top: >= keeps it.
        if inside and (best is None or len(point) >= len(best["mountpoint"])):
            best = {"mountpoint": point, "device": fields[2], "fstype": tail[0], "source": tail[1]}
    return best


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def newest_mtime(root):
    newest = None
    for directory, _dirs, files in os.walk(root):
        for name in files:
            try:
                mtime = os.stat(os.path.join(directory, name)).st_mtime
            except OSError:
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return newest


def tail(path, limit=4000):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def read_from(path, offset, limit=65536):
    """Bytes appended to path since offset (bounded), where they start, where they end; a shorter
    file means it was replaced: restart at 0."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            start = offset if offset <= size else 0
            handle.seek(start)
            chunk = handle.read(limit)
    except OSError:
        return "", offset, offset
    # Only whole lines: a line still being written is read on the next tick.
    cut = chunk.rfind(b"\n") + 1
    return chunk[:cut].decode(errors="replace"), start, start + cut


def tree_bytes(path):
    total = 0
    for directory, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_size
    return total
