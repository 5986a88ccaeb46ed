"""What every run action shares: the locks, the run event, the checked state move, the GPU locks."""

from functools import partial

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import get_random_string

from core.enqueue import after_commit, send
from fleet.control_host import runs_here_problem
from fleet.models import Instance
from notifications.models import Event
from projects.models import Project
from runs import notices
from runs.live import push_run_update
from runs.models import (
    LIVE_STATES,
    RUN_TRANSITIONS,
    GpuLock,
    Run,
    RunEvent,
    RunState,
    Sweep,
)

FAILED_TO_START = {RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE, RunState.FAILED_LAUNCH}


def new_run_id(project_slug: str) -> str:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    return f"{project_slug}-{stamp}-{get_random_string(4, 'abcdefghijkmnpqrstuvwxyz23456789')}"


def lock_run(run_pk: int, *, run_only: bool = False) -> Run:
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
    foreign-key checks take at COMMIT while it holds the instance: the two deadlocked on PostgreSQL."""
    instance_id, project_id = Run.objects.values_list("instance_id", "project_id").get(pk=run_pk)
    Instance.objects.select_for_update(no_key=True).filter(pk=instance_id).first()
    Project.objects.select_for_update(no_key=True).filter(pk=project_id).first()
    run = Run.objects.select_for_update(no_key=True, of=("self",)).select_related("instance", "project").get(pk=run_pk)
    if run.instance_id != instance_id:  # an edit moved it to another box while we waited: lock that one
        return locked_run(run_pk)
    return run


def push_update(run: Run, payload: dict) -> None:
    """Send to the run page (and its project page) only after the rows are committed."""
    transaction.on_commit(partial(push_run_update, run.run_id, payload, run.project.slug))


def run_event(run: Run, kind: str, message: str, actor=None, from_state="", to_state="", **data) -> RunEvent:
    event = RunEvent.objects.create(
        run=run, kind=kind, message=message, actor=actor, from_state=from_state, to_state=to_state, data=data
    )
    push_update(
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
    return run_event(run, kind, message, actor, **(data or {}))


def check_move(run: Run, target: RunState) -> RunState:
    source = RunState(run.state)
    RUN_TRANSITIONS.check(source, target)
    return source


def move_run(run: Run, target: RunState, message: str, actor=None, **data) -> None:
    source = check_move(run, target)
    run.state, run.state_changed_at, run.redrives = target, timezone.now(), 0
    run.save()
    run_event(run, "state", message, actor, from_state=source.value, to_state=target.value, **data)
    if target == RunState.EXPORTED:
        notices.announce(run, Event.RUN_FINISHED, "finished; its export is sealed on the box: verify custody next")
    elif target in FAILED_TO_START:
        notices.announce(run, Event.RUN_FAILED, f"{target.label}: {message[:200]}", failure_class=target.value)
    if run.sweep_id and target not in LIVE_STATES - {RunState.EXITED}:
        # A cell freed its GPU: the box's queue may move.
        after_commit("runs.tasks.advance_sweep", run.sweep_id)
    if "multinode" in (run.scheduler or {}) and source in WATCHED_STATES and target not in WATCHED_STATES:
        # Rank 0's attempt ended: no other box's node of it trains on unwatched.
        after_commit("runs.tasks.stop_run_peers", run.pk, run.attempt, f"rank 0's attempt ended ({target.label})")


WATCHED_STATES = {RunState.RUNNING, RunState.EXITED}


def note_run(run_pk: int, message: str) -> None:
    """A note on the run's history, from a task that changed nothing of the run itself."""
    with transaction.atomic():
        run = Run.objects.get(pk=run_pk)
        run_event(run, "note", message)


def acquire_gpus(run: Run) -> str | None:
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


def release_gpus(run: Run) -> None:
    released = GpuLock.objects.filter(run=run).delete()[0]
    if released:
        run_event(run, "gpu", f"Released {released} GPU lock(s)")


def locked_sweep(sweep_pk: int):
    """The sweep locked in the one order every transaction touching a box takes: its cells' boxes (by
    id), its project, then the sweep; its runs after it (the caller's). The advance once took the sweep
    and its cells first, while a watcher changing a cell's state held the cell's box and project and
    waited for the cell: a PostgreSQL deadlock in the sweeps tried (retried, but an ERROR each time)."""
    project_id = Sweep.objects.values_list("project_id", flat=True).get(pk=sweep_pk)
    boxes = Run.objects.filter(sweep_id=sweep_pk).values_list("instance_id", flat=True).distinct()
    list(Instance.objects.select_for_update(no_key=True).filter(pk__in=list(boxes)).order_by("pk"))
    Project.objects.select_for_update(no_key=True).filter(pk=project_id).first()
    return Sweep.objects.select_for_update(of=("self",)).select_related("base_run").get(pk=sweep_pk)


def may_run_on(run: Run, actor, instance: Instance | None = None) -> None:
    """Work starts on the run's boxes (its own and every box running a node of it) or on the box it is to
    continue on: on the control host only an administrator's run, started by an administrator or by
    RemoteGPU itself (the forms and the API refuse it first; this is the rule every start goes through)."""
    boxes = [instance] if instance is not None else [run.instance, *run_boxes_beside(run)]
    if any(box.profile.is_local for box in boxes):
        problem = control_host_problem(run, actor)
        if problem:
            raise PermissionDenied(problem)


def run_boxes_beside(run: Run) -> list[Instance]:
    """The other boxes of a run over several boxes (none before it is saved)."""
    return [peer.instance for peer in run.peers.select_related("instance")] if run.pk else []


def control_host_problem(run: Run, actor) -> str | None:
    """Why the run may not run on the control host, or None. Whoever starts it (actor; None: RemoteGPU
    itself, a relaunch or a proof) and whoever last wrote what it runs (its command, source, hooks, config:
    Run.definition_by, else its maker) must both be administrators: an operator who edits an
    administrator's draft before its proof or start would otherwise run her command there."""
    if actor is not None and (problem := runs_here_problem(actor)):
        return problem
    author = run.definition_by if run.definition_by_id else run.created_by
    if author is None or not author.is_superuser:
        who = author.get_username() if author is not None else "nobody known"
        return (
            f"{run.run_id or 'This run'} was last written by {who}, not an administrator: what it runs never runs on "
            "the control host. An administrator makes it anew (New run like this), or it runs on another box."
        )
    return None


def arm_watcher(instance_id: int) -> None:
    send("watching.tasks.watch_instance", instance_id)


def user_by_pk(pk):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(pk=pk).first()
