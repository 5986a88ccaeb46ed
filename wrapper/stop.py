"""`stop`: a person's stop of an attempt: SIGTERM, then SIGKILL after the grace."""

import contextlib
import json
import os
import signal
import subprocess
import threading
import time

from .attempts import attempt_dir
from .digits import ascii_int
from .files import alive, atomic_write, read

STOP_MARKER = "stop.json"
PREEMPTED_MARKER = "preempted"  # a SIGTERM that was not a person's stop: the platform's notice


TERMINATING = []  # the grace timer, armed once per wrapper


def stop_request(spec):
    try:
        return json.loads(read(os.path.join(attempt_dir(spec), STOP_MARKER)) or "null")
    except ValueError:
        return None


def grace_of(spec):
    asked = stop_request(spec) or {}
    seconds = asked.get("grace_seconds", spec.stop_grace_seconds)
    return max(0, min(int(seconds), 3600)) if isinstance(seconds, int) else 30


def terminate_gracefully(child, spec):
    """SIGTERM now, so the run can checkpoint; SIGKILL when the grace is over and it is still there."""
    if child.poll() is not None:
        return
    child.terminate()
    if TERMINATING:
        return
    grace = grace_of(spec)

    def kill_after_grace():
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()

    TERMINATING.append(threading.Thread(target=kill_after_grace, daemon=True))
    TERMINATING[0].start()


def stop_reason(spec, code):
    """The quarantine reason of an attempt a person stopped (its marker), else None."""
    asked = stop_request(spec)
    if not isinstance(asked, dict):
        return None
    how = "after SIGTERM" if code != 137 else f"by SIGKILL when the {grace_of(spec)} s grace ran out"
    if asked.get("node_failed"):  # another node of a run over several boxes failed: this one was ended with it
        said = f"this node was stopped: the command ended {how} (exit code {code})"
        return f"a node of the run failed: {asked.get('by')}; {said}"
    return "stopped by {}: the command ended {} (exit code {})".format(asked.get("by") or "a person", how, code)


def on_sigterm(spec, child):
    """The wrapper's SIGTERM: a person's stop (its marker was written first), or else the platform's
    preemption notice (a container stop, Slurm's --signal, a spot reclaim), marked as such. Either way
    the command gets SIGTERM and its grace to save; resume never rests on that last save."""
    if stop_request(spec) is None:
        with contextlib.suppress(OSError):
            atomic_write(os.path.join(attempt_dir(spec), PREEMPTED_MARKER), f"{int(time.time())}\n")
    if child:
        terminate_gracefully(child, spec)


WALLTIME_MARKER = "walltime-signal"  # Slurm's USR1 came: the walltime is near


def on_usr1(spec, child):
    """The scheduler's notice that the walltime is near (Slurm's --signal=B:USR1@N): marked, and passed on
    to the command so it saves a checkpoint while it still may."""
    with contextlib.suppress(OSError):
        atomic_write(os.path.join(attempt_dir(spec), WALLTIME_MARKER), f"{int(time.time())}\n")
    if child and child.poll() is None:
        with contextlib.suppress(OSError):
            child.send_signal(signal.SIGUSR1)


def preempted_reason(spec, code):
    """The quarantine reason of an attempt whose wrapper was told to go by the platform, else None."""
    if code == 0 or read(os.path.join(attempt_dir(spec), PREEMPTED_MARKER)) is None:
        return None
    warned = read(os.path.join(attempt_dir(spec), WALLTIME_MARKER))
    if warned is not None:  # USR1 came first: the scheduler's time limit, not a preemption
        ended = read(os.path.join(attempt_dir(spec), PREEMPTED_MARKER)) or ""
        stamps = ascii_int(ended.strip()), ascii_int(warned.strip())
        before = stamps[0] - stamps[1] if None not in stamps else None
        said = f" {before} s" if before is not None else ""
        return (
            f"the job's time limit ran out: SIGUSR1 came{said} before SIGTERM, for the command to save; it ended"
            f" with exit code {code}"
        )
    return (
        f"interrupted: SIGTERM to the wrapper (a preemption notice or the container stopping); the command had"
        f" {grace_of(spec)} s to save and ended with exit code {code}"
    )


def cmd_stop(spec, request):
    """A person's stop: the marker (who, the grace), then SIGTERM to the wrapper, which passes it on to
    the command and kills it when the grace is over. Idempotent; refused where nothing runs."""
    attempt = attempt_dir(spec)
    if request.get("signal") is False:  # the scheduler delivers it (scancel): the marker only, no pid here
        return _mark_only(spec, attempt, request)
    pids = (read(os.path.join(attempt, "pid")) or "").split()
    wrapper = (ascii_int(pids[0]) or 0) if pids else 0
    if not os.path.isdir(attempt) or not wrapper or not alive(wrapper):
        code = read(os.path.join(attempt, "exit_code")) if os.path.isdir(attempt) else None
        print(json.dumps({"stopped": False, "reason": "not running" + (" (exit code " + code + ")" if code else "")}))
        return 0
    _write_stop_marker(spec, attempt, request)
    os.kill(wrapper, signal.SIGTERM)
    print(json.dumps({"stopped": True, "pid": wrapper}))
    return 0


def _write_stop_marker(spec, attempt, request):
    by = "".join(ch for ch in str(request.get("by", ""))[:300] if ch.isprintable())
    grace = request.get("grace_seconds")
    marker = {"by": by, "grace_seconds": grace if isinstance(grace, int) else 30, "at": int(time.time())}
    marker["node_failed"] = request.get("node_failed") is True
    if stop_request(spec) is None:
        atomic_write(os.path.join(attempt, STOP_MARKER), json.dumps(marker))


def _mark_only(spec, attempt, request):
    """A job the scheduler runs, perhaps on another node: the stop's marker is written where the wrapper
    reads it (shared storage), and the control side cancels the job; a job not started yet has no
    attempt directory, and its cancel alone stops it."""
    if os.path.isdir(attempt):
        _write_stop_marker(spec, attempt, request)
    print(json.dumps({"stopped": True, "marked": os.path.isdir(attempt)}))
    return 0
