"""A long-lived line stream from a node command (the wrapper's `follow`), read with a deadline;
its stdin stays open, so the watcher can ask the same command a probe (one line) at each tick.

Over SSH it is one more channel on the connection the watcher already holds (no handshake); on
the control host, a child process. Reading waits at most the time asked for, keeps at most
MAX_LINE bytes of a line not yet ended (a node that never sends a newline cannot grow our
memory), and ends cleanly when the command does.
"""

import contextlib
import os
import select
import signal
import subprocess

from node.transport.base import TransportError

MAX_LINE = 1 << 20
READ = 1 << 16


class FeedError(TransportError):
    """The stream broke, or sent a line longer than MAX_LINE."""


class LineFeed:
    def __init__(self, source, recv, close, send):
        self._source, self._recv, self._close, self._send = source, recv, close, send
        self._buffer = b""
        self.ended = False

    def send(self, line: bytes) -> None:
        """Write one request line to the command's stdin (a probe asked over the stream)."""
        if self.ended:
            raise FeedError("the follow stream has ended")
        try:
            self._send(line + b"\n")
        except Exception as exc:  # paramiko's socket.timeout and SSHException, a closed pipe, alike
            raise FeedError(f"could not write to the follow stream: {exc}") from None

    def lines(self, timeout: float) -> list[bytes]:
        """The whole lines that arrive within timeout seconds (at least one read if data is ready)."""
        if self.ended:
            return []
        ready, _, _ = select.select([self._source], [], [], max(timeout, 0))
        if not ready:
            return []
        try:
            data = self._recv(READ)
        except OSError as exc:
            self.ended = True
            raise FeedError(f"the follow stream broke: {exc}") from None
        if not data:
            self.ended = True
        self._buffer += data
        *whole, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > MAX_LINE:
            self.close()
            raise FeedError(f"the node sent a line longer than {MAX_LINE} bytes on the follow stream")
        return [line for line in whole if line.strip()]

    def close(self) -> None:
        self.ended = True
        self._close()


def channel_feed(client, command: str, stdin: bytes, timeout: float) -> LineFeed:
    """A feed over a new channel of an open paramiko connection; its stdin stays open for requests.

    The channel's timeout bounds a write to a box that stopped reading; a read never waits on it
    (LineFeed reads only what select says is there)."""
    try:
        channel = client.get_transport().open_session(timeout=timeout)
        channel.settimeout(timeout)
        channel.exec_command(command)
        channel.sendall(stdin + b"\n")
    except Exception as exc:  # paramiko raises SSHException, EOFError, OSError alike
        raise FeedError(f"could not open the follow stream: {exc}") from None
    return LineFeed(channel, channel.recv, channel.close, channel.sendall)


def process_feed(argv: list[str], stdin: bytes, **popen) -> LineFeed:
    """A feed from a local child process (its own session, so closing it ends the whole group)."""
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, **popen
    )
    process.stdin.write(stdin + b"\n")
    process.stdin.flush()

    def send(line: bytes) -> None:
        process.stdin.write(line)
        process.stdin.flush()

    def close():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for pipe in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):  # the write side may hold an unflushed line to a dead child
                pipe.close()

    return LineFeed(process.stdout, lambda size: os.read(process.stdout.fileno(), size), close, send)
