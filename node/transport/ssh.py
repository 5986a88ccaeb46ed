"""SSHTransport: paramiko with pinned host keys, bounded connects and bounded commands."""

import base64
import hashlib
import select
import shlex
import socket
import stat as statmod
import threading
import time
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import paramiko

from node.transport.base import (
    MAX_ANSWER,
    STDERR_TAIL,
    AnswerTooLarge,
    CommandResult,
    CommandTimeout,
    CredentialError,
    HostKeyMismatch,
    HostKeyUnknown,
    PathStat,
    Unreachable,
    script_command,
)
from node.transport.feed import channel_feed
from node.transport.stream import can_use_openssh, channel_stream, openssh_stream


@dataclass(frozen=True)
class HostKey:
    key_type: str
    key_base64: str

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(base64.b64decode(self.key_base64)).digest()
        return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")

    def as_paramiko(self) -> paramiko.PKey:
        return paramiko.PKey.from_type_string(self.key_type, base64.b64decode(self.key_base64))

    @classmethod
    def of(cls, key: paramiko.PKey) -> "HostKey":
        return cls(key.get_name(), key.get_base64())


def _send_all(channel, chunks) -> None:
    """A command's stdin from an iterable; a command that exits early ends the sending quietly."""
    try:
        for chunk in chunks:
            channel.sendall(chunk)
        channel.shutdown_write()
    except (paramiko.SSHException, EOFError, OSError):
        pass


def _open_socket(host: str, port: int, timeout: float) -> socket.socket:
    try:
        return socket.create_connection((host, port), timeout=timeout)
    except (TimeoutError, OSError) as exc:
        raise Unreachable(f"cannot reach {host}:{port} within {timeout:g}s: {exc}") from None


def scan_host_key(host: str, port: int, timeout: float) -> HostKey:
    """Learn the host key without authenticating or running anything (first contact)."""
    sock = _open_socket(host, port, timeout)
    transport = paramiko.Transport(sock)
    transport.banner_timeout = timeout
    try:
        transport.start_client(timeout=timeout)
        return HostKey.of(transport.get_remote_server_key())
    except (paramiko.SSHException, EOFError, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise Unreachable(f"{host}:{port} did not speak SSH within {timeout:g}s ({reason})") from None
    finally:
        transport.close()


# What a box's own answer may be (the file is not there, not ours to read): passed on as it is. Every other
# OSError, paramiko's SSHException and EOFError mean the connection or session broke.
FILE_ANSWERS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)


@contextmanager
def session_errors(transport: "SSHTransport", what: str):
    """paramiko's and the socket's errors inside as Unreachable (the connection is closed, so the next call
    connects afresh): a session that drops during an SFTP call or a stream is the box not answering, never
    a crash of the task that asked."""
    try:
        yield
    except FILE_ANSWERS:
        raise
    except (paramiko.SSHException, EOFError, OSError) as exc:
        transport.close()
        reason = str(exc) or type(exc).__name__
        raise Unreachable(f"{transport.host}:{transport.port}: {what} failed: {reason}") from None


class _Guarded:
    """A remote file or stream read through session_errors: a read that meets a dropped session is
    Unreachable, while errors of the reader's own code (a local disk, a hash) pass untouched."""

    def __init__(self, transport: "SSHTransport", raw, what: str):
        self.transport, self.raw, self.what = transport, raw, what

    def read(self, size: int = -1) -> bytes:
        with session_errors(self.transport, self.what):
            return self.raw.read(size)

    def readinto(self, buffer) -> int:
        with session_errors(self.transport, self.what):
            return self.raw.readinto(buffer)


def _sftp_path(path: str) -> str:
    # SFTP starts in the login directory and does no shell expansion.
    for prefix in ("$HOME/", "~/"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return "." if path in ("$HOME", "~") else path


def _path_stat(path: str, info: paramiko.SFTPAttributes) -> PathStat:
    return PathStat(path, info.st_size or 0, float(info.st_mtime or 0), statmod.S_ISDIR(info.st_mode or 0))


def _send_unless_answered(channel, stdin: bytes | None) -> None:
    """stdin, then EOF, unless the command closed its channel first: a box may answer and exit before it
    reads what it was sent (a broken or hostile one), and that answer is still read and judged. Under
    load the garbage-box test lost this race, and its box's answer was called unreachable."""
    try:
        if stdin:
            channel.sendall(stdin)
        channel.shutdown_write()
    except OSError:  # paramiko: "Socket is closed", the channel's, not the connection's
        if not channel.closed:
            raise


class SSHTransport:
    def __init__(
        self,
        host: str,
        port: int,
        user: str,
        pinned: HostKey | None,
        auth: dict,
        connect_timeout: float = 10.0,
        keepalive: int = 15,
        max_answer: int = MAX_ANSWER,
    ):
        self.host, self.port, self.user = host, port, user
        self.max_answer = max_answer
        self.pinned = pinned
        self.auth = auth  # {"pkey": PKey} or {"key_filename": path}
        self.connect_timeout = connect_timeout
        self.keepalive = keepalive
        self._client: paramiko.SSHClient | None = None

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.close()

    def connect(self) -> paramiko.SSHClient:
        if self._client is not None:
            return self._client
        if self.pinned is None:
            raise HostKeyUnknown(f"no host key is pinned for {self.host}:{self.port}; confirm its fingerprint first")
        client = paramiko.SSHClient()
        entry = self.host if self.port == 22 else f"[{self.host}]:{self.port}"
        client.get_host_keys().add(entry, self.pinned.key_type, self.pinned.as_paramiko())
        # Never auto-add: an unknown or changed key refuses the connection.
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        timeout = self.connect_timeout
        try:
            client.connect(
                self.host,
                port=self.port,
                username=self.user,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                allow_agent=False,
                look_for_keys=False,
                **self.auth,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyMismatch(
                f"host key of {self.host}:{self.port} changed: pinned {self.pinned.fingerprint}, "
                f"offered {HostKey.of(exc.key).fingerprint}. Refusing to connect; nothing was run."
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise CredentialError(f"{self.user}@{self.host}:{self.port} refused the key: {exc}") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            client.close()
            raise Unreachable(f"{self.host}:{self.port}: {exc or type(exc).__name__} (timeout {timeout:g}s)") from None
        client.get_transport().set_keepalive(self.keepalive)
        self._client = client
        return client

    def run(self, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        return self._exec(shlex.join(argv), timeout, stdin)

    def run_script(self, script: str, timeout: float, stdin: bytes | None = None) -> CommandResult:
        return self.run(script_command(script), timeout, stdin)

    def _exec(self, command: str, timeout: float, stdin) -> CommandResult:
        """stdin: bytes, or an iterable of bytes sent from a thread while the answer is read (a stream)."""
        started = time.monotonic()
        try:
            channel = self.connect().get_transport().open_session(timeout=self.connect_timeout)
            channel.exec_command(command)
            if isinstance(stdin, bytes | None):
                _send_unless_answered(channel, stdin)
            else:
                threading.Thread(target=_send_all, args=(channel, stdin), daemon=True).start()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            self.close()
            raise Unreachable(f"{self.host}:{self.port}: session failed: {exc}") from None
        out, err = bytearray(), bytearray()
        deadline = started + timeout
        while True:
            if channel.recv_ready():
                out += channel.recv(65536)
                if len(out) > self.max_answer:  # a hostile box's 40 MiB answer is never held whole
                    channel.close()
                    raise AnswerTooLarge(
                        f"{self.host} answered more than {self.max_answer} bytes; the command was ended"
                    )
            elif channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
                del err[:-STDERR_TAIL]
            elif channel.exit_status_ready() and channel.eof_received:
                break
            elif time.monotonic() > deadline:
                channel.close()
                raise CommandTimeout(f"command ran past {timeout:g}s on {self.host}; its channel was closed")
            elif channel.closed and not channel.exit_status_ready():
                self.close()
                raise Unreachable(f"{self.host}:{self.port}: connection dropped mid-command")
            else:
                select.select([channel], [], [], 0.05)
        code = channel.recv_exit_status()
        channel.close()
        elapsed = time.monotonic() - started
        return CommandResult(code, out.decode(errors="replace"), err.decode(errors="replace"), elapsed)

    @contextmanager
    def _sftp(self, what: str):
        """An SFTP session for one call; a session that breaks anywhere inside is Unreachable."""
        with session_errors(self, what):
            sftp = self.connect().open_sftp()
            with sftp:
                sftp.get_channel().settimeout(max(self.connect_timeout, 30))
                yield sftp

    @contextmanager
    def reader(self, path: str, offset: int = 0):
        """A file on the node opened for streaming from offset, with read-ahead (SFTP prefetch)."""
        with self._sftp(f"opening {path}") as sftp:
            with session_errors(self, f"opening {path}"):
                handle = sftp.open(_sftp_path(path), "rb")
            try:
                with session_errors(self, f"opening {path}"):
                    handle.seek(offset)
                    handle.prefetch()
                yield _Guarded(self, handle, f"reading {path}")
            finally:
                with suppress(Exception):  # a dropped session cannot close its handle: nothing to do
                    handle.close()

    def stream(self, argv: list[str], stdin: bytes | None = None):
        """Context manager: the stdout of a node command as a binary stream (bulk pulls)."""
        command = shlex.join(argv)
        if can_use_openssh(self):
            return openssh_stream(self, command, stdin)
        return self._channel_stream(command, stdin)

    @contextmanager
    def _channel_stream(self, command: str, stdin: bytes | None):
        with ExitStack() as stack:
            with session_errors(self, "opening a stream"):
                out = stack.enter_context(channel_stream(self.connect(), command, stdin, self.connect_timeout))
            yield _Guarded(self, out, "reading a stream")

    def follow(self, argv: list[str], stdin: bytes):
        """One more channel on this connection: no handshake for the watcher's push stream."""
        with session_errors(self, "opening a follow channel"):
            return channel_feed(self.connect(), shlex.join(argv), stdin, self.connect_timeout)

    def upload(self, local_path: Path, remote_path: str) -> None:
        with self._sftp(f"uploading {remote_path}") as sftp:
            sftp.put(str(local_path), _sftp_path(remote_path))

    def download(self, remote_path: str, local_path: Path) -> None:
        with self._sftp(f"downloading {remote_path}") as sftp:
            sftp.get(_sftp_path(remote_path), str(local_path))

    def stat(self, path: str) -> PathStat | None:
        with self._sftp(f"stat of {path}") as sftp:
            try:
                info = sftp.stat(_sftp_path(path))
            except FileNotFoundError:
                return None
        return _path_stat(path, info)

    def listdir(self, path: str) -> list[PathStat]:
        with self._sftp(f"listing {path}") as sftp:
            entries = sftp.listdir_attr(_sftp_path(path))
        stats = [_path_stat(entry.filename, entry) for entry in entries]
        return sorted(stats, key=lambda entry: entry.path)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
