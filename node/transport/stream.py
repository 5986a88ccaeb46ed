"""Bulk byte streams from a node: the stdout of one command, read as it arrives.

Bulk pulls go through the OpenSSH client when the worker has one and the credential is a key
file: it moves bytes several times faster than paramiko's pure-Python packet layer, and it is
held to the same pinned host key (a one-line known_hosts written for this stream only). Anything
else (a key held in an environment variable, no `ssh` binary) streams over a paramiko exec
channel: slower, never less safe.
"""

import fcntl
import shutil
import subprocess
import tempfile
import threading
from contextlib import contextmanager, suppress
from pathlib import Path

from node.transport.base import TransportError

# AES-GCM uses the CPU's AES instructions; chacha20 is the fallback every OpenSSH has.
FAST_CIPHERS = "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com"
HOST_ALIAS = "remotegpu-node"


class StreamError(TransportError):
    """The remote command behind a stream failed or the stream broke."""


F_SETPIPE_SZ = 1031  # Linux: a 1 MiB pipe lets one read take a whole chunk (64 KiB by default)


def _widen(pipe) -> None:
    with suppress(OSError):
        fcntl.fcntl(pipe.fileno(), F_SETPIPE_SZ, 1 << 20)


def _feed(pipe, data: bytes) -> None:
    # A writer thread: the remote side may start answering before it has read all of its input.
    with suppress(OSError):  # the remote side may stop reading early: not our error to report
        pipe.write(data)
    with suppress(OSError):
        pipe.close()


def openssh_argv(transport, known_hosts: Path, command: str) -> list[str]:
    options = {
        "BatchMode": "yes",
        "IdentitiesOnly": "yes",
        "IdentityAgent": "none",
        "StrictHostKeyChecking": "yes",
        "UserKnownHostsFile": str(known_hosts),
        "GlobalKnownHostsFile": "/dev/null",
        "HostKeyAlias": HOST_ALIAS,
        "ConnectTimeout": str(int(transport.connect_timeout)),
        "ServerAliveInterval": str(transport.keepalive),
        "ServerAliveCountMax": "3",
        "Compression": "no",
        "LogLevel": "ERROR",
    }
    key_file = transport.auth["key_filename"]
    argv = ["ssh", "-F", "/dev/null", "-c", FAST_CIPHERS, "-p", str(transport.port), "-i", key_file]
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    return [*argv, "--", f"{transport.user}@{transport.host}", command]


def can_use_openssh(transport) -> bool:
    return bool(shutil.which("ssh")) and "key_filename" in transport.auth and transport.pinned is not None


@contextmanager
def process_stream(argv: list[str], stdin: bytes | None, what: str, wait: float | None = None, env=None, **popen):
    """The stdout of a local process (ssh, or the command itself) as a stream; a failure says why."""
    pipe = subprocess.PIPE
    process = subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=pipe, bufsize=0, env=env, **popen)
    _widen(process.stdout)
    threading.Thread(target=_feed, args=(process.stdin, stdin or b""), daemon=True).start()
    try:
        yield process.stdout
    except BaseException:
        process.kill()
        raise
    finally:
        process.stdout.close()
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    detail = process.stderr.read().decode(errors="replace").strip()[-500:]
    process.stderr.close()
    if process.returncode != 0:
        raise StreamError(f"{what} ended with {process.returncode}: {detail}")


@contextmanager
def openssh_stream(transport, command: str, stdin: bytes | None):
    with tempfile.TemporaryDirectory(prefix="remotegpu-ssh-") as scratch:
        known_hosts = Path(scratch) / "known_hosts"
        pinned = transport.pinned
        known_hosts.write_text(f"{HOST_ALIAS} {pinned.key_type} {pinned.key_base64}\n")
        argv = openssh_argv(transport, known_hosts, command)
        where = f"stream from {transport.host}:{transport.port}"
        with process_stream(argv, stdin, where, wait=transport.connect_timeout) as stream:
            yield stream


@contextmanager
def channel_stream(client, command: str, stdin: bytes | None, timeout: float):
    channel = client.get_transport().open_session(timeout=timeout)
    channel.settimeout(max(timeout, 30))
    channel.exec_command(command)

    def feed():
        try:
            channel.sendall(stdin or b"")
        finally:
            channel.shutdown_write()

    threading.Thread(target=feed, daemon=True).start()
    reader = channel.makefile("rb", 1 << 20)
    try:
        yield reader
        status = channel.recv_exit_status()
    finally:
        channel.close()
    if status != 0:
        raise StreamError(f"stream command ended with {status}")


def local_stream(argv: list[str], stdin: bytes | None, env: dict[str, str], **popen):
    return process_stream(argv, stdin, argv[0], env=env, **popen)
