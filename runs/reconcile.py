"""Every state that waits on a task has a deadline; past it, re-drive the task or fail with a reason.

A task can vanish with its worker (SIGKILL), or finish its node work and then lose the database
(a terminated backend): the run would wait forever while the box trains unwatched. Beat runs
`reconcile_runs` every RECONCILE_INTERVAL; each overdue run is re-driven idempotently (the tasks
re-read the node: a launched attempt is recognised by its markers and adopted) up to
RECONCILE_MAX_REDRIVES times, then moved to the state's failure with the next step to take.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from runs.models import RunState


@dataclass(frozen=True)
class Deadline:
    state: str
    seconds: float
    task: str  # what is re-driven
    failure: str  # where the run goes when re-driving did not help
    next_step: str


def deadlines() -> dict[str, Deadline]:
    return {
        RunState.PREFLIGHT: Deadline(
            RunState.PREFLIGHT, settings.RECONCILE_PREFLIGHT_SECONDS, "preflight", RunState.FAILED_PREFLIGHT,
            "check that a worker runs and reaches the box, then start preflight again",
        ),
        RunState.SMOKE: Deadline(
            RunState.SMOKE, settings.RECONCILE_SMOKE_SECONDS, "smoke", RunState.FAILED_SMOKE,
            "check that a worker runs and reaches the box, then start preflight again",
        ),
        RunState.LAUNCHING: Deadline(
            RunState.LAUNCHING, settings.RECONCILE_LAUNCH_SECONDS, "launch", RunState.FAILED_LAUNCH,
            "retry: a retry re-reads the node first and adopts an attempt that is running there",
        ),
        RunState.EXITED: Deadline(
            RunState.EXITED, settings.RECONCILE_EXITED_SECONDS, "closeout", RunState.QUARANTINED,
            "the wrapper never sealed or quarantined the attempt (disk full?): free space, then retry",
        ),
    }  # fmt: skip


def overdue(run, now=None) -> Deadline | None:
    deadline = deadlines().get(run.state)
    if deadline is None:
        return None
    since = run.state_changed_at or run.created
    return deadline if since + timedelta(seconds=deadline.seconds) <= (now or timezone.now()) else None
