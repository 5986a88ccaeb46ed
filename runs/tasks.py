"""Celery tasks of the runs app: node work happens here, outside transactions; results go to actions."""

import json
import socket
import time
from functools import partial

from celery import shared_task
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError

from fleet import boot_hooks, slurm_jobs
from fleet.credentials import run_secret_values, secret_problems
from node.build import wrapper_name
from node.pull import HashMismatch
from node.transport import TransportError
from platforms.layout import resolve_home
from projects.models import Project
from runs import ckpt_pull, multinode, preflight, shipping
from runs.actions import arrays, base, checkpoints, lifecycle, peers, redrive, spending, sweeps
from runs.box_spec import run_node
from runs.cadence import checkpoint_environment
from runs.gpus import gone_problem
from runs.models import Run, RunState
from runs.sources import SourceError


@shared_task(acks_late=True, soft_time_limit=20, time_limit=30)
def worker_selfcheck() -> dict:
    """A worker proves it reaches the same database the web process uses."""
    return {"hostname": socket.gethostname(), "projects": Project.objects.count()}


def _run_in(pk: int, state: RunState) -> Run | None:
    run = Run.objects.select_related("instance", "project").filter(pk=pk).first()
    return run if run is not None and run.state == state else None


VAST_START_HOOK = "$HOME/onstart.sh"  # vast.ai saves its on-start script there and runs it at each start


# The node work is idempotent (a launch re-reads the node first): a database error after it retries
# the task instead of acking it and stranding the run (a terminated backend, a failover).
DB_RETRY = {"autoretry_for": (DatabaseError,), "retry_backoff": 2, "retry_backoff_max": 30, "max_retries": 5}


# Staging datasets is part of preflight: its time limit leaves STAGE_TIMEOUT for that.
@shared_task(
    acks_late=True, soft_time_limit=settings.STAGE_TIMEOUT + 600, time_limit=settings.STAGE_TIMEOUT + 660, **DB_RETRY
)
def preflight_run(run_pk: int) -> None:
    run = _run_in(run_pk, RunState.PREFLIGHT)
    if run is None:
        return
    try:
        with run_node(run) as node:
            node.prepare()
            commit = shipping.ship_source(node)
            node.upload_restore(run.attempt + 1, ckpt_pull.control_dir(run))
            staged, stage_problems = shipping.stage_datasets(node, partial(lifecycle.do_record_staging, run_pk))
            run = lifecycle.do_record_staged(run_pk, staged)
            node.run = run
            report = node.call("preflight", node.write_spec("preflight", node.spec(0)), timeout=300)
            cluster, cluster_problems = {}, []
            if run.instance.profile.runs_jobs:  # the compute nodes, not the login node
                needs_torch = bool((report.get("environment") or {}).get("torch"))  # the login node's has it
                cluster, cluster_problems = slurm_jobs.preflight(node, run, needs_torch)
            # A run over several boxes: every other box proven too, and the rendezvous measured from each.
            nodes, node_problems = multinode.preflight_peers(run, node, report)
    except (TransportError, SourceError, OSError) as exc:  # OSError: a control-host checkpoint copy unreadable
        lifecycle.do_finish_preflight(run_pk, {}, [f"{type(exc).__name__}: {exc}"])
        return
    report = {**report, "commit": commit, "datasets": staged, "slurm": cluster, **nodes}
    report, problems = preflight.verdict(run, report)
    problems += cluster_problems + node_problems
    problems += stage_problems
    # Names only: whether each secret is known, granted and set here; its value is read at launch.
    problems += [f"Secrets: {problem}" for problem in secret_problems(run)]
    lifecycle.do_finish_preflight(run_pk, report, problems)


@shared_task(
    acks_late=True,
    soft_time_limit=settings.CKPT_PULL_DEADLINE_SECONDS,
    time_limit=settings.CKPT_PULL_DEADLINE_SECONDS + 60,
    **DB_RETRY,
)
def pull_checkpoint(run_pk: int, sha256: str) -> str:
    """The checkpoint a box with no durable tier holds, pulled to the control host (ckpt_pull)."""
    run = Run.objects.select_related("instance", "project").filter(pk=run_pk).first()
    asked = (run.durable_ckpt.get("pull") or {}) if run else {}
    if asked.get("sha256") != sha256 or asked.get("error"):
        return "not asked"
    directory = ckpt_pull.control_dir(run)
    began = time.monotonic()
    with ckpt_pull.pull_lock(directory) as held:
        if not held:
            return "another pull of the run runs"  # the watcher asks again past the deadline
        try:
            with run_node(run) as node:
                arrived = ckpt_pull.pull_held(node, asked, directory)
        except (TransportError, HashMismatch, OSError) as exc:
            checkpoints.do_fail_checkpoint_pull(run_pk, sha256, f"{type(exc).__name__}: {exc}")
            return "failed"
        kept = checkpoints.do_record_pulled_checkpoint(run_pk, sha256, arrived, time.monotonic() - began)
    return "pulled" if kept else "superseded"


@shared_task(
    acks_late=True, soft_time_limit=settings.SMOKE_TIMEOUT + 60, time_limit=settings.SMOKE_TIMEOUT + 120, **DB_RETRY
)
def smoke_run(run_pk: int) -> None:
    run = _run_in(run_pk, RunState.SMOKE)
    if run is None:
        return
    try:
        values = run_secret_values(run) if run.secrets_in_smoke else {}
        with run_node(run) as node:
            spec_path = node.write_spec("smoke", node.spec(0))
            node.put_secrets(spec_path, values)
            result = node.call("smoke", spec_path, timeout=settings.SMOKE_TIMEOUT + 30)
    except TransportError as exc:
        lifecycle.do_finish_smoke(run_pk, -1, f"could not run the smoke: {exc}")
        return
    warnings = [str(w)[:500] for w in result.get("warnings") or [] if isinstance(w, str)][:5]  # an untrusted box
    lifecycle.do_finish_smoke(run_pk, result["exit_code"], result["output"], warnings)


@shared_task(acks_late=True, soft_time_limit=120, time_limit=180, **DB_RETRY)
def launch_run(run_pk: int, attempt: int) -> None:
    run = _run_in(run_pk, RunState.LAUNCHING)
    if run is None or run.attempt != attempt:
        return
    try:
        with run_node(run, env=checkpoint_environment(run), dataset_files=shipping.dataset_files(run)) as node:
            node.prepare()
            status = node.call("status", node.attempt_spec(attempt))
            if status["launched"]:
                # A redelivered task: the attempt is already running on the node; never start it twice.
                # How it was launched is read back from the node (its launch wrote it there first).
                launched = node.launched_as(attempt) or (run.detach or "unknown", run.launched_command, "")
                detach, command, job = launched
                lifecycle.do_mark_launched(run_pk, attempt, detach, command, wrapper_name(), job=job)
                return
            if run.instance.profile.runs_jobs:  # a cluster: the job is the unit
                _launch_job(node, run, attempt)
                return
            if run.gpus:  # every (re)launch: the GPUs are still there (a restart may have taken them)
                gone = gone_problem(
                    run.gpus,
                    node.call("gpus", node.attempt_spec(attempt))["gpus"],
                    run.preflight_report.get("gpu_holders"),
                )
                if gone:
                    lifecycle.do_mark_launch_failed(run_pk, attempt, gone)
                    return
            detach_kind = run.instance.profile.data["daemon"]["detach"]
            if detach_kind == "onstart":
                boot_hooks.install_start_hook(node, resolve_home(VAST_START_HOOK, node.home))
            use_tmux = detach_kind in ("tmux", "onstart") and run.preflight_report.get("tmux")
            # Read now, at every (re)launch: a grant revoked since the last attempt stops this one.
            node.put_secrets(node.layout.spec(f"attempt-{attempt}"), run_secret_values(run))  # uploaded above
            multinode.launch_peers(run, attempt, checkpoint_environment(run))  # before rank 0, which they wait for
            hook = ""
            if run.auto_relaunch and not run.secrets:  # opted in: the box relaunches it after a restart
                onstart = resolve_home(VAST_START_HOOK, node.home) if detach_kind == "onstart" else None
                hook = boot_hooks.install_boot_hook(node, onstart)
            detach, command = node.launch(attempt, bool(use_tmux))
    except TransportError as exc:
        lifecycle.do_mark_launch_failed(run_pk, attempt, str(exc))
        return
    lifecycle.do_mark_launched(run_pk, attempt, detach, command, wrapper_name(), hook)


def _launch_job(node, run, attempt: int) -> None:
    """A cluster's run: its job, or its task of the sweep's job array (one already submitted for it is
    read back from its launch marker, never submitted again)."""
    node.put_secrets(node.layout.spec(f"attempt-{attempt}"), run_secret_values(run))
    launched = node.launched_as(attempt)
    if launched and launched[2]:
        lifecycle.do_mark_launched(run.pk, attempt, *launched[:2], wrapper_name(), job=launched[2])
        return
    node.attempt_spec(attempt)  # the spec an array's task runs, on the login node before it waits
    if arrays.wants_array(run) and arrays.do_ready_array_cell(run.pk, attempt) == arrays.WAIT:
        return  # the sweep's array takes it (runs.tasks.submit_sweep_array)
    detach, command, job = node.launch_job(attempt)
    lifecycle.do_mark_launched(run.pk, attempt, detach, command, wrapper_name(), job=job)


@shared_task(acks_late=True, soft_time_limit=120, time_limit=180, **DB_RETRY)
def submit_sweep_array(sweep_pk: int) -> str:
    """The sweep's ready cells as one job array; each cell marked launched as its task."""
    cells = arrays.do_claim_array(sweep_pk)
    if not cells:
        return "nothing to submit"
    sweep = cells[0].sweep
    try:
        with run_node(cells[0]) as node:
            command, job = node.launch_array(cells, f"rgpu-sweep-{sweep_pk}", sweep.gpus_per_box)
    except TransportError as exc:
        arrays.do_release_array_claim(sweep_pk)
        for cell in cells:
            lifecycle.do_mark_launch_failed(cell.pk, cell.attempt, f"the sweep's job array: {exc}")
        return "failed"
    arrays.do_record_array(sweep_pk, job, cells, sweep.gpus_per_box)
    for cell in cells:
        lifecycle.do_mark_launched(cell.pk, cell.attempt, "sbatch", command, wrapper_name(), job=f"{job}_{cell.cell}")
    return job


@shared_task(acks_late=True, soft_time_limit=120, time_limit=180)
def fail_run_nodes(run_pk: int, attempt: int, failed: str) -> str:
    """A node of a run over several boxes failed: rank 0's node is stopped with that reason (its attempt
    closes with it, its class a node's failure) and so is every other box's node."""
    run = Run.objects.select_related("instance", "project").get(pk=run_pk)
    request = {"by": failed, "grace_seconds": settings.RUN_STOP_GRACE_SECONDS, "node_failed": True}
    try:
        with run_node(run) as node:
            node.invoke(node.layout.tools, "stop", node.layout.spec(f"attempt-{attempt}"), request=request)
    except TransportError as exc:
        base.note_run(run_pk, f"Rank 0's node could not be stopped after a node failed: {exc}")
    said = multinode.stop_peers(run, attempt, failed, node_failed=True)
    base.note_run(run_pk, f"Every node of attempt {attempt} stopped after a node failed: {'; '.join(said)}")
    return failed


@shared_task(acks_late=True, soft_time_limit=120, time_limit=180)
def stop_run_peers(run_pk: int, attempt: int, why: str) -> list[str]:
    """A run over several boxes whose attempt ended (or whose node failed): every other box's node of it
    stopped, so none trains on unwatched. Idempotent: a stopped or finished node answers "not running"."""
    run = Run.objects.select_related("instance", "project").get(pk=run_pk)
    if run.state == RunState.QUARANTINED:  # which node failed first, read before any is stopped
        names = {peer.rank: peer.instance.name for peer in multinode.peers_of(run)}
        first = peers.first_failed(run.last_status or {}, multinode.peer_statuses(run), names)
        if first:
            peers.do_name_failed_node(run_pk, attempt, first)
    said = multinode.stop_peers(run, attempt, why)
    base.note_run(run_pk, f"The other boxes' nodes of attempt {attempt}: {'; '.join(said)}")
    return said


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def advance_sweep(sweep_pk: int) -> list[str]:
    return sweeps.do_advance_sweep(sweep_pk)


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def close_active(run_pk: int, actor_id: int, reason: str) -> str:
    """Idempotent: a redelivery after the move finds no active/ and records it closed."""
    from fleet.node_client import NodeClient
    from runs.actions.lifecycle import do_mark_active_closed

    run = Run.objects.select_related("project", "instance").get(pk=run_pk)
    with NodeClient(run.instance) as node:
        answer = node.close_active(run, reason)
    if not answer.get("closed"):
        return answer.get("reason", "not closed")
    do_mark_active_closed(run.pk, actor_id, reason, answer)
    return "closed"


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def reseal_run(run_pk: int, attempt: int, actor_id: int) -> str:
    """The box seals the quarantined attempt's kept export by today's contract, or says why not."""
    from runs.actions.reseal import do_finish_reseal
    from runs.box_spec import run_node

    run = Run.objects.select_related("project", "instance").get(pk=run_pk)
    with run_node(run) as node:
        node.install_wrapper(node.layout.tools)  # this control host's wrapper: it knows `reseal`
        answer = node.call("reseal", node.write_spec("reseal", node.spec(attempt)), timeout=90)
    do_finish_reseal(run.pk, attempt, answer, actor_id)
    return "sealed" if answer.get("sealed") else "refused"


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def deliver_stop(run_pk: int, attempt: int) -> str:
    """Tell the box to stop the attempt. Idempotent (the wrapper keeps the first stop's marker); an
    unreachable box leaves it asked, and the reconciler sends it again until its deadline."""
    from fleet.node_client import NodeClient
    from runs.actions import stops

    run = stops.pending_stop(run_pk, attempt)
    if run is None:
        return "nothing to deliver"
    try:
        with NodeClient(run.instance) as node:
            answer = node.stop(run, str(run.stop_asked_by or "a person"))
    except TransportError as exc:
        return f"not delivered, sent again later: {exc}"
    stops.do_mark_stop_delivered(run.pk, attempt, answer)
    base.arm_watcher(run.instance_id)  # the next probe reads the quarantine
    return json.dumps(answer)


@shared_task(soft_time_limit=20, time_limit=30, ignore_result=True)
def record_health() -> bool:
    """Measure every part of the system here, so no page ever waits on a ping."""
    from core.health import measure_and_record

    return all(check.ok for check in measure_and_record())


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def reconcile_runs() -> dict:
    """Beat: every run past the deadline of its state is re-driven or failed with a reason."""
    from runs import reconcile  # when a waiting run is overdue (pure)

    waiting = Run.objects.filter(state__in=list(reconcile.deadlines())).only(
        "pk", "state", "state_changed_at", "created"
    )
    outcomes = {}
    for run in waiting:
        if reconcile.overdue(run):
            outcomes[run.pk] = redrive.do_reconcile_run(run.pk)
    # A stop the box has not heard yet (unreachable, or its message lost): sent again, or expired.
    from runs.actions import stops

    for run_pk, attempt, expired in stops.overdue_stops():
        if expired:
            outcomes[f"stop {run_pk}"] = "expired" if stops.do_expire_stop(run_pk, attempt) else "settled"
        else:
            deliver_stop.delay(run_pk, attempt)
            outcomes[f"stop {run_pk}"] = "sent again"
    # A running run whose provider says its box is gone or stopped: moved by itself, or offered the move.
    from runs.actions import moves

    for run_pk in moves.lost_box_runs():
        outcomes[f"lost box {run_pk}"] = moves.do_handle_lost_box(run_pk)
    # A sweep's advance is enqueued when a cell ends; if that message died with its worker, the
    # queued cells would wait forever. Advancing is idempotent (planned from the rows), so re-plan.
    for sweep_pk in (
        Run.objects.filter(sweep__isnull=False, state=RunState.DRAFT).values_list("sweep", flat=True).distinct()
    ):
        for run_id in sweeps.do_advance_sweep(sweep_pk):
            outcomes[run_id] = "sweep cell started"
    # An approved spend whose continuation was never delivered (the broker was down at approval):
    # continuing is idempotent (it starts only what still waits on that approval).
    for request_pk in spending.lost_spend_continuations():
        try:
            outcomes[f"spend {request_pk}"] = redrive.do_continue_after_spend(request_pk)
        except ValidationError as exc:
            outcomes[f"spend {request_pk}"] = " ".join(exc.messages)
    return outcomes


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def close_out_run(run_pk: int, attempt: int) -> str:
    """An EXITED run nobody sealed: the node quarantines the attempt (closeout never finished)."""
    from fleet.node_client import NodeClient

    run = _run_in(run_pk, RunState.EXITED)
    if run is None or run.attempt != attempt:
        return "nothing to do"
    with NodeClient(run.instance) as node:
        answer = node.abandon(run)
    base.arm_watcher(run.instance_id)  # the watcher's next probe reads the quarantine
    return json.dumps(answer)


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def continue_after_spend(request_id: int) -> str:
    """An approved spend starts what waited for it (a lost message: the operator starts it again)."""
    return redrive.do_continue_after_spend(request_id)


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def warn_budget_forecasts() -> list[str]:
    from runs.budgets import do_warn_forecasts

    return do_warn_forecasts()


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def expire_spend_requests() -> int:
    return spending.do_expire_spend_requests()
