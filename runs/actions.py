"""Every state change of a run: one function per verb, in a transaction, writing a run event.

Views, tasks and (later) the API all call these. Work on the node is enqueued after commit.
"""

from functools import partial

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import get_random_string

from runs.live import push_run_update
from runs.models import RETRYABLE_STATES, RUN_TRANSITIONS, GpuLock, Run, RunEvent, RunState


class IllegalTransition(ValidationError):
    pass


def new_run_id(project_slug: str) -> str:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    return f"{project_slug}-{stamp}-{get_random_string(4, 'abcdefghijkmnpqrstuvwxyz23456789')}"


def _locked(run_pk: int) -> Run:
    return Run.objects.select_for_update().select_related("instance", "project").get(pk=run_pk)


def _event(run: Run, kind: str, message: str, actor=None, from_state="", to_state="", **data) -> RunEvent:
    event = RunEvent.objects.create(
        run=run, kind=kind, message=message, actor=actor, from_state=from_state, to_state=to_state, data=data
    )
    payload = {"event": message, "kind": kind, "state": run.state, "at": event.at.isoformat()}
    transaction.on_commit(partial(push_run_update, run.run_id, payload))
    return event


def _transition(run: Run, target: RunState, message: str, actor=None, **data) -> None:
    source = RunState(run.state)
    if target not in RUN_TRANSITIONS[source]:
        raise IllegalTransition(f"A run cannot go from {source.label} to {target.label}.")
    run.state = target
    run.save()
    _event(run, "state", message, actor, from_state=source.value, to_state=target.value, **data)


def _acquire_gpus(run: Run) -> str | None:
    """Take one lock per requested GPU; the name of the run holding one, if any is taken."""
    for index in run.gpus:
        try:
            with transaction.atomic():
                GpuLock.objects.create(instance=run.instance, gpu_index=index, run=run)
        except IntegrityError:
            holder = GpuLock.objects.get(instance=run.instance, gpu_index=index).run
            if holder.pk == run.pk:
                continue
            GpuLock.objects.filter(run=run).delete()
            return f"GPU {index} on {run.instance.name} already has a writer: run {holder.run_id}"
    return None


def _release_gpus(run: Run) -> None:
    released = GpuLock.objects.filter(run=run).delete()[0]
    if released:
        _event(run, "gpu", f"Released {released} GPU lock(s)")


def do_create_run(run: Run, actor) -> Run:
    with transaction.atomic(durable=True):
        run.run_id = new_run_id(run.project.slug)
        run.created_by = actor
        run.save()
        _event(run, "created", f"Run created on {run.instance.name}", actor, to_state=run.state)
    return run


def do_start_preflight(run_pk: int, actor) -> Run:
    from runs.tasks import preflight_run

    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        _transition(run, RunState.PREFLIGHT, "Preflight started", actor)
        transaction.on_commit(partial(preflight_run.delay, run.pk))
    return run


def do_finish_preflight(run_pk: int, report: dict, problems: list[str]) -> Run:
    from runs.tasks import smoke_run

    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state != RunState.PREFLIGHT:
            return run  # a duplicate delivery of the task: the first one decided
        hashes = report.get("hashes", {})
        run.source_tree_sha256 = hashes.get("source_tree_sha256", "")
        run.config_sha256 = hashes.get("config_sha256", "")
        run.manifest_sha256 = hashes.get("manifest_sha256", "")
        run.resolved_commit = report.get("commit") or run.resolved_commit
        if not problems and not run.identities_bound:
            problems = ["Identities could not be bound (source and config hashes): refusing to launch."]
        if not problems:
            holder = _acquire_gpus(run)
            if holder:
                problems = [holder]
        run.preflight_report = {**report, "problems": problems}
        if problems:
            _transition(run, RunState.FAILED_PREFLIGHT, "Preflight failed: " + "; ".join(problems))
        else:
            _transition(run, RunState.SMOKE, "Preflight passed; identities bound", **hashes)
            transaction.on_commit(partial(smoke_run.delay, run.pk))
    return run


def do_finish_smoke(run_pk: int, exit_code: int, output: str) -> Run:
    from runs.tasks import launch_run

    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state != RunState.SMOKE:
            return run
        run.smoke_exit_code, run.smoke_output = exit_code, output
        if exit_code == 0 and "Traceback" not in output:
            run.attempt = 1
            _transition(run, RunState.LAUNCHING, "CPU smoke passed")
            transaction.on_commit(partial(launch_run.delay, run.pk, run.attempt))
        else:
            why = "a Traceback in its output" if exit_code == 0 else f"exit code {exit_code}"
            _transition(run, RunState.FAILED_SMOKE, f"CPU smoke failed: {why}")
            _release_gpus(run)
    return run


def do_mark_launched(run_pk: int, attempt: int, detach: str, command: str, wrapper: str) -> Run:
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state != RunState.LAUNCHING or run.attempt != attempt:
            return run
        run.detach, run.launched_command, run.wrapper_name = detach, command, wrapper
        run.launched_at = timezone.now()
        _transition(run, RunState.RUNNING, f"Attempt {attempt} launched detached ({detach})")
    return run


def do_mark_launch_failed(run_pk: int, attempt: int, error: str) -> Run:
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state != RunState.LAUNCHING or run.attempt != attempt:
            return run
        _transition(run, RunState.FAILED_LAUNCH, f"Launch of attempt {attempt} failed: {error}")
        _release_gpus(run)
    return run


def do_mark_run_exited(run_pk: int, exit_code: int | None, message: str) -> Run:
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state != RunState.RUNNING:
            return run
        run.exit_code, run.exited_at = exit_code, timezone.now()
        _transition(run, RunState.EXITED, message, exit_code=exit_code)
        _release_gpus(run)
    return run


def do_close_run(run_pk: int, exported: bool, reason: str) -> Run:
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state != RunState.EXITED:
            return run
        run.close_reason = reason
        if exported:
            _transition(run, RunState.EXPORTED, "Export sealed on the node")
        else:
            _transition(run, RunState.QUARANTINED, f"Attempt {run.attempt} quarantined: {reason}")
    return run


def do_retry_run(run_pk: int, actor) -> Run:
    """Retry the identical config as a new attempt; it resumes from the run's latest checkpoint."""
    from runs.tasks import launch_run

    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state not in RETRYABLE_STATES:
            raise IllegalTransition(f"Only a quarantined or failed launch can be retried (this run is {run.state}).")
        holder = _acquire_gpus(run)
        if holder:
            raise ValidationError(holder)
        run.attempt += 1
        run.exit_code = None
        _transition(run, RunState.LAUNCHING, f"Retry of the identical config: attempt {run.attempt}", actor)
        transaction.on_commit(partial(launch_run.delay, run.pk, run.attempt))
    return run


def do_record_status(run_pk: int, status: dict) -> Run:
    """Apply what the node says is true now: exit marker, then sealed export or quarantine."""
    run = Run.objects.get(pk=run_pk)
    Run.objects.filter(pk=run_pk).update(last_status=status)  # the wrapper bounds log_tail to 4 KB
    finished = status.get("exit_code") is not None and not status.get("wrapper_alive")
    if run.state == RunState.RUNNING and finished:
        code = status["exit_code"]
        run = do_mark_run_exited(run_pk, code, f"Exited with code {code}")
    if run.state == RunState.EXITED:
        if status.get("exported"):
            run = do_close_run(run_pk, True, "")
        elif status.get("quarantine_reason"):
            run = do_close_run(run_pk, False, status["quarantine_reason"])
    return run
