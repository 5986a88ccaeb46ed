"""One contract, two transports: the local subprocess and real SSH to a loopback sshd."""

import os
import time
import uuid

import paramiko
import pytest

from fleet.credentials import resolve_auth
from node.transport import (
    AnswerTooLarge,
    CommandTimeout,
    HostKey,
    LocalTransport,
    SSHTransport,
    TransportError,
    scan_host_key,
)

CANARY = f"/tmp/remotegpu-canary-{uuid.uuid4().hex}"
NASTY = f'it\'s a "test"; $(touch {CANARY}) `touch {CANARY}` && echo * | cat'


@pytest.fixture(params=["local", "ssh", "ssh-key-in-memory"])
def transport(request, sshd):
    if request.param == "local":
        with LocalTransport() as local:
            yield local
        return
    key = scan_host_key("127.0.0.1", sshd.port, timeout=5)
    auth = resolve_auth(sshd.credential_ref)
    if request.param == "ssh-key-in-memory":
        # A key held in an environment variable: bulk streams use paramiko's channel, not OpenSSH.
        auth = {"pkey": paramiko.Ed25519Key.from_private_key_file(auth["key_filename"])}
    with SSHTransport("127.0.0.1", sshd.port, sshd.user, key, auth, 5) as ssh:
        yield ssh


def test_arguments_reach_the_program_verbatim(transport):
    result = transport.run(["printf", "%s|", NASTY, "two words", ""], timeout=10)
    assert result.exit_code == 0
    assert result.stdout == f"{NASTY}|two words||"
    assert not os.path.exists(CANARY), "a shell interpreted an argument"


def test_exit_code_and_stderr_propagate(transport):
    result = transport.run_script("echo out; echo err >&2; exit 7", timeout=10)
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")


def test_stdin_is_delivered(transport):
    result = transport.run(["wc", "-c"], timeout=10, stdin=b"x" * 100_000)
    assert result.stdout.strip() == "100000"


def test_a_box_that_answers_and_exits_before_reading_its_stdin_is_still_heard(transport):
    """A box may answer and close its end before it reads what it was sent: its answer is read and judged,
    not called unreachable (the garbage-box test lost that race under load)."""
    result = transport.run(["echo", "answered"], timeout=30, stdin=b"x" * (16 << 20))
    assert (result.exit_code, result.stdout) == (0, "answered\n")


def test_timeout_is_enforced(transport):
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        transport.run(["sleep", "30"], timeout=1)
    assert time.monotonic() - started < 5


def test_an_answer_past_the_bound_ends_the_command(transport):
    """Every read from a box has a byte bound; 40 MiB on stdout is refused at 1 MiB."""
    transport.max_answer = 1024**2
    started = time.monotonic()
    with pytest.raises(AnswerTooLarge, match="more than 1048576 bytes"):
        transport.run(["sh", "-c", "head -c 41943040 /dev/zero; sleep 30"], timeout=20)
    assert time.monotonic() - started < 10  # ended at the bound, not at the timeout
    noisy = transport.run(["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' e >&2; echo done"], timeout=20)
    assert noisy.stdout == "done\n" and 0 < len(noisy.stderr) <= 64 * 1024  # stderr keeps its last part


def test_upload_download_stat_and_list(transport, tmp_path):
    node_dir = tmp_path / "node dir"
    node_dir.mkdir()
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 1000)
    transport.upload(source, str(node_dir / "copy.bin"))
    stat = transport.stat(str(node_dir / "copy.bin"))
    assert stat.size == 256_000 and not stat.is_dir
    assert transport.stat(str(node_dir / "missing")) is None
    assert [entry.path for entry in transport.listdir(str(node_dir))] == ["copy.bin"]
    back = tmp_path / "back.bin"
    transport.download(str(node_dir / "copy.bin"), back)
    assert back.read_bytes() == source.read_bytes()


def test_home_relative_paths_expand_on_the_node(transport):
    name = f"remotegpu-contract-{uuid.uuid4().hex}"
    transport.run_script(f'printf 12345 > "$HOME"/{name}', timeout=10)
    try:
        assert transport.stat(f"$HOME/{name}").size == 5
        assert transport.stat(f"~/{name}").size == 5
        assert transport.stat("$HOME").is_dir
    finally:
        transport.run_script(f'rm -f "$HOME"/{name}', timeout=10)


def test_stream_delivers_every_byte_of_a_file_with_an_awkward_name(transport, tmp_path):
    payload = os.urandom(3 << 20)
    source = tmp_path / 'it\'s a "blob" $(x).bin'
    source.write_bytes(payload)
    with transport.stream(["cat", str(source)]) as stream:
        received = b"".join(iter(lambda: stream.read(1 << 16), b""))
    assert received == payload
    with transport.stream(["tail", "-c", f"+{len(payload) - 99}", str(source)]) as stream:
        assert stream.read() == payload[-100:]


def test_stream_feeds_stdin_and_reports_a_failing_command(transport, tmp_path):
    names = [f"file-{i:04d}.txt" for i in range(2000)]  # far more than one pipe buffer of names
    with transport.stream(["wc", "-l"], stdin="".join(f"{n}\n" for n in names).encode()) as stream:
        assert stream.read().strip() == b"2000"
    with pytest.raises(TransportError), transport.stream(["cat", str(tmp_path / "missing")]) as stream:
        stream.read()


def test_a_bulk_stream_is_held_to_the_pinned_host_key(sshd, tmp_path):
    """The OpenSSH path must refuse a changed host key exactly as the paramiko path does."""
    wrong = HostKey.of(paramiko.ECDSAKey.generate())
    ssh = SSHTransport("127.0.0.1", sshd.port, sshd.user, wrong, resolve_auth(sshd.credential_ref), 5)
    with pytest.raises(TransportError), ssh.stream(["touch", str(tmp_path / "ran")]) as stream:
        stream.read()
    assert not (tmp_path / "ran").exists()
