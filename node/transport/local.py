"""LocalTransport: the node is this machine (the local-workstation profile)."""

import os
import pwd
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from node.transport.base import (
    MAX_ANSWER,
    STDERR_TAIL,
    AnswerTooLarge,
    CommandResult,
    CommandTimeout,
    PathStat,
    script_command,
)
from node.transport.feed import process_feed
from node.transport.stream import local_stream

# What a command on the control host may inherit from the worker: never its secrets (SECRET_KEY,
# DATABASE_URL, provider keys, credential variables), only what a shell and a GPU job need.
INHERITED = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "SHELL", "TERM", "PYTHONUNBUFFERED"}
INHERITED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_")


def child_env(user: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}
    if user:
        account = pwd.getpwnam(user)
        env.update(HOME=account.pw_dir, USER=user, LOGNAME=user, SHELL=account.pw_shell or "/bin/sh")
    return env


def as_user(user: str | None) -> dict:
    """Popen arguments that run a child as user (its own groups only), or none."""
    if not user:
        return {}
    account = pwd.getpwnam(user)
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


def _drain(pipe, sink: bytearray, limit: int | None, over: threading.Event, kill=None) -> None:
    """Read a child's pipe to its end: stdout up to limit (past it the child's group is killed),
    stderr keeping only its last STDERR_TAIL bytes."""
    while chunk := pipe.read1(65536):
        sink += chunk
        if limit is None:
            del sink[:-STDERR_TAIL]
        elif len(sink) > limit:
            over.set()
            del sink[:]
            kill()
            break
    pipe.close()


def _kill_group(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _feed(pipe, data) -> None:
    """A child's stdin: bytes, or an iterable of bytes (a stream)."""
    try:
        for chunk in [data] if isinstance(data, bytes) else data:
            pipe.write(chunk)
        pipe.close()
    except (BrokenPipeError, OSError):
        pass  # the child exited without reading all of its input


def _expand(path: str) -> str:
    return os.path.expanduser(path.replace("$HOME", "~", 1) if path.startswith("$HOME") else path)


class LocalTransport:
    """Commands on this machine, with a scrubbed environment; as an unprivileged user when one is named.

    With a user, every file operation goes through a child running as that user too: a run's
    symlink to the control host's secrets must not be followed with the worker's rights.
    """

    def __init__(self, cwd: str | None = None, user: str | None = None, max_answer: int = MAX_ANSWER):
        self.cwd = cwd
        self.user = user
        self.max_answer = max_answer

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        started = time.monotonic()
        # A new session so a timeout can kill the whole process group, not just the shell.
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.cwd,
            env=child_env(self.user),
            start_new_session=True,
            **as_user(self.user),
        )
        out, err = bytearray(), bytearray()
        over = threading.Event()
        readers = [
            threading.Thread(
                target=_drain,
                args=(process.stdout, out, self.max_answer, over, lambda: _kill_group(process.pid)),
                daemon=True,
            ),
            threading.Thread(target=_drain, args=(process.stderr, err, None, over), daemon=True),
            threading.Thread(target=_feed, args=(process.stdin, stdin or b""), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.wait()
            if not over.is_set():
                raise CommandTimeout(f"command ran past {timeout:g}s and was killed") from None
        for reader in readers:
            reader.join(timeout=5)
        if over.is_set():
            raise AnswerTooLarge(f"the command wrote more than {self.max_answer} bytes and was ended")
        return CommandResult(
            process.returncode,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            time.monotonic() - started,
        )

    def run_script(self, script: str, timeout: float, stdin: bytes | None = None) -> CommandResult:
        return self.run(script_command(script), timeout, stdin)

    def _path(self, path: str) -> str:
        """A node path with $HOME / ~ meaning the home of the user commands run as."""
        if not self.user:
            return _expand(path)
        for prefix in ("$HOME", "~"):
            if path == prefix or path.startswith(prefix + "/"):
                return pwd.getpwnam(self.user).pw_dir + path[len(prefix) :]
        return path

    def _as_user(self, argv: list[str], timeout: float = 300, stdin: bytes | None = None) -> CommandResult:
        result = self.run(argv, timeout, stdin)
        if result.exit_code != 0:
            raise OSError(f"{argv[0]} as {self.user} failed: {result.stderr.strip()[:200]}")
        return result

    @contextmanager
    def reader(self, path: str, offset: int = 0):
        if self.user:
            with self.stream(["tail", "-c", f"+{offset + 1}", self._path(path)]) as handle:
                yield handle
            return
        with open(_expand(path), "rb") as handle:
            handle.seek(offset)
            yield handle

    def stream(self, argv: list[str], stdin: bytes | None = None):
        return local_stream(argv, stdin, child_env(self.user), **as_user(self.user))

    def follow(self, argv: list[str], stdin: bytes):
        return process_feed(argv, stdin, cwd=self.cwd, env=child_env(self.user), **as_user(self.user))

    def upload(self, local_path: Path, remote_path: str) -> None:
        if self.user:
            self._as_user(["sh", "-c", 'cat > "$1"', "sh", self._path(remote_path)], stdin=local_path.read_bytes())
            return
        shutil.copyfile(local_path, _expand(remote_path))

    def download(self, remote_path: str, local_path: Path) -> None:
        if self.user:
            with self.stream(["cat", self._path(remote_path)]) as source, open(local_path, "wb") as out:
                shutil.copyfileobj(source, out)
            return
        shutil.copyfile(_expand(remote_path), local_path)

    def stat(self, path: str) -> PathStat | None:
        if self.user:
            result = self.run(["stat", "-L", "-c", "%s %Y %F", self._path(path)], timeout=30)
            if result.exit_code != 0:
                return None
            size, mtime, kind = result.stdout.strip().split(" ", 2)
            return PathStat(path, int(size), float(mtime), kind == "directory")
        try:
            info = os.stat(_expand(path))
        except FileNotFoundError:
            return None
        return PathStat(path, info.st_size, info.st_mtime, os.path.isdir(_expand(path)))

    def listdir(self, path: str) -> list[PathStat]:
        if self.user:
            # One child for the whole directory: name, size, mtime and type of each entry, NUL-separated.
            listing = self._as_user(
                ["find", "-L", self._path(path), "-mindepth", "1", "-maxdepth", "1", "-printf", "%P\\0%s\\0%T@\\0%Y\\0"]
            ).stdout.split("\0")
            rows = [listing[i : i + 4] for i in range(0, len(listing) - 1, 4)]
            entries = [PathStat(name, int(size), float(mtime), kind == "d") for name, size, mtime, kind in rows]
            return sorted(entries, key=lambda entry: entry.path)
        base = _expand(path)
        entries = []
        for name in sorted(os.listdir(base)):
            info = os.stat(os.path.join(base, name))
            entries.append(PathStat(name, info.st_size, info.st_mtime, os.path.isdir(os.path.join(base, name))))
        return entries

    def close(self) -> None:
        """Nothing to close: each command is its own process."""
