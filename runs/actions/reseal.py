"""A person's re-seal of an attempt quarantined for its paperwork alone (a train.csv an older wrapper
required): asked here, carried out by the box's wrapper (`reseal`: today's contract checked again on the
staged export kept with the attempt), recorded here. Audited; what can make a number wrong still refuses."""

from django.core.exceptions import ValidationError
from django.db import transaction

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from projects.roles import require
from runs import signals
from runs.actions.base import lock_run, move_run, run_event, user_by_pk
from runs.models import RunState


def do_reseal_run(run_pk: int, *, actor):
    """Ask the box to seal the quarantined attempt whose only problems are paperwork."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        require(actor, "projects.operate", run.project)
        if run.state != RunState.QUARANTINED or not signals.paperwork_only(run.close_reason):
            raise ValidationError(
                "Only an attempt quarantined for missing paperwork alone (train.csv) can be sealed after all."
            )
        run_event(run, "note", f"Re-seal of attempt {run.attempt} asked: its only problems were paperwork", actor)
        after_commit("runs.tasks.reseal_run", run.pk, run.attempt, actor.pk)
    return run


def do_finish_reseal(run_pk: int, attempt: int, answer: dict, actor_id: int | None):
    """The box's answer: sealed (the run is exported, audited, the gap said) or refused with why."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        if run.state != RunState.QUARANTINED or run.attempt != attempt:
            return run  # moved on meanwhile (a retry, a redelivery): nothing to record
        actor = actor_id and user_by_pk(actor_id)
        if not answer.get("sealed"):
            run_event(run, "alert", f"Re-seal refused on the box: {str(answer.get('reason'))[:1000]}", actor)
            return run
        gaps = [str(gap)[:200] for gap in answer.get("paperwork") or [] if isinstance(gap, str)][:10]
        run.close_reason = ""
        move_run(
            run, RunState.EXPORTED, f"Attempt {attempt} sealed after all: " + ("; ".join(gaps) or "as it was"), actor
        )
        message = f"{run.run_id}: attempt {attempt}, quarantined for paperwork alone, sealed ({'; '.join(gaps)})"
        record(AuditAction.RUN_RESEALED, message[:2000], actor=actor, run=run)
    return run
