"""Unreachable nodes fail within the configured timeout with a clear message."""

import socket
import threading
import time

import pytest

from node.transport import HostKey, SSHTransport, Unreachable, scan_host_key
from tests.sshd import free_port


@pytest.fixture
def silent_server():
    """Accepts TCP and never says a word (a hung sshd, a wrong service, a black-holed proxy)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_closed_port_is_unreachable_at_once():
    started = time.monotonic()
    with pytest.raises(Unreachable, match="cannot reach"):
        scan_host_key("127.0.0.1", free_port(), timeout=2)
    assert time.monotonic() - started < 2


def test_silent_server_fails_within_the_timeout_on_first_contact(silent_server):
    started = time.monotonic()
    with pytest.raises(Unreachable, match="did not speak SSH"):
        scan_host_key("127.0.0.1", silent_server, timeout=1.5)
    assert time.monotonic() - started < 4


def test_silent_server_fails_within_the_timeout_when_pinned(silent_server):
    pinned = HostKey("ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIB7Kz8c6l1rW9vNd0cIh0HcdhdZ4m5lQeQzMc1a2b3c4")
    transport = SSHTransport("127.0.0.1", silent_server, "nobody", pinned, {"key_filename": "/dev/null"}, 1.5)
    started = time.monotonic()
    with pytest.raises(Unreachable):
        transport.run(["true"], timeout=5)
    assert time.monotonic() - started < 4
