"""Recovery through Slurm: a job the scheduler requeues (by `scontrol requeue`, or preempted by a job of a
higher partition) runs again as the run's next attempt (SLURM_RESTART_COUNT), which the watcher adopts;
the product lifts the ~120 s hold a requeue leaves, and the attempt resumes from the run's checkpoint."""

import csv
import os
import signal
import time

import pytest

from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.runs.conftest import SETTLED, set_config, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = {"partition": "low", "time_minutes": 10, "signal_seconds": 60}


def held_run(bob, make_run, node, source, gate):
    """A six-epoch run on the cluster, running and held at the gate after its first, checkpointed epoch."""
    set_config(source, epochs=6, hold_file=gate.path)
    run = make_run(gpus=[], scheduler={"options": OPTIONS})
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    train = node.active(run) / "attempt-1" / "output" / "train.csv"
    wait_until(lambda: train.exists() and len(train.read_text().splitlines()) > 1, 60, 0.1, what="epoch 1 logged")
    return run


def adopted(run, attempt: int, timeout: float = 90) -> None:
    from watching.tasks import arm_watchers

    wait_until(
        lambda: run.refresh_from_db() or run.attempt == attempt,
        timeout,
        0.3,
        what=lambda: f"attempt {attempt} adopted: {list(run.events.values_list('message', flat=True))}",
        between=arm_watchers,
    )


def exported_after_resume(run, node) -> None:
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    log = (node.active(run) / "attempt-2" / "log.txt").read_text()
    assert int(log.split("resumed from epoch ")[1].split()[0]) >= 1  # where the requeue found it
    with open(node.export(run) / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 7))
    assert any("Slurm requeued the job" in m for m in run.events.values_list("message", flat=True))


def test_a_requeue_is_counted_as_attempt_2_and_resumes_from_the_checkpoint(
    bob, make_run, node, source, gate, slurm, celery_worker_process
):
    run = held_run(bob, make_run, node, source, gate)
    began = time.monotonic()
    slurm.run("scontrol", "requeue", run.slurm_job)
    adopted(run, 2)
    gate.release()
    wait_until(lambda: (node.active(run) / "attempt-2" / "log.txt").exists(), 60, 0.1, what="attempt 2 running")
    print(f"\nslurm: requeue to training again {time.monotonic() - began:.1f} s")
    assert run.slurm_job and run.scheduler["base_attempt"] == 1  # the same job, run again
    exported_after_resume(run, node)


def test_a_preempted_job_is_requeued_and_resumed(bob, make_run, node, source, gate, slurm, celery_worker_process):
    run = held_run(bob, make_run, node, source, gate)
    began = time.monotonic()
    # A job of the high partition that needs both nodes: the low one's job is preempted (REQUEUE).
    high = slurm.run("sbatch", "--parsable", "-p", "high", "-N", "2", "-o", "/dev/null", "--wrap", "sleep 300").strip()
    adopted(run, 2)
    preempted = time.monotonic() - began
    slurm.run("scancel", high)
    gate.release()
    print(f"\nslurm: preempted and adopted as attempt 2 in {preempted:.1f} s")
    exported_after_resume(run, node)


def test_a_node_failure_leaves_the_old_copy_running_and_it_never_reaches_the_new_attempts_export(
    bob, make_run, node, source, gate, slurm, celery_worker_process
):
    """A node lost (its slurmd frozen, then marked down: NODE_FAIL) while its job's payload keeps running
    there, as a node cut off from the controller does: Slurm requeues the job elsewhere, so two copies run.
    The new attempt seals; the old one, superseded, quarantines itself and its output stays its own."""
    run = held_run(bob, make_run, node, source, gate)
    lost = slurm.run("squeue", "-h", "-j", run.slurm_job, "-o", "%N").strip()
    slurmd = int((slurm.dir / f"slurmd-{lost}.pid").read_text())
    os.kill(slurmd, signal.SIGSTOP)
    try:
        slurm.run("scontrol", "update", f"NodeName={lost}", "State=DOWN", "Reason=lost")
        adopted(run, 2)

        def queue():
            spec = node.active(run) / "spec-attempt-2.json"
            run.refresh_from_db()
            events = [spec.exists(), run.attempt, run.last_status.get("scheduler"), run.health]
            events += list(run.events.values_list("message", flat=True))
            return slurm.run("squeue", "-h", "-j", run.slurm_job, "-o", "%T %r %N %S", check=False) + str(events)

        wait_until(lambda: (node.active(run) / "attempt-2" / "log.txt").exists(), 60, 0.1, what=queue)
        assert slurm.run("squeue", "-h", "-j", run.slurm_job, "-o", "%N").strip() != lost
        gate.release()
        run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=180, refresh=True)
        assert run.state == RunState.EXPORTED and run.attempt == 2, run.close_reason
        old = node.quarantine(run, 1)
        wait_until(lambda: (old / "reason.txt").exists(), 60, 0.2, what="the old copy closing")
    finally:
        os.kill(slurmd, signal.SIGCONT)
        slurm.run("scontrol", "update", f"NodeName={lost}", "State=RESUME", check=False)
    assert (old / "reason.txt").read_text().startswith("superseded: Slurm requeued the job and attempt 2 runs")
    assert (node.active(run) / "sealed").read_text().strip() == "attempt 2"
    ours = node.active(run) / "attempt-2" / "output" / "best.pth"
    assert (node.export(run) / "best.pth").read_bytes() == ours.read_bytes()
