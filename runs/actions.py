"""Every state change of a run: one function per verb, in a transaction, writing a run event.

Views, tasks and (later) the API all call these. Work on the node is enqueued after commit.
"""

from datetime import timedelta
from functools import partial

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import get_random_string

from notifications.models import Event
from profiles.actions import do_observe_running
from profiles.control_host import runs_here_problem
from profiles.models import Instance
from projects.models import Project
from runs import environment, logs, notices, rollups, signals, spend, sweeps
from runs.live import push_run_update
from runs.models import (
    LIVE_STATES,
    RETRYABLE_STATES,
    RUN_TRANSITIONS,
    UNCLOSED_STATES,
    GpuLock,
    Run,
    RunEvent,
    RunState,
    SpendRequest,
    SpendStatus,
    Sweep,
)
from runs.observe import CURVE_LIMIT, Observation, Snapshot, observe

FAILED_TO_START = {RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE, RunState.FAILED_LAUNCH}


class IllegalTransition(ValidationError):
    pass


def new_run_id(project_slug: str) -> str:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    return f"{project_slug}-{stamp}-{get_random_string(4, 'abcdefghijkmnpqrstuvwxyz23456789')}"


def _locked(run_pk: int, *, run_only: bool = False) -> Run:
    """The run, locked with its instance and project rows (a state change serialises with the box's
    teardown decisions), or alone (run_only): the watcher's observations change nothing a teardown
    or a sibling run decides on, and locking the project row for each made every probe of every run
    in a project wait in one line (500 runs: 78 transactions queued on that one row)."""
    if run_only:
        return (
            Run.objects.select_for_update(no_key=True, of=("self",))
            .select_related("instance", "project")
            .get(pk=run_pk)
        )
    return locked_run(run_pk)


def locked_run(run_pk: int) -> Run:
    """The run with its box and project, locked in the one order every transaction touching a box
    takes: the instance, then the project, then the run, each a no-key lock (no key of them changes).
    A teardown locks the instance and then writes its exported runs: the same order. The watcher
    locks its run alone, or, when the probe changes the run's state, takes this order from the start.

    One FOR UPDATE over the join locked the rows in whatever order the plan read them, and a FOR
    UPDATE of the project or run conflicts with the KEY SHARE that a teardown request's deferred
    foreign-key checks take at COMMIT while it holds the instance: the two deadlocked on PostgreSQL
    (issue 29 §5)."""
    instance_id, project_id = Run.objects.values_list("instance_id", "project_id").get(pk=run_pk)
    Instance.objects.select_for_update(no_key=True).filter(pk=instance_id).first()
    Project.objects.select_for_update(no_key=True).filter(pk=project_id).first()
    run = Run.objects.select_for_update(no_key=True, of=("self",)).select_related("instance", "project").get(pk=run_pk)
    if run.instance_id != instance_id:  # an edit moved it to another box while we waited: lock that one
        return locked_run(run_pk)
    return run


def _push(run: Run, payload: dict) -> None:
    """Send to the run page (and its project page) only after the rows are committed."""
    transaction.on_commit(partial(push_run_update, run.run_id, payload, run.project.slug))


def _event(run: Run, kind: str, message: str, actor=None, from_state="", to_state="", **data) -> RunEvent:
    event = RunEvent.objects.create(
        run=run, kind=kind, message=message, actor=actor, from_state=from_state, to_state=to_state, data=data
    )
    _push(
        run,
        {
            "type": "event",
            "id": event.pk,
            "kind": kind,
            "message": message,
            "state": run.state,
            "state_label": run.get_state_display(),
            "health": run.health,
            "at": event.at.isoformat(),
        },
    )
    return event


def record_run_event(run: Run, kind: str, message: str, actor=None, data: dict | None = None) -> RunEvent:
    """For other apps' actions (custody, teardown): an event on the run, pushed after commit."""
    return _event(run, kind, message, actor, **(data or {}))


def _check_move(run: Run, target: RunState) -> RunState:
    source = RunState(run.state)
    if target not in RUN_TRANSITIONS[source]:
        raise IllegalTransition(f"A run cannot go from {source.label} to {target.label}.")
    return source


def _transition(run: Run, target: RunState, message: str, actor=None, **data) -> None:
    source = _check_move(run, target)
    run.state, run.state_changed_at, run.redrives = target, timezone.now(), 0
    run.save()
    _event(run, "state", message, actor, from_state=source.value, to_state=target.value, **data)
    if target == RunState.EXPORTED:
        notices.announce(run, Event.RUN_FINISHED, "finished; its export is sealed on the box: verify custody next")
    elif target in FAILED_TO_START:
        notices.announce(run, Event.RUN_FAILED, f"{target.label}: {message[:200]}", failure_class=target.value)
    if run.sweep_id and target not in LIVE_STATES - {RunState.EXITED}:
        from runs.tasks import advance_sweep  # a cell freed its GPU: the box's queue may move

        transaction.on_commit(partial(advance_sweep.delay, run.sweep_id))


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


def _may_run_on(run: Run, actor) -> None:
    """A person starts work on the run's box: on the control host only an administrator does (the
    forms and the API refuse it first; this is the rule every start goes through)."""
    if run.instance.profile.is_local and actor is not None:
        problem = runs_here_problem(actor)
        if problem:
            raise PermissionDenied(problem)


def do_create_run(run: Run, *, actor) -> Run:
    _may_run_on(run, actor)
    with transaction.atomic(durable=True):
        run.run_id = new_run_id(run.project.slug)
        run.created_by = actor
        run.save()
        rollups.add(run, runs=1)
        _event(run, "created", f"Run created on {run.instance.name}", actor, to_state=run.state)
    return run


# What preflight bound from the node: stale once what the run is has changed.
BOUND = {
    "source_tree_sha256": "",
    "resolved_commit": "",
    "config_sha256": "",
    "manifest_sha256": "",
    "preflight_report": {},
    "smoke_exit_code": None,
    "smoke_output": "",
    "gpu_holders_waived_by": None,  # an override is of the run it was given for
}


def do_edit_run(run_pk: int, changes: dict, *, actor) -> list[str]:
    """Change a run that has not run on its box yet (draft, failed preflight or smoke); audited.

    Its bound identities are cleared: the next preflight binds what the run now is.
    """
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
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
        _may_run_on(run, actor)
        if run.instance_id != was_on:
            rollups.move(run, was_on, verified=run.custody_records.filter(status="verified").exists())
        for field, empty in BOUND.items():
            setattr(run, field, empty)
        run.save()
        _event(run, "edited", "Edited: " + "; ".join(lines)[:2000], actor, fields=changed)
        _cancel_unspent_approvals(run, "edited: " + ", ".join(changed), actor)
    return changed


def do_start_preflight(run_pk: int, *, actor) -> Run:
    from runs.tasks import preflight_run

    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        _may_run_on(run, actor)
        _check_move(run, RunState.PREFLIGHT)  # before the gate: an illegal start asks nobody to pay
        waiting = _spend_gate(run, run.attempt + 1, SpendRequest.Why.LAUNCH, actor)
        if waiting is None:
            _transition(run, RunState.PREFLIGHT, "Preflight started", actor)
            transaction.on_commit(partial(preflight_run.delay, run.pk))
    if waiting is not None:  # raised after commit: the request is kept, the run is not started
        raise SpendPending(waiting)
    return run


class SpendPending(ValidationError):
    def __init__(self, request: SpendRequest):
        self.request = request
        super().__init__(f"Waits for an approver (spend request #{request.pk}): {request.reason}.")


def _spend_gate(run: Run, attempt: int, why: str, actor) -> SpendRequest | None:
    """None when this attempt may spend; else its pending spend request (created and announced once).

    An approval covers the attempt only on the terms it was given (box, rate, minutes, cost); a request
    asked on other terms is cancelled and asked again."""
    terms = spend.terms_of(run)
    covered = run.spend_requests.filter(attempt=attempt, status=SpendStatus.APPROVED, terms=terms).exists()
    reason = None if covered else spend.needs_approval(run)
    if reason is None:
        return None
    pending = run.spend_requests.filter(attempt=attempt, status=SpendStatus.PENDING).first()
    if pending is not None and pending.terms == terms:
        return pending
    if pending is not None:
        _cancel_spend(run, pending, spend.terms_changed(pending.terms, terms), actor)
    said = (
        f"Attempt {attempt} waits for an approver: {reason}",
        f"attempt {attempt} waits for a spend approval: {reason}",
    )
    return _ask_spend(run, attempt, why, reason, actor, said)


def _cancel_spend(run: Run, request: SpendRequest, changed: str, actor) -> None:
    request.status = SpendStatus.CANCELLED
    request.save(update_fields=["status"])
    text = f"Spend request #{request.pk} cancelled: the run changed since it was asked ({changed}); starting asks again"
    _event(run, "spend", text, actor, spend_request=request.pk)


def _cancel_unspent_approvals(run: Run, changed: str, actor) -> None:
    """An edit of a run that has not spent yet: what was asked or approved for it no longer holds."""
    open_requests = run.spend_requests.select_for_update().filter(
        attempt__gt=run.attempt, status__in=(SpendStatus.PENDING, SpendStatus.APPROVED)
    )
    for request in open_requests:
        _cancel_spend(run, request, changed, actor)


def _ask_spend(run: Run, attempt: int, why: str, reason: str, actor, said: tuple[str, str]) -> SpendRequest:
    """The request in the approval queue, its run event and the project's notification (said: their texts)."""
    request = SpendRequest.objects.create(
        run=run,
        attempt=attempt,
        why=why,
        expected_cost=spend.expected_cost(run),
        terms=spend.terms_of(run),
        reason=reason,
        requester=actor or run.created_by,  # an automatic relaunch is asked for by whoever launched the run
        expires_at=timezone.now() + timedelta(hours=settings.SPEND_APPROVAL_HOURS),
    )
    event_text, headline = said
    _event(run, "spend", event_text, actor, spend_request=request.pk)
    notices.announce(run, Event.SPEND, headline)
    return request


def _ask_again_when_overrunning(run: Run, now) -> None:
    """Longer than expected changes the run's cost: the envelope is asked again, once per attempt.
    Nothing stops the run by itself (that would destroy its evidence): an approver acknowledges, or
    rejects and the project is told to stop it."""
    if not spend.overrunning(run, now):  # no query: this runs on every probe of every running run
        return
    if run.spend_requests.filter(attempt=run.attempt, why=SpendRequest.Why.OVERRUN).exists():
        return
    reason = spend.overrun_reason(run, now)
    if reason is not None:
        said = (f"Asked again: {reason}", f"asks the envelope again: {reason}")
        _ask_spend(run, run.attempt, SpendRequest.Why.OVERRUN, reason, None, said)


def do_decide_spend(request_pk: int, approve: bool, comment: str, *, actor) -> SpendRequest:
    """An approver (never the requester) lets the attempt spend, or refuses; approval continues it.
    An approval is of the terms the request was asked on: if the run has other terms now, it is cancelled."""
    with transaction.atomic(durable=True):
        request = (
            SpendRequest.objects.select_for_update(of=("self",))
            .select_related("run__project", "run__instance")
            .get(pk=request_pk)
        )
        run = request.run
        if not actor.has_perm("projects.approve_cost", run.project):
            raise PermissionDenied(f"Only an approver of project {run.project.name} decides its spending.")
        if request.requester_id == actor.pk:
            raise PermissionDenied("The requester of a spend never approves it: ask another approver.")
        if request.status != SpendStatus.PENDING:
            raise ValidationError(f"Spend request #{request.pk} is {request.get_status_display().lower()}.")
        if request.expires_at <= timezone.now():
            raise ValidationError(f"Spend request #{request.pk} has expired; start the run again to ask again.")
        changed = spend.terms_changed(request.terms, spend.terms_of(run)) if approve else ""
        if changed:  # the approver was shown other terms than the run has now (a box's rate was edited)
            _cancel_spend(run, request, changed, actor)
        else:
            request.status = SpendStatus.APPROVED if approve else SpendStatus.REJECTED
            request.approver, request.comment, request.decided_at = actor, comment.strip(), timezone.now()
            _record_decision(run, request, approve, comment, actor)
    if changed:  # raised after commit: the cancellation is kept
        raise ValidationError(
            f"Spend request #{request.pk} was cancelled: the run changed since it was asked ({changed})."
        )
    return request


def _record_decision(run: Run, request: SpendRequest, approve: bool, comment: str, actor) -> None:
    from runs.tasks import continue_after_spend

    request.save()
    verdict = "approved" if approve else "rejected"
    _event(run, "spend", f"Spend of attempt {request.attempt} {verdict}: {comment.strip()}", actor)
    if not approve and request.why == SpendRequest.Why.OVERRUN:
        notices.announce(run, Event.SPEND, f"its overrun was rejected by {actor.get_username()}: stop it by hand")
    if approve:
        transaction.on_commit(partial(continue_after_spend.delay, request.pk))


def do_continue_after_spend(request_pk: int) -> str:
    """After an approval: start what waited (once; a run that moved on meanwhile is left alone)."""
    request = SpendRequest.objects.select_related("run", "requester").get(pk=request_pk)
    run, actor = request.run, request.requester
    if request.status != SpendStatus.APPROVED:
        return "not approved"
    if request.why == SpendRequest.Why.SWEEP and run.sweep_id:
        return f"sweep advanced: {do_advance_sweep(run.sweep_id)}"
    if (
        request.why == SpendRequest.Why.RELAUNCH
        and run.state in RETRYABLE_STATES
        and run.attempt + 1 == request.attempt
    ):
        do_retry_run(run.pk, actor=actor)
        return "relaunched"
    if request.why == SpendRequest.Why.LAUNCH and run.state == RunState.DRAFT:
        do_start_preflight(run.pk, actor=actor)
        return "preflight started"
    return f"nothing to do (run is {run.state})"


def lost_spend_continuations(now=None) -> list[int]:
    """Approved spend requests whose run still waits on them TEARDOWN_REDRIVE_SECONDS after the decision:
    their continuation task was lost (an enqueue that failed after the approval committed)."""
    now = now or timezone.now()
    approved = SpendRequest.objects.filter(
        status=SpendStatus.APPROVED,
        decided_at__lte=now - timedelta(seconds=settings.TEARDOWN_REDRIVE_SECONDS),
        decided_at__gte=now - timedelta(hours=settings.SPEND_APPROVAL_HOURS),
        attempt=F("run__attempt") + 1,
    )
    launch = approved.filter(why=SpendRequest.Why.LAUNCH, run__state=RunState.DRAFT, run__sweep__isnull=True)
    relaunch = approved.filter(why=SpendRequest.Why.RELAUNCH, run__state__in=RETRYABLE_STATES)
    return sorted({*launch.values_list("pk", flat=True), *relaunch.values_list("pk", flat=True)})


def do_expire_spend_requests(now=None) -> int:
    now = now or timezone.now()
    expired = 0
    with transaction.atomic(durable=True):
        pending = SpendRequest.objects.select_for_update().filter(status=SpendStatus.PENDING, expires_at__lte=now)
        for request in pending:
            request.status = SpendStatus.EXPIRED
            request.save(update_fields=["status"])
            run = Run.objects.select_related("project", "instance").get(pk=request.run_id)
            _event(run, "spend", f"Spend request #{request.pk} expired unanswered: start the run again to ask again")
            expired += 1
    return expired


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
        run.write_bytes_per_second = report.get("write_bytes_per_second") or run.write_bytes_per_second
        if report.get("environment"):
            run.env_identity = environment.identity(report["environment"])
            persistent = run.instance.profile.data["identity"]["persistent"]
            for warning in environment.environment_warnings(report["environment"], persistent):
                _event(run, "alert", warning)
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
        transaction.on_commit(partial(_arm_watcher, run.instance_id))
        evidence = f"run {run.run_id} launched on it"
        transaction.on_commit(partial(do_observe_running, run.instance_id, evidence))
    return run


def _arm_watcher(instance_id: int) -> None:
    from runs.tasks import watch_instance

    watch_instance.delay(instance_id)


def do_mark_launch_failed(run_pk: int, attempt: int, error: str) -> Run:
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state != RunState.LAUNCHING or run.attempt != attempt:
            return run
        _transition(run, RunState.FAILED_LAUNCH, f"Launch of attempt {attempt} failed: {error}")
        _release_gpus(run)
    return run


def do_waive_gpu_holders(run_pk: int, comment: str, *, actor) -> Run:
    """An approver lets the next preflight start beside processes outside RemoteGPU on the run's GPUs
    (a colleague's notebook that will not grow); audited. No CUDA or a missing GPU is never waived."""
    if not comment.strip():
        raise ValidationError("Say why: the override is part of the run's history.")
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if not actor.has_perm("projects.approve_cost", run.project):
            raise PermissionDenied("Only an approver of the run's project overrides a GPU held by another process.")
        if run.state not in (RunState.DRAFT, RunState.FAILED_PREFLIGHT):
            raise ValidationError("An override is for the next preflight of a draft or a failed preflight.")
        run.gpu_holders_waived_by = actor
        run.save(update_fields=["gpu_holders_waived_by"])
        _event(run, "note", f"GPU held by another process: overridden for the next preflight: {comment.strip()}", actor)
    return run


def do_retry_run(run_pk: int, *, actor) -> Run:
    """Retry the identical config as a new attempt; it resumes from the run's latest checkpoint."""
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        _may_run_on(run, actor)
        if run.state not in RETRYABLE_STATES:
            raise IllegalTransition(f"Only a quarantined or failed launch can be retried (this run is {run.state}).")
        waiting = _spend_gate(run, run.attempt + 1, SpendRequest.Why.RELAUNCH, actor)
        if waiting is None:
            _relaunch(run, actor, "Retry of the identical config")
    if waiting is not None:
        raise SpendPending(waiting)
    return run


def do_close_active(run_pk: int, reason: str, *, actor) -> Run:
    """An operator closes a failed run's leftover active/ (moved into quarantine/ on the node)."""
    from runs.tasks import close_active

    if not reason.strip():
        raise ValidationError("Say why: the reason is written beside the quarantined directory.")
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.state not in UNCLOSED_STATES or run.active_closed_at:
            raise IllegalTransition("Only a failed or quarantined run's open active/ can be closed.")
        _event(run, "note", f"Closing active/ requested: {reason.strip()}", actor)
        transaction.on_commit(partial(close_active.delay, run.pk, actor.pk, reason.strip()))
    return run


def do_mark_active_closed(run_pk: int, actor_id: int | None, reason: str, answer: dict) -> Run:
    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        if run.active_closed_at is None:
            run.active_closed_at = timezone.now()
            run.save(update_fields=["active_closed_at"])
            where = f"moved to {answer['to']}" if answer.get("moved") else answer.get("reason", "nothing left")
            _event(run, "note", f"active/ closed ({where}): {reason}", actor_id and _user(actor_id), **answer)
    return run


def _user(pk):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(pk=pk).first()


def _relaunch(run: Run, actor, why: str) -> None:
    """A new attempt of the identical command; it resumes from the run's latest checkpoint."""
    from runs.tasks import launch_run

    holder = _acquire_gpus(run)
    if holder:
        raise ValidationError(holder)
    run.attempt += 1
    run.exit_code, run.active_closed_at = None, None  # the new attempt opens active/ again
    # A new attempt starts a new log and re-arms every signal; the curve keeps its history.
    run.log_offset, run.log_kept_bytes, run.alerts, run.failure_class, run.failure_excerpt = 0, 0, [], "", ""
    run.health, run.health_since = "", None
    run.stop_asked_at, run.stop_asked_by, run.stop_delivered_at = None, None, None  # a stop was of the last one
    _transition(run, RunState.LAUNCHING, f"{why}: attempt {run.attempt}", actor)
    transaction.on_commit(partial(launch_run.delay, run.pk, run.attempt))


def _exit(run: Run, exit_code: int | None, message: str) -> None:
    run.exit_code, run.exited_at = exit_code, timezone.now()
    if run.launched_at:
        used = (run.exited_at - run.launched_at).total_seconds() * len(run.gpus)
        run.gpu_seconds += used
        rollups.add(run, gpu_seconds=used)
    _transition(run, RunState.EXITED, message, exit_code=exit_code)
    _release_gpus(run)


def _classify_failure(run: Run, status: dict, dead: bool) -> None:
    if run.failure_class:
        return
    reason = run.close_reason or ""
    interrupted, stopped = reason.startswith("interrupted"), reason.startswith("stopped by ")
    seen = set(run.alerts) | ({"disk_full"} if reason.startswith("disk_full") else set())
    run.failure_class = signals.classify(run.exit_code, seen, dead=dead, interrupted=interrupted, stopped=stopped)
    run.failure_excerpt = signals.excerpt(status.get("log_tail") or "")
    failure = signals.FAILURE_CLASSES[run.failure_class]
    _event(run, "failure", f"Classified: {failure.label}. {failure.remediation}", failure_class=run.failure_class)
    event = Event.RUN_INTERRUPTED if run.failure_class == "interrupted" else Event.RUN_FAILED
    notices.announce(run, event, f"{failure.label}. {failure.remediation}", failure_class=run.failure_class)


def _maybe_relaunch(run: Run) -> None:
    """An interruption of a run that opted in is relaunched, a bounded number of times."""
    if run.failure_class != "interrupted" or not run.auto_relaunch:
        return
    if run.relaunches >= run.max_relaunches:
        _event(run, "failure", f"Interrupted again; {run.relaunches} automatic relaunches used: relaunch by hand")
        return
    if _spend_gate(run, run.attempt + 1, SpendRequest.Why.RELAUNCH, None) is not None:
        return  # the envelope is asked again; an approval relaunches it
    run.relaunches += 1
    try:
        _relaunch(run, None, f"Interrupted: automatic relaunch {run.relaunches} of {run.max_relaunches}")
    except ValidationError as exc:
        _event(run, "failure", f"Automatic relaunch refused: {' '.join(exc.messages)}")


def _alert(run: Run, name: str, detail: str = "") -> None:
    run.alerts = [*run.alerts, name]
    message = signals.SIGNAL_MESSAGES[name] + (f": {detail}" if detail else "")
    _event(run, "alert", message, signal=name)
    if name == "stalled":
        notices.announce(run, Event.RUN_STALLED, message)


def _set_health(run: Run, health: str, since) -> None:
    if run.health != health:
        run.health, run.health_since = health, since


def do_observe_run(run_pk: int, status: dict, thresholds: dict, pushed_until: int | None = None) -> tuple[Run, bool]:
    """Apply one probe of a run (what it means is `runs.observe.observe`); returns (run, looks_dead).

    pushed_until: how far the watcher's push stream already sent this attempt's log to the pages
    (only the rest of the probe's chunk is sent again)."""
    with transaction.atomic(durable=True):
        # A probe that changes the run's state (and maybe relaunches it) locks its instance and project
        # too, in the one lock order, taken before the run's row; any other probe locks the run alone.
        changes = _changes_state(status)
        run = _locked(run_pk, run_only=not changes)
        seen = observe(Snapshot.of(run), status, thresholds)
        if not seen.applies:
            return run, False
        now = timezone.now()
        if seen.reachable_again:
            _event(run, "probe", "Reachable again; watching resumes")
        logs.keep(run, seen.log_start, seen.log_offset, seen.log_chunk)
        run.log_offset, run.csv_offset = seen.log_offset, seen.csv_offset
        if seen.rows:
            run.curve = (run.curve + seen.rows)[-CURVE_LIMIT:]
            run.last_metrics = run.curve[-1]
        if seen.ran is not None:
            run.env_identity = {**run.env_identity, "ran": seen.ran}  # read back from the node
        if seen.heartbeat_at is not None:
            run.heartbeat_at = seen.heartbeat_at
        # What the run printed and logged reaches its page before what it led to (an alert, "exited").
        _push_output(run, seen, status, pushed_until)
        run.alerts = [name for name in seen.alerts if name not in seen.new_alerts]
        for name in seen.new_alerts:
            _alert(run, name)
        _set_health(run, seen.health, now)
        _apply_outcome(run, seen, status)
        if run.state == RunState.RUNNING:
            _ask_again_when_overrunning(run, now)
        run.last_status = {
            **{k: v for k, v in status.items() if k not in ("log_chunk", "csv_chunk")},
            "csv_header": seen.csv_header,
            "heartbeat_age": seen.heartbeat_age,
        }
        run.save()
        _push(run, {"type": "status", "health": run.health, "heartbeat_age": seen.heartbeat_age, "state": run.state})
    return run, seen.dead


def _changes_state(status: dict) -> bool:
    """Whether observing status may move its run (exit, export, quarantine): what `observe` calls
    finished, exported or quarantined, read from the status alone, before any lock is taken."""
    alive = status.get("wrapper_alive") or status.get("child_alive")
    ended = status.get("exit_code") is not None or bool(status.get("quarantine_reason"))
    return bool(status.get("exported") or status.get("quarantine_reason") or (not alive and ended))


def _apply_outcome(run: Run, seen: Observation, status: dict) -> None:
    """Exit, export or quarantine, as the probe shows them (each a transition with its event)."""
    if run.state == RunState.RUNNING and seen.finished:
        code = seen.exit_code
        _exit(run, code, f"Exited with code {code}" if code is not None else "Exited without an exit code (dead)")
        if code == 0 and run.launched_at:
            elapsed = (run.exited_at - run.launched_at).total_seconds()
            if elapsed < 0.5 * run.expected_minutes * 60:
                _alert(run, "fast_finish", f"{elapsed:.0f} s of an expected {run.expected_minutes} min")
    if run.state != RunState.EXITED:
        return
    if seen.exported:
        run.close_reason = ""
        _transition(run, RunState.EXPORTED, "Export sealed on the node")
    elif seen.quarantine_reason:
        run.close_reason = seen.quarantine_reason
        _transition(run, RunState.QUARANTINED, f"Attempt {run.attempt} quarantined: {run.close_reason}")
        _classify_failure(run, status, dead=seen.exit_code is None)
        _maybe_relaunch(run)


def _push_output(run: Run, seen: Observation, status: dict, pushed_until: int | None) -> None:
    text = seen.log_chunk
    if text and pushed_until is not None and seen.log_start < pushed_until:
        text = signals.strip_ansi(signals.beyond(status["log_chunk"], seen.log_start, pushed_until))
    lines = text.splitlines()[-200:]
    if lines:
        _push(run, {"type": "log", "lines": lines, "attempt": run.attempt, "end": seen.log_offset})
    if seen.rows:
        _push(run, {"type": "curve", "rows": seen.rows})


def do_note_node_error(run_pk: int, error: str) -> None:
    """The box answered but the wrapper failed there (a full disk, a broken interpreter): said once."""
    with transaction.atomic(durable=True):
        run = _locked(run_pk, run_only=True)
        if "node_error" in run.alerts:
            return
        run.alerts = [*run.alerts, "node_error"]
        run.save(update_fields=["alerts"])
        _event(run, "alert", f"Node error (the box answers; this is not unreachability): {error[:300]}")


def do_mark_unreachable(instance_id: int, error: str) -> None:
    """A failed probe says nothing about the runs: their state stays; the page says since when."""
    with transaction.atomic(durable=True):
        now = timezone.now()
        for run in (
            Run.objects.select_for_update(of=("self",))
            .select_related("project")
            .filter(instance_id=instance_id, state__in=[RunState.RUNNING, RunState.EXITED])
        ):
            if run.health != "unreachable":
                _set_health(run, "unreachable", now)
                run.save(update_fields=["health", "health_since"])
                _event(run, "probe", f"Unreachable since {now:%Y-%m-%d %H:%M:%S} UTC: {error[:200]}")
                notices.announce(run, Event.RUN_UNREACHABLE, f"its box stopped answering at {now:%H:%M:%S} UTC")


# ---------------------------------------------------------------- sweeps

CELL_FIELDS = [
    "project_id",
    "source_kind",
    "source_path",
    "source_commit",
    "command",
    "config_path",
    "data_paths",
    "manifest_path",
    "expected_minutes",
    "checkpoint_bytes",
    "checkpoints_retained",
    "scratch_bytes",
    "expected_files",
    "environment",
    "auto_relaunch",
    "max_relaunches",
    "stall_seconds",
]


def do_create_sweep(
    base_run: Run, name: str, cells: list[dict], boxes: list, gpus_per_box: int, independent: bool, *, actor
) -> Sweep:
    """One run per cell (validated cells in, nothing launched yet), then start what fits."""
    if any(box.profile.is_local for box in boxes) and (refused := runs_here_problem(actor)):
        raise PermissionDenied(refused)
    with transaction.atomic(durable=True):
        sweep = Sweep.objects.create(
            project=base_run.project,
            name=name,
            base_run=base_run,
            overrides=cells,
            created_by=actor,
            gpus_per_box=gpus_per_box if independent else 1,
            independent=independent,
        )
        sweep.instances.set(boxes)
        order = sweeps.assign_boxes(len(cells), [box.pk for box in boxes] if independent else [boxes[0].pk])
        for index, (overrides, box_pk) in enumerate(zip(cells, order, strict=True), start=1):
            cell = Run(**{field: getattr(base_run, field) for field in CELL_FIELDS})
            cell.instance_id, cell.sweep, cell.cell, cell.config_overrides = box_pk, sweep, index, overrides
            cell.title = f"{name} · cell {index}: " + ", ".join(f"{k}={v}" for k, v in overrides.items())
            cell.run_id, cell.created_by = new_run_id(base_run.project.slug), actor
            cell.save()
            rollups.add(cell, runs=1)
            _event(cell, "created", f"Sweep {name}: cell {index} queued on box {box_pk}", actor, to_state=cell.state)
        transaction.on_commit(partial(do_advance_sweep, sweep.pk))
    return sweep


def do_advance_sweep(sweep_pk: int) -> list[str]:
    """Start every queued cell that has a free GPU on its box, in cell order (one sweep lock at a time)."""
    from runs.tasks import preflight_run

    with transaction.atomic(durable=True):
        sweep = Sweep.objects.select_for_update(of=("self",)).select_related("base_run").get(pk=sweep_pk)
        cells = {run.pk: run for run in Run.objects.select_for_update(no_key=True).filter(sweep=sweep).order_by("cell")}
        holding = LIVE_STATES - {RunState.EXITED}
        busy: dict[int, set[int]] = {}
        for run in cells.values():
            if run.state in holding:
                slots = busy.setdefault(run.instance_id if sweep.independent else 0, set())
                if run.gpus:
                    slots.update(run.gpus)
                else:  # a CPU cell holds a slot of its box without naming a GPU: the lowest free one
                    slots.add(min(set(range(len(slots) + 1)) - slots))
        queued = [
            (run.pk, run.instance_id if sweep.independent else 0)
            for run in cells.values()
            if run.state == RunState.DRAFT
        ]
        started = []
        for run_pk, gpu in sweeps.plan_starts(queued, busy, sweep.gpus_per_box):
            run = cells[run_pk]
            if _spend_gate(run, run.attempt + 1, SpendRequest.Why.SWEEP, sweep.created_by) is not None:
                continue  # this cell waits for an approver; an approval advances the sweep again
            # A sweep of a CPU run runs its cells on CPU (a slot, not a GPU: preflight would refuse a GPU
            # the box does not have, issue 29 §5); a GPU run's cells each take their own GPU.
            run.gpus = [gpu] if sweep.base_run.gpus else []
            where = f"GPU {gpu}" if run.gpus else f"CPU slot {gpu}"
            _transition(run, RunState.PREFLIGHT, f"Sweep {sweep.name}: cell {run.cell} starts on {where}")
            transaction.on_commit(partial(preflight_run.delay, run.pk))
            started.append(run.run_id)
    return started


def do_reconcile_run(run_pk: int) -> str:
    """Re-drive the task an overdue run waits on, or fail it with the reason and the next step."""
    from runs import reconcile

    with transaction.atomic(durable=True):
        run = _locked(run_pk)
        deadline = reconcile.overdue(run)
        if deadline is None:
            return "in time"
        waited = int((timezone.now() - (run.state_changed_at or run.created)).total_seconds())
        if run.redrives < settings.RECONCILE_MAX_REDRIVES:
            run.redrives += 1
            run.state_changed_at = timezone.now()  # a fresh deadline for the re-driven task
            run.save(update_fields=["redrives", "state_changed_at"])
            _event(
                run,
                "alert",
                f"No answer from the {deadline.task} task for {waited} s (worker lost?): "
                f"re-driving it ({run.redrives} of {settings.RECONCILE_MAX_REDRIVES})",
            )
            transaction.on_commit(partial(_redrive, run.pk, run.state, run.attempt))
            return "re-driven"
        why = f"{deadline.task} never finished ({waited} s, {run.redrives} re-drives)"
        run.failure_class, run.failure_excerpt = "stranded", why
        _transition(run, deadline.failure, f"{why}: {deadline.next_step}")
        _release_gpus(run)
    return "failed"


def _redrive(run_pk: int, state: str, attempt: int) -> None:
    from runs import tasks

    task = {
        RunState.PREFLIGHT: lambda: tasks.preflight_run.delay(run_pk),
        RunState.SMOKE: lambda: tasks.smoke_run.delay(run_pk),
        RunState.LAUNCHING: lambda: tasks.launch_run.delay(run_pk, attempt),
        RunState.EXITED: lambda: tasks.close_out_run.delay(run_pk, attempt),
    }[state]
    task()
