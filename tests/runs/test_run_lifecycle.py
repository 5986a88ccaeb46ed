"""RUN end to end on the real loopback sshd through a real Celery worker: the example trains and seals."""

import csv
import json
import os
import signal

import pytest
import torch

from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.models import GpuLock, RunState
from tests.runs.conftest import SETTLED, set_config, wait_file, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
REQUIRED = ["run.json", "config.yaml", "train.csv", "best.pth", "last.pth"]


def test_run_seals_an_export_without_the_dashboard(bob, make_run, node, source, gate, celery_worker_process):
    set_config(source, epochs=6, hold_file=gate.path)  # held after epoch 1 until the worker is dead
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.RUNNING, list(run.events.values_list("message", flat=True))
    # The dashboard's worker dies right after launch; the run must finish on its own.
    celery_worker_process.kill()
    gate.release()
    export = wait_file(node.export(run) / "best.pth", timeout=120).parent
    for name in REQUIRED:
        assert (export / name).is_file(), name
    assert not (export / "latest.pth").exists()
    assert (export / "test" / "synthetic" / "metrics.json").is_file()
    assert (export / "test" / "synthetic" / "results.parquet").is_file()
    assert not (node.root / "export" / ".partial" / run.run_id).exists()
    best = torch.load(export / "best.pth", weights_only=True)
    assert set(best) == {"model", "epoch", "val_loss"}

    # Identities were bound from what is on the node.
    assert run.config_sha256 and len(run.source_tree_sha256) == 64
    assert run.smoke_exit_code == 0 and "smoke ok" in run.smoke_output
    assert run.detach in {"tmux", "nohup"} and "wrapper-" in run.launched_command

    celery_worker_process.start()
    run = wait_state(run, {RunState.EXPORTED}, refresh=True)
    assert run.exit_code == 0
    states = list(run.events.exclude(to_state="").values_list("to_state", flat=True))
    assert states == ["preflight", "smoke", "launching", "running", "exited", "exported"]


def test_kill_9_then_identical_retry_resumes_from_the_checkpoint(
    bob, make_run, node, source, gate, celery_worker_process
):
    set_config(source, epochs=20, hold_file=gate.path)  # held after epoch 1, checkpointed, until killed
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.RUNNING
    train_csv = node.active(run) / "output" / "train.csv"
    wait_file(train_csv)
    wait_until(lambda: len(train_csv.read_text().splitlines()) >= 2, 60, 0.05, what="epoch 1 checkpointed")
    wrapper_pid, child_pid = map(int, (node.active(run) / "attempt-1" / "pid").read_text().split())
    os.kill(child_pid, signal.SIGKILL)

    run = wait_state(run, {RunState.QUARANTINED}, refresh=True)
    assert run.exit_code == 137
    assert "code 137" in (node.quarantine(run, 1) / "reason.txt").read_text()
    assert not node.export(run).exists()
    assert (node.active(run) / "ckpt" / "latest.pth").exists()  # the checkpoint stays for the retry

    gate.release()
    do_retry_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.EXPORTED}, timeout=180, refresh=True)
    assert run.attempt == 2
    log = (node.active(run) / "attempt-2" / "log.txt").read_text()
    resumed_from = int(log.split("resumed from epoch ")[1].split()[0])
    assert resumed_from == 1  # where the kill found it
    with open(node.export(run) / "train.csv") as handle:
        epochs = [int(row["epoch"]) for row in csv.DictReader(handle)]
    assert epochs == list(range(1, 21))  # every epoch once: continued, not restarted
    assert torch.load(node.export(run) / "last.pth", weights_only=True)["epoch"] == 20
    assert json.loads((node.export(run) / "run.json").read_text())["run_id"] == run.run_id


def test_second_run_on_the_same_gpu_is_refused_until_the_first_exits(bob, make_run, no_worker):
    """One writer per GPU: the lock is taken when preflight passes. (This box's torch has no CUDA, so
    preflight itself refuses a GPU run here: the lock is exercised on a passing report.)"""
    from runs.actions.lifecycle import do_finish_preflight, do_mark_launch_failed

    clean = {"hashes": {"source_tree_sha256": "a" * 64, "config_sha256": "b" * 64}}
    first = do_finish_preflight(make_run(gpus=[0], state=RunState.PREFLIGHT).pk, clean, [])
    assert first.state == RunState.SMOKE
    second = do_finish_preflight(make_run(gpus=[0], state=RunState.PREFLIGHT).pk, clean, [])
    assert second.state == RunState.FAILED_PREFLIGHT
    assert f"GPU 0 on {first.instance.name} already has a writer: run {first.run_id}" in second.events.last().message
    assert list(GpuLock.objects.values_list("run__run_id", flat=True)) == [first.run_id]
    type(first).objects.filter(pk=first.pk).update(state=RunState.LAUNCHING, attempt=1)
    do_mark_launch_failed(first.pk, 1, "the box went away")
    assert not GpuLock.objects.exists()
