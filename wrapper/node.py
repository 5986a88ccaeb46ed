"""`node`: one node's part of a multi-node run, the task srun starts on every node of the job. It starts
that node's torchrun in a session of its own, passes a stop on, and when torchrun ends, for whatever
reason, ends every process it left on this node (its workers are in sessions of their own: a killed
launcher left its worker training with the other node for minutes). It then exits with torchrun's code,
so srun sees the node fail at once and ends every other node's part (--kill-on-bad-exit), and writes
what happened on this node under the attempt's nodes/ for the run's page.
"""

import contextlib
import json
import os
import signal
import subprocess
import threading
import time

from .files import atomic_write, read
from .tree import TREE_MARK, end_stragglers, marked_pids, process_argv, process_state


def node_mark():
    """This node's part of the attempt's mark: the head's sweep still finds it (a prefix of it)."""
    return f"{os.environ.get(TREE_MARK, 'unmarked')}.{os.environ.get('SLURM_NODEID', '0')}"


def cmd_node(request_path):
    """request (written by the head's wrapper, on the run's shared storage): argv, cwd, nodes (where each
    node's record goes) and grace (the stop's, for what torchrun leaves)."""
    request = json.loads(read(request_path) or "{}")
    argv = request.get("argv") if isinstance(request, dict) else None
    if not isinstance(argv, list) or not argv or not all(isinstance(part, str) for part in argv):
        return 2
    at = request.get("node_rank_at")
    if isinstance(at, int) and 0 < at <= len(argv):  # this node's rank: its Slurm node id (0: the first node)
        argv = [*argv[:at], f"--node-rank={int(os.environ.get('SLURM_NODEID') or 0)}", *argv[at:]]
    mark = node_mark()
    env = dict(os.environ, **{TREE_MARK: mark})
    child = subprocess.Popen(argv, cwd=request.get("cwd") or None, env=env, start_new_session=True)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):  # srun's stop, passed on to torchrun
        signal.signal(signum, lambda number, frame: _pass_on(child, number))
    ended, stopped = threading.Event(), {}
    threading.Thread(target=watch_stopped, args=(mark, ended, stopped), daemon=True).start()
    code = child.wait()
    ended.set()
    code = 128 - code if code < 0 else code
    nodes = request.get("nodes") or os.path.dirname(request_path)
    os.makedirs(nodes, exist_ok=True)
    left = end_stragglers(mark, None, int(request.get("grace") or 10) if code else 10)
    name = os.environ.get("SLURMD_NODENAME") or os.environ.get("SLURM_NODEID", "0")
    record = {"node": name[:100], "task": os.environ.get("SLURM_PROCID", "0"), "exit_code": code, "stragglers": left}
    record["stopped"] = list(stopped.values())[:20]
    atomic_write(os.path.join(nodes, f"{os.environ.get('SLURM_NODEID', '0')}.json"), json.dumps(record))
    return code


def watch_stopped(mark, ended, stopped, every=1.0, record=None):
    """Each process of this node's tree seen stopped (SIGSTOP: a frozen peer the others wait on until the
    collective timeout): named in the node's record, so the run's reason says which node froze. record:
    a file the list is also written to as it grows (a box's node: its status reads it)."""
    while not ended.wait(every):
        for pid in marked_pids(mark):
            if pid not in stopped and process_state(pid) == "T":
                stopped[pid] = {"pid": pid, "argv": process_argv(pid), "state": "T", "since": int(time.time())}
                if record:
                    with contextlib.suppress(OSError):
                        atomic_write(record, json.dumps(list(stopped.values())[:20]))


def _pass_on(child, signum):
    if child.poll() is None:
        try:
            os.killpg(child.pid, signum)
        except OSError:
            child.send_signal(signum)
