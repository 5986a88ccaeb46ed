"""LocalTransport: the node is this machine (the local-workstation profile)."""

import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from profiles.transport.base import CommandResult, CommandTimeout, PathStat, script_command
from profiles.transport.stream import local_stream

# What a command on the control host may inherit from the worker: never its secrets (SECRET_KEY,
# DATABASE_URL, provider keys, credential variables), only what a shell and a GPU job need.
INHERITED = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "SHELL", "TERM", "PYTHONUNBUFFERED"}
INHERITED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_")


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}


def _expand(path: str) -> str:
    return os.path.expanduser(path.replace("$HOME", "~", 1) if path.startswith("$HOME") else path)


class LocalTransport:
    def __init__(self, cwd: str | None = None):
        self.cwd = cwd

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
            env=child_env(),
            start_new_session=True,
        )
        try:
            out, err = process.communicate(input=stdin or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise CommandTimeout(f"command ran past {timeout:g}s and was killed") from None
        return CommandResult(
            process.returncode,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            time.monotonic() - started,
        )

    def run_script(self, script: str, timeout: float, stdin: bytes | None = None) -> CommandResult:
        return self.run(script_command(script), timeout, stdin)

    @contextmanager
    def reader(self, path: str, offset: int = 0):
        with open(_expand(path), "rb") as handle:
            handle.seek(offset)
            yield handle

    def stream(self, argv: list[str], stdin: bytes | None = None):
        return local_stream(argv, stdin, child_env())

    def upload(self, local_path: Path, remote_path: str) -> None:
        shutil.copyfile(local_path, _expand(remote_path))

    def download(self, remote_path: str, local_path: Path) -> None:
        shutil.copyfile(_expand(remote_path), local_path)

    def stat(self, path: str) -> PathStat | None:
        try:
            info = os.stat(_expand(path))
        except FileNotFoundError:
            return None
        return PathStat(path, info.st_size, info.st_mtime, os.path.isdir(_expand(path)))

    def listdir(self, path: str) -> list[PathStat]:
        base = _expand(path)
        entries = []
        for name in sorted(os.listdir(base)):
            info = os.stat(os.path.join(base, name))
            entries.append(PathStat(name, info.st_size, info.st_mtime, os.path.isdir(os.path.join(base, name))))
        return entries

    def close(self) -> None:
        """Nothing to close: each command is its own process."""
