"""The no-edit path on the loopback box: trainers written the way public ones are, with no RemoteGPU in
mind, reach a verified export with zero changed lines, their files declared with the run (runs/
trainer_files.py). `examples/charlm/train.py` (nanoGPT's way: `out/ckpt.pt` saved in place, `iter_num`,
`--init_from=resume`, losses printed), `examples/lightfit/train_plain.py` (Lightning's way:
`epoch=…-step=….ckpt`, a CSV logger) and `examples/trainerfit/train.py` (Hugging Face Trainer's way:
`checkpoint-<step>/` folders, a JSON-lines log, predictions) are each killed mid-run, retried, resume
where they stopped and are verified from their own files. The helper paths of charlm and trainerfit
(`train_rg.py`) change at most ten lines each; trainerfit's is verified after a move to a second box
(tests/runs/test_durable_resume.py)."""

import csv
import json
import os
import pickle
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
from django.conf import settings

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.models import RunState
from tests.conftest import ARTIFACTS, REPO
from tests.custody.test_custody_e2e import wait_record
from tests.runs.conftest import wait_state
from tests.runs.test_bring_your_own import SETTLED, code_lines
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

CHARLM = REPO / "examples" / "charlm"
LIGHTFIT = REPO / "examples" / "lightfit"
TRAINERFIT = REPO / "examples" / "trainerfit"
TRAINERFIT_FILES = {
    "checkpoints": "out/checkpoint-*/",
    "resume_args": "--resume_from_checkpoint True",
    "smoke_args": "--num_train_epochs=1",
}
STEP_LINE = r"step (?P<step>\d+): train loss (?P<train_loss>[0-9.]+), val loss (?P<val_loss>[0-9.]+)"
CHARLM_FILES = {
    "checkpoints": "out/ckpt.pt",
    "resume_args": "--init_from=resume",
    "smoke_args": "--max_iters=2 --eval_interval=1",
    "weights_key": "model",
    "log_pattern": STEP_LINE,
}


def copied(example: Path) -> Path:
    target = Path(settings.VAR_DIR) / "sources" / uuid.uuid4().hex
    shutil.copytree(example, target, ignore=shutil.ignore_patterns("__pycache__", "out", "lightning_logs"))
    return target


@pytest.fixture
def source():
    target = copied(CHARLM)
    yield target
    shutil.rmtree(target, ignore_errors=True)


def exported_rows(node, run) -> list[dict]:
    with open(node.export(run) / "train.csv") as handle:
        return list(csv.DictReader(handle))


def verified_after(started: float, record, name: str) -> None:
    """The seconds from the preflight's start to a verified record (the issue's figure, per trainer and
    path), kept in test-artifacts/no-edit-seconds.json by each test that reaches one."""
    assert record.status == CustodyStatus.VERIFIED, record.failure
    path = ARTIFACTS / "no-edit-seconds.json"
    ARTIFACTS.mkdir(exist_ok=True)
    seen = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**seen, name: round(time.monotonic() - started, 1)}, indent=1))


@pytest.mark.parametrize("example", [CHARLM, TRAINERFIT], ids=lambda path: path.name)
def test_the_helper_path_changes_at_most_ten_lines(example):
    import difflib

    diff = difflib.unified_diff(code_lines(example / "train.py"), code_lines(example / "train_rg.py"), n=0)
    changed = [line for line in diff if line.startswith("+") and not line.startswith("+++")]
    assert 0 < len(changed) <= 10, changed


def saved_at(path: Path, key: str) -> int | None:
    """The step a whole checkpoint file holds; None while it is not there or half written (a kill then
    would leave a file no resume can load: these trainers save in place, not atomically)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)[key]
    except (OSError, RuntimeError, EOFError, KeyError, pickle.UnpicklingError):
        return None


def training(run, bob):
    """Preflight, smoke and launch: the run once its attempt trains."""
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED | {RunState.RUNNING}, timeout=180)
    assert run.state == RunState.RUNNING, (run.state, run.close_reason, run.smoke_output[-800:])
    return run


def killed_and_retried(node, run, hold: Path, bob):
    """Its trainer killed (held after a whole save), the run retried with the hold gone: the exported run
    and its second attempt's log."""
    _wrapper, child = map(int, (node.active(run) / "attempt-1" / "pid").read_text().split())
    os.kill(child, signal.SIGKILL)
    run = wait_state(run, {RunState.QUARANTINED}, refresh=True)
    assert run.exit_code == 137, [event.message for event in run.events.order_by("at")]
    hold.unlink()
    do_retry_run(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, (run.state, run.close_reason)
    return run, (node.active(run) / "attempt-2" / "log.txt").read_text()


def test_an_unchanged_nanogpt_style_trainer_is_killed_retried_resumed_in_place_and_verified(
    bob, make_run, node, source, tmp_path, celery_worker_process
):
    hold = tmp_path / "hold"
    hold.write_text("20\n")  # held after its evaluation (and save) at iteration 20 until the test lets go
    command = [sys.executable, "train.py", "config/tiny.py", f"--hold_file={hold}"]
    run = make_run(command=command, config_path="config/tiny.py", trainer_files=CHARLM_FILES)
    started = time.monotonic()
    run = training(run, bob)
    # The smoke (its declared --max_iters=2) saved out/ckpt.pt in the source tree: removed, with a warning.
    smoke = "Smoke: the smoke wrote the script's declared files (out/ckpt.pt)"
    assert run.events.filter(kind="alert", message__startswith=smoke).exists()
    # Killed once its save at iteration 20 is whole: nanoGPT saves ckpt.pt in place, so a kill during the
    # write leaves a file no resume can load (the no-edit path does not make an in-place save atomic).
    checkpoint = node.active(run) / "src" / "out" / "ckpt.pt"
    wait_until(lambda: saved_at(checkpoint, "iter_num") == 20, 120, 0.05, what=lambda: saved_at(checkpoint, "iter_num"))
    run, resumed = killed_and_retried(node, run, hold, bob)
    assert "Resuming training from out at iter 20" in resumed
    rows = exported_rows(node, run)
    assert [int(row["step"]) for row in rows] == [0, 10, 20, 30, 40, 50, 60]  # both attempts' printed lines
    assert {"train_loss", "val_loss"} <= set(rows[0])
    record = wait_record(do_start_verification(run.pk, actor=bob))
    verified_after(started, record, "charlm, no edit (killed once, retried)")


def test_a_declaration_naming_files_the_script_never_wrote_lists_each_at_once(
    bob, make_run, source, celery_worker_process
):
    """The script (here one that prints a step line and saves nothing, so no torch is imported) exits 0;
    the declared files it never wrote are each named, and the run is not retried."""
    files = {**CHARLM_FILES, "checkpoints": "checkpoints/*.pt", "predictions": "out/predictions.csv"}
    run = make_run(
        command=[sys.executable, "-c", "print('step 0: train loss 4.1, val loss 4.2')"],
        config_path="config/tiny.py",
        trainer_files=files,
    )
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=180, refresh=True)
    assert run.state == RunState.QUARANTINED and run.failure_class == "contract", (run.state, run.close_reason)
    assert run.close_reason.startswith("export contract not met (2 problems): ")
    assert "no file matches the declared checkpoints checkpoints/*.pt" in run.close_reason
    assert "the declared predictions file out/predictions.csv is missing" in run.close_reason
    assert run.attempt == 1


def test_charlm_with_the_helpers_lines_is_verified_with_its_loss_recomputed(
    bob, make_run, source, celery_worker_process
):
    run = make_run(command=[sys.executable, "train_rg.py", "config/tiny.py"], config_path="config/tiny.py")
    started = time.monotonic()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, (run.state, run.close_reason, run.smoke_output[-500:])
    assert not run.events.filter(kind="alert", message__startswith="Smoke:").exists()  # its smoke wrote nothing
    record = wait_record(do_start_verification(run.pk, actor=bob))
    verified_after(started, record, "charlm, helper (10 lines)")
    (loss,) = [m for m in record.evidence["metrics"] if m["name"] == "loss"]
    assert loss["test"] == "val" and loss["within_tolerance"]


def test_an_unchanged_lightning_style_trainer_is_killed_retried_resumed_and_exported_from_its_files(
    bob, make_run, node, tmp_path, celery_worker_process
):
    source = copied(LIGHTFIT)
    files = {
        "checkpoints": "lightning_logs/checkpoints/epoch=*-step=*.ckpt",
        "smoke_args": "--max_epochs=1",
        "weights_key": "state_dict",
        "metrics": "lightning_logs/version_0/metrics.csv",
    }
    hold = tmp_path / "hold"
    hold.write_text("2\n")  # held after its save of epoch 2 until the test lets go
    command = [sys.executable, "train_plain.py", "--ckpt_path", "last", f"--hold_file={hold}"]
    run = make_run(source_path=str(source), command=command, trainer_files=files)
    started = time.monotonic()
    run = training(run, bob)
    saved = node.active(run) / "src" / "lightning_logs" / "checkpoints" / "epoch=2-step=39.ckpt"
    wait_until(lambda: saved_at(saved, "epoch") == 2, 120, 0.05, what=lambda: saved_at(saved, "epoch"))
    run, resumed = killed_and_retried(node, run, hold, bob)
    assert "Epoch 3:" in resumed and "Epoch 2:" not in resumed  # from the newest epoch=…ckpt, not from 0
    rows = exported_rows(node, run)
    assert [int(row["step"]) for row in rows] == [13 * epoch for epoch in range(1, 7)]  # both attempts' rows
    assert {"epoch", "train_loss", "val_loss"} <= set(rows[0])
    record = wait_record(do_start_verification(run.pk, actor=bob))
    verified_after(started, record, "lightfit, no edit (killed once, retried)")
    shutil.rmtree(source, ignore_errors=True)


def test_an_unchanged_trainer_style_script_is_killed_retried_resumed_and_exported_from_its_folders(
    bob, make_run, node, tmp_path, celery_worker_process
):
    """Hugging Face Trainer's way (examples/trainerfit): checkpoint-<step>/ folders, a JSON-lines log, the
    final model and its predictions in its output_dir; the loss and accuracy are recomputed from them."""
    source = copied(TRAINERFIT)
    files = {
        **TRAINERFIT_FILES,
        "weights": "out/pytorch_model.bin",
        "metrics": "out/log.jsonl",
        "predictions": "out/predictions.csv",
    }
    hold = tmp_path / "hold"
    hold.write_text("20\n")  # held after its save at step 20 until the test lets go
    command = [sys.executable, "train.py", f"--hold_file={hold}"]
    run = make_run(source_path=str(source), command=command, config_path="train.py", trainer_files=files)
    started = time.monotonic()
    run = training(run, bob)
    # The smoke trained an epoch in the source tree: its folders and files were removed before the attempt.
    assert "out/checkpoint-10" in run.events.get(kind="alert", message__startswith="Smoke:").message
    state = node.active(run) / "src" / "out" / "checkpoint-20" / "trainer_state.json"

    def saved_step() -> int | None:  # trainer_state.json is the folder's last file: whole when it parses
        try:
            return json.loads(state.read_text())["global_step"]
        except (OSError, ValueError, KeyError):
            return None

    wait_until(lambda: saved_step() == 20, 120, 0.05, what=saved_step)
    assert "Continuing training" not in (node.active(run) / "attempt-1" / "log.txt").read_text()  # not the smoke's
    run, resumed = killed_and_retried(node, run, hold, bob)
    assert "Continuing training from checkpoint out/checkpoint-20, global step 20" in resumed
    steps = [int(row["step"]) for row in exported_rows(node, run)]
    assert steps == [5, 10, 15, 20, 25, 30, 35, 40, 45, 48]  # both attempts' lines, each step once
    record = wait_record(do_start_verification(run.pk, actor=bob))
    verified_after(started, record, "trainerfit, no edit (killed once, retried)")
    recomputed = {m["name"]: m["within_tolerance"] for m in record.evidence["metrics"]}
    assert recomputed == {"accuracy": True, "loss": True}
    shutil.rmtree(source, ignore_errors=True)
