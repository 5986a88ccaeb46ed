"""The other boxes' nodes of a run over several boxes, as the run's watcher reads them each tick.

A node whose wrapper ended with a failure, whose processes are gone with no exit marker, or whose box has
not answered for longer than a heartbeat can be stale, fails the whole attempt with the node named:
every node is stopped (no orphan trains on), and rank 0's attempt closes with that reason.
"""

from django.db import transaction
from django.utils import timezone

from core.enqueue import after_commit
from runs.actions.base import lock_run, run_event
from runs.models import RunPeer, RunState

KEPT = ("launched", "wrapper_alive", "child_alive", "exit_code", "heartbeat_at", "now", "quarantine_reason")


def failure_of(status: dict, since_unreachable: float | None, stale_after: float) -> str:
    """Why this node has failed the attempt, or ""."""
    if "unreachable" in status:
        if since_unreachable is not None and since_unreachable > stale_after:
            return f"its box has not answered for {since_unreachable:.0f} s ({status['unreachable'][:160]})"
        return ""
    code = status.get("exit_code")
    if code not in (None, 0):
        said = status.get("quarantine_reason") or f"command exited with code {code}"
        return said[:400]
    if status.get("launched") and not status.get("wrapper_alive") and code is None:
        return "dead: its wrapper is gone and wrote no exit marker"
    beat, now = status.get("heartbeat_at"), status.get("now")
    if status.get("wrapper_alive") and beat and now and now - beat > stale_after:
        return f"its heartbeat is {now - beat:.0f} s old"
    return ""


def do_observe_peers(run_pk: int, attempt: int, statuses: dict, stale_after: float) -> str:
    """Each node's word kept (for the run page); the first failure found fails the attempt (every node
    stopped, rank 0's attempt closed with it). Returns that failure, or ""."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        if run.attempt != attempt or run.state != RunState.RUNNING:
            return ""
        now, failed = timezone.now(), ""
        for peer in RunPeer.objects.select_for_update().filter(run=run).select_related("instance"):
            status = statuses.get(peer.rank) or {"unreachable": "not asked"}
            kept = {key: status[key] for key in KEPT if key in status}
            kept["log_tail"] = str(status.get("log_tail") or "")[-2000:]
            if "unreachable" in status:
                kept = {**peer.last_status, "unreachable": status["unreachable"]}
                kept.setdefault("unreachable_since", now.timestamp())
            since = now.timestamp() - kept["unreachable_since"] if "unreachable_since" in kept else None
            peer.last_status, peer.probed_at = kept | {"attempt": attempt}, now
            peer.save(update_fields=["last_status", "probed_at"])
            why = failure_of(status, since, stale_after)
            if why and not failed:
                failed = f"node {peer.instance.name} (rank {peer.rank}): {why}"
        if failed and ((run.scheduler or {}).get("node_failure") or {}).get("attempt") != attempt:
            run.scheduler = {**run.scheduler, "node_failure": {"attempt": attempt, "said": failed}}
            run.save(update_fields=["scheduler"])
            run_event(run, "note", f"A node failed: {failed}; every node of attempt {attempt} is stopped")
            after_commit("runs.tasks.fail_run_nodes", run.pk, attempt, failed)
    return failed


def ended_ago(status: dict) -> float | None:
    """How long ago the node's command last wrote its log, by its own box's clock (boxes' clocks differ:
    each is compared with its own)."""
    now, last = status.get("now"), status.get("log_mtime")
    return now - last if isinstance(now, int | float) and isinstance(last, int | float) else None


def first_failed(head: dict, statuses: dict, names: dict) -> str:
    """The other box's node that failed before rank 0's attempt ended (by more than a second), or that
    holds a stopped process (a frozen peer rank 0 timed out waiting for), named; "" when rank 0 failed
    first (the others then failed because it had gone)."""
    head_ago = ended_ago(head) or 0.0
    found = []
    for rank, status in sorted(statuses.items()):
        if status.get("stopped_processes"):
            return f"node {names[rank]} (rank {rank}): a process of it was stopped (SIGSTOP), a frozen peer"
        why = failure_of(status, None, float("inf"))
        ago = ended_ago(status)
        if why and ago is not None and ago > head_ago + 1:
            found.append((ago, f"node {names[rank]} (rank {rank}): {why}"))
    return max(found)[1] if found else ""


def do_name_failed_node(run_pk: int, attempt: int, said: str) -> None:
    """Rank 0's attempt failed after another box's node had: the run's reason names that node first."""
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        if run.attempt != attempt or run.state != RunState.QUARANTINED or run.close_reason.startswith("a node of"):
            return
        run.close_reason = f"a node of the run failed: {said}; rank 0 then: {run.close_reason}"[:4000]
        run.failure_class = "node_failed"
        run.save(update_fields=["close_reason", "failure_class"])
        run_event(run, "failure", f"A node failed first: {said}", failure_class="node_failed")
