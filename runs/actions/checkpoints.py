"""What a probe's checkpoint-mirror state changes on a locked run: the newest durable copies, the lag
alert, the resume proof of a relaunched attempt (which stops automatic relaunches when broken), and the
relaunches the box's start hook made while no control plane watched."""

from django.conf import settings

from notifications.models import Event
from runs import notices, signals
from runs.actions.base import run_event
from runs.cadence import checkpoint_environment
from runs.checkpoints import lag_problem, parse_mirror, resume_problem
from runs.models import Run


def lag_allowance(run: Run) -> float:
    """How long a newer checkpoint may wait uncopied: the run's cadence where it has one, else the
    setting; plus two of the mirror's looks."""
    every = checkpoint_environment(run).get("REMOTEGPU_CHECKPOINT_EVERY_S")
    return (int(every) if every else settings.CKPT_LAG_SECONDS) + 2 * settings.CKPT_MIRROR_POLL_SECONDS


def apply_mirror(run: Run, status: dict) -> None:
    """Called under the run's lock with a probe of its current attempt."""
    mirror = parse_mirror(status.get("ckpt_mirror"))
    if mirror is None:
        return
    run.ckpt_mirror = mirror
    newest = mirror["newest"]
    same_tier = mirror["target"] == run.durable_ckpt.get("target")
    if newest and (newest["seq"] > (run.durable_ckpt.get("seq") or 0) or not same_tier):
        # Copies on another tier (a box that does not share the last one's) start the list again: a
        # restore reads one directory.
        files = {**(run.durable_ckpt.get("files", {}) if same_tier else {}), newest["name"]: newest}
        where = {"target": mirror["target"], "instance_id": run.instance_id}
        run.durable_ckpt = {**run.durable_ckpt, **where, "seq": newest["seq"], "files": files}
    _lag(run, mirror, status["now"])
    _resume(run, mirror)


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
    problem = lag_problem(mirror, node_now, lag_allowance(run))
    if problem is None:
        run.alerts = [name for name in run.alerts if name != "ckpt_lag"]  # caught up: a new lag is news again
        return
    if "ckpt_lag" not in run.alerts:
        _material(run, "ckpt_lag", problem)


def _resume(run: Run, mirror: dict) -> None:
    problem = resume_problem(mirror, run.resume_floor)
    if problem is None or run.resume_broken:
        return
    run.resume_broken = f"attempt {run.attempt}: {problem}"
    _material(run, "resume_broken", problem + ". Automatic relaunches stop: fix the resume, then retry by hand.")


def _material(run: Run, name: str, detail: str) -> None:
    run.alerts = [*run.alerts, name]
    message = f"{signals.SIGNAL_MESSAGES[name]}: {detail}"
    run_event(run, "alert", message, signal=name)
    notices.announce(run, Event.RUN_CHECKPOINT, message)
