"""Credential references resolve on the worker at the moment of use; key material is never accepted."""

import pytest

from fleet.credentials import reference_problem, resolve_auth
from node.transport import CredentialError, SSHTransport, scan_host_key


@pytest.mark.parametrize(
    "reference", ["env:RUNPOD_KEY", "/home/ops/.ssh/id_ed25519", "~/.ssh/lab key".replace(" ", "_")]
)
def test_references_are_accepted(reference):
    assert reference_problem(reference) is None


@pytest.mark.parametrize(
    "reference",
    [
        "-----BEGIN RSA PRIVATE KEY-----",
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ user@box",
        "A" * 80,
        "env:1BAD",
        "relative/path",
        "/path/with\nnewline",
    ],
)
def test_non_references_are_refused(reference):
    assert reference_problem(reference) is not None


def test_env_reference_holding_a_key_authenticates_without_touching_disk(monkeypatch, sshd):
    monkeypatch.setenv("REMOTEGPU_TEST_KEY", sshd.user_key.read_text())
    auth = resolve_auth("env:REMOTEGPU_TEST_KEY")
    assert set(auth) == {"pkey"}
    pinned = scan_host_key("127.0.0.1", sshd.port, timeout=5)
    with SSHTransport("127.0.0.1", sshd.port, sshd.user, pinned, auth, 5) as ssh:
        assert ssh.run(["echo", "ok"], timeout=10).stdout == "ok\n"


def test_env_reference_holding_a_path(monkeypatch, sshd):
    monkeypatch.setenv("REMOTEGPU_TEST_KEY_PATH", str(sshd.user_key))
    assert resolve_auth("env:REMOTEGPU_TEST_KEY_PATH") == {"key_filename": str(sshd.user_key)}


def test_missing_env_var_and_missing_file_are_clear(monkeypatch):
    monkeypatch.delenv("REMOTEGPU_NOT_SET", raising=False)
    with pytest.raises(CredentialError, match="REMOTEGPU_NOT_SET is not set"):
        resolve_auth("env:REMOTEGPU_NOT_SET")
    with pytest.raises(CredentialError, match="does not exist"):
        resolve_auth("/nonexistent/key")


def test_wrong_key_is_refused_by_the_server(tmp_path, sshd):
    from tests.sshd import keygen

    stranger = keygen(tmp_path / "stranger")
    pinned = scan_host_key("127.0.0.1", sshd.port, timeout=5)
    with pytest.raises(CredentialError, match="refused the key"):
        SSHTransport("127.0.0.1", sshd.port, sshd.user, pinned, {"key_filename": str(stranger)}, 5).connect()


def test_a_referenced_variable_is_never_echoed_in_an_error(monkeypatch):
    """env:DATABASE_URL once showed the database password in the connection test's error."""
    from fleet.credentials import resolve_auth
    from node.transport import CredentialError

    monkeypatch.setenv("SOME_WORKER_SECRET", "postgres://user:canary-password@db/x")
    with pytest.raises(CredentialError) as error:
        resolve_auth("env:SOME_WORKER_SECRET")
    assert "canary" not in str(error.value) and "SOME_WORKER_SECRET" in str(error.value)


def test_the_public_half_is_read_from_the_key_or_its_pub_file_and_never_echoes_the_key(tmp_path, monkeypatch):
    """What a rent gives a provider so the box lets us in: from the private key (file or env), from the
    .pub beside a key with a passphrase; a clear error, with nothing of the key, when neither is there."""
    import subprocess
    from types import SimpleNamespace

    from fleet.credentials import public_key_of

    plain = tmp_path / "plain"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(plain)], check=True)
    expected = " ".join((tmp_path / "plain.pub").read_text().split()[:2])
    assert public_key_of(SimpleNamespace(name="k", reference=str(plain))) == expected
    monkeypatch.setenv("RENT_TEST_KEY", plain.read_text())
    assert public_key_of(SimpleNamespace(name="k", reference="env:RENT_TEST_KEY")) == expected

    locked = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(locked)], check=True)
    locked_pub = " ".join((tmp_path / "locked.pub").read_text().split()[:2])
    assert public_key_of(SimpleNamespace(name="k", reference=str(locked))) == locked_pub
    (tmp_path / "locked.pub").write_text("not a key at all\n")
    with pytest.raises(CredentialError, match="public half of SSH key k cannot be read") as refused:
        public_key_of(SimpleNamespace(name="k", reference=str(locked)))
    assert "BEGIN" not in str(refused.value) and "not a key" not in str(refused.value)
