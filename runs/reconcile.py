"""Every state that waits on a task has a deadline; past it, re-drive the task or fail with a reason.

A task can vanish with its worker (SIGKILL), or finish its node work and then lose the database
(a terminated backend): the run would wait forever while the box trains unwatched. Beat runs
`reconcile_runs` every RECONCILE_INTERVAL; each overdue run is re-driven idempotently (the tasks
re-read the node: a launched attempt is recognised by its markers and adopted) up to
RECONCILE_MAX_REDRIVES times, then moved to the state's failure with the next step to take.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

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


REDRIVE_FROM_WORKER = "check that a worker runs and reaches the box, then start preflight again"
# state, the setting that bounds it, the step, where it ends if nothing moves it, the next step.
DEADLINES = [
    (RunState.PREFLIGHT, "RECONCILE_PREFLIGHT_SECONDS", "preflight", RunState.FAILED_PREFLIGHT, REDRIVE_FROM_WORKER),
    (RunState.SMOKE, "RECONCILE_SMOKE_SECONDS", "smoke", RunState.FAILED_SMOKE, REDRIVE_FROM_WORKER),
    (
        RunState.LAUNCHING,
        "RECONCILE_LAUNCH_SECONDS",
        "launch",
        RunState.FAILED_LAUNCH,
        "retry: a retry re-reads the node first and adopts an attempt that is running there",
    ),
    (
        RunState.EXITED,
        "RECONCILE_EXITED_SECONDS",
        "closeout",
        RunState.QUARANTINED,
        "the wrapper never sealed or quarantined the attempt (disk full?): free space, then retry",
    ),
]


def deadlines() -> dict[str, Deadline]:
    """Read at call time: a deployment (or a test) sets the seconds through settings."""
    return {
        state: Deadline(state, getattr(settings, setting), step, failed, next_step)
        for state, setting, step, failed, next_step in DEADLINES
    }


def overdue(run, now=None) -> Deadline | None:
    deadline = deadlines().get(run.state)
    if deadline is None:
        return None
    since = run.state_changed_at or run.created
    moved = (run.staging or {}).get("at") if run.state == RunState.PREFLIGHT else None
    if isinstance(moved, int | float):  # a preflight still staging bytes is not stuck
        since = max(since, datetime.fromtimestamp(moved, tz=UTC))
    return deadline if since + timedelta(seconds=deadline.seconds) <= (now or timezone.now()) else None
