"""A sweep on a cluster that keeps accounting goes as one job array, through the product's own paths: each
cell its own run (preflight, smoke, spec, export), all of them one `sbatch --array`, the cluster running
at most the sweep's slots at once; each cell's state read from its own task ("<array>_<cell>") while it is
queued and from sacct's accounting once it has left the queue. A cell that failed its smoke is left out."""

import time

import pytest

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from fleet import slurm_jobs
from runs.actions.sweeps import do_advance_sweep, do_create_sweep
from runs.box_spec import run_node
from runs.models import RunState, Sweep
from tests.custody.test_custody_e2e import wait_record
from tests.runs.conftest import wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = {"partition": "low", "time_minutes": 10, "signal_seconds": 60}
ENDED = {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE}


def test_a_sweep_goes_as_one_job_array_each_cell_its_own_run(
    bob, client, make_run, instance, node, slurm, celery_worker_process
):
    base = make_run(gpus=[], scheduler={"options": OPTIONS})
    # Cell 2's batch size of 0 fails its CPU smoke: the array is sent without it, not held for it.
    overrides = [{"lr": 0.05}, {"batch_size": 0}, {"lr": 0.1}]
    sweep = do_create_sweep(base, "lr", overrides, [instance], 2, True, actor=bob)
    assert sweep.array == {"wanted": True}
    began = time.monotonic()
    do_advance_sweep(sweep.pk)
    cells = list(sweep.cells.order_by("cell"))
    assert [cell.state for cell in cells] == [RunState.PREFLIGHT] * 3  # all start: the cluster queues them
    for cell in cells:
        wait_state(cell, ENDED | {RunState.RUNNING}, timeout=120, refresh=True)
    assert cells[1].state == RunState.FAILED_SMOKE, cells[1].events.values_list("message", flat=True)
    sweep = Sweep.objects.get(pk=sweep.pk)
    array = sweep.array_job
    assert array.isdigit() and sweep.array["cells"] == [1, 3] and sweep.array["at_once"] == 2, sweep.array
    assert [cells[0].slurm_job, cells[2].slurm_job] == [f"{array}_1", f"{array}_3"]
    assert all(cells[index].preflight_report["slurm"]["accounting"] is True for index in (0, 2))
    script = (node.active(cells[0]) / f"rgpu-sweep-{sweep.pk}.sbatch").read_text()
    assert "#SBATCH --array=1,3%2" in script and "#SBATCH --time=10" in script, script
    # One sbatch: both cells are tasks of the one array, at most two at a time (%2): the sweep's slots.
    listed = slurm.run("squeue", "-h", "-r", "-j", array, "-O", "JobArrayID:24|,State:24|", check=False)
    assert all(line.split("|")[0].strip() in (f"{array}_1", f"{array}_3") for line in listed.splitlines()), listed
    # A redelivered launch of a cell reads its task back from its launch marker: never submitted again.
    with run_node(cells[2]) as client_node:
        assert client_node.launched_as(1) == ("sbatch", cells[2].launched_command, f"{array}_3")

    for index in (0, 2):
        cells[index] = wait_state(cells[index], ENDED, timeout=180, refresh=True)
        assert cells[index].state == RunState.EXPORTED, cells[index].close_reason
        assert (node.active(cells[index]) / "attempt-1" / "output" / "train.csv").exists()
    print(f"\nslurm array: sweep start to both cells exported {time.monotonic() - began:.1f} s")
    # The watcher read each cell's own task while it was queued; once the tasks have left the queue
    # (MinJobAge 5 s) the scheduler's word on each comes from the accounting database.
    assert [cells[index].last_status["scheduler"]["job"] for index in (0, 2)] == [f"{array}_1", f"{array}_3"]
    gone = lambda: not slurm.run("squeue", "-h", "-r", "-j", array, check=False).strip()  # noqa: E731
    wait_until(gone, 30, 0.3, what="the array leaving the queue")
    with run_node(cells[0]) as login_node:
        found = slurm_jobs.jobs_of(login_node.transport, [f"{array}_1", f"{array}_3"])
    assert {job: (seen.source, seen.state) for job, seen in found.items()} == {
        f"{array}_1": ("sacct", "COMPLETED"),
        f"{array}_3": ("sacct", "COMPLETED"),
    }
    accounted = slurm.run("sacct", "-X", "-P", "-n", "-j", array, "-o", "JobID,State")
    assert sorted(accounted.split()) == [f"{array}_1|COMPLETED", f"{array}_3|COMPLETED"], accounted
    record = wait_record(do_start_verification(cells[2].pk, actor=bob))
    assert record.status == CustodyStatus.VERIFIED, record.failure
    client.force_login(bob)
    page = client.get(sweep.get_absolute_url()).content.decode()
    assert f"Slurm job array <code>{array}</code>" in page and "cells 1, 3 as its tasks" in page
