"""Driving runs on: what an approved spend continues, and the reconciler's re-drive of a run that
waits on a task nobody is running."""

from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.enqueue import send
from runs.actions.base import lock_run, move_run, release_gpus, run_event
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.actions.sweeps import do_advance_sweep
from runs.models import (
    RETRYABLE_STATES,
    RunState,
    SpendRequest,
    SpendStatus,
)


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


def do_reconcile_run(run_pk: int) -> str:
    """Re-drive the task an overdue run waits on, or fail it with the reason and the next step."""
    from runs import reconcile

    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        deadline = reconcile.overdue(run)
        if deadline is None:
            return "in time"
        waited = int((timezone.now() - (run.state_changed_at or run.created)).total_seconds())
        if run.redrives < settings.RECONCILE_MAX_REDRIVES:
            run.redrives += 1
            run.state_changed_at = timezone.now()  # a fresh deadline for the re-driven task
            run.save(update_fields=["redrives", "state_changed_at"])
            run_event(
                run,
                "alert",
                f"No answer from the {deadline.task} task for {waited} s (worker lost?): "
                f"re-driving it ({run.redrives} of {settings.RECONCILE_MAX_REDRIVES})",
            )
            transaction.on_commit(partial(_redrive, run.pk, run.state, run.attempt))
            return "re-driven"
        why = f"{deadline.task} never finished ({waited} s, {run.redrives} re-drives)"
        run.failure_class, run.failure_excerpt = "stranded", why
        move_run(run, deadline.failure, f"{why}: {deadline.next_step}")
        release_gpus(run)
    return "failed"


def _redrive(run_pk: int, state: str, attempt: int) -> None:
    resend = {
        RunState.PREFLIGHT: lambda: send("runs.tasks.preflight_run", run_pk),
        RunState.SMOKE: lambda: send("runs.tasks.smoke_run", run_pk),
        RunState.LAUNCHING: lambda: send("runs.tasks.launch_run", run_pk, attempt),
        RunState.EXITED: lambda: send("runs.tasks.close_out_run", run_pk, attempt),
    }[state]
    resend()
