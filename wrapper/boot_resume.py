"""`boot-resume ROOT`: the start hook's subcommand: after a reboot or a container restart, relaunch on
the box, with no control plane, each attempt under ROOT that was cut off.

An attempt is cut off when its spec opted in (`boot_relaunch`), it has no exit marker, no seal and no
quarantine, and none of its processes lives. It is started again in place (the same attempt: the
command resumes from its own checkpoint in ckpt/), at most `boot_relaunch.max` times, counted in
`active/<run>/boot-relaunches`, which the control side reads back and counts as interruptions. An
attempt with run secrets is not relaunched: they were read once and deleted at its start. Every relaunch
passes the launch task's GPU gate first: a box back without the GPUs the run asked for relaunches nothing.
"""

import json
import os
import re
import subprocess
import sys
import time

from .digits import ascii_int
from .files import alive, atomic_write, read
from .gpus import relaunch_problem
from .specs import load_spec
from .status import counted, rebooted

COUNTER = "boot-relaunches"
GPU_GATE = "the GPU gate refused it: "
SPEC_NAME = re.compile(r"^spec-attempt-([0-9]+)\.json\Z")


def newest_attempt_spec(active):
    numbered = [(int(m.group(1)), name) for name in os.listdir(active) if (m := SPEC_NAME.match(name))]
    return os.path.join(active, max(numbered)[1]) if numbered else None


def why_not(spec, active):
    """Why the attempt of spec is not to be relaunched now, or None."""
    allowed = spec.boot_relaunch.max if spec.boot_relaunch else 0
    attempt = os.path.join(active, f"attempt-{spec.attempt}")
    if not allowed:
        return "not opted in"
    if spec.secrets:
        return "it has run secrets, read once at its start: relaunch it from the dashboard"
    if not os.path.isdir(attempt) or read(os.path.join(attempt, "exit_code")) is not None:
        return "closed"
    if os.path.isdir(spec.export):
        return "sealed"
    # Pids recorded before a reboot or container restart name nothing of ours now (another process may
    # have any of them): only where the boot is the same do they say the attempt still runs.
    pids = [pid for pid in map(ascii_int, (read(os.path.join(attempt, "pid")) or "").split()) if pid is not None]
    if not rebooted(spec, attempt) and any(running(pid) for pid in pids if pid > 0):
        return "running"
    if counted(os.path.join(active, COUNTER)) >= allowed:
        return f"its {allowed} relaunches on the box are used"
    gone = relaunch_problem(spec)  # the launch task's GPU gate: never trained on CPU at the GPU rate
    return f"{GPU_GATE}{gone}" if gone else None


def running(pid):
    """Alive and not a zombie waiting to be reaped."""
    if not alive(pid):
        return False
    stat = read(f"/proc/{pid}/stat") or ""
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def cmd_boot_resume(root):
    relaunched, skipped = [], []
    base = os.path.join(root, "active")
    for run_id in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        active = os.path.join(base, run_id)
        path = newest_attempt_spec(active) if os.path.isdir(active) else None
        if path is None:
            continue
        try:
            spec = load_spec(path)
            reason = why_not(spec, active)
        except (OSError, ValueError, KeyError) as exc:
            reason = f"unreadable spec: {exc}"
        if reason:
            skipped.append({"run_id": run_id, "why": reason})
            if reason.startswith(GPU_GATE):  # said where its run's page reads: the attempt's own log
                with open(os.path.join(active, f"attempt-{spec.attempt}", "log.txt"), "a") as log:
                    log.write(f"remotegpu: not relaunched on the box by its start hook: {reason}\n")
            continue
        used = counted(os.path.join(active, COUNTER)) + 1
        atomic_write(os.path.join(active, COUNTER), f"{used}\n")
        attempt = os.path.join(active, f"attempt-{spec.attempt}")
        allowed = spec.boot_relaunch.max
        with open(os.path.join(attempt, "log.txt"), "a") as log:
            log.write(f"remotegpu: relaunched on the box by its start hook after a restart ({used} of {allowed})\n")
        with open(os.path.join(active, "boot-resume.log"), "ab") as out:
            subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(sys.argv[0]), "run", path],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                cwd="/",
                start_new_session=True,
            )
        relaunched.append({"run_id": run_id, "attempt": spec.attempt, "count": used, "at": time.time()})
    print(json.dumps({"relaunched": relaunched, "skipped": skipped}))
    return 0
