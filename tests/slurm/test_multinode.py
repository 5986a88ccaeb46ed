"""One run over two nodes of the cluster (`sbatch -N2`): the wrapper, the job's batch shell on its first
node, starts the bundled example (tinyfit, data-parallel under torchrun) on both nodes with one srun; one
run, one history, one export sealed by rank 0. Every node's failure is seen: a node's launcher group
killed fails the run with the node named and no worker left. (A frozen worker, failed within the collective
timeout and named, is tests/runs/test_multinode_boxes.py's; the node part's reading of it, test_node_failures.)"""

import csv
import json
import os
import signal
import time

import pytest

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.custody.test_custody_e2e import wait_record
from tests.processes import cmdline, of_run, workers
from tests.runs.conftest import SETTLED, edit_train, set_config, wait_file, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 10  # the collectives' bound this run sets: a frozen peer fails the run after it
OPTIONS = {"partition": "low", "time_minutes": 10, "nodes": 2, "collective_timeout_seconds": TIMEOUT, "ifname": "lo"}


def two_node_run(make_run, **options):
    options = {key: value for key, value in {**OPTIONS, **options}.items() if value is not None}
    return make_run(gpus=[], scheduler={"options": options})


def test_a_run_over_two_nodes_trains_once_and_its_export_is_verified(
    bob, make_run, node, source, slurm, celery_worker_process
):
    """Rank 1 also aborts after the training, as torch's exit did in 3 of 14 runs without a barrier
    ("terminate called without an active exception"): rank 0's export is complete, so the run is exported,
    and the node's failure is kept beside the attempt."""
    edit_train(source, "    leave(world)\n", "    leave(world)\n    if rank == 1:\n        os.abort()\n")
    run = two_node_run(make_run, ifname=None)  # nobody names the interface: the preflight measures it
    began = time.monotonic()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=120)
    assert run.state == RunState.RUNNING, list(run.events.values_list("message", flat=True))
    nodes = run.preflight_report["slurm"]["nodes"]
    assert [answer["host"] for answer in nodes] == ["n1", "n2"], nodes
    meeting = nodes[0]["rendezvous"]
    assert meeting["reached_by"] == meeting["of"] == 1 and nodes[1]["rendezvous"]["reached"] is True
    assert [answer["rendezvous"]["ifname"] for answer in nodes] == ["lo", "lo"]  # each node's measured end
    spec = json.loads((node.active(run) / "spec-attempt-1.json").read_text())
    assert spec["distributed"]["ifname"] == "lo"  # the collectives pinned to it
    script = (node.active(run) / "launch-1.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
    log = node.active(run) / "attempt-1" / "log.txt"
    wait_until(lambda: log.exists() and "rank 1 of 2 joined" in log.read_text(), 90, 0.2, what="both ranks joined")
    both_after = time.monotonic() - began
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    text = log.read_text()
    assert "0: rank 0 of 2 joined (gloo, collectives time out after 10 s)" in text  # srun --label: the task
    assert "1: rank 1 of 2 joined" in text
    noted = (node.active(run) / "attempt-1" / "peer-failures.txt").read_text()
    assert noted.startswith("node n2 (task 1): "), noted  # its abort at exit, kept, not failing the run
    record = wait_record(do_start_verification(run.pk, actor=bob))
    assert record.status == CustodyStatus.VERIFIED, record.failure
    assert not of_run(run.run_id)  # nothing of the run left on either node
    print(
        f"\nslurm -N2: preflight start to both ranks training {both_after:.1f} s,"
        f" to verified {time.monotonic() - began:.1f} s"
    )


def test_a_nodes_killed_launcher_group_fails_the_run_with_the_node_named_and_no_worker_left(
    bob, make_run, node, source, gate, slurm, celery_worker_process
):
    set_config(source, epochs=20, hold_file=gate.path)
    run = two_node_run(make_run)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=120)
    wait_until(lambda: len(workers(run)) == 2, 90, 0.2, what="a worker on each node")
    wait_file(node.active(run) / "attempt-1" / "output" / "train.csv")
    agent = next(
        pid
        for pid, env in of_run(run.run_id)
        if env.get("SLURM_PROCID") == "1" and "torch.distributed.run" in cmdline(pid) and "RANK" not in env
    )
    began = time.monotonic()
    os.killpg(os.getpgid(agent), signal.SIGKILL)  # node n2's launcher group: its worker is in a session of its own
    run = wait_state(run, {RunState.QUARANTINED}, timeout=90, refresh=True)
    failed_in = time.monotonic() - began
    assert run.close_reason.startswith("command exited with code 137; node n2 (task 1): "), run.close_reason
    wait_until(lambda: not of_run(run.run_id), 30, 0.2, what="no process of the run left on either node")
    assert run.failure_class == "node_failed", run.failure_class  # not this box's memory (exit 137)
    print(f"\nslurm -N2: a node's launcher killed, the run failed in {failed_in:.1f} s")


def test_a_node_whose_environment_differs_fails_the_preflight(bob, make_run, slurm, celery_worker_process):
    """Node n2's tasks find another torch first on their path (the cluster's task prolog), as on a node
    whose image was built apart: the run never starts."""
    run = two_node_run(make_run)
    with slurm.differ("n2"):
        do_start_preflight(run.pk, actor=bob)
        run = wait_state(run, {RunState.FAILED_PREFLIGHT, RunState.SMOKE, RunState.LAUNCHING, RunState.RUNNING})
    assert run.state == RunState.FAILED_PREFLIGHT, run.state
    said = " ".join(run.events.values_list("message", flat=True))
    assert "the nodes' environments differ (n1: python" in said and "n2: python" in said, said
    assert "torch 0.0.1+other" in said
    assert run.slurm_job == ""  # nothing was submitted


def test_a_requeued_two_node_job_resumes_on_both_nodes_from_the_checkpoint(
    bob, make_run, node, source, gate, slurm, celery_worker_process
):
    """Resume is state restore: Slurm runs the job again (attempt 2); rank 0 restores the newest checkpoint
    and sends it to every rank, and the run goes on from there to one export with every epoch once."""
    from tests.slurm.test_requeue import adopted

    set_config(source, epochs=6, hold_file=gate.path)
    run = two_node_run(make_run)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=120)
    train = node.active(run) / "attempt-1" / "output" / "train.csv"
    wait_until(lambda: train.exists() and len(train.read_text().splitlines()) > 1, 90, 0.1, what="epoch 1 logged")
    began = time.monotonic()
    slurm.run("scontrol", "requeue", run.slurm_job)
    adopted(run, 2)
    gate.release()
    log = node.active(run) / "attempt-2" / "log.txt"

    def resumed() -> bool:
        text = log.read_text() if log.exists() else ""
        return "0: resumed from epoch" in text and "1: resumed from epoch" in text

    wait_until(resumed, 90, 0.2, what="both nodes resumed")
    print(f"\nslurm -N2: requeue to both nodes training again {time.monotonic() - began:.1f} s")
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    text = log.read_text()
    epochs = {
        int(line.split("resumed from epoch ")[1].split()[0]) for line in text.splitlines() if "resumed from" in line
    }
    assert len(epochs) == 1 and epochs.pop() >= 1, text  # both nodes from the same checkpoint
    with open(node.export(run) / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 7))
