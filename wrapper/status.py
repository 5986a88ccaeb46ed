"""`status`: what is true on the node right now for one run."""

import contextlib
import json
import os
import time

from .attempts import attempt_dir, quarantine_dir
from .digits import ascii_int
from .environment import boot_identity
from .files import alive, measure, newest_mtime, read, read_from, tail


def largest_items(roots, count=5):
    sizes = []
    for root in roots:
        if not os.path.isdir(root):
            continue
        for name in os.listdir(root):
            full = os.path.join(root, name)
            total = 0
            for directory, _dirs, files in os.walk(full) if os.path.isdir(full) else [("", [], [full])]:
                for file in files:
                    try:
                        total += os.lstat(os.path.join(directory, file)).st_size
                    except OSError:
                        continue
            sizes.append({"path": full, "bytes": total})
    return sorted(sizes, key=lambda item: -item["bytes"])[:count]


def moved_or_not(attempt, quarantined, name):
    """A marker of the attempt, read in its dir or, once moved there, in its quarantine dir."""
    found = read(os.path.join(attempt, name))
    return found if found is not None else read(os.path.join(quarantined, name))


def run_status(spec, log_offset=0, csv_offset=0):
    requested_log, requested_csv = log_offset, csv_offset
    attempt = attempt_dir(spec)
    quarantined = quarantine_dir(spec)
    base = attempt if os.path.isdir(attempt) else quarantined
    # quarantine() moves the attempt's markers one by one (each move atomic): a probe in between reads
    # each where it is now. Read from the attempt dir only, it saw no pid and no exit code while the
    # wrapper was still alive, and called the run dead without an exit code (test_no_edit, once).
    pids = [ascii_int(pid) or 0 for pid in (moved_or_not(attempt, quarantined, "pid") or "").split()]
    exit_code = moved_or_not(attempt, quarantined, "exit_code")
    heartbeat_at = moved_or_not(attempt, quarantined, "heartbeat")
    log_chunk, log_start, log_offset = read_from(os.path.join(base, "log.txt"), log_offset)
    csv_chunk, _, csv_offset = read_from(os.path.join(spec.output, "train.csv"), csv_offset)
    status = {
        "run_id": spec.run_id,
        "attempt": spec.attempt,
        "now": time.time(),
        "launched": bool(pids) or os.path.isdir(quarantined),
        "wrapper_alive": bool(pids) and pids[0] > 0 and alive(pids[0]),
        "child_alive": len(pids) > 1 and pids[1] > 0 and alive(pids[1]),
        "exit_code": ascii_int(exit_code.strip(), signed=True) if exit_code else None,
        "heartbeat_at": ascii_int(heartbeat_at.strip()) if heartbeat_at else None,
        "exported": os.path.isdir(spec.export),
        "paperwork": json.loads(read(os.path.join(base, "paperwork.json")) or "[]"),  # export.PAPERWORK_FILE
        "quarantine_reason": read(os.path.join(quarantined, "reason.txt")),
        "rebooted": rebooted(spec, base),
        "ran": json.loads(read(os.path.join(base, "ran.json")) or "null"),
        "ckpt_mirror": mirror_state(base),
        "boot_relaunches": counted(os.path.join(spec.active, "boot-relaunches")),  # boot_resume.COUNTER
        # A node of a run over several boxes: processes of it seen stopped (SIGSTOP), a frozen peer.
        "stopped_processes": len(json.loads(read(os.path.join(base, "stopped.json")) or "[]") or []),
        "log_mtime": written_at(spec, base),
        "ckpt_mtime": newest_mtime(spec.ckpt) if os.path.isdir(spec.ckpt) else None,
        "log_from": requested_log,
        "log_chunk": log_chunk,
        "log_start": log_start,
        "log_offset": log_offset,
        "csv_from": requested_csv,
        "csv_chunk": csv_chunk,
        "csv_offset": csv_offset,
        "log_tail": tail(os.path.join(base, "log.txt")),
        "space": measure(spec.run_root),
    }
    if status["exit_code"] not in (None, 0):
        cache = os.path.join(spec.run_root, "cache")
        status["regenerable"] = largest_items([cache, os.path.join(spec.active, "smoke")])
    return status


def written_at(spec, base):
    """When the command last wrote: its log or its output, never the wrapper's own markers (the
    heartbeat, the checkpoint mirror's state), which would keep a silent run from ever reading stalled."""
    times = [newest_mtime(spec.output) if os.path.isdir(spec.output) else None]
    with contextlib.suppress(OSError):
        times.append(os.stat(os.path.join(base, "log.txt")).st_mtime)
    return max(filter(None, times), default=None)


def counted(path):
    text = read(path) or ""
    return ascii_int(text.strip()) or 0


def mirror_state(base):
    """What the attempt's checkpoint mirror last said (ckpt_mirror.STATE), or None."""
    try:
        state = json.loads(read(os.path.join(base, "ckpt-mirror.json")) or "null")
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def rebooted(spec, base):
    at_launch = read(os.path.join(base, "boot_identity"))
    return at_launch is not None and at_launch != boot_identity(spec)


def cmd_status(spec):
    print(json.dumps(run_status(spec)))
    return 0
