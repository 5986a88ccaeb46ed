"""The checkpoint cadence is given to the run: REMOTEGPU_CHECKPOINT_EVERY_S from Young's W = √(2·μ·C)
where the platform interrupts, and tinyfit honours it (a real training process, stopped mid-run)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from profiles.models import Instance
from runs.cadence import checkpoint_environment
from runs.models import Run
from tests.runs.conftest import TINYFIT


def run_on(profile_key: str, **fields) -> Run:
    instance = Instance(name="x", profile_key=profile_key)
    measured = {"checkpoint_bytes": 512 * 1024**2, "write_bytes_per_second": 256 * 1024**2}
    return Run(instance=instance, **{**measured, **fields})


def test_an_interruptible_platform_gives_the_run_its_cadence():
    # vast.ai: μ = 8 h; C = 512 MiB at 256 MiB/s = 2 s; W = √(2 · 28,800 s · 2 s) = 339.4 s.
    assert checkpoint_environment(run_on("vastai")) == {"REMOTEGPU_CHECKPOINT_EVERY_S": "339"}
    assert checkpoint_environment(run_on("generic-ssh")) == {}  # not interrupted: a checkpoint per epoch
    assert checkpoint_environment(run_on("vastai", write_bytes_per_second=None)) == {}  # C not measured yet


def train_until_epoch(tmp_path, stop_after: int, every: str | None) -> tuple[bool, str]:
    """tinyfit with a pause per epoch, killed once it logged epoch stop_after: whether a checkpoint exists."""
    config = tmp_path / "config.yaml"
    config.write_text((TINYFIT / "config.yaml").read_text().replace("epoch_pause: 0", "epoch_pause: 0.5"))
    env = dict(os.environ, REMOTEGPU_CHECKPOINT_DIR=str(tmp_path / "ckpt"), REMOTEGPU_OUTPUT_DIR=str(tmp_path / "out"))
    if every:
        env["REMOTEGPU_CHECKPOINT_EVERY_S"] = every
    child = subprocess.Popen(
        [sys.executable, str(TINYFIT / "train.py"), "--config", str(config)], env=env, stdout=subprocess.PIPE, text=True
    )
    lines = []
    deadline = time.monotonic() + 120
    for line in child.stdout:
        lines.append(line)
        if line.startswith(f"epoch {stop_after}/") or time.monotonic() > deadline:
            break
    time.sleep(0.2)  # past the epoch's checkpoint write, inside its pause
    child.send_signal(signal.SIGKILL)
    child.wait()
    return (tmp_path / "ckpt" / "latest.pth").exists(), "".join(lines)


@pytest.mark.parametrize(("every", "checkpointed"), [(None, True), ("3600", False), ("1", True)])
def test_tinyfit_checkpoints_at_the_cadence_it_is_given(tmp_path, every, checkpointed):
    exists, log = train_until_epoch(tmp_path, 3, every)
    assert "epoch 3/" in log
    # Without a cadence: after every epoch. An hour's cadence: not yet after 3 short epochs. A second's: yes.
    assert exists is checkpointed
