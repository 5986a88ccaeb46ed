"""A real OpenSSH server on a free loopback port, with its own host key and a throwaway user key."""

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.worker_env import NODE_ROOT

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


class Sshd:
    def __init__(
        self,
        directory: Path,
        port: int | None = None,
        extra_config: tuple[str, ...] = (),
        granted_keys: Path | None = None,
    ):
        self.extra_config = list(extra_config)
        self.granted_keys = granted_keys  # a second authorized_keys file (staging's temporary keys)
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.user = getpass.getuser()
        self.user_key = keygen(self.dir / "user_key") if not (self.dir / "user_key").exists() else self.dir / "user_key"
        (self.dir / "authorized_keys").write_text((self.dir / "user_key.pub").read_text())
        self.process: subprocess.Popen | None = None
        self._scanned: tuple[int, object] | None = None  # (the host key file's mtime, the key a scan saw)

    def scanned_host_key(self):
        """The host key as a client's scan sees it, scanned once per key: every e2e test's box pins it,
        and a handshake per test was CPU the suite spent on an answer that never changed."""
        from node.transport import scan_host_key

        stamp = (self.dir / "host_key").stat().st_mtime_ns
        if self._scanned is None or self._scanned[0] != stamp:
            self._scanned = (stamp, scan_host_key("127.0.0.1", self.port, timeout=5))
        return self._scanned[1]

    def new_host_key(self) -> Path:
        for suffix in ("", ".pub"):
            (self.dir / f"host_key{suffix}").unlink(missing_ok=True)
        return keygen(self.dir / "host_key")

    def write_config(self) -> Path:
        config = self.dir / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.dir / 'host_key'}",
                    f"AuthorizedKeysFile {self.dir / 'authorized_keys'} {self.granted_keys or ''}".rstrip(),
                    f"PidFile {self.dir / 'sshd.pid'}",
                    "UsePAM no",
                    "StrictModes no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "Subsystem sftp /usr/lib/openssh/sftp-server",
                    "LogLevel ERROR",
                    # Debian's bash sources ~/.bashrc for every command sshd runs, and this machine's root
                    # .bashrc runs `pyenv init` (and its shims resolve each `python3` through `pyenv exec`):
                    # dozens of processes and ~0.1 s of CPU per SSH command (the two inits alone: 0.09 s).
                    # A shell that finds SHLVL set thinks it is nested and skips that (as a box whose
                    # .bashrc is light would be); the wrapper then runs on /usr/bin/python3.
                    # sshd takes the first SetEnv line only: a test's own variables join this one.
                    " ".join(["SetEnv SHLVL=1", *(line[7:] for line in self.extra_config if line[:7] == "SetEnv ")]),
                    *(line for line in self.extra_config if line[:7] != "SetEnv "),
                    "",
                ]
            )
        )
        return config

    def start(self) -> "Sshd":
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        if not (self.dir / "host_key").exists():
            self.new_host_key()
        config = self.write_config()
        log = (self.dir / "sshd.log").open("a")
        self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not start: {(self.dir / 'sshd.log').read_text()}")

    def stop(self) -> None:
        """Stop listening and cut every open session, as when a box drops off the network."""
        if self.process and self.process.poll() is None:
            # Freeze the listener first: killing the sessions while it still accepts let a watcher's
            # reconnect slip in between (a session that survived the "drop", seen under CI load).
            self.process.send_signal(signal.SIGSTOP)
            subprocess.run(["pkill", "-KILL", "-P", str(self.process.pid)], check=False)
            self.process.kill()
            self.process.wait(timeout=10)

    def restart_with_new_host_key(self) -> None:
        self.stop()
        self.new_host_key()
        self.start()

    @property
    def credential_ref(self) -> str:
        return str(self.user_key)

    @property
    def home(self) -> str:
        return os.path.expanduser("~")

    def credential_for(self, project):
        """This server's client key, registered as a credential and granted to project."""
        from fleet.models import Credential, CredentialKind

        credential, _ = Credential.objects.get_or_create(
            name=f"sshd-{self.port}", defaults={"kind": CredentialKind.SSH_KEY, "reference": self.credential_ref}
        )
        credential.projects.add(project)
        return credential

    def instance_fields(self, project, pinned: bool = True) -> dict:
        """Instance model fields that reach this server (host key pinned unless asked not to)."""
        fields = {
            "profile_key": "generic-ssh",
            "host": "127.0.0.1",
            "port": self.port,
            "user": self.user,
            "credential_id": self.credential_for(project).pk,  # an id: __dict__.update() sets it too
            "state": "running",
            "data_root_override": NODE_ROOT,  # this test process's own root on the shared box
            # The loopback box is this machine: its "power-off" must never be one. Tests that watch a
            # shutdown happen set their own command.
            "shutdown_command": "true",
        }
        if pinned:
            from django.utils import timezone

            key = self.scanned_host_key()
            fields.update(
                host_key_type=key.key_type, host_key_base64=key.key_base64, host_key_confirmed_at=timezone.now()
            )
        return fields


class BoxMaker:
    """What a provider stub starts on create: a real sshd on a fresh port with a fresh host key, letting
    in only the public keys the provider was given for it (at create, or attached later: on_attach).
    client_key is the SSH key a rent names; a box made without it cannot be reached with it."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.client_key = keygen(directory / "client_key")
        self.started: list[Sshd] = []

    def __call__(self, provider: str, name: str, keys: list[str]) -> tuple[str, int]:
        home = self.directory / f"box-{len(self.started)}-{provider}"
        server = Sshd(home)  # its own user_key, which nobody was given: only `keys` let anyone in
        (home / "authorized_keys").write_text("".join(f"{key}\n" for key in keys))
        self.started.append(server.start())
        return "127.0.0.1", server.port

    def authorize(self, endpoint: tuple[str, int], key: str) -> None:
        """A key attached to the box at endpoint (vast.ai's attach): sshd reads the file at each login."""
        server = next(server for server in self.started if server.port == endpoint[1])
        with (server.dir / "authorized_keys").open("a") as keys:
            keys.write(f"{key}\n")

    def public_key(self) -> str:
        return " ".join(Path(f"{self.client_key}.pub").read_text().split()[:2])

    def stop(self) -> None:
        for server in self.started:
            server.stop()
