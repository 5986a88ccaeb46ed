"""Host keys are pinned: first contact learns the key, a changed key refuses and runs nothing."""

import uuid
from pathlib import Path

import pytest

from fleet.credentials import resolve_auth
from node.transport import HostKeyMismatch, HostKeyUnknown, SSHTransport, scan_host_key
from tests.sshd import Sshd


@pytest.fixture
def own_sshd(tmp_path):
    server = Sshd(tmp_path / "sshd").start()
    yield server
    server.stop()


def connect(server, pinned):
    return SSHTransport("127.0.0.1", server.port, server.user, pinned, resolve_auth(server.credential_ref), 5)


def test_first_contact_learns_the_fingerprint_of_the_real_host_key(own_sshd):
    key = scan_host_key("127.0.0.1", own_sshd.port, timeout=5)
    public = (own_sshd.dir / "host_key.pub").read_text().split()
    assert (key.key_type, key.key_base64) == (public[0], public[1])
    assert key.fingerprint.startswith("SHA256:")


def test_nothing_runs_without_a_pinned_key(own_sshd):
    with pytest.raises(HostKeyUnknown):
        connect(own_sshd, None).connect()


def test_changed_host_key_refuses_and_runs_nothing(own_sshd):
    pinned = scan_host_key("127.0.0.1", own_sshd.port, timeout=5)
    with connect(own_sshd, pinned) as ssh:
        assert ssh.run(["echo", "hello"], timeout=10).stdout == "hello\n"
    own_sshd.restart_with_new_host_key()
    marker = Path(f"/tmp/remotegpu-should-not-exist-{uuid.uuid4().hex}")
    transport = connect(own_sshd, pinned)
    with pytest.raises(HostKeyMismatch) as caught:
        transport.run(["touch", str(marker)], timeout=10)
    assert "changed" in str(caught.value) and pinned.fingerprint in str(caught.value)
    assert "nothing was run" in str(caught.value)
    assert not marker.exists()
