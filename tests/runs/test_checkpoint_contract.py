"""Where the product looks for checkpoints, on the wrapper's own mirror with real files: only files named
like a checkpoint count (a CSV sidecar was shown as the newest copy on the control host), and a run that
trains past its cadence with nothing in $REMOTEGPU_CHECKPOINT_DIR (its trainer saved into its own
folder; ckpt/ stayed empty for the whole run) gets one material alert naming that folder."""

import os
from datetime import timedelta

import pytest
import torch
from django.utils import timezone

from runs.actions.checkpoints import apply_mirror, lag_allowance
from runs.checkpoints import missing_problem, parse_mirror
from runs.models import RunState
from tests import factories
from tests.box_specs import spec_with
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()


def mirror_of(tmp_path, files: dict[str, bytes]) -> dict:
    """The wrapper's mirror state after two looks at a ckpt/ holding files (no durable tier), as the
    control side reads it."""
    return parse_mirror(raw_mirror_of(tmp_path, files))


def raw_mirror_of(tmp_path, files: dict[str, bytes]) -> dict:
    """The state file the wrapper's mirror writes after two looks at a ckpt/ holding files."""
    active = tmp_path / "proj" / "active" / "r1"
    ckpt = active / "ckpt"
    (active / "attempt-1").mkdir(parents=True)
    ckpt.mkdir()
    mirror = WRAPPER.CheckpointMirror(
        spec_with(WRAPPER, **{"ckpt": str(ckpt), "active": str(active)}), str(active / "attempt-1")
    )
    mirror.begin()
    for name, data in files.items():
        (ckpt / name).write_bytes(data)
        os.utime(ckpt / name, (1000, 1000))  # long settled
    mirror.look()
    mirror.look()
    return mirror.state


def checkpoint_bytes(tmp_path, step: int) -> bytes:
    path = tmp_path / "c.pt"
    torch.save({"step": step, "w": torch.zeros(2)}, path)
    return path.read_bytes()


def test_only_files_named_like_a_checkpoint_count(tmp_path):
    mirror = mirror_of(tmp_path, {"metrics.csv": b"step,loss\n9,0.1\n", "notes.txt": b"x", "model.pt": b""})
    assert mirror["local"]["name"] == "model.pt"  # the sidecars written after it are not newer copies
    assert set(WRAPPER.candidates(str(tmp_path / "proj" / "active" / "r1" / "ckpt"))) == {"model.pt"}


def test_a_trainer_saving_elsewhere_is_named_once_it_has_trained_past_its_cadence(tmp_path):
    empty = mirror_of(tmp_path, {"train-log.csv": b"iter,loss\n1,2.0\n"})
    assert empty["local"] is None and empty["start"] is None
    problem = missing_problem(empty, logged_steps=40, running_seconds=700, allowance=600)
    assert "no checkpoint in $REMOTEGPU_CHECKPOINT_DIR (active/<run-id>/ckpt on the box)" in problem
    assert "40 steps logged over 700 s" in problem
    assert missing_problem(empty, logged_steps=40, running_seconds=500, allowance=600) is None  # within cadence
    assert missing_problem(empty, logged_steps=0, running_seconds=700, allowance=600) is None  # not training yet


def test_a_checkpoint_where_the_product_looks_or_one_started_from_is_enough(tmp_path):
    saved = mirror_of(tmp_path / "a", {"ckpt.pt": checkpoint_bytes(tmp_path, 5)})
    assert saved["local"]["step"] == 5
    assert missing_problem(saved, logged_steps=40, running_seconds=10**6, allowance=600) is None


@pytest.mark.django_db
def test_the_run_gets_one_material_alert_naming_the_folder(box_row, tmp_path):
    run = factories.run(box_row, state=RunState.RUNNING, attempt=1, curve=[{"epoch": 1}, {"epoch": 2}])
    run.launched_at = timezone.now() - timedelta(seconds=lag_allowance(run) + 60)
    raw = {"ckpt_mirror": raw_mirror_of(tmp_path, {"losses.csv": b"1,2\n"}), "now": 0}
    for _ in range(2):  # two probes: said once
        apply_mirror(run, raw)
    assert run.alerts.count("no_checkpoint") == 1
    alert = run.events.get(kind="alert")
    assert alert.message.startswith("No checkpoint where RemoteGPU looks: 2 steps logged")
    assert "$REMOTEGPU_CHECKPOINT_DIR" in alert.message
