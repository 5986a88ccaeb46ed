"""What a watcher's probe of a run changes: outcome, health, alerts, output, relaunch."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from notifications.models import Event
from runs import logs, notices, rollups, signals
from runs.actions.base import lock_run, move_run, push_update, release_gpus, run_event
from runs.actions.checkpoints import apply_boot_relaunches, apply_mirror
from runs.actions.lifecycle import relaunch_run
from runs.actions.spending import ask_again_when_overrunning, spend_gate
from runs.models import (
    Run,
    RunState,
    SpendRequest,
)
from watching.masking import mask_tree, values_for
from watching.observe import CURVE_LIMIT, Observation, Snapshot, continued, observe


def _exit(run: Run, exit_code: int | None, message: str) -> None:
    run.exit_code, run.exited_at = exit_code, timezone.now()
    if run.launched_at:
        used = (run.exited_at - run.launched_at).total_seconds() * len(run.gpus)
        run.gpu_seconds += used
        rollups.add(run, gpu_seconds=used)
    move_run(run, RunState.EXITED, message, exit_code=exit_code)
    release_gpus(run)


def _classify_failure(run: Run, status: dict, dead: bool) -> None:
    if run.failure_class:
        return
    reason = run.close_reason or ""
    interrupted, stopped = reason.startswith("interrupted"), reason.startswith("stopped by ")
    seen = set(run.alerts) | ({"disk_full"} if reason.startswith("disk_full") else set())
    contract = signals.contract_failure(reason)
    run.failure_class = signals.classify(
        run.exit_code,
        seen,
        dead=dead,
        interrupted=interrupted,
        stopped=stopped,
        contract=contract,
        node=signals.node_failure(reason),
    )
    run.failure_excerpt = signals.excerpt(status.get("log_tail") or "")
    failure = signals.FAILURE_CLASSES[run.failure_class]
    run_event(run, "failure", f"Classified: {failure.label}. {failure.remediation}", failure_class=run.failure_class)
    event = Event.RUN_INTERRUPTED if run.failure_class == "interrupted" else Event.RUN_FAILED
    notices.announce(run, event, f"{failure.label}. {failure.remediation}", failure_class=run.failure_class)


def _maybe_relaunch(run: Run) -> None:
    """An interruption of a run that opted in is relaunched, a bounded number of times."""
    if run.failure_class != "interrupted" or not run.auto_relaunch:
        return
    if run.resume_broken:
        run_event(run, "failure", f"Interrupted; not relaunched automatically: resume broken ({run.resume_broken})")
        return
    if run.relaunches >= run.max_relaunches:
        run_event(run, "failure", f"Interrupted again; {run.relaunches} automatic relaunches used: relaunch by hand")
        return
    if spend_gate(run, run.attempt + 1, SpendRequest.Why.RELAUNCH, None) is not None:
        return  # the envelope is asked again; an approval relaunches it
    run.relaunches += 1
    try:
        relaunch_run(run, None, f"Interrupted: automatic relaunch {run.relaunches} of {run.max_relaunches}")
    except ValidationError as exc:
        run_event(run, "failure", f"Automatic relaunch refused: {' '.join(exc.messages)}")


def _alert(run: Run, name: str, detail: str = "") -> None:
    run.alerts = [*run.alerts, name]
    message = signals.alert_message(name, detail)
    run_event(run, "alert", message, signal=name)
    if name == "stalled":
        notices.announce(run, Event.RUN_STALLED, message)


def _set_health(run: Run, health: str, since) -> None:
    if run.health != health:
        run.health, run.health_since = health, since


def do_observe_run(run_pk: int, status: dict, thresholds: dict, pushed_until: int | None = None) -> tuple[Run, bool]:
    """Apply one probe of a run (what it means is `watching.observe.observe`); returns (run, looks_dead).

    pushed_until: how far the watcher's push stream already sent this attempt's log to the pages
    (only the rest of the probe's chunk is sent again)."""
    with transaction.atomic(durable=True):
        # A probe that changes the run's state (and maybe relaunches it) locks its instance and project
        # too, in the one lock order, taken before the run's row; any other probe locks the run alone.
        changes = _changes_state(status)
        run = lock_run(run_pk, run_only=not changes)
        status = mask_tree(status, values_for(run))  # before anything of it is kept, shown or judged
        seen = observe(Snapshot.of(run), status, thresholds)
        if not seen.applies:
            return run, False
        now = timezone.now()
        if seen.reachable_again:
            run_event(run, "probe", "Reachable again; watching resumes")
        logs.keep(run, seen.log_start, seen.log_offset, seen.log_chunk)
        run.log_offset, run.csv_offset = seen.log_offset, seen.csv_offset
        if seen.rows:
            run.curve = continued(run.curve, seen.rows)[-CURVE_LIMIT:]
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
        apply_boot_relaunches(run, status)
        apply_mirror(run, status)  # before the outcome: a broken resume stops the relaunch it may lead to
        _apply_outcome(run, seen, status)
        if run.state == RunState.RUNNING:
            ask_again_when_overrunning(run, now)
        run.last_status = {
            **{k: v for k, v in status.items() if k not in ("log_chunk", "csv_chunk")},
            "csv_header": seen.csv_header,
            "heartbeat_age": seen.heartbeat_age,
        }
        run.save()
        push_update(
            run, {"type": "status", "health": run.health, "heartbeat_age": seen.heartbeat_age, "state": run.state}
        )
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
                run_event(run, "note", signals.FAST_FINISH.format(elapsed=elapsed, expected=run.expected_minutes))
    if run.state != RunState.EXITED:
        return
    if seen.exported:
        run.close_reason = ""
        move_run(run, RunState.EXPORTED, "Export sealed on the node")
        gaps = [str(gap)[:200] for gap in status.get("paperwork") or [] if isinstance(gap, str)][:10]
        if gaps:  # missing paperwork warns (DOMAIN §4): nothing it lacks can make a reported number wrong
            run_event(run, "alert", "Sealed with paperwork missing (recorded, not a failure): " + "; ".join(gaps))
    elif seen.quarantine_reason:
        run.close_reason = seen.quarantine_reason
        move_run(run, RunState.QUARANTINED, f"Attempt {run.attempt} quarantined: {run.close_reason}")
        _classify_failure(run, status, dead=seen.exit_code is None)
        _maybe_relaunch(run)


def _push_output(run: Run, seen: Observation, status: dict, pushed_until: int | None) -> None:
    text = seen.log_chunk
    if text and pushed_until is not None and seen.log_start < pushed_until:
        text = signals.strip_ansi(signals.beyond(status["log_chunk"], seen.log_start, pushed_until))
    lines = text.splitlines()[-200:]
    if lines:
        push_update(run, {"type": "log", "lines": lines, "attempt": run.attempt, "end": seen.log_offset})
    if seen.rows:
        push_update(run, {"type": "curve", "rows": seen.rows})


def do_note_node_error(run_pk: int, error: str) -> None:
    """The box answered but the wrapper failed there (a full disk, a broken interpreter): said once."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        if "node_error" in run.alerts:
            return
        run.alerts = [*run.alerts, "node_error"]
        run.save(update_fields=["alerts"])
        run_event(run, "alert", f"Node error (the box answers; this is not unreachability): {error[:300]}")


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
                run_event(run, "probe", f"Unreachable since {now:%Y-%m-%d %H:%M:%S} UTC: {error[:200]}")
                notices.announce(run, Event.RUN_UNREACHABLE, f"its box stopped answering at {now:%H:%M:%S} UTC")
