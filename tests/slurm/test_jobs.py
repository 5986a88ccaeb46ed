"""A run on a Slurm cluster, through the product's own paths: the box is the login node, the run an sbatch job
(closing the SSH session is the detach), its state the scheduler's, its stop a scancel the scheduler
confirms, and a job that has left squeue still read to its final state from sacct."""

import os
import signal
import time

import pytest

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from fleet import slurm_jobs
from node.slurm import SchedulerSilent
from runs.actions import stops
from runs.actions.lifecycle import do_start_preflight
from runs.box_spec import run_node
from runs.models import RunState
from tests.custody.test_custody_e2e import wait_record
from tests.runs.conftest import SETTLED, set_config, wait_file, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = {"partition": "low", "time_minutes": 10, "signal_seconds": 60}


def slurm_run(make_run, **options):
    return make_run(gpus=[], scheduler={"options": {**OPTIONS, **options}})


def test_a_run_is_an_sbatch_job_detached_exported_and_verified(bob, make_run, node, slurm, celery_worker_process):
    run = slurm_run(make_run)
    began = time.monotonic()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.RUNNING, list(run.events.values_list("message", flat=True))
    job = run.slurm_job
    assert job.isdigit() and run.detach == "sbatch" and run.launched_command.startswith("sbatch --parsable ")
    assert run.scheduler["base_attempt"] == 1
    script = (node.active(run) / "launch-1.sbatch").read_text()
    assert "#SBATCH --partition=low" in script and "#SBATCH --time=10" in script
    assert "#SBATCH --signal=B:USR1@60" in script and "#SBATCH --requeue" in script
    # A redelivered launch that finds the attempt running reads its job back from the node's launch marker.
    with run_node(run) as client:
        assert client.launched_as(1) == ("sbatch", run.launched_command, job)
    # The job, not the SSH session that submitted it, holds the run: the scheduler lists it.
    wait_until(lambda: slurm.state_of(job) == "RUNNING" or (node.active(run) / "attempt-1" / "pid").exists(), 30, 0.1)
    running_after = time.monotonic() - began
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    # Each attempt writes its output under its own directory (a requeued copy never mixes into it).
    assert (node.active(run) / "attempt-1" / "output" / "train.csv").exists()
    assert (node.export(run) / "best.pth").exists()
    # The scheduler's final word was read, from the completion log once the job left the queue.
    wait_until(lambda: run.refresh_from_db() or "COMPLETED" in str(run.last_status.get("scheduler")), 30, 0.3)
    # A controller that does not answer is not an empty queue: sacct's final word is not asked then (a job
    # at its time limit is final there while its processes still end, and would be quarantined alive).
    with run_node(run) as client, slurm.stalled(), pytest.raises(SchedulerSilent, match="Socket timed out"):
        slurm_jobs.jobs_of(client.transport, [job])
    record = wait_record(do_start_verification(run.pk, actor=bob))
    assert record.status == CustodyStatus.VERIFIED, record.failure
    print(f"\nslurm: submit to running {running_after:.1f} s, to verified {time.monotonic() - began:.1f} s")


def test_a_stop_is_a_scancel_confirmed_by_the_scheduler(
    bob, make_run, node, source, gate, slurm, celery_worker_process
):
    set_config(source, epochs=20, hold_file=gate.path)
    run = slurm_run(make_run)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    wait_file(node.active(run) / "attempt-1" / "output" / "train.csv")
    stops.do_stop_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=90, refresh=True)
    assert run.close_reason.startswith("stopped by bob"), run.close_reason
    wait_until(lambda: slurm.state_of(run.slurm_job) == "", 30, 0.2, what="the job leaving the queue")
    final = slurm.run("sacct", "-c", "-P", "-n", "-j", run.slurm_job, "-o", "State").split()
    assert final and final[-1].startswith("CANCELLED"), final
    assert (node.active(run) / "ckpt" / "latest.pth").exists()  # kept for a retry


def test_a_job_without_a_time_limit_held_by_a_maintenance_reservation_shows_why(
    bob, client, make_run, node, slurm, celery_worker_process
):
    """A maintenance reservation soon on every node: a job with no time limit could run into it, so Slurm
    holds it (ReqNodeNotAvail) while a job whose limit ends first would start. The run page says both."""
    run = make_run(gpus=[], scheduler={"options": {"partition": "low"}})  # no time limit
    window = ["StartTime=now+600", "Duration=60", "Nodes=ALL", "Flags=MAINT,IGNORE_JOBS", "Users=root"]
    slurm.run("scontrol", "create", "reservation", "ReservationName=maint", *window)
    try:
        do_start_preflight(run.pk, actor=bob)
        run = wait_state(run, SETTLED)
        assert run.state == RunState.RUNNING and slurm.state_of(run.slurm_job) == "PENDING"

        def held():
            run.refresh_from_db()
            seen = run.last_status.get("scheduler") or {}
            return seen if seen.get("state") == "PENDING" and seen.get("reason") not in (None, "", "None") else None

        seen = wait_until(held, 30, 0.3, what="the pending reason on the run", between=_arm)
        assert seen["reason"].startswith("ReqNodeNotAvail"), seen
        assert run.health != "dead" and run.state == RunState.RUNNING  # queued is not dead
        client.force_login(bob)
        page = client.get(run.get_absolute_url()).content.decode()
        assert "ReqNodeNotAvail" in page and 'id="slurm-no-limit"' in page
    finally:
        slurm.run("scontrol", "delete", "ReservationName=maint", check=False)


def _arm():
    from watching.tasks import arm_watchers

    arm_watchers()


def test_usr1_comes_before_term_at_the_walltime_and_the_run_ends_timeout_with_its_checkpoint(
    bob, make_run, node, source, slurm, celery_worker_process
):
    set_config(source, epochs=200, epoch_pause=0.5)  # longer than its one-minute limit
    run = slurm_run(make_run, time_minutes=1, signal_seconds=50)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    attempt = node.active(run) / "attempt-1"
    run = wait_state(run, {RunState.QUARANTINED, RunState.EXPORTED}, timeout=150, refresh=True)
    warned = int((attempt / "walltime-signal").read_text()) if (attempt / "walltime-signal").exists() else None
    quarantined = node.quarantine(run, 1)
    warned = warned or int((quarantined / "walltime-signal").read_text())
    ended = int((quarantined / "preempted").read_text())
    assert warned < ended, (warned, ended)  # USR1 first, then TERM
    assert run.close_reason.startswith("the job's time limit ran out: SIGUSR1 came"), run.close_reason
    log = (quarantined / "log.txt").read_text()
    saved = int(log.split("checkpoint saved at epoch ")[1].split()[0])
    assert saved >= 1 and (node.active(run) / "ckpt" / "latest.pth").exists()
    wait_until(
        lambda: run.refresh_from_db() or "TIMEOUT" in str(run.last_status.get("scheduler")), 60, 0.5, between=_arm
    )
    print(f"\nslurm: USR1 {ended - warned} s before TERM; saved at epoch {saved}")


def test_the_preflight_asks_the_cluster_and_one_of_its_compute_nodes(bob, make_run, slurm, celery_worker_process):
    missing = slurm_run(make_run, partition="nope")
    do_start_preflight(missing.pk, actor=bob)
    missing = wait_state(missing, SETTLED)
    assert missing.state == RunState.FAILED_PREFLIGHT
    said = " ".join(missing.events.values_list("message", flat=True))
    assert "partition nope does not exist on this cluster (it has: low, high)" in said, said
    refused = slurm_run(make_run, gres="gpu:1")  # a cluster with no GPUs configured
    do_start_preflight(refused.pk, actor=bob)
    refused = wait_state(refused, SETTLED)
    assert refused.state == RunState.FAILED_PREFLIGHT
    said = " ".join(refused.events.values_list("message", flat=True))
    assert "the cluster refuses the job as asked" in said and "gres" in said.lower(), said
    good = slurm_run(make_run)
    do_start_preflight(good.pk, actor=bob)
    good = wait_state(good, SETTLED)
    compute = good.preflight_report["slurm"]["compute"]
    assert compute["root"] and compute["torch"] and not compute["under_tmpdir"], compute
    assert good.preflight_report["slurm"]["partitions"] == ["low", "high"]


def test_a_job_killed_outright_is_quarantined_on_the_schedulers_final_word(
    bob, make_run, node, source, gate, slurm, celery_worker_process
):
    """The job's processes killed outright, as an out-of-memory killer does (no marker can be written): dead,
    in the scheduler's words, not the login node's process table (a compute node's pids mean nothing there)."""
    set_config(source, epochs=20, hold_file=gate.path)
    run = slurm_run(make_run)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    wait_file(node.active(run) / "attempt-1" / "output" / "train.csv")
    for pid in (node.active(run) / "attempt-1" / "pid").read_text().split():  # the wrapper, then the command
        os.kill(int(pid), signal.SIGKILL)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=90, refresh=True)
    assert run.close_reason.startswith(f"dead: no exit marker, and the scheduler says job {run.slurm_job} "), (
        run.close_reason
    )
    assert "CANCELLED" in run.close_reason or "FAILED" in run.close_reason, run.close_reason


def test_a_sweep_on_a_cluster_without_accounting_runs_each_cell_as_its_own_job(
    bob, make_run, instance, slurm, celery_worker_process
):
    """Not as a job array: the completion log cannot name an array's task once it leaves the queue
    (tests/slurm_arrays/ has the cluster that can)."""
    from runs.actions.sweeps import do_advance_sweep, do_create_sweep

    base = slurm_run(make_run)
    sweep = do_create_sweep(base, "lr", [{"lr": 0.05}, {"lr": 0.1}], [instance], 2, True, actor=bob)
    do_advance_sweep(sweep.pk)
    cells = list(sweep.cells.order_by("cell"))
    for cell in cells:
        assert cell.scheduler == {"options": OPTIONS} and cell.gpus == []
        wait_state(
            cell, {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_PREFLIGHT}, timeout=180, refresh=True
        )
        assert cell.state == RunState.EXPORTED, (cell.close_reason, list(cell.events.values_list("message", flat=True)))
    jobs = [cell.slurm_job for cell in cells]
    assert all(job.isdigit() for job in jobs) and len(set(jobs)) == 2  # one job per cell, each its own run
    assert all(cell.preflight_report["slurm"]["accounting"] is False for cell in cells)
    sweep.refresh_from_db()
    assert sweep.array == {"wanted": True}  # wanted, and measured not possible here: no array was submitted
