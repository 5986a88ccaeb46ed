"""A run's Slurm job requeued by the scheduler (preemption, a node failure, `scontrol requeue`): the same
job runs again as the run's next attempt, started by Slurm, not by us. The watcher adopts it here."""

from django.db import transaction

from core.audit import record
from core.models import AuditAction
from runs.actions.base import lock_run, run_event
from runs.checkpoints import resume_floor
from runs.models import Run, RunState


def do_adopt_requeue(run_pk: int, attempt: int, said: str) -> Run:
    """The run follows its job to `attempt` (the launched attempt plus SLURM_RESTART_COUNT). It resumes
    from the run's checkpoints and must be proven as any resume (runs/actions/checkpoints.py)."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk)
        # While its job lives the run stays running (node/slurm.py: merged), so a requeue meets it there.
        if run.state != RunState.RUNNING or attempt <= run.attempt:
            return run  # an older probe, or a run that has moved on
        was = run.attempt
        run.resume_floor = resume_floor(run.ckpt_mirror or None, same_box=True)
        run.ckpt_mirror = {}
        run.attempt = attempt
        run.exit_code, run.active_closed_at = None, None
        run.csv_offset = 0  # the requeued attempt logs again from where it resumed: the curve stays one line
        run.log_offset, run.log_kept_bytes, run.alerts, run.failure_class, run.failure_excerpt = 0, 0, [], "", ""
        run.health, run.health_since = "", None
        run.relaunches += 1
        run.save()
        message = f"Slurm requeued the job: attempt {was} ended, attempt {attempt} runs it again ({said})"
        run_event(run, "note", message)
        record(AuditAction.RUN_RETRIED, f"{run.run_id}: {message}", run=run)
    return run
