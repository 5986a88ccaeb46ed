"""`run`: the detached attempt: pid, heartbeat, command, exit marker, closeout."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import threading
import time

from .attempts import attempt_dir, run_env
from .ckpt_mirror import CheckpointMirror, restore_checkpoints
from .declared import attempt_argv
from .declared_ckpt import restore_declared
from .diskwatch import DiskWatch
from .distributed import failed_tasks, frozen_nodes, nodes_said
from .environment import boot_identity
from .export import closeout, quarantine
from .files import atomic_write, durable_write, reserve_markers
from .hooks import drop_proxy_from_wrapper, hook_env, make_cache
from .node import watch_stopped
from .run_secrets import pump_masked, remask_in_place, remove_secrets, take_secrets
from .scheduler import claim, superseded
from .stop import grace_of, on_sigterm, on_usr1, preempted_reason, stop_reason
from .tree import end_stragglers, new_tree_mark, stragglers_said


def heartbeat(path, interval, stop):
    while not stop.wait(interval):
        try:
            atomic_write(path, f"{int(time.time())}\n")
        except OSError:  # a full disk: rewrite the same-length stamp in place (no new inode or block)
            with contextlib.suppress(OSError), open(path, "r+") as handle:
                handle.write(f"{int(time.time())}\n")


def start_child(spec, argv, log, secrets, hooks):
    """The command, started without a shell; with secrets its output is masked on its way to the log."""
    env = run_env(spec, False, secrets, hooks)
    # A node of a run over several boxes: torchrun in a session of its own, so a killed launcher group
    # leaves this wrapper to report it (and to end the workers it left).
    apart = bool(spec.distributed) and spec.scheduler != "slurm"
    if not secrets:
        return subprocess.Popen(argv, cwd=spec.cwd, env=env, stdout=log, stderr=log, start_new_session=apart), None
    child = subprocess.Popen(
        argv, cwd=spec.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=apart
    )
    pump = threading.Thread(target=pump_masked, args=(child.stdout, log, list(secrets.values())), daemon=True)
    pump.start()
    return child, pump


def _prepare(spec) -> tuple[str, str, bool]:
    """The attempt's directories and markers: (attempt dir, reserve dir, started again in place)."""
    attempt = attempt_dir(spec)
    os.makedirs(attempt, exist_ok=True)
    for directory in (spec.ckpt, spec.output, os.path.dirname(spec.partial), spec.quarantine_base):
        os.makedirs(directory, exist_ok=True)
    reserve = reserve_markers(attempt)
    in_place = os.path.exists(os.path.join(attempt, "started_at"))  # the start hook's relaunch after a restart
    atomic_write(os.path.join(attempt, "started_at"), f"{int(time.time())}\n")
    atomic_write(os.path.join(attempt, "boot_identity"), boot_identity(spec) + "\n")
    return attempt, reserve, in_place


def _start_recorded(spec, attempt, log, secrets):
    """The child started, and what actually ran written for the control side: the argv, the kernel's view
    of it, the hooks applied (names of what the proxy exported, never values) and the secrets' names."""
    try:
        argv = attempt_argv(spec)
        hooks, hooks_ran = hook_env(spec, dict(os.environ))
        child, pump = start_child(spec, argv, log, secrets, hooks)
        exe = os.path.realpath(f"/proc/{child.pid}/exe") if os.path.exists(f"/proc/{child.pid}/exe") else ""
        ran = {"argv0": argv[0], "exe": exe, "hooks": hooks_ran, "secrets": sorted(secrets)}
        atomic_write(os.path.join(attempt, "ran.json"), json.dumps(ran))
        return child, pump
    except OSError as exc:
        log.write((f"cannot start the command: {exc}\n").encode())
        return None, None


def _close(spec, attempt, reserve, code, disk, stragglers) -> int:
    """The exit marker (also in the reserve), then quarantine with the reason, or the sealed export."""
    durable_write(os.path.join(attempt, "exit_code"), f"{code}\n", os.path.join(reserve, "exit_code"))
    stopped = stop_reason(spec, code) or preempted_reason(spec, code)
    failed = code != 0 and (disk.full_reason(code) or f"command exited with code {code}")
    failed, peers = _failure_said(spec, attempt, failed, stragglers)
    if not (stopped or failed) and spec.distributed and spec.distributed.role == "peer":
        # Another box's node: rank 0's box seals the export; this one ends with its exit marker only.
        with contextlib.suppress(OSError):
            atomic_write(os.path.join(attempt, "node-done"), f"{int(time.time())}\n")
        shutil.rmtree(reserve, ignore_errors=True)
        return 0
    problem = stopped or failed or superseded(spec) or closeout(spec)
    if problem and peers and not stopped:  # the training had not finished: the nodes that failed first
        problem = f"command exited with code {code}; {peers}; and rank 0's export: {problem}"
    if problem:
        quarantine(spec, problem)
        return 1
    with contextlib.suppress(OSError):  # a convenience marker: the export itself is what counts
        atomic_write(os.path.join(spec.active, "sealed"), f"attempt {spec.attempt}\n")
    shutil.rmtree(reserve, ignore_errors=True)
    return 0


def _failure_said(spec, attempt, failed, stragglers):
    """(the failure with the stragglers stopped, or "" where srun named failed nodes; what those nodes'
    failures were). A node's failure after rank 0 exported in full (an abort at exit, another node's) does
    not fail a finished training: rank 0's export, checked at closeout as any, decides."""
    tasks = failed_tasks(os.path.join(attempt, "log.txt")) if failed and spec.distributed else {}
    said = [nodes_said(tasks)] if tasks else []
    said += [frozen] if tasks and (frozen := frozen_nodes(attempt)) else []
    said += [stragglers_said(stragglers)] if failed and stragglers else []
    if tasks:  # a node failed: rank 0's export decides whether the training had finished before it
        with contextlib.suppress(OSError):
            atomic_write(os.path.join(attempt, "peer-failures.txt"), "; ".join(said) + "\n")
        return "", "; ".join(said)
    return "; ".join([failed, *said]) if failed else failed, ""


def put_back_declared(spec):
    try:
        restore_declared(spec)
    except (OSError, tarfile.TarError) as exc:
        return f"putting the declared checkpoint back: {exc}"
    return None


def _restored(spec, in_place):
    """(problem, copies restored). A fresh attempt on another box continues from the durable copy; one
    started again in place keeps the newer checkpoints it wrote since."""
    if in_place:
        return None, []
    problem, restored = restore_checkpoints(spec)
    return problem or put_back_declared(spec), restored  # the no-edit path: where the unchanged script looks


def _watch_frozen(spec, attempt, stop):
    """A box's node of a run over several boxes: a stopped process of it is recorded for its status."""
    if spec.distributed and spec.scheduler != "slurm":
        record = os.path.join(attempt, "stopped.json")
        threading.Thread(target=watch_stopped, args=(spec.tree_mark, stop, {}, 1.0, record), daemon=True).start()


def cmd_run(spec):
    spec = spec.but(tree_mark=new_tree_mark(spec))  # the attempt's processes, whatever their session
    secrets = take_secrets(spec)  # read once, the file gone before anything else happens
    drop_proxy_from_wrapper(spec)
    make_cache(spec)
    attempt, reserve, in_place = _prepare(spec)
    claim(spec)
    log_path = os.path.join(attempt, "log.txt")
    problem, restored = _restored(spec, in_place)
    if problem:
        remove_secrets(spec)
        quarantine(spec, "restore failed: " + problem)
        return 1
    stop = threading.Event()
    watcher = CheckpointMirror(spec, attempt)
    watcher.state["restored"] = restored  # which copies it continued from (a newer one than named, maybe)
    mirror = threading.Thread(target=watcher.loop, args=(stop,), daemon=True)
    mirror.start()
    beat = os.path.join(attempt, "heartbeat")
    atomic_write(beat, f"{int(time.time())}\n")
    threading.Thread(target=heartbeat, args=(beat, spec.heartbeat_seconds, stop), daemon=True).start()
    disk = DiskWatch(spec.active)
    disk.start(stop)
    with open(log_path, "ab") as log:
        child, pump = _start_recorded(spec, attempt, log, secrets)
        _watch_frozen(spec, attempt, stop)
        # The child has them; this process keeps them only to mask its log once more at the end.
        mask_values, secrets = list((secrets or {}).values()), None
        atomic_write(os.path.join(attempt, "pid"), f"{os.getpid()} {child.pid if child else -1}\n")
        # A SIGTERM to the wrapper is passed on (then SIGKILL after the grace), so the exit marker is
        # still written; a person's stop (cmd_stop) is a SIGTERM with its marker, any other a preemption.
        signal.signal(signal.SIGTERM, lambda signum, frame: on_sigterm(spec, child))
        # Slurm's --signal=B:USR1 before the walltime: the command is told to save (docs/contract.md).
        signal.signal(signal.SIGUSR1, lambda signum, frame: on_usr1(spec, child))
        code = child.wait() if child else 127
        # A launcher's workers in sessions of their own outlive it (torchrun's): none trains on unwatched.
        stragglers = end_stragglers(spec.tree_mark, attempt, grace_of(spec) if code else 10)
        disk.exited()  # before anything of ours is removed or copied
        if pump is not None:
            pump.join(timeout=30)  # the rest of the child's output, masked, before the exit marker
    # What the child wrote into log.txt itself (past the masker on its stdout): masked in place.
    remask_in_place(log_path, mask_values)
    mask_values = None
    remove_secrets(spec)
    if code < 0:
        code = 128 - code  # killed by a signal: report as a shell would (SIGKILL -> 137)
    stop.set()
    mirror.join(timeout=600)  # the last checkpoint copied before the attempt closes
    return _close(spec, attempt, reserve, code, disk, stragglers)
