"""A long-lived line stream from a node command (the wrapper's `follow`), read with a deadline.

Over SSH it is one more channel on the connection the watcher already holds (no handshake); on
the control host, a child process. Reading waits at most the time asked for, keeps at most
MAX_LINE bytes of a line not yet ended (a node that never sends a newline cannot grow our
memory), and ends cleanly when the command does.
"""

import os
import select
import signal
import subprocess

from profiles.transport.base import TransportError

MAX_LINE = 1 << 20
READ = 1 << 16


class FeedError(TransportError):
    """The stream broke, or sent a line longer than MAX_LINE."""


class LineFeed:
    def __init__(self, source, recv, close):
        self._source, self._recv, self._close = source, recv, close
        self._buffer = b""
        self.ended = False

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
    """A feed over a new channel of an open paramiko connection."""
    try:
        channel = client.get_transport().open_session(timeout=timeout)
        channel.exec_command(command)
        channel.sendall(stdin)
        channel.shutdown_write()
    except Exception as exc:  # paramiko raises SSHException, EOFError, OSError alike
        raise FeedError(f"could not open the follow stream: {exc}") from None
    return LineFeed(channel, channel.recv, channel.close)


def process_feed(argv: list[str], stdin: bytes, **popen) -> LineFeed:
    """A feed from a local child process (its own session, so closing it ends the whole group)."""
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, **popen
    )
    process.stdin.write(stdin)
    process.stdin.close()

    def close():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()

    return LineFeed(process.stdout, lambda size: os.read(process.stdout.fileno(), size), close)
