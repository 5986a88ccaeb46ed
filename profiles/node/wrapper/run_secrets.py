"""A run's secrets on the box: one 0600 file per attempt, in memory-backed storage where the box has it,
outside every data and durable root; read once by the attempt (or the smoke) and deleted.

The values arrive on the SSH channel's stdin (`put-secrets`, put_secrets.py), never in a spec or a command line. The
training child gets them in its environment; the wrapper's own environment never holds them. Whatever
the child prints passes through `Masker` before it reaches the log file, so the log that is probed,
pushed and kept holds a placeholder where a value was.
"""

import contextlib
import json
import os
import stat

# Memory-backed first (tmpfs: nothing reaches a disk), then the user's runtime directory. Shared
# directories: ours is a subdirectory checked to be our own 0700 directory before anything is written.
SECRET_DIRS = ("/dev/shm", os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")  # noqa: S108
SECRETS_LIMIT = 1 << 20  # a run's secrets are tokens and keys: far less than this


def secrets_dir():
    for base in SECRET_DIRS:
        if base and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            return os.path.join(base, f"remotegpu-{os.getuid()}")
    return os.path.join(os.path.expanduser("~"), ".remotegpu-secrets")


class NotPrivate(Exception):
    """The secrets directory is a link or another user's: nothing secret is written there."""


def private_dir():
    """The secrets directory, made 0700 and checked to be this user's own directory (not a link)."""
    directory = secrets_dir()
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
    name = f"{os.path.basename(spec['run_root'])}--{spec['run_id']}--{spec['attempt']}.json"
    return os.path.join(secrets_dir(), name)


def take_secrets(spec):
    """The attempt's secrets, read once and the file deleted at once: {NAME: value}, {} when none."""
    path = secrets_path(spec)
    try:
        with open(path) as handle:
            values = json.loads(handle.read(SECRETS_LIMIT))
    except (OSError, ValueError):
        values = {}
    finally:
        remove_secrets(spec)
    wanted = spec.get("secrets") or []
    return {name: value for name, value in (values or {}).items() if name in wanted and isinstance(value, str)}


def remove_secrets(spec):
    with contextlib.suppress(OSError):
        os.remove(secrets_path(spec))


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
