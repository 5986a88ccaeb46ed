"""What a probe's checkpoint-mirror state changes on a locked run: the newest durable copies (or, with
no durable tier, the pull of the box's held checkpoint to the control host), the lag alert, the resume
proof of a relaunched attempt (which stops automatic relaunches when broken), and the relaunches the
box's start hook made while no control plane watched."""

import time
from functools import partial
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.enqueue import after_commit
from notifications.models import Event
from runs import ckpt_pull, notices, signals
from runs.actions.base import lock_run, push_update, run_event
from runs.cadence import checkpoint_environment
from runs.checkpoints import lag_problem, missing_problem, parse_mirror, resume_problem, resume_proven
from runs.ckpt_pull import CONTROL
from runs.models import Run


def lag_allowance(run: Run) -> float:
    """How long a newer checkpoint may wait uncopied: the run's cadence where it has one, else the
    setting; plus two of the mirror's looks."""
    every = checkpoint_environment(run).get("REMOTEGPU_CHECKPOINT_EVERY_S")
    return (int(every) if every else settings.CKPT_LAG_SECONDS) + 2 * settings.CKPT_MIRROR_POLL_SECONDS


def apply_mirror(run: Run, status: dict) -> None:
    """Called under the run's lock with a probe of its current attempt."""
    mirror = parse_mirror(status.get("ckpt_mirror"), (run.trainer_files or {}).get("checkpoints"))
    if mirror is None:
        return
    _refused(run, mirror, (run.ckpt_mirror or {}).get("refused") or {})
    run.ckpt_mirror = mirror
    newest = mirror["newest"]
    same_tier = mirror["target"] == run.durable_ckpt.get("target")
    if newest and (newest["seq"] > (run.durable_ckpt.get("seq") or 0) or not same_tier):
        # Copies on another tier (a box that does not share the last one's) start the list again: a
        # restore reads one directory. The box's list of what its manifest keeps replaces ours (a copy
        # we never saw, and what it pruned, are as it says); an older wrapper sends only the newest.
        kept = mirror["files"] if newest["name"] in mirror["files"] else {}
        files = kept or {**(run.durable_ckpt.get("files", {}) if same_tier else {}), newest["name"]: newest}
        where = {"target": mirror["target"], "instance_id": run.instance_id}
        run.durable_ckpt = {**run.durable_ckpt, **where, "seq": newest["seq"], "files": files}
        push_update(run, {"type": "checkpoint", "step": newest["step"]})  # the run page's section anew
    sealing = status.get("exported") or status.get("exit_code") == 0  # its export is the copy that counts
    if not mirror["durable"] and mirror["held"] and not sealing:
        _ask_pull(run, mirror["held"])
    _lag(run, mirror, status["now"])
    _missing(run, mirror)
    _took_newer(run, mirror)
    _resume(run, mirror)


def _refused(run: Run, mirror: dict, before: dict) -> None:
    """Names the box reported that are no checkpoint of this run's: said once each, never kept."""
    new = {name: why for name, why in mirror["refused"].items() if name not in before}
    if new:
        said = "; ".join(f"{name}: {why}" for name, why in new.items())
        run_event(
            run,
            "alert",
            f"The box named checkpoints that are not this run's, refused (never copied, pulled or restored): {said}",
        )


def _pulled(run: Run) -> dict | None:
    """The newest checkpoint the control host holds of the run, as its box described it."""
    if run.durable_ckpt.get("target") != CONTROL:
        return None
    files = [entry for entry in (run.durable_ckpt.get("files") or {}).values() if not entry["name"].startswith("best")]
    return max(files, key=lambda entry: entry["seq"], default=None)


def _ask_pull(run: Run, held: dict) -> None:
    """Ask a worker for one checkpoint the box holds that the control host lacks, one pull at a time: a
    pull under way is asked again only past its deadline (its worker was lost), a failed one after the
    retry wait."""

    on_control = run.durable_ckpt.get("files") if run.durable_ckpt.get("target") == CONTROL else {}
    wanted = [
        entry for name, entry in held.items() if (on_control or {}).get(name, {}).get("sha256") != entry["sha256"]
    ]
    if not wanted:
        return
    asked, now = run.durable_ckpt.get("pull") or {}, time.time()
    if asked:
        wait = settings.CKPT_PULL_RETRY_SECONDS if asked.get("error") else settings.CKPT_PULL_DEADLINE_SECONDS
        if now - asked.get("asked", 0) < wait and any(entry["sha256"] == asked.get("sha256") for entry in wanted):
            return
    # A name the control host has no copy of first, then the one whose copy is oldest: a latest.pth
    # rewritten every epoch never starves best.pth.
    entry = min(wanted, key=lambda item: (item["name"] in on_control, on_control.get(item["name"], {}).get("at", 0)))
    run.durable_ckpt = {**run.durable_ckpt, "pull": {**entry, "asked": now, "attempt": run.attempt}}
    after_commit("runs.tasks.pull_checkpoint", run.pk, entry["sha256"])


def do_record_pulled_checkpoint(run_pk: int, sha256: str, arrived: Path, seconds: float) -> bool:
    """The box's held checkpoint arrived on the control host, its SHA-256 checked: it is the run's
    durable copy now. False when the watcher has asked for another since (the arrival is dropped)."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        asked = run.durable_ckpt.get("pull") or {}
        if asked.get("sha256") != sha256:
            arrived.unlink(missing_ok=True)
            return False
        before = run.durable_ckpt if run.durable_ckpt.get("target") == CONTROL else {}
        seq = (before.get("seq") or 0) + 1
        entry = {key: asked[key] for key in ("name", "sha256", "bytes", "step", "at", "attempt")}
        entry.update(file=f"{seq:06d}-{asked['name']}", seq=seq)
        directory = ckpt_pull.control_dir(run)
        ckpt_pull.store(arrived, directory, entry["file"])
        files = {**(before.get("files") or {}), entry["name"]: entry}
        pulled = {"sha256": sha256, "bytes": entry["bytes"], "seconds": round(seconds, 3), "at": time.time()}
        where = {"target": CONTROL, "instance_id": run.instance_id, "seq": seq, "files": files}
        run.durable_ckpt = {**run.durable_ckpt, **where, "pull": None, "pulled": pulled}
        run.save(update_fields=["durable_ckpt"])
        size = entry["bytes"] / 2**20
        message = (
            f"Checkpoint {entry['name']} of step {entry['step']} copied to the control host"
            f" ({size:.1f} MiB in {seconds:.1f} s, SHA-256 checked): its box has no durable tier"
        )
        run_event(run, "note", message, sha256=sha256, step=entry["step"])
        restoring = (run.durable_ckpt.get("restore") or {}).get("files") or []
        keep = {item["file"] for item in files.values()} | {item["file"] for item in restoring}
        transaction.on_commit(partial(ckpt_pull.prune, directory, keep))
    return True


def do_fail_checkpoint_pull(run_pk: int, sha256: str, reason: str) -> None:
    """A pull that failed (the box went away, the bytes did not match): said on the run; the watcher
    asks again after CKPT_PULL_RETRY_SECONDS while the box still holds it."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        asked = run.durable_ckpt.get("pull") or {}
        if asked.get("sha256") != sha256:
            return
        run.durable_ckpt = {**run.durable_ckpt, "pull": {**asked, "error": reason[:300], "asked": time.time()}}
        run.save(update_fields=["durable_ckpt"])
        run_event(run, "failure", f"Copying checkpoint {asked['name']} to the control host failed: {reason[:300]}")


def apply_boot_relaunches(run: Run, status: dict) -> None:
    """The box's start hook relaunched the attempt after a restart (boot-resume): each is an interruption,
    counted once, against the run's relaunches."""
    count = status.get("boot_relaunches")
    if not isinstance(count, int) or isinstance(count, bool) or count <= run.boot_relaunches:
        return
    new, run.boot_relaunches = count - run.boot_relaunches, count
    run.relaunches += new
    message = f"Interrupted (the box restarted); relaunched on the box by its start hook with no control plane: {count}"
    run_event(run, "failure", message, boot_relaunches=count)
    notices.announce(
        run, Event.RUN_INTERRUPTED, "its box restarted; its start hook relaunched it", failure_class="interrupted"
    )


def _lag(run: Run, mirror: dict, node_now: float) -> None:
    # Without a durable tier the box holds a newer copy only once the one before has stayed its time.
    allowance = lag_allowance(run) + (0 if mirror.get("durable") else settings.CKPT_HOLD_SECONDS)
    problem = lag_problem(mirror, node_now, allowance, _pulled(run))
    if problem is None:
        run.alerts = [name for name in run.alerts if name != "ckpt_lag"]  # caught up: a new lag is news again
        return
    if "ckpt_lag" not in run.alerts:
        _material(run, "ckpt_lag", problem)


def _missing(run: Run, mirror: dict) -> None:
    """Said once per run: it trains, and nothing it saves is where a resume or a durable copy looks."""
    if "no_checkpoint" in run.alerts or run.launched_at is None:
        return
    running = (timezone.now() - run.launched_at).total_seconds()
    problem = missing_problem(mirror, len(run.curve or []), running, lag_allowance(run))
    if problem:
        _material(run, "no_checkpoint", problem)


def _took_newer(run: Run, mirror: dict) -> None:
    """Said once: the continued attempt restored a newer durable copy than the move named (the box
    mirrored it after the control side last looked)."""
    restore = run.durable_ckpt.get("restore") or {}
    if restore.get("attempt") != run.attempt or restore.get("took") is not None or not mirror["restored"]:
        return
    named = {item["name"]: item["file"] for item in restore.get("files") or []}
    newer = [item for item in mirror["restored"] if named.get(item["name"]) not in (None, item["file"])]
    run.durable_ckpt = {**run.durable_ckpt, "restore": {**restore, "took": mirror["restored"]}}
    for item in newer:
        run_event(
            run,
            "note",
            f"Restored {item['name']} from the newer durable copy {item['file']} (step {item['step']}): the box"
            f" mirrored it after it was last looked at, instead of {named[item['name']]}",
        )


def _resume(run: Run, mirror: dict) -> None:
    problem = resume_problem(mirror, run.resume_floor)
    if problem is None and resume_proven(mirror, run.resume_floor):
        _proven(run, mirror)
    if problem is None or run.resume_broken:
        return
    run.resume_broken = f"attempt {run.attempt}: {problem}"
    _material(run, "resume_broken", problem + ". Automatic relaunches stop: fix the resume, then retry by hand.")


def _proven(run: Run, mirror: dict) -> None:
    """Said once per attempt: the resume is proven by what the box wrote, not by the command's word."""
    if (run.durable_ckpt or {}).get("resume_proven") == run.attempt:
        return
    run.durable_ckpt = {**(run.durable_ckpt or {}), "resume_proven": run.attempt}
    first, local = mirror["first_written"]["step"], mirror["local"]["step"]
    run_event(
        run,
        "note",
        f"Resume proven: attempt {run.attempt} was given step {run.resume_floor}, wrote its first checkpoint at "
        f"step {first} and trained on to step {local}",
    )


def _material(run: Run, name: str, detail: str) -> None:
    run.alerts = [*run.alerts, name]
    message = signals.alert_message(name, detail)
    run_event(run, "alert", message, signal=name)
    notices.announce(run, Event.RUN_CHECKPOINT, message)
