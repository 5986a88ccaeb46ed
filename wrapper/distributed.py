"""A run over several nodes (or several processes) under Slurm: the wrapper, the job's batch shell on its
first node, starts the command under torchrun on every node of the job with one srun, one task per node.
Each task is the wrapper's `node` part (node.py: it owns that node's tree), which starts

    <python> -m torch.distributed.run --node-rank=<Slurm node id> --nnodes=N --nproc-per-node=P \\
        --master-addr=<first node's address> --master-port=<a free port there> --max-restarts=0 <script> [args]

srun --kill-on-bad-exit: a node whose tree died ends every node's (no peer waits on it for the collective
timeout); --label: each line of the log says its node's task. The rendezvous address is the first node's
NodeAddr as the scheduler knows it; the port is measured free there, on the node that hosts the store.
When the step fails, srun names the failed tasks ("srun: error: n2: task 1: Killed"): the attempt's reason
names them, and an attempt whose only failures are other nodes' while rank 0 exported in full is not failed
by them (an abort at exit, after the training finished, hit 3 of 14 runs without a barrier).
"""

import json
import os
import re
import socket
import subprocess
import sys

from .digits import ascii_int

SRUN_ERROR = re.compile(r"^srun: error: (\S{1,100}): tasks? ([0-9,-]{1,50}): (.{1,200})\Z")
LOG_TAIL_BYTES = 64 * 1024


def _scontrol(*args):
    result = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)
    return result.stdout if result.returncode == 0 else ""


def head_address(environ):
    """The first node of the job: the batch host, where the rendezvous store is hosted."""
    nodes = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or ""
    hosts = _scontrol("show", "hostnames", nodes).split() if nodes else []
    first = hosts[0] if hosts else socket.gethostname()
    shown = re.search(r"\bNodeAddr=(\S+)", _scontrol("show", "node", first, "-o"))
    return shown.group(1) if shown else first


def free_port():
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def torchrun_argv(spec, argv, environ=None):
    """The command started on every node of the job: srun of this wrapper's `node` part on each node (it
    owns that node's tree), which starts torchrun of the run's script there."""
    shape = spec.distributed
    nodes, per_node = int(shape.nodes), int(shape.tasks_per_node)
    endpoint = f"{head_address(environ if environ is not None else os.environ)}:{free_port()}"
    address, port = endpoint.rsplit(":", 1)
    # Static rendezvous, each node's rank its Slurm node id (the node part adds --node-rank): rank 0 is on
    # the job's first node, which hosts the store and runs the wrapper that seals the export. (c10d's
    # dynamic rendezvous gave rank 0 to whichever node came first.)
    torchrun = [argv[0], "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--nproc-per-node={per_node}"]
    torchrun += [f"--master-addr={address}", f"--master-port={port}", "--max-restarts=0", *argv[1:]]
    attempt = os.path.join(spec.active, f"attempt-{spec.attempt}")
    request = {"argv": torchrun, "cwd": spec.cwd, "nodes": os.path.join(attempt, "nodes"), "node_rank_at": 3}
    request["grace"] = int(spec.stop_grace_seconds)
    path = os.path.join(attempt, "node-request.json")
    os.makedirs(attempt, exist_ok=True)
    with open(path + ".tmp", "w") as handle:
        json.dump(request, handle)
    os.replace(path + ".tmp", path)
    guard = [sys.executable, os.path.abspath(sys.argv[0]), "node", path]
    return ["srun", f"--nodes={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--label", *guard]


def box_torchrun_argv(spec, argv):
    """One SSH box's node of a run over several boxes: torchrun of the run's script, its node rank and the
    rendezvous (rank 0's box, at the port its preflight measured there) given by the control side."""
    shape = spec.distributed
    torchrun = [argv[0], "-m", "torch.distributed.run", f"--node-rank={int(shape.node_rank)}"]
    torchrun += [f"--nnodes={int(shape.nodes)}", f"--nproc-per-node={int(shape.tasks_per_node)}"]
    torchrun += [f"--master-addr={shape.master_addr}", f"--master-port={int(shape.master_port)}"]
    return [*torchrun, "--max-restarts=0", *argv[1:]]


def distributed_env(spec):
    """The collectives' bound and interface, for every rank (torch reads the interface names itself)."""
    shape = spec.distributed
    if not shape:
        return {}
    threads = str(int(shape.cpus_per_task or 1))  # torchrun's default of one thread starves a data loader
    env = {"REMOTEGPU_COLLECTIVE_TIMEOUT_S": str(int(shape.timeout)), "OMP_NUM_THREADS": threads}
    if shape.ifname:
        env.update(GLOO_SOCKET_IFNAME=shape.ifname, NCCL_SOCKET_IFNAME=shape.ifname)
    return env


def failed_tasks(log_path):
    """{task: (node, what)} of the tasks srun said failed, read from the attempt log's tail."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(log_path) - LOG_TAIL_BYTES))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return {}
    failed = {}
    for line in tail.splitlines():
        found = SRUN_ERROR.match(line.strip())
        if found:
            for task in _task_numbers(found.group(2)):
                failed.setdefault(task, (found.group(1), found.group(3).strip()))
    return failed


def _task_numbers(text):
    numbers = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        first, last = ascii_int(low, 100_000), ascii_int(high or low, 100_000)
        if first is not None and last is not None:
            numbers.update(range(first, min(last, first + 1000) + 1))
    return sorted(numbers)[:1000]


def nodes_said(failed):
    """The failed nodes in a sentence for the attempt's reason, in the order srun saw them fail (the first
    is where it started: the others were ended by it)."""
    return "; ".join(f"node {node} (task {task}): {what}" for task, (node, what) in list(failed.items())[:8])


def frozen_nodes(attempt):
    """What each node's part found stopped (SIGSTOP: state T) when its torchrun ended: a frozen peer, the
    cause, where the node that failed first only timed out waiting for it. In a sentence, or ""."""
    nodes = os.path.join(attempt, "nodes")
    said = []
    try:
        names = sorted(os.listdir(nodes))[:64]
    except OSError:
        return ""
    for name in names:
        if not re.fullmatch(r"[0-9]{1,5}\.json", name):
            continue
        try:
            with open(os.path.join(nodes, name)) as handle:
                record = json.loads(handle.read(1 << 20))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict):
            continue
        listed = [*(record.get("stopped") or []), *(record.get("stragglers") or [])]
        stopped = [found for found in listed if isinstance(found, dict) and found.get("state") == "T"]
        if stopped:
            what = f"{str(stopped[0].get('argv'))[:80]} (pid {stopped[0].get('pid')})"
            said.append(f"node {str(record.get('node'))[:100]} held a stopped process, a frozen peer: {what}")
    return "; ".join(said)
