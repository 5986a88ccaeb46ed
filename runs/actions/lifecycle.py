"""A run's life from draft to launch, retry and close: one function per verb, in a transaction."""

import time
from functools import partial

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from core.states import IllegalTransition
from datasets.roster import data_identity
from fleet.actions import do_observe_running
from fleet.models import Instance
from runs import environment, hooks, rollups
from runs.actions.base import (
    acquire_gpus,
    arm_watcher,
    check_move,
    lock_run,
    may_run_on,
    move_run,
    new_run_id,
    release_gpus,
    run_event,
    user_by_pk,
)
from runs.actions.moves import move_problems, pending_move
from runs.actions.spending import SpendPending, cancel_unspent_approvals, spend_gate
from runs.checkpoints import resume_floor
from runs.live import push_run_update
from runs.models import (
    RETRYABLE_STATES,
    UNCLOSED_STATES,
    Run,
    RunPeer,
    RunState,
    SpendRequest,
)


def do_create_run(run: Run, *, actor, peers=()) -> Run:
    """peers: the other boxes of a run over several boxes, in node-rank order (the run's box is rank 0)."""
    run.created_by = run.definition_by = actor
    for box in (run.instance, *peers):
        may_run_on(run, actor, box)
    with transaction.atomic(durable=True):
        run.run_id = new_run_id(run.project.slug)
        run.save()
        RunPeer.objects.bulk_create(RunPeer(run=run, instance=box, rank=rank) for rank, box in enumerate(peers, 1))
        rollups.add(run, runs=1)
        where = " and ".join(box.name for box in (run.instance, *peers))
        nodes = f" ({len(peers) + 1} nodes, rank 0 on {run.instance.name})" if peers else ""
        run_event(run, "created", f"Run created on {where}{nodes}", actor, to_state=run.state)
    return run


# What preflight bound from the node: stale once what the run is has changed.
BOUND = {
    "source_tree_sha256": "",
    "resolved_commit": "",
    "config_sha256": "",
    "manifest_sha256": "",
    "data_sha256": "",
    "preflight_report": {},
    "smoke_exit_code": None,
    "smoke_output": "",
    "gpu_holders_waived_by": None,  # an override is of the run it was given for
}


def written_by(run: Run, actor):
    """Who wrote what the run runs after actor's edit: actor, except that an administrator's edit of what
    someone else wrote keeps that person as its author (an operator's command is never laundered)."""
    before = run.definition_by if run.definition_by_id else run.created_by
    if actor is not None and actor.is_superuser and before is not None and not before.is_superuser:
        return before
    return actor


def do_edit_run(run_pk: int, changes: dict, *, actor) -> list[str]:
    """Change a run that has not run on its box yet (draft, failed preflight or smoke); audited.

    Its bound identities are cleared: the next preflight binds what the run now is.
    """
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.sweep_id:
            raise ValidationError("A sweep cell is what its sweep made it: change the sweep, or make a new run.")
        if not run.editable:
            raise ValidationError(
                f"A run that is {run.get_state_display().lower()} keeps what it ran: use “New run like this”."
            )
        changed = [field for field, value in changes.items() if getattr(run, field) != value]
        if not changed:
            return []
        lines = [f"{field}: {getattr(run, field)!r} → {changes[field]!r}" for field in changed]
        was_on = run.instance_id
        for field in changed:
            setattr(run, field, changes[field])
        run.definition_by = written_by(run, actor)
        may_run_on(run, actor)
        if run.instance_id != was_on:
            rollups.move(run, was_on, verified=run.custody_records.filter(status="verified").exists())
        for field, empty in BOUND.items():
            setattr(run, field, empty)
        run.save()
        run_event(run, "edited", "Edited: " + "; ".join(lines)[:2000], actor, fields=changed)
        cancel_unspent_approvals(run, "edited: " + ", ".join(changed), actor)
    return changed


def do_start_preflight(run_pk: int, *, actor) -> Run:

    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        may_run_on(run, actor)
        check_move(run, RunState.PREFLIGHT)  # before the gate: an illegal start asks nobody to pay
        waiting = spend_gate(run, run.attempt + 1, SpendRequest.Why.LAUNCH, actor)
        if waiting is None:
            move_run(run, RunState.PREFLIGHT, "Preflight started", actor)
            record(AuditAction.RUN_LAUNCH_ASKED, f"{run.run_id}: launch asked", actor=actor, run=run)
            after_commit("runs.tasks.preflight_run", run.pk)
    if waiting is not None:  # raised after commit: the request is kept, the run is not started
        raise SpendPending(waiting)
    return run


def do_record_staging(run_pk: int, progress: dict) -> None:
    """Staging progress is not a state change: an UPDATE and a live push. Its time keeps the preflight's
    deadline from passing while bytes still move (runs/reconcile.py)."""
    staging = {**progress, "at": time.time()}
    Run.objects.filter(pk=run_pk).update(staging=staging)
    run = Run.objects.select_related("project").only("run_id", "project__slug").get(pk=run_pk)
    push_run_update(run.run_id, {"type": "staging", **staging}, run.project.slug)


def do_record_staged(run_pk: int, staged: list[dict]) -> Run:
    """Where each dataset sits on the node now: the spec's data directories (the command's environment)."""
    dirs = {item["name"]: item["target"] for item in staged}
    Run.objects.filter(pk=run_pk).update(staging={"dirs": dirs, "at": time.time()})
    return Run.objects.select_related("instance", "project").get(pk=run_pk)


MOUNT_FIELDS = ("mountpoint", "device", "fstype", "source")


def record_mounts(instance: Instance, mounts) -> None:
    """The box's data-root mount as this preflight measured it (typed, bounded: the box is untrusted), kept
    on the box for the tier decisions of its teardown (Instance.measured_data_tier). Under the run's lock,
    which holds the box's row first."""
    if not isinstance(mounts, dict):
        return
    kept = {}
    for key in ("data", "declared_tier"):
        mount = mounts.get(key)
        if isinstance(mount, dict):
            kept[key] = {field: str(mount.get(field) or "")[:200] for field in MOUNT_FIELDS}
    if kept != instance.data_mounts:
        instance.data_mounts = kept
        instance.save(update_fields=["data_mounts"])


def do_finish_preflight(run_pk: int, report: dict, problems: list[str]) -> Run:

    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.state != RunState.PREFLIGHT:
            return run  # a duplicate delivery of the task: the first one decided
        hashes = report.get("hashes", {})
        run.source_tree_sha256 = hashes.get("source_tree_sha256", "")
        run.config_sha256 = hashes.get("config_sha256", "")
        run.manifest_sha256 = hashes.get("manifest_sha256", "")
        run.resolved_commit = report.get("commit") or run.resolved_commit
        staged = report.get("datasets") or []
        for item in staged:
            if item.get("damaged"):
                run_event(
                    run,
                    "alert",
                    f"Dataset {item['name']}: changed on the box since it was staged, staged again: "
                    + ", ".join(item["damaged"][:5]),
                )
        run.data_sha256 = data_identity([item["roster_sha256"] for item in staged]) if staged else ""
        if run.project.require_data_identity and not run.data_sha256 and not problems:
            problems = [f"{run.project.name} requires a data identity: bind a registered dataset to the run."]
        if not problems and not run.identities_bound:
            problems = ["Identities could not be bound (source and config hashes): refusing to launch."]

        if not problems:
            holder = acquire_gpus(run)
            if holder:
                problems = [holder]
        run.preflight_report = {**report, "problems": problems}
        record_mounts(run.instance, report.get("mounts"))
        run.write_bytes_per_second = report.get("write_bytes_per_second") or run.write_bytes_per_second
        _bind_environment(run, report)
        if not problems and (moved := move_problems(run)):  # a continuation binds what it bound on its last box
            problems = moved
            release_gpus(run)
        if problems:
            move_run(run, RunState.FAILED_PREFLIGHT, "Preflight failed: " + "; ".join(problems))
        else:
            move_run(run, RunState.SMOKE, "Preflight passed; identities bound", **hashes)
            after_commit("runs.tasks.smoke_run", run.pk)
    return run


def _bind_environment(run: Run, report: dict) -> None:
    """The hooks applied and the interpreter's environment, as the preflight measured them, with their
    warnings."""
    if report.get("hooks"):
        run.hooks, run.hooks_sha256 = report["hooks"], hooks.sha256(report["hooks"])
        for warning in hooks.warnings(report["hooks"]):
            run_event(run, "alert", warning)
    if report.get("environment"):
        run.env_identity = environment.identity(report["environment"])
        persistent = run.instance.profile.data["identity"]["persistent"]
        for warning in environment.environment_warnings(report["environment"], persistent):
            run_event(run, "alert", warning)


def do_finish_smoke(run_pk: int, exit_code: int, output: str, warnings: list[str] = ()) -> Run:
    """warnings: what the box saw of the smoke that passes but will mislead (a whole export written)."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.state != RunState.SMOKE:
            return run
        run.smoke_exit_code, run.smoke_output = exit_code, output
        for warning in warnings:
            run_event(run, "alert", f"Smoke: {warning}")
        if exit_code == 0 and "Traceback" not in output and pending_move(run):
            relaunch_run(run, None, f"CPU smoke passed; continued on {run.instance.name}", moved=True)
        elif exit_code == 0 and "Traceback" not in output:
            run.attempt = 1
            move_run(run, RunState.LAUNCHING, "CPU smoke passed")
            after_commit("runs.tasks.launch_run", run.pk, run.attempt)
        else:
            why = "a Traceback in its output" if exit_code == 0 else f"exit code {exit_code}"
            move_run(run, RunState.FAILED_SMOKE, f"CPU smoke failed: {why}")
            release_gpus(run)
    return run


def do_mark_launched(
    run_pk: int, attempt: int, detach: str, command: str, wrapper: str, hook: str = "", job: str = ""
) -> Run:
    """The attempt runs detached; hook: where the box's start hook that relaunches it was installed; job:
    the Slurm job it is (its requeues are this run's next attempts, counted from this one)."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.state != RunState.LAUNCHING or run.attempt != attempt:
            return run
        if job:
            run.scheduler = {**(run.scheduler or {}), "job": job, "base_attempt": attempt}
            run_event(run, "note", f"Slurm job {job} submitted (sbatch) for attempt {attempt}")
        if hook:
            run_event(run, "note", f"Start hook on the box: {hook}")
            record(AuditAction.RUN_START_HOOK, f"{run.run_id}: start hook {hook}", run=run)
        run.detach, run.launched_command, run.wrapper_name = detach, command, wrapper
        run.launched_at = timezone.now()
        move_run(run, RunState.RUNNING, f"Attempt {attempt} launched detached ({detach})")
        transaction.on_commit(partial(arm_watcher, run.instance_id))
        evidence = f"run {run.run_id} launched on it"
        transaction.on_commit(partial(do_observe_running, run.instance_id, evidence))
    return run


def do_mark_launch_failed(run_pk: int, attempt: int, error: str) -> Run:
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.state != RunState.LAUNCHING or run.attempt != attempt:
            return run
        move_run(run, RunState.FAILED_LAUNCH, f"Launch of attempt {attempt} failed: {error}")
        release_gpus(run)
    return run


def do_waive_gpu_holders(run_pk: int, comment: str, *, actor) -> Run:
    """An approver lets the next preflight start beside processes outside RemoteGPU on the run's GPUs
    (a colleague's notebook that will not grow); audited. No CUDA or a missing GPU is never waived."""
    if not comment.strip():
        raise ValidationError("Say why: the override is part of the run's history.")
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if not actor.has_perm("projects.approve_cost", run.project):
            raise PermissionDenied("Only an approver of the run's project overrides a GPU held by another process.")
        if run.state not in (RunState.DRAFT, RunState.FAILED_PREFLIGHT):
            raise ValidationError("An override is for the next preflight of a draft or a failed preflight.")
        run.gpu_holders_waived_by = actor
        run.save(update_fields=["gpu_holders_waived_by"])
        run_event(
            run, "note", f"GPU held by another process: overridden for the next preflight: {comment.strip()}", actor
        )
        message = f"{run.run_id}: GPU held by another process waived: {comment.strip()}"
        record(AuditAction.RUN_GPU_WAIVED, message, actor=actor, run=run)
    return run


def do_accept_gpu_mismatch(run_pk: int, comment: str, *, actor) -> Run:
    """An approver accepts the box's GPUs as its last preflight measured them, though they differ from
    what was rented (runs/hardware.py); audited. The acceptance holds for that very measurement: a box
    that measures differently again fails again."""
    from runs.hardware import measured_gpus, signature

    if not comment.strip():
        raise ValidationError("Say why: the acceptance is part of the run's history.")
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if not actor.has_perm("projects.approve_cost", run.project):
            raise PermissionDenied("Only an approver of the run's project accepts a box that is not what was rented.")
        if run.state != RunState.FAILED_PREFLIGHT:
            raise ValidationError("An acceptance is for the next preflight of a failed preflight.")
        measured = signature(measured_gpus(run.preflight_report.get("gpu_inventory")))
        if not measured:
            raise ValidationError("The last preflight measured no GPU: there is nothing to accept.")
        run.gpu_accepted = {"by": actor.get_username(), "comment": comment.strip()[:500], "measured": measured}
        run.save(update_fields=["gpu_accepted"])
        message = f"{run.run_id}: GPUs accepted as measured on {run.instance.name} ({measured}): {comment.strip()}"
        run_event(run, "note", message[:2000], actor)
        record(AuditAction.RUN_GPU_WAIVED, message[:2000], actor=actor, run=run)
    return run


def do_retry_run(run_pk: int, *, actor) -> Run:
    """Retry the identical config as a new attempt; it resumes from the run's latest checkpoint."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        may_run_on(run, actor)
        if run.state not in RETRYABLE_STATES:
            raise IllegalTransition(f"Only a quarantined or failed launch can be retried (this run is {run.state}).")
        waiting = spend_gate(run, run.attempt + 1, SpendRequest.Why.RELAUNCH, actor)
        if waiting is None:
            relaunch_run(run, actor, "Retry of the identical config")
            record(AuditAction.RUN_RETRIED, f"{run.run_id}: retried as attempt {run.attempt}", actor=actor, run=run)
    if waiting is not None:
        raise SpendPending(waiting)
    return run


def do_close_active(run_pk: int, reason: str, *, actor) -> Run:
    """An operator closes a failed run's leftover active/ (moved into quarantine/ on the node)."""

    if not reason.strip():
        raise ValidationError("Say why: the reason is written beside the quarantined directory.")
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.state not in UNCLOSED_STATES or run.active_closed_at:
            raise IllegalTransition("Only a failed or quarantined run's open active/ can be closed.")
        run_event(run, "note", f"Closing active/ requested: {reason.strip()}", actor)
        after_commit("runs.tasks.close_active", run.pk, actor.pk, reason.strip())
    return run


def do_mark_active_closed(run_pk: int, actor_id: int | None, reason: str, answer: dict) -> Run:
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.active_closed_at is None:
            run.active_closed_at = timezone.now()
            run.save(update_fields=["active_closed_at"])
            where = f"moved to {answer['to']}" if answer.get("moved") else answer.get("reason", "nothing left")
            run_event(run, "note", f"active/ closed ({where}): {reason}", actor_id and user_by_pk(actor_id), **answer)
    return run


def relaunch_run(run: Run, actor, why: str, moved: bool = False) -> None:
    """A new attempt of the identical command; it resumes from the run's latest checkpoint."""

    holder = acquire_gpus(run)
    if holder:
        raise ValidationError(holder)
    # The step the new attempt must start from, proved from its checkpoints (runs/checkpoints.py); a
    # continuation on another box has set it already from the durable copy alone.
    if not moved:
        run.resume_floor = resume_floor(run.ckpt_mirror or None, same_box=True)
    run.ckpt_mirror = {}
    run.attempt += 1
    run.exit_code, run.active_closed_at = None, None  # the new attempt opens active/ again
    run.csv_offset = 0  # its train.csv is read from the start: the curve replaces what it logs again
    # A new attempt starts a new log and re-arms every signal; the curve keeps its history.
    run.log_offset, run.log_kept_bytes, run.alerts, run.failure_class, run.failure_excerpt = 0, 0, [], "", ""
    run.health, run.health_since = "", None
    run.stop_asked_at, run.stop_asked_by, run.stop_delivered_at = None, None, None  # a stop was of the last one
    move_run(run, RunState.LAUNCHING, f"{why}: attempt {run.attempt}", actor)
    after_commit("runs.tasks.launch_run", run.pk, run.attempt)
