"""A session that drops under a call is the box not answering, never a crash of the task that asked.

paramiko's SSHException / EOFError and the socket's errors used to escape `stat`, `upload`, `listdir`,
`reader` and the channel stream (a preflight's `install_wrapper` crashed and waited out its 900 s
deadline; a teardown's execution crashed on "SSH session not active"). And a pull's tar stream that
ends before its first block (a dropped session's empty stream) escaped as a raw `tarfile.ReadError`.
A real sshd on loopback: its session processes are SIGKILLed under a connected transport while the
listener stays up, as when a box's network blips."""

import subprocess
from types import SimpleNamespace

import paramiko
import pytest

from fleet.credentials import resolve_auth
from node.pull import pull_batch
from node.transport import LocalTransport, SSHTransport, Unreachable, scan_host_key
from node.transport.stream import StreamError
from tests.sshd import Sshd


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    server = Sshd(tmp_path_factory.mktemp("dropping-sshd"))
    yield server.start()
    server.stop()


def connected(box, in_memory: bool) -> SSHTransport:
    auth = resolve_auth(box.credential_ref)
    if in_memory:  # a key held in an environment variable: streams go over paramiko's channel
        auth = {"pkey": paramiko.Ed25519Key.from_private_key_file(auth["key_filename"])}
    transport = SSHTransport("127.0.0.1", box.port, box.user, scan_host_key("127.0.0.1", box.port, 5), auth, 5)
    transport.connect()
    assert transport.run(["true"], timeout=10).ok
    return transport


def drop_sessions(box) -> None:
    """Kill every session process of the box; the listener goes on accepting."""
    subprocess.run(["pkill", "-KILL", "-P", str(box.process.pid)], check=False)


def read_all(transport, path):
    with transport.reader(path) as handle:
        return handle.read()


CALLS = {
    "stat": lambda transport, tmp: transport.stat(str(tmp)),
    "listdir": lambda transport, tmp: transport.listdir(str(tmp)),
    "upload": lambda transport, tmp: transport.upload(tmp / "local.txt", str(tmp / "remote.txt")),
    "download": lambda transport, tmp: transport.download(str(tmp / "local.txt"), tmp / "back.txt"),
    "reader": lambda transport, tmp: read_all(transport, str(tmp / "local.txt")),
    "stream": lambda transport, tmp: transport.stream(["cat", str(tmp / "local.txt")]).__enter__().read(),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_dropped_session_is_unreachable_and_the_next_call_connects_again(box, tmp_path, call):
    (tmp_path / "local.txt").write_text("hello\n")
    transport = connected(box, in_memory=True)
    try:
        drop_sessions(box)
        with pytest.raises(Unreachable, match=f"127.0.0.1:{box.port}"):
            CALLS[call](transport, tmp_path)
        assert transport.stat(str(tmp_path / "local.txt")).size == 6  # a fresh connection
    finally:
        transport.close()


def test_a_file_that_is_not_there_is_still_an_answer_not_a_drop(box, tmp_path):
    transport = connected(box, in_memory=True)
    try:
        assert transport.stat(str(tmp_path / "nothing")) is None
        with pytest.raises(FileNotFoundError):
            transport.listdir(str(tmp_path / "nothing"))
    finally:
        transport.close()


@pytest.mark.parametrize("kind", ["local", "ssh", "ssh-in-memory"])
def test_a_tar_stream_that_ends_before_its_first_block_is_a_transport_failure_said_as_such(box, tmp_path, kind):
    entry = SimpleNamespace(path="a.txt", bytes=3, sha256="0" * 64)
    transport = LocalTransport() if kind == "local" else connected(box, in_memory=kind == "ssh-in-memory")
    try:
        # tar -C on a root that is gone writes nothing at all and exits 2: the empty stream a dropped
        # session leaves behind, before the command's status can be read.
        with pytest.raises(StreamError, match="tar stream .* broke .*the pull resumes"):
            pull_batch(transport, str(tmp_path / "gone"), [entry], tmp_path / "custody")
    finally:
        transport.close()
    assert not (tmp_path / "custody" / "a.txt").exists()
