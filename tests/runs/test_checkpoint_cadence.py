"""The checkpoint cadence is given to the run: REMOTEGPU_CHECKPOINT_EVERY_S from Young's W = √(2·μ·C)
where the platform interrupts, and tinyfit honours it (a real training process, stopped mid-run)."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.models import Instance
from runs.cadence import cadence_for, checkpoint_environment
from runs.models import Run
from tests.runs.conftest import TEST_SAMPLES, TINYFIT, set_config
from tests.waiting import wait_until


def run_on(profile_key: str, **fields) -> Run:
    instance = Instance(name="x", profile_key=profile_key)
    measured = {"checkpoint_bytes": 512 * 1024**2, "write_bytes_per_second": 256 * 1024**2}
    return Run(instance=instance, **{**measured, **fields})


def test_an_interruptible_platform_gives_the_run_its_cadence():
    # vast.ai: μ = 8 h; C = 512 MiB at 256 MiB/s = 2 s; W = √(2 · 28,800 s · 2 s) = 339.4 s.
    assert checkpoint_environment(run_on("vastai")) == {"REMOTEGPU_CHECKPOINT_EVERY_S": "339"}
    assert checkpoint_environment(run_on("generic-ssh")) == {}  # not interrupted: a checkpoint per epoch
    assert checkpoint_environment(run_on("vastai", write_bytes_per_second=None)) == {}  # C not measured yet


def test_an_n_node_run_is_interrupted_n_times_as_often():
    """Before: a 4-node run took one box's μ, checkpointing twice as rarely as Young/Daly says it should."""
    # μ = 8 h / 4 nodes = 2 h: W = √(2 · 7,200 s · 2 s) = 169.7 s.
    four = run_on("vastai", scheduler={"options": {"nodes": 4, "tasks_per_node": 1}})
    assert checkpoint_environment(four) == {"REMOTEGPU_CHECKPOINT_EVERY_S": "169"} and cadence_for(four).nodes == 4
    assert cadence_for(run_on("vastai", scheduler={"options": {"nodes": True}})).nodes == 1  # not a count


def test_the_cadence_takes_the_first_real_checkpoint_and_rounds_down_to_whole_steps():
    # The first checkpoint the run wrote is 128 MiB, not the declared 512: C = 0.5 s, W = √(2 · 28,800 · 0.5) = 169.7 s.
    first = {"first_written": {"name": "latest.pth", "bytes": 128 * 1024**2, "step": 1, "at": 1.0}}
    run = run_on("vastai", ckpt_mirror=first)
    assert checkpoint_environment(run) == {"REMOTEGPU_CHECKPOINT_EVERY_S": "169"}
    assert cadence_for(run).measured_size and cadence_for(run).checkpoint_bytes == 128 * 1024**2
    # Its logged steps take 40 s (the median: one slow step and garbage do not move it): 4 whole steps, 160 s.
    run.curve = [{"epoch": i, "seconds": s} for i, s in enumerate(["40.0", "39", "41", "40", "400", "x", None, "-3"])]
    assert checkpoint_environment(run) == {
        "REMOTEGPU_CHECKPOINT_EVERY_S": "160",
        "REMOTEGPU_CHECKPOINT_EVERY_STEPS": "4",
    }
    run.curve = [{"epoch": 1, "seconds": "900"}]  # a step longer than W: every step
    assert checkpoint_environment(run)["REMOTEGPU_CHECKPOINT_EVERY_STEPS"] == "1"


def test_the_launched_command_gets_its_cadence(make_run, node, settings):
    """What launch_run hands the node: the spec's environment, read back from the node's spec file."""
    from runs.box_spec import run_node

    run = make_run(checkpoint_bytes=512 * 1024**2, write_bytes_per_second=256 * 1024**2)
    run.instance.profile_key = "vastai"
    with run_node(run, env=checkpoint_environment(run)) as box:
        box.prepare()
        spec_path = box.write_spec("launch", box.spec(1))
    written = json.loads((node.active(run) / Path(spec_path).name).read_text())
    assert written["env"]["REMOTEGPU_CHECKPOINT_EVERY_S"] == "339"


def train_until_epoch(tmp_path, stop_after: int, every: str | None, steps: str | None = None) -> tuple[bool, str]:
    """tinyfit held after it logged epoch stop_after (its checkpoint decision made, its train.csv
    written), then killed: whether a checkpoint exists."""
    hold = tmp_path / "hold"
    hold.write_text(f"{stop_after}\n")
    config = tmp_path / "config.yaml"
    config.write_text((TINYFIT / "config.yaml").read_text())
    set_config(tmp_path, samples=TEST_SAMPLES, hold_file=hold)
    env = dict(os.environ, REMOTEGPU_CHECKPOINT_DIR=str(tmp_path / "ckpt"), REMOTEGPU_OUTPUT_DIR=str(tmp_path / "out"))
    if every:
        env["REMOTEGPU_CHECKPOINT_EVERY_S"] = every
    if steps:
        env["REMOTEGPU_CHECKPOINT_EVERY_STEPS"] = steps
    log = (tmp_path / "log.txt").open("w")
    child = subprocess.Popen([sys.executable, str(TINYFIT / "train.py"), "--config", str(config)], env=env, stdout=log)
    train_csv = tmp_path / "out" / "train.csv"
    try:
        logged = lambda: train_csv.exists() and len(train_csv.read_text().splitlines()) > stop_after  # noqa: E731
        wait_until(logged, 120, 0.05, what=f"epoch {stop_after} logged")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        log.close()
    return (tmp_path / "ckpt" / "latest.pth").exists(), (tmp_path / "log.txt").read_text()


# The two below start the real example (torch's import: seconds of CPU each): the end-to-end tier, not
# the quick loop (`make test-fast` passed its minute with them).
@pytest.mark.e2e
@pytest.mark.parametrize(
    ("every", "steps", "checkpointed"),
    [(None, None, True), ("3600", None, False), ("0.001", None, True), ("3600", "2", True), ("0.001", "5", False)],
)
def test_tinyfit_checkpoints_at_the_cadence_it_is_given(tmp_path, every, steps, checkpointed):
    exists, log = train_until_epoch(tmp_path, 3, every, steps)
    assert "epoch 3/" in log
    # Without a cadence: after every epoch. An hour's cadence: not yet after 3 short epochs. A millisecond's
    # (shorter than any epoch of 6 batches): yes.
    # In whole steps, the steps decide: every 2 epochs (saved at 2), every 5 (not yet at 3).
    assert exists is checkpointed


@pytest.mark.e2e
def test_tinyfit_resumed_from_its_last_epoch_on_an_empty_box_still_exports_its_whole_log(tmp_path):
    """A box lost after the last epoch's checkpoint but before sealing: the run continues elsewhere from
    that checkpoint, with nothing more to train and an empty output/. train.csv must still be written,
    every epoch's row from the checkpoint (CI: "required file train.csv is missing")."""
    config = tmp_path / "config.yaml"
    config.write_text((TINYFIT / "config.yaml").read_text())
    set_config(tmp_path, samples=TEST_SAMPLES, epochs=4)
    env = dict(os.environ, REMOTEGPU_CHECKPOINT_DIR=str(tmp_path / "ckpt"), REMOTEGPU_OUTPUT_DIR=str(tmp_path / "out"))
    command = [sys.executable, str(TINYFIT / "train.py"), "--config", str(config)]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=120)
    epochs = len((tmp_path / "out" / "train.csv").read_text().splitlines()) - 1
    shutil.rmtree(tmp_path / "out")  # the other box: only the durable checkpoints were restored
    (tmp_path / "out").mkdir()
    again = subprocess.run(command, env=env, check=True, capture_output=True, text=True, timeout=120)
    assert f"resumed from epoch {epochs}" in again.stdout
    rows = (tmp_path / "out" / "train.csv").read_text().splitlines()
    assert len(rows) == epochs + 1 and rows[-1].startswith(f"{epochs},")
