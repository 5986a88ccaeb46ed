"""How a multi-node attempt's failure is told (the built wrapper's wrapper/distributed.py and run.py):
srun's lines name the nodes that failed, in the order it saw them; a node's part that found a stopped
process names the frozen peer; a node failure is its own failure class, not this box's memory."""

import json

from runs import signals
from tests.runs.conftest import load_wrapper

SRUN = """0: epoch 3/12 train_loss=1.2
srun: error: n2: task 1: Exited with exit code 137
srun: launch/slurm: _step_signal: Terminating StepId=3.0
srun: error: n1: task 0: Exited with exit code 1
srun: error: n[3-4]: tasks 2-3: Killed
srun: error: n2: task 1: Killed
srun: error: n5: task x: nonsense
"""


def test_srun_names_the_failed_nodes_in_the_order_they_failed(tmp_path):
    wrapper = load_wrapper()
    log = tmp_path / "log.txt"
    log.write_text("x" * 100_000 + "\n" + SRUN)  # only the tail is read
    failed = wrapper.failed_tasks(str(log))
    assert list(failed) == [1, 0, 2, 3]  # first seen first: task 1 is where it started
    assert failed[1] == ("n2", "Exited with exit code 137") and failed[3] == ("n[3-4]", "Killed")
    said = wrapper.nodes_said(failed)
    assert said.startswith("node n2 (task 1): Exited with exit code 137; node n1 (task 0): Exited with exit code 1")
    assert wrapper.failed_tasks(str(tmp_path / "none.txt")) == {}


def test_a_stopped_process_a_node_part_saw_names_the_frozen_peer(tmp_path):
    wrapper = load_wrapper()
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    record = {"node": "n2", "task": "1", "exit_code": 1, "stragglers": []}
    record["stopped"] = [{"pid": 41, "argv": "python -u train.py", "state": "T", "since": 1}]
    (nodes / "1.json").write_text(json.dumps(record))
    (nodes / "0.json").write_text(json.dumps({"node": "n1", "stragglers": [{"pid": 3, "state": "S"}]}))
    (nodes / "stragglers.json").write_text("[]")  # not a node's record: passed over
    (nodes / "2.json").write_text("[1, 2]")  # a record that is not one: passed over, never a crash
    said = wrapper.frozen_nodes(str(tmp_path))
    assert said == "node n2 held a stopped process, a frozen peer: python -u train.py (pid 41)"
    assert wrapper.frozen_nodes(str(tmp_path / "missing")) == ""


def test_a_node_failure_is_its_own_class_and_not_the_boxs_memory():
    reason = "command exited with code 137; node n2 (task 1): Exited with exit code 137; and rank 0's export: x"
    assert signals.node_failure(reason) and not signals.node_failure("command exited with code 137")
    assert signals.classify(137, set(), node=True) == "node_failed"
    assert signals.classify(137, set()) == "oom"
    assert signals.FAILURE_CLASSES["node_failed"].retry_offered


def test_which_other_box_failed_first_is_read_from_each_boxs_own_clock():
    from runs.actions.peers import failure_of, first_failed

    stale = 30.0
    assert failure_of({"exit_code": 137}, None, stale) == "command exited with code 137"
    assert failure_of({"launched": True, "wrapper_alive": False, "exit_code": None}, None, stale).startswith("dead")
    assert failure_of({"wrapper_alive": True, "heartbeat_at": 100, "now": 200}, None, stale).startswith("its heartbeat")
    assert failure_of({"wrapper_alive": True, "heartbeat_at": 190, "now": 200}, None, stale) == ""
    assert failure_of({"unreachable": "timed out"}, 10, stale) == ""  # not for long yet
    assert failure_of({"unreachable": "timed out"}, 45, stale).startswith("its box has not answered for 45 s")
    head = {"now": 1000.0, "log_mtime": 998.0}  # rank 0 ended 2 s ago, by its box's clock
    names = {1: "box2", 2: "box3"}
    # box2 ended 9 s ago by its own clock (set an hour apart): it failed first and is named.
    peers = {
        1: {"exit_code": 137, "now": 4600.0, "log_mtime": 4591.0},
        2: {"exit_code": 1, "now": 50.0, "log_mtime": 49.5},
    }
    assert first_failed(head, peers, names) == "node box2 (rank 1): command exited with code 137"
    # Every other box ended after rank 0: rank 0 failed first, no other box is blamed.
    assert first_failed(head, {1: {"exit_code": 1, "now": 10.0, "log_mtime": 9.5}}, names) == ""
    frozen = {2: {"wrapper_alive": True, "stopped_processes": 1}}
    assert (
        first_failed(head, frozen, names) == "node box3 (rank 2): a process of it was stopped (SIGSTOP), a frozen peer"
    )
