"""A loopback box whose sessions find an nvidia-smi shim first on their PATH: what a rented box's
nvidia-smi would answer (two GPUs, a foreign process, another model, a stuck data loader), while this
machine has none. The shim is a real executable the wrapper runs; only its answers are the test's."""

import stat

from tests.sshd import Sshd


def box_with_nvidia_smi(directory, script: str) -> Sshd:
    """An sshd (started) under directory whose PATH has the shim's folder first."""
    shims = directory / "bin"
    shims.mkdir()
    (shims / "nvidia-smi").write_text(script)
    (shims / "nvidia-smi").chmod(0o755 | stat.S_IXUSR)
    return Sshd(directory / "sshd", extra_config=(f"SetEnv PATH={shims}:/usr/local/bin:/usr/bin:/bin",)).start()
