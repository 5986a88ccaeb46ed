"""What the box does on its own holds to the control side's rules.

The start hook's relaunch (`boot-resume`) ran no GPU check, so a box back from a restart without its GPUs
trained on CPU at the GPU rate; it now passes the launch task's gate (one rule, `gone_problem`). The
secrets file fell back to `~/.remotegpu-secrets` where no tmpfs was found, a durable, synced home on
Featurize and LanRui; with no memory-backed directory, measured as tmpfs, secrets are refused with the
reason. nvidia-smi is a shim on PATH answering as a box back without its GPUs would."""

import json
import os
import stat
import subprocess

import pytest

from tests.box_specs import spec_with
from tests.mounts import tmpfs
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()

NO_GPUS = "#!/bin/sh\n# a box back from a restart with no GPU attached: nvidia-smi lists nothing\nexit 0\n"


@pytest.fixture
def cut_off(tmp_path):
    """An opted-in attempt asking for GPU 0, cut off by a restart: no exit marker, no process."""
    active = tmp_path / "proj" / "active" / "r1"
    attempt = active / "attempt-1"
    attempt.mkdir(parents=True)
    (attempt / "log.txt").write_text("")
    spec = spec_with(
        WRAPPER,
        **{
            "attempt": 1,
            "run_id": "r1",
            "run_root": str(tmp_path / "proj"),
            "active": str(active),
            "export": str(tmp_path / "proj" / "export" / "r1"),
            **{key: str(active / key) for key in ("src", "cwd", "ckpt", "output", "partial", "quarantine_base")},
            "boot_relaunch": {"max": 2},
            "gpus": [0],
            "gpus_at_preflight": {"nvidia_smi": True},
        },
    )
    (active / "spec-attempt-1.json").write_text(spec.to_json())
    return spec, active


def shim(tmp_path, monkeypatch, script: str | None):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if script is not None:
        (bin_dir / "nvidia-smi").write_text(script)
        (bin_dir / "nvidia-smi").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_a_box_back_without_its_gpus_relaunches_nothing(cut_off, tmp_path, monkeypatch):
    spec, active = cut_off
    shim(tmp_path, monkeypatch, NO_GPUS)
    assert WRAPPER.why_not(spec, str(active)) == WRAPPER.GPU_GATE + (
        "GPU 0 is not on this box now (nvidia-smi lists none): not run on CPU"
    )


def test_a_box_whose_nvidia_smi_is_gone_since_preflight_relaunches_nothing(cut_off, tmp_path, monkeypatch):
    spec, active = cut_off
    shim(tmp_path, monkeypatch, None)
    assert "nvidia-smi answered at preflight and not now" in WRAPPER.why_not(spec, str(active))
    # A box that never had nvidia-smi (a CPU run's box) is not held to it, as at the launch task.
    assert WRAPPER.why_not(spec.but(gpus=[]), str(active)) is None


def test_the_start_hook_says_why_in_the_attempts_log_and_starts_nothing(cut_off, tmp_path, monkeypatch):
    spec, active = cut_off
    shim(tmp_path, monkeypatch, NO_GPUS)
    root = str(tmp_path / "proj")
    command = ["python3", "-I", "-S", str(WRAPPER.__file__), "boot-resume", root]
    done = subprocess.run(command, capture_output=True, timeout=60, env={**os.environ})
    said = json.loads(done.stdout)
    assert said["relaunched"] == [] and said["skipped"][0]["why"].startswith(WRAPPER.GPU_GATE)
    assert "not relaunched on the box by its start hook: the GPU gate" in (active / "attempt-1" / "log.txt").read_text()
    assert not (active / WRAPPER.COUNTER).exists()


def test_secrets_are_refused_where_no_directory_is_memory_backed(tmp_path, monkeypatch):
    plain = tmp_path / "shm-on-disk"  # a /dev/shm that is a plain directory of the system disk
    plain.mkdir()
    monkeypatch.setattr(WRAPPER, "SECRET_DIRS", (str(plain),))
    spec = spec_with(
        WRAPPER, **{"run_root": str(tmp_path / "proj"), "run_id": "r1", "attempt": 1, "secrets": ["TOKEN"]}
    )
    with pytest.raises(WRAPPER.NotPrivate, match="never written to a disk"):
        WRAPPER.private_dir()
    assert WRAPPER.take_secrets(spec) == {}
    assert not list(plain.iterdir()) and not (tmp_path / ".remotegpu-secrets").exists()


def test_secrets_land_in_a_directory_measured_as_tmpfs(tmp_path, monkeypatch):
    with tmpfs(tmp_path / "shm", "1m") as memory:
        monkeypatch.setattr(WRAPPER, "SECRET_DIRS", (str(tmp_path / "missing"), str(memory)))
        spec = spec_with(
            WRAPPER, **{"run_root": str(tmp_path / "proj"), "run_id": "r1", "attempt": 1, "secrets": ["TOKEN"]}
        )
        directory = WRAPPER.private_dir()
        assert directory.startswith(str(memory))
        WRAPPER.write_private(WRAPPER.secrets_path(spec), json.dumps({"TOKEN": "s3cr3t"}))
        assert WRAPPER.take_secrets(spec) == {"TOKEN": "s3cr3t"}
        assert os.listdir(directory) == []  # read once, gone
