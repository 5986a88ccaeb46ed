"""The whole process tree an attempt started, whatever session its processes are in.

The wrapper owns its command's process group, but a launcher may start its workers in sessions of their
own: torchrun's elastic agent does (start_new_session=True), so killing one node's launcher group left
its worker training with the other node for minutes, unnoticed by either agent (measured:
../shared/reference/clusters/slurm-on-one-machine.md). Every process of the attempt carries one mark in
its environment, inherited by whatever it starts; when the command ends, whatever still carries the mark
is a straggler: told to go (SIGTERM), killed after a short grace, and named in the attempt's record.
"""

import contextlib
import json
import os
import signal
import time

from .digits import ascii_int
from .files import atomic_write

TREE_MARK = "REMOTEGPU_ATTEMPT_TREE"
STRAGGLERS_FILE = "stragglers.json"  # in the attempt's folder: what was still running after the command ended
TREE_SCAN_LIMIT = 100_000  # /proc entries read at most (a box is untrusted; so is its process table's size)


def new_tree_mark(spec) -> str:
    return f"{spec.run_id}.{spec.attempt}.{os.urandom(8).hex()}"


def marked_pids(mark: str) -> list[int]:
    """The pids whose environment carries this attempt's mark, or a node's part of it ("<mark>.<node>"),
    this process excluded."""
    needles = (f"{TREE_MARK}={mark}\0".encode(), f"{TREE_MARK}={mark}.".encode())
    found = []
    with contextlib.suppress(OSError):
        for count, name in enumerate(os.listdir("/proc")):
            if count >= TREE_SCAN_LIMIT:
                break
            if ascii_int(name) in (None, os.getpid()):
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    environ = handle.read(1 << 20) + b"\0"
            except OSError:  # gone, or not ours to read
                continue
            if any(needle in environ for needle in needles):
                found.append(int(name))
    return found


def process_argv(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return " ".join(part.decode(errors="replace") for part in handle.read(400).split(b"\0")[:3] if part)
    except OSError:
        return "?"


def process_state(pid: int) -> str:
    """The kernel's one-letter state: R running, S sleeping, T stopped (SIGSTOP), Z a zombie; "" gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0][:1]
    except (OSError, IndexError):
        return ""


def _tree_alive(pid: int) -> bool:
    return process_state(pid) not in ("", "Z")


def end_stragglers(mark: str, attempt_dir: str | None, grace: float = 10.0) -> list[dict]:
    """Every process still carrying the mark: SIGTERM, then SIGKILL after the grace; recorded (pid and
    what ran) in the attempt's folder (if given) for the control side. [] when the command took its tree with it."""
    left = [{"pid": pid, "argv": process_argv(pid), "state": process_state(pid)} for pid in marked_pids(mark)]
    if not left:
        return []
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for found in left:
            with contextlib.suppress(OSError):
                os.kill(found["pid"], signum)
                os.kill(found["pid"], signal.SIGCONT)  # a stopped process (SIGSTOP) gets its TERM too
        deadline = time.monotonic() + (grace if signum == signal.SIGTERM else 5)
        while any(_tree_alive(found["pid"]) for found in left) and time.monotonic() < deadline:
            time.sleep(0.1)
            _reap_tree([found["pid"] for found in left])
        if not any(_tree_alive(found["pid"]) for found in left):
            break
    for found in left:
        found["survived"] = _tree_alive(found["pid"])
    if attempt_dir:  # a node's part keeps them in its own record instead
        with contextlib.suppress(OSError):
            atomic_write(os.path.join(attempt_dir, STRAGGLERS_FILE), json.dumps(left))
    return left


def _reap_tree(pids: list[int]) -> None:
    """A straggler that is this process's own child (reparented here) is reaped, or it stays a zombie;
    only those pids: another child of the wrapper (a checkpoint copy) is its own caller's to wait for."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def stragglers_said(left: list[dict]) -> str:
    """The stragglers in a sentence for the attempt's closing reason."""
    if not left:
        return ""
    names = "; ".join(f"{found['argv'][:80]} (pid {found['pid']})" for found in left[:3])
    more = f" and {len(left) - 3} more" if len(left) > 3 else ""
    return f"{len(left)} process(es) it started still ran after it ended and were stopped: {names}{more}"
