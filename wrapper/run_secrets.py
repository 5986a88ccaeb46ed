"""A run's secrets on the box: one 0600 file per attempt, in memory-backed storage (refused where the box
has none), outside every data and durable root; read once by the attempt (or the smoke) and deleted.

The values arrive on the SSH channel's stdin (`put-secrets`, put_secrets.py), never in a spec or a command line. The
training child gets them in its environment; the wrapper's own environment never holds them. Whatever
the child prints passes through `Masker` before it reaches the log file, so the log that is probed,
pushed and kept holds a placeholder where a value was.
"""

import contextlib
import json
import os
import stat

from .files import mount_of

# Memory-backed only (tmpfs: nothing reaches a disk), each measured as such: /dev/shm, then the user's
# runtime directory. Shared directories: ours is a subdirectory checked to be our own 0700 directory
# before anything is written. Without one, secrets are refused (never a file in a home directory).
SECRET_DIRS = ("/dev/shm", os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")  # noqa: S108
SECRETS_LIMIT = 1 << 20  # a run's secrets are tokens and keys: far less than this


MEMORY_FS = ("tmpfs", "ramfs")
NO_MEMORY_DIR = (
    "this box has no memory-backed directory ({}, measured as tmpfs) to hold run secrets, and they are never "
    "written to a disk (a home directory may be synced or kept: Featurize, LanRui): mount a tmpfs at /dev/shm, "
    "or run without secrets"
)


def secrets_dir():
    """Our directory in the first memory-backed base there is, measured (its mount's fstype), or None."""
    for base in SECRET_DIRS:
        if not (base and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK)):
            continue
        if (mount_of(base) or {}).get("fstype") in MEMORY_FS:
            return os.path.join(base, f"remotegpu-{os.getuid()}")
    return None


class NotPrivate(Exception):
    """The secrets directory is a link or another user's: nothing secret is written there."""


def private_dir():
    """The secrets directory, made 0700 and checked to be this user's own directory (not a link)."""
    directory = secrets_dir()
    if directory is None:
        raise NotPrivate(NO_MEMORY_DIR.format(", ".join(base for base in SECRET_DIRS if base)))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    mine = os.lstat(directory)
    if not stat.S_ISDIR(mine.st_mode) or mine.st_uid != os.getuid():
        raise NotPrivate(f"{directory} is not this user's own directory: refusing to write secrets")
    os.chmod(directory, 0o700)
    return directory


def write_private(path, text):
    """text as a new 0600 file at path (inside private_dir), staged under this process's name first."""
    staging = f"{path}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.remove(staging)
    with os.fdopen(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write(text)
    os.replace(staging, path)
    return path


def secrets_path(spec):
    """The attempt's secrets file: named by project root, run and attempt, so each call finds it."""
    name = f"{os.path.basename(spec.run_root)}--{spec.run_id}--{spec.attempt}.json"
    directory = secrets_dir()
    return os.path.join(directory, name) if directory else None


def take_secrets(spec):
    """The attempt's secrets, read once and the file deleted at once: {NAME: value}, {} when none."""
    path = secrets_path(spec)
    if path is None:  # nowhere they could have been put: put-secrets refused, so the launch never came
        return {}
    try:
        with open(path) as handle:
            values = json.loads(handle.read(SECRETS_LIMIT))
    except (OSError, ValueError):
        values = {}
    finally:
        remove_secrets(spec)
    wanted = spec.secrets or []
    return {name: value for name, value in (values or {}).items() if name in wanted and isinstance(value, str)}


def remove_secrets(spec):
    path = secrets_path(spec)
    if path:
        with contextlib.suppress(OSError):
            os.remove(path)


MASK = b"[secret masked]"


class Masker:
    """Replaces every secret value in a byte stream; a value split across two reads is still caught,
    since the last len(longest)-1 bytes are held back until the next read (or the end)."""

    def __init__(self, values):
        self.values = sorted({v.encode() for v in values if v}, key=len, reverse=True)
        self.keep = max((len(v) for v in self.values), default=1) - 1
        # A value without a newline cannot run across one: a finished line is written at once.
        self.lines = not any(b"\n" in v for v in self.values)
        self.pending = b""

    def mask(self, data):
        for value in self.values:
            data = data.replace(value, MASK)
        return data

    def feed(self, chunk):
        text = self.mask(self.pending + chunk)
        # A value that may still be completed by the next read starts within the last `keep` bytes.
        cut = max(len(text) - self.keep, 0)
        if self.lines:
            cut = max(cut, text.rfind(b"\n") + 1)
        self.pending = text[cut:]
        return text[:cut]

    def close(self):
        rest, self.pending = self.mask(self.pending), b""
        return rest


def pump_masked(stream, log, values):
    """Copy the child's output to the log, masked, until the child closes it."""
    masker = Masker(values)
    while True:
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        log.write(masker.feed(chunk))
        log.flush()
    log.write(masker.close())
    log.flush()


def remask_in_place(path, values, block=1 << 20):
    """Every secret value in the file at path overwritten with as many `*` (its size and inode kept, so
    what the control side has read of it stays where it was): a child that wrote a value into its own
    log.txt, past the masker on its stdout, leaves none in the log the attempt ends with. How many found."""
    wanted = sorted({v.encode() for v in values if v}, key=len, reverse=True)
    if not wanted:
        return 0
    overlap, found, offset = max(len(v) for v in wanted) - 1, 0, 0
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        while True:
            data = os.pread(fd, block + overlap, offset)
            if not data:
                break
            for value in wanted:
                start = data.find(value)
                while start >= 0:
                    os.pwrite(fd, b"*" * len(value), offset + start)
                    data = data[:start] + b"*" * len(value) + data[start + len(value) :]
                    found += 1
                    start = data.find(value, start + len(value))
            if len(data) <= block:
                break
            offset += block
    finally:
        os.close(fd)
    return found
