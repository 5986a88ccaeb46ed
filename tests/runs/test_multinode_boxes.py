"""One run over two SSH boxes (two loopback sshd, gloo on CPU): the bundled example (tinyfit, data-parallel
under torchrun) trains to one verified export sealed on rank 0's box; the other box's node is run by its
own wrapper and read by the run's one watcher. Every node's failure is seen and named, and no worker is
left on either box: a node's launcher group killed, a frozen worker (within the collective timeout the run
set, not torch's 30 minutes); a box whose environment differs fails the preflight; a retry resumes both
nodes from the durable checkpoint."""

import csv
import os
import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.models import RunPeer, RunState
from tests import factories
from tests.custody.test_custody_e2e import wait_record
from tests.processes import cmdline, of_run, workers
from tests.runs.conftest import SETTLED, set_config, wait_file, wait_state
from tests.sshd import Sshd
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 10  # the collectives' bound this run sets


@pytest.fixture(scope="module")
def second_sshd(tmp_path_factory):
    server = Sshd(tmp_path_factory.mktemp("box2")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def other_torch(tmp_path_factory) -> Path:
    """A torch of another build, first on a box's path (as on a box whose image was built apart)."""
    root = tmp_path_factory.mktemp("other-torch")
    (root / "torch").mkdir()
    (root / "torch" / "__init__.py").write_text('__version__ = "0.0.1+other"\n')
    (root / "torch" / "version.py").write_text('__version__ = "0.0.1+other"\ncuda = None\n')
    return root


@pytest.fixture(scope="module")
def differing_sshd(tmp_path_factory, other_torch):
    server = Sshd(tmp_path_factory.mktemp("box3"), extra_config=(f"SetEnv PYTHONPATH={other_torch}",)).start()
    yield server
    server.stop()


def peer_box(project, server, tmp_path, name):
    fields = {**server.instance_fields(project), "data_root_override": str(tmp_path / f"{name}-data")}
    return factories.box(name=f"{project.slug}-{name}-{timezone.localdate():%Y%m%d}", project=project, **fields)


def two_box_run(make_run, peer, ifname="lo", **options):
    options = {"collective_timeout_seconds": TIMEOUT, **options} | ({"ifname": ifname} if ifname else {})
    run = make_run(gpus=[], scheduler={"multinode": options})
    RunPeer.objects.create(run=run, instance=peer, rank=1)
    return run


def peer_root(peer, run) -> Path:
    return Path(peer.data_root_override) / run.project.slug


def started(bob, run, timeout=120):
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=timeout)
    assert run.state == RunState.RUNNING, list(run.events.values_list("message", flat=True))
    return run


def test_a_run_over_two_boxes_trains_once_and_its_export_is_verified(
    bob, client, project, make_run, node, tmp_path, second_sshd, celery_worker_process
):
    peer = peer_box(project, second_sshd, tmp_path, "box2")
    run = two_box_run(make_run, peer, ifname=None)  # nobody names the interface: the preflight measures it
    began = time.monotonic()
    run = started(bob, run)
    meeting = run.preflight_report["rendezvous"]
    assert meeting["reached_by"] == meeting["of"] == 1 and meeting["address"] == "127.0.0.1"
    assert meeting["ifnames"] == {"0": "lo", "1": "lo"}  # the interface each box's connection went through
    assert [node["box"] for node in run.preflight_report["peers"]] == [peer.name]
    wait_until(lambda: len(workers(run)) == 2, 90, 0.2, what="a worker on each box")
    pinned = [(env.get("GLOO_SOCKET_IFNAME"), env.get("NCCL_SOCKET_IFNAME")) for _, env in of_run(run.run_id)]
    assert pinned and set(pinned) == {("lo", "lo")}, pinned  # every process of both nodes, pinned to it
    both_after = time.monotonic() - began
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    head_log = (node.active(run) / "attempt-1" / "log.txt").read_text()
    peer_log = (peer_root(peer, run) / "active" / run.run_id / "attempt-1" / "log.txt").read_text()
    assert "rank 0 of 2 joined (gloo, collectives time out after 10 s)" in head_log
    assert "rank 1 of 2 joined" in peer_log and not (peer_root(peer, run) / "export" / run.run_id).exists()
    assert (peer_root(peer, run) / "active" / run.run_id / "attempt-1" / "node-done").exists()
    record = wait_record(do_start_verification(run.pk, actor=bob))
    assert record.status == CustodyStatus.VERIFIED, record.failure
    wait_until(lambda: not of_run(run.run_id), 30, 0.2, what="nothing of the run left on either box")
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-nodes"' in page and peer.name in page and "one run over 2 boxes" in page
    print(
        f"\ntwo boxes: preflight start to both training {both_after:.1f} s,"
        f" to verified {time.monotonic() - began:.1f} s"
    )


def test_a_nodes_killed_launcher_group_fails_the_run_named_and_a_retry_resumes_both_boxes(
    bob, project, make_run, node, source, gate, tmp_path, second_sshd, celery_worker_process
):
    """box2's launcher group killed (its worker is in a session of its own): the run fails with box2 named
    and no worker left on either box. Resume is state restore: a retry relaunches both boxes, rank 0
    restores the newest checkpoint and sends it to rank 1, and the run ends with every epoch once."""
    set_config(source, epochs=6, hold_file=gate.hold(at=2).path)  # held once epoch 2 is logged and saved
    peer = peer_box(project, second_sshd, tmp_path, "box2")
    run = started(bob, two_box_run(make_run, peer))
    train = node.active(run) / "output" / "train.csv"
    wait_until(lambda: train.exists() and len(train.read_text().splitlines()) > 2, 90, 0.1, what="epoch 2 logged")
    agent = next(pid for pid, env in of_run(run.run_id) if "--node-rank=1" in cmdline(pid) and "RANK" not in env)
    began = time.monotonic()
    os.killpg(os.getpgid(agent), signal.SIGKILL)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=60, refresh=True)
    failed_in = time.monotonic() - began
    assert run.close_reason.startswith(f"a node of the run failed: node {peer.name} (rank 1): "), run.close_reason
    assert "exited with code 137" in run.close_reason, run.close_reason
    wait_until(lambda: run.refresh_from_db() or run.failure_class == "node_failed", 30, 0.2, what="its class")
    wait_until(lambda: not of_run(run.run_id), 30, 0.2, what="no process of the run left on either box")
    print(f"\ntwo boxes: a node's launcher group killed, the run failed in {failed_in:.1f} s")

    gate.release()
    began = time.monotonic()
    do_retry_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED and run.attempt == 2, run.close_reason
    head_log = (node.active(run) / "attempt-2" / "log.txt").read_text()
    peer_log = (peer_root(peer, run) / "active" / run.run_id / "attempt-2" / "log.txt").read_text()
    resumed = int(head_log.split("resumed from epoch ")[1].split()[0])
    assert resumed >= 1 and f"resumed from epoch {resumed}" in peer_log  # both from rank 0's checkpoint
    with open(node.export(run) / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 7))
    print(f"\ntwo boxes: a retry to exported from epoch {resumed} in {time.monotonic() - began:.1f} s")


def test_a_frozen_worker_fails_the_run_within_the_collective_timeout_naming_its_box(
    bob, project, make_run, node, source, tmp_path, second_sshd, celery_worker_process
):
    set_config(source, epochs=400)
    peer = peer_box(project, second_sshd, tmp_path, "box2")
    run = started(bob, two_box_run(make_run, peer))
    wait_until(lambda: len(workers(run)) == 2, 90, 0.2, what="a worker on each box")
    wait_file(node.active(run) / "output" / "train.csv")
    began = time.monotonic()
    os.kill(workers(run)[1], signal.SIGSTOP)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=TIMEOUT + 75, refresh=True)
    failed_in = time.monotonic() - began
    assert failed_in < TIMEOUT + 45, failed_in  # the run's bound, not torch's 30 minutes
    wait_until(lambda: run.refresh_from_db() or run.close_reason.startswith("a node of"), 30, 0.2, what="named")
    assert f"node {peer.name} (rank 1): a process of it was stopped (SIGSTOP), a frozen peer" in run.close_reason
    wait_until(lambda: not of_run(run.run_id), 60, 0.2, what="no process of the run left, the frozen one included")
    print(f"\ntwo boxes: a frozen worker, the run failed in {failed_in:.1f} s (collective timeout {TIMEOUT} s)")


def test_a_box_whose_environment_differs_fails_the_preflight(
    bob, project, make_run, tmp_path, differing_sshd, celery_worker_process
):
    peer = peer_box(project, differing_sshd, tmp_path, "box3")
    run = two_box_run(make_run, peer)
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.FAILED_PREFLIGHT, run.state
    said = " ".join(run.events.values_list("message", flat=True))
    assert "The nodes' environments differ (" in said and f"{peer.name}: python" in said and "0.0.1+other" in said
