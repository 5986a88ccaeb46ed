"""What every node transport offers, and the errors it may raise."""

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class TransportError(Exception):
    """Anything that stopped us from talking to a node; says nothing about the run or billing."""


class Unreachable(TransportError):
    """Could not connect, or the server never spoke SSH, within the timeout."""


class CredentialError(TransportError):
    """The credential reference could not be resolved, or the node refused it."""


class HostKeyUnknown(TransportError):
    """No host key is pinned yet: nothing may run until a person confirms the fingerprint."""


class HostKeyMismatch(TransportError):
    """The node presented a different host key than the pinned one: refuse, run nothing."""


class CommandTimeout(TransportError):
    """A command ran past its timeout; its channel was closed."""


class AnswerTooLarge(TransportError):
    """A command wrote more than the transport keeps; it was ended and nothing it wrote is used."""


# What a command's output may be at most (NODE_ANSWER_MAX_BYTES); stderr keeps only its last part.
MAX_ANSWER = 8 * 1024 * 1024
STDERR_TAIL = 64 * 1024


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class PathStat:
    path: str
    size: int
    mtime: float
    is_dir: bool


class Transport(Protocol):
    """Short-lived: open, do a few things, close (use as a context manager)."""

    def run(self, argv: list[str], timeout: float, stdin=None) -> CommandResult:
        """argv on the node; stdin: bytes, or an iterable of bytes streamed while the answer is read."""

    def run_script(self, script: str, timeout: float, stdin: bytes | None = None) -> CommandResult: ...

    def reader(self, path: str, offset: int = 0):
        """Context manager: a readable binary file on the node, positioned at offset."""

    def stream(self, argv: list[str], stdin: bytes | None = None):
        """Context manager: the stdout of a node command as a binary stream, read as it arrives."""

    def follow(self, argv: list[str], stdin: bytes):
        """A `LineFeed` of a long-running node command's stdout (node/transport/feed.py)."""

    def upload(self, local_path: Path, remote_path: str) -> None: ...

    def download(self, remote_path: str, local_path: Path) -> None: ...

    def stat(self, path: str) -> PathStat | None: ...

    def listdir(self, path: str) -> list[PathStat]: ...

    def close(self) -> None: ...


def shell_path(path: str) -> str:
    """Quote a node path for a shell; a leading $HOME or ~ stays expandable, the rest is literal."""
    for prefix in ("$HOME/", "~/"):
        if path.startswith(prefix):
            return '"$HOME"/' + shlex.quote(path[len(prefix) :])
    if path in ("$HOME", "~"):
        return '"$HOME"'
    return shlex.quote(path)


def script_command(script: str) -> list[str]:
    return ["bash", "-c", script]
