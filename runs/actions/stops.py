"""A person's Stop of a running run: asked (audited), delivered to the box, or expired.

The wrapper on the box does the stopping (SIGTERM, SIGKILL after RUN_STOP_GRACE_SECONDS) and
quarantines the attempt with the reason "stopped by <person>"; the watcher then moves the run as for
any quarantine, its GPUs are freed, and Retry identical config resumes it from its checkpoint.
"""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from core.states import IllegalTransition
from runs.actions.base import lock_run, run_event
from runs.models import Run, RunState


def do_stop_run(run_pk: int, *, actor) -> Run:
    """Ask the box to stop the run's current attempt; refused, with the state, where nothing runs."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if not actor.has_perm("projects.operate", run.project):
            raise PermissionDenied("Only an operator of the run's project stops it.")
        if run.state != RunState.RUNNING:
            raise IllegalTransition(f"Only a running run can be stopped; this one is {run.get_state_display()}.")
        if run.stop_asked_at is not None:
            raise ValidationError(f"A stop is already on its way (asked by {run.stop_asked_by or 'someone'}).")
        run.stop_asked_at, run.stop_asked_by, run.stop_delivered_at = timezone.now(), actor, None
        run.save(update_fields=["stop_asked_at", "stop_asked_by", "stop_delivered_at"])
        grace = settings.RUN_STOP_GRACE_SECONDS
        run_event(
            run, "stop", f"Stop asked by {actor}: SIGTERM, then SIGKILL after {grace} s", actor, attempt=run.attempt
        )
        message = f"{run.run_id}: stop of attempt {run.attempt} asked"
        record(AuditAction.RUN_STOP_ASKED, message, actor=actor, run=run)
        after_commit("runs.tasks.deliver_stop", run.pk, run.attempt)
    return run


def pending_stop(run_pk: int, attempt: int) -> Run | None:
    """The run, if a stop of this attempt is asked and not yet delivered while it still runs."""
    return (
        Run.objects.stop_undelivered()
        .select_related("project", "instance", "stop_asked_by")
        .filter(pk=run_pk, attempt=attempt)
        .first()
    )


def _still_undelivered(run: Run, attempt: int) -> bool:
    """The locked run still waits for the box to hear this attempt's stop (a settled one is left alone)."""
    return run.attempt == attempt and run.stop_asked_at is not None and run.stop_delivered_at is None


def do_mark_stop_delivered(run_pk: int, attempt: int, answer: dict) -> Run | None:
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        if not _still_undelivered(run, attempt):
            return None
        run.stop_delivered_at = timezone.now()
        run.save(update_fields=["stop_delivered_at"])
        if answer.get("stopped"):
            run_event(run, "stop", "Stop delivered: the box sent the command SIGTERM", attempt=attempt)
        else:
            why = str(answer.get("reason") or "nothing runs")[:200]
            run_event(run, "stop", f"Stop delivered, but nothing ran to stop on the box ({why})", attempt=attempt)
    return run


def overdue_stops(now=None) -> list[tuple[int, int, bool]]:
    """(run, attempt, expired) of every stop not yet delivered: re-sent, or expired past the deadline."""
    now = now or timezone.now()
    deadline = now - timedelta(seconds=settings.RUN_STOP_DEADLINE_SECONDS)
    waiting = Run.objects.stop_undelivered()
    return [
        (pk, attempt, asked < deadline) for pk, attempt, asked in waiting.values_list("pk", "attempt", "stop_asked_at")
    ]


def do_expire_stop(run_pk: int, attempt: int) -> bool:
    """A stop the box never heard (unreachable until the deadline) ends with its reason; the run goes on."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        if not _still_undelivered(run, attempt):
            return False
        asked_by = run.stop_asked_by
        run.stop_asked_at, run.stop_asked_by = None, None
        run.save(update_fields=["stop_asked_at", "stop_asked_by"])
        minutes = settings.RUN_STOP_DEADLINE_SECONDS // 60
        run_event(
            run,
            "stop",
            f"Stop asked by {asked_by or 'someone'} expired: the box did not answer for {minutes} min, so the run "
            "was never stopped and may still be running. Stop it again once the box answers.",
            attempt=attempt,
        )
    return True
