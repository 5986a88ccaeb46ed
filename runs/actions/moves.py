"""Continue a run on another box: a fresh attempt there restores the newest durable checkpoints, with
the same identities (checked at its preflight), spend-gated like a launch; the run keeps one history."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from core.states import IllegalTransition
from fleet.models import Instance
from notifications.models import Event
from runs import ckpt_pull, notices, rollups, signals
from runs.actions.base import lock_run, may_run_on, move_run, release_gpus, run_event
from runs.actions.spending import SpendPending, spend_gate
from runs.ckpt_pull import CONTROL
from runs.models import LIVE_STATES, RETRYABLE_STATES, Run, RunState, SpendRequest
from runs.reach import reach_problem

# What a continuation's box must run the same (or a person confirms the difference): the versions, and
# every installed distribution as one hash.
ENVIRONMENT_KEYS = ("python", "torch", "cuda", "packages_sha256")
# Where a continuation may start from: a closed attempt, or a run whose box a person says is gone.
MOVABLE_STATES = RETRYABLE_STATES | {RunState.RUNNING, RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE}


def pending_move(run: Run) -> dict | None:
    """The continuation whose preflight and smoke are under way (its attempt not launched yet)."""
    last = run.moves[-1] if run.moves else None
    return last if last and last.get("attempt") == run.attempt + 1 else None


def restorable(run: Run) -> list[dict]:
    """The newest durable copy of each of the run's checkpoints, as its boxes reported them."""
    return sorted((run.durable_ckpt.get("files") or {}).values(), key=lambda entry: entry["seq"])


def do_continue_elsewhere(
    run_pk: int,
    instance_pk: int,
    *,
    actor,
    box_gone: bool = False,
    confirm_difference: bool = False,
    automatic: str = "",
) -> Run:
    """A fresh attempt of the run on another box of its project, from its newest durable checkpoints.
    automatic: why RemoteGPU moves it by itself (actor None): it counts against the run's relaunches."""

    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        may_run_on(run, actor)
        target = _target(run, instance_pk)
        may_run_on(run, actor, target)
        if automatic:
            _may_move_by_itself(run, target)
            run.relaunches += 1
        if run.state not in MOVABLE_STATES:
            raise IllegalTransition(f"A run that is {run.get_state_display().lower()} cannot be continued elsewhere.")
        if run.state in (RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE) and not pending_move(run):
            raise IllegalTransition("Only a run that ran can be continued elsewhere: start its preflight instead.")
        if run.state == RunState.RUNNING and not box_gone:
            raise ValidationError("The run is running: say its box is gone (preempted, terminated) to continue it.")
        files = restorable(run)
        if not files:
            raise ValidationError("No durable checkpoint of this run is known: it can only be retried on its box.")
        from_control = run.durable_ckpt.get("target") == CONTROL
        unreadable = reach_problem(run.instance, target, from_control)
        if unreadable:
            raise ValidationError(unreadable)
        if from_control and (missing := _not_on_control(run, files)):
            raise ValidationError(f"The control host's copy {missing} is gone: the run can only be retried on its box.")
        waiting = spend_gate(run, run.attempt + 1, SpendRequest.Why.RELAUNCH, actor)
        if waiting is None:
            _continue(run, target, files, actor, box_gone, confirm_difference, from_control)
            if automatic:
                message = (
                    f"Moved by itself to {target.name} ({automatic}): relaunch {run.relaunches} of {run.max_relaunches}"
                )
                run_event(run, "failure", message)
                notices.announce(run, Event.RUN_INTERRUPTED, message, failure_class="interrupted")
            after_commit("runs.tasks.preflight_run", run.pk)
    if waiting is not None:
        raise SpendPending(waiting)
    return run


def _target(run: Run, instance_pk: int) -> Instance:
    target = Instance.objects.filter(pk=instance_pk, project_id=run.project_id).first()
    if target is None:
        raise ValidationError("Choose a box of the run's project.")
    if target.pk == run.instance_id:
        raise ValidationError("That is the run's own box: retry it there instead.")
    if target.state == "released":
        raise ValidationError(f"{target.name} is released.")
    return target


def _may_move_by_itself(run: Run, target: Instance) -> None:
    if not run.auto_relaunch:
        raise ValidationError("The run does not relaunch by itself.")
    if run.relaunches >= run.max_relaunches:
        raise ValidationError(f"its {run.max_relaunches} relaunches are used")
    if run.resume_broken:
        raise ValidationError("its resume is broken")
    if target.profile.is_local:
        raise ValidationError("a run never moves to the control host by itself")


def free_candidate(run: Run) -> Instance | None:
    """The first box of the run's list that is free now: live, its provider not saying it is down, not
    the control host, and no other run live on it."""
    names = [name for name in run.move_candidates if isinstance(name, str)]
    boxes = Instance.objects.filter(project_id=run.project_id, name__in=names).exclude(pk=run.instance_id)
    live = Run.objects.filter(state__in=LIVE_STATES, instance__in=boxes).exclude(pk=run.pk)
    busy = set(live.values_list("instance_id", flat=True))
    by_name = {box.name: box for box in boxes}
    for name in names:
        box = by_name.get(name)
        if (
            box
            and box.state != "released"
            and not box.provider_down
            and not box.profile.is_local
            and box.pk not in busy
        ):
            return box
    return None


def lost_box_runs() -> list[int]:
    """Runs the watcher believes running on a box its provider says is not running, not yet handled."""
    running = Run.objects.filter(state=RunState.RUNNING).exclude(instance__provider_down={})
    return [run.pk for run in running.only("pk", "alerts") if "box_lost" not in run.alerts]


def do_handle_lost_box(run_pk: int) -> str:
    """The provider says a running run's box is gone or stopped (a preempted spot box): a run that
    relaunches by itself continues on the first free box of its list, from its newest durable
    checkpoints; otherwise (or when it cannot) a material alert offers the move to a person."""
    run = Run.objects.select_related("instance").get(pk=run_pk)
    down = run.instance.provider_down
    if run.state != RunState.RUNNING or not down or "box_lost" in run.alerts:
        return "nothing to do"
    why = f"{down.get('evidence', 'the provider says it is down')} since {down.get('since', '?')[:19]}"
    refusal = "it does not relaunch by itself or lists no box to continue on"
    if run.auto_relaunch and run.move_candidates:
        target = free_candidate(run)
        refusal = "no box of its list is free"
        if target is not None:
            try:
                do_continue_elsewhere(run_pk, target.pk, actor=None, box_gone=True, automatic=why)
                return f"continued on {target.name}"
            except SpendPending:
                return f"continuing on {target.name} once the spend is approved"
            except (ValidationError, IllegalTransition) as exc:
                refusal = " ".join(getattr(exc, "messages", [str(exc)]))
    return _offer_move(run_pk, why, refusal)


def _offer_move(run_pk: int, why: str, refusal: str) -> str:
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        if run.state != RunState.RUNNING or "box_lost" in run.alerts:
            return "handled meanwhile"
        run.alerts = [*run.alerts, "box_lost"]
        run.save(update_fields=["alerts"])
        message = (
            f"{signals.SIGNAL_MESSAGES['box_lost']} ({why}); not moved by itself: {refusal}."
            " Continue it on another box from its newest durable checkpoint (its box is gone)."
        )
        run_event(run, "alert", message, signal="box_lost")
        notices.announce(run, Event.RUN_INTERRUPTED, message, failure_class="interrupted")
    return "offered"


def _not_on_control(run: Run, files: list[dict]) -> str | None:
    directory = ckpt_pull.control_dir(run)
    return next((entry["name"] for entry in files if not (directory / entry["file"]).is_file()), None)


def _continue(
    run: Run, target: Instance, files: list[dict], actor, box_gone: bool, confirm: bool, from_control: bool
) -> None:
    source = run.instance
    if run.state == RunState.RUNNING:  # the box is gone by a person's word: the attempt ends here
        run.exit_code, run.exited_at = None, timezone.now()
        said = actor or "its provider"
        run.close_reason = f"interrupted: the box {source.name} is gone (said by {said})"
        move_run(run, RunState.EXITED, f"Attempt {run.attempt}: its box is gone (said by {said})", actor)
        move_run(run, RunState.QUARANTINED, f"Attempt {run.attempt} quarantined: {run.close_reason}", actor)
        run.failure_class = "interrupted"
    release_gpus(run)
    run.alerts = [name for name in run.alerts if name != "box_lost"]  # the new box's loss is news again
    plain = [entry for entry in files if not entry["name"].startswith("best")]
    steps = [entry["step"] for entry in plain if entry["step"] is not None]
    move = {
        "attempt": run.attempt + 1,
        "from": source.name,
        "to": target.name,
        "at": timezone.now().isoformat(),
        "by": str(actor) if actor else "RemoteGPU by itself",
        "files": [{key: entry[key] for key in ("name", "file", "sha256", "bytes", "step", "seq")} for entry in files],
        "confirm_difference": confirm,
        "identities": {
            "source_tree_sha256": run.source_tree_sha256,
            "config_sha256": run.config_sha256,
            "data_sha256": run.data_sha256,
            "environment": {key: run.env_identity.get(key) for key in ENVIRONMENT_KEYS},
        },
    }
    run.moves = [*run.moves, move]
    restore = {"attempt": move["attempt"], "files": move["files"], "from_control": from_control}
    run.durable_ckpt = {**run.durable_ckpt, "restore": restore}
    run.resume_floor = max(steps) if steps else None
    run.boot_relaunches = 0  # what the new box's start hook counts starts from nothing
    run.gpu_accepted = {}  # an acceptance was of the old box's GPUs
    was_on = run.instance_id
    run.instance = target
    rollups.move(run, was_on, verified=False)
    newest = max(plain or files, key=lambda entry: entry["seq"])
    message = (
        f"Continuing on {target.name} (from {source.name}) from the"
        f" {'control host’s copy of the' if from_control else 'durable'} checkpoint {newest['name']}"
        f" of step {newest['step']}: preflight on the new box"
    )
    move_run(run, RunState.PREFLIGHT, message, actor, files=[entry["file"] for entry in files])
    record(
        AuditAction.RUN_CONTINUED, f"{run.run_id}: continued on {target.name} from {source.name}", actor=actor, run=run
    )


def move_problems(run: Run) -> list[str]:
    """At the continuation's preflight: the new box must bind what the run bound before (source, config,
    data) and, unless a person confirmed the difference, have the same Python, torch and CUDA."""
    move = pending_move(run)
    if move is None:
        return []
    problems = []
    before = move["identities"]
    for field in ("source_tree_sha256", "config_sha256", "data_sha256"):
        if before.get(field) and getattr(run, field) != before[field]:
            problems.append(f"{field} differs from the run's on {move['from']}: {getattr(run, field)[:12] or 'none'}")
    # Only what the move recorded (a move made before packages were hashed compares python, torch, CUDA).
    now = {key: run.env_identity.get(key) for key in ENVIRONMENT_KEYS if key in before["environment"]}
    changed = [
        f"{key} {str(before['environment'].get(key))[:12]} → {str(now[key])[:12]}"
        for key in now
        if before["environment"].get(key) != now[key]
    ]
    if changed and not move.get("confirm_difference"):
        problems.append(
            f"the environment differs from {move['from']}'s ({', '.join(changed)}): confirm the difference to go on"
        )
    return problems
