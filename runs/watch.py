"""The watcher of one instance's live runs: a lease, one combined probe per tick, a bounded life.

It lives in the worker fleet. It never decides from a log line alone, never retries a run, and
treats a failed probe as "unreachable", which changes no run's state.
"""

import contextlib
import logging
import random
import threading
import time

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from profiles.models import Instance
from profiles.node.client import NodeClient
from profiles.node.protocol import NodeError
from profiles.node.transport import TransportError
from runs import leases
from runs.actions.observation import do_mark_unreachable, do_note_node_error, do_observe_run
from runs.models import Run, RunState
from runs.push import Push

WATCHED = (RunState.RUNNING, RunState.EXITED)
log = logging.getLogger(__name__)
# Set when this worker process shuts down (runs/tasks.py): every watcher in it stops within a moment
# and releases its lease, so a restart or deploy neither waits out their lifetimes nor leaves them.
STOPPING = threading.Event()
DATABASE_SLOTS = threading.BoundedSemaphore(settings.WATCH_DB_CONNECTIONS)


def thresholds() -> dict:
    return {
        "stale_heartbeat": 3 * settings.RUN_HEARTBEAT_SECONDS + 2 * settings.WATCH_TICK_SECONDS,
        "min_free_bytes": settings.PRESSURE_MIN_FREE_BYTES,
        "min_free_fraction": settings.PRESSURE_MIN_FREE_FRACTION,
    }


def live_runs(instance_id: int) -> list[Run]:
    return list(
        Run.objects.select_related("project", "instance")
        .filter(instance_id=instance_id, state__in=WATCHED)
        .order_by("pk")
    )


class LeaseLost(Exception):
    """Another watcher took over while this one waited on the box: its answer is not applied."""


@contextlib.contextmanager
def database():
    """One of this process's WATCH_DB_CONNECTIONS slots, its connection closed when the block ends.

    Watchers spend their lives waiting on boxes and touch the database in short bursts: bounded
    here, a hundred of them in two workers need a few connections, not a hundred (at 500 runs they
    ran PostgreSQL, max_connections 100, out of connections and every watcher failed to start)."""
    with DATABASE_SLOTS:
        try:
            yield
        finally:
            with contextlib.suppress(DatabaseError):  # a broken connection is dropped all the same
                connection.close()


def tick(node: NodeClient, runs: list[Run], still_mine=lambda: True, push: Push | None = None) -> None:
    """One combined probe for every live run on the node, then apply each answer (if still ours).
    No database connection is held while the box answers (seconds, on a loaded box)."""
    answer = node.probe(runs, stream=push)
    with database():
        if not still_mine():
            raise LeaseLost
        dead = _apply(runs, answer, push)
    for observed in dead:
        # No process and no marker: quarantine the attempt on the node (no connection held meanwhile);
        # the next tick closes it.
        try:
            node.abandon(observed)
        except NodeError as exc:  # the box answered: a node error (a full disk?), not unreachability
            with database():
                do_note_node_error(observed.pk, f"could not quarantine the dead attempt on the node: {exc}")


def _apply(runs: list[Run], answer: dict, push: Push | None) -> list[Run]:
    """Apply each run's answer; the runs that look dead."""
    dead_runs = []
    for run in runs:
        status = answer["runs"].get(run.run_id)
        if not status:
            continue
        if "error" in status:  # the box answered for this run, but not with a status we can apply
            do_note_node_error(run.pk, f"the node's status of this run: {status['error']}")
            continue
        if push is None:
            observed, dead = do_observe_run(run.pk, status, thresholds())
        else:
            with push.lock:  # the push reader forwards nothing of this run while its probe is applied
                observed, dead = do_observe_run(run.pk, status, thresholds(), push.until(run))
                if observed.attempt == run.attempt:
                    push.sent_to(run, observed.log_offset)  # the probe sent the rest of its chunk to the pages
        if dead:
            dead_runs.append(observed)
    return dead_runs


def _renew(instance_id: int, owner: str, seconds: float, connected: bool) -> bool:
    try:
        return leases.renew(instance_id, owner, seconds, connected=connected)
    except DatabaseError as exc:
        log.warning("watcher of instance %s could not renew its lease: %s", instance_id, exc)
        return False


def _live_runs_or_none(instance_id: int) -> list[Run] | None:
    try:
        return live_runs(instance_id)
    except DatabaseError as exc:
        log.warning("watcher of instance %s skipped a tick: %s", instance_id, exc)
        return None


def _release(instance_id: int, owner: str) -> None:
    try:
        with database():
            leases.release(instance_id, owner)
    except DatabaseError as exc:  # it expires within a lease; beat arms a watcher again
        log.warning("watcher of instance %s could not release its lease: %s", instance_id, exc)


def _reachable_again(instance_id: int, owner: str, since):
    if since is not None:
        leases.set_unreachable(instance_id, owner, None)
    return None


def watch_instance(instance_id: int, owner: str, spread: bool = True) -> str:
    """Watch until the lifetime ends or nothing is live; returns why it stopped.

    spread: wait a random part of a tick first (watchers armed together would tick together); a
    watcher re-armed at the end of its predecessor's life is already out of step with the others."""
    lease_seconds = settings.WATCH_LEASE_SECONDS
    try:
        with database():
            if not leases.claim(instance_id, owner, lease_seconds):
                return "refused"
            instance = Instance.objects.select_related("project", "credential").get(pk=instance_id)
    except DatabaseError as exc:  # a claimed lease expires; beat arms a watcher again
        log.warning("watcher of instance %s could not start: %s", instance_id, exc)
        return "database unavailable"
    deadline = time.monotonic() + settings.WATCH_LIFETIME_SECONDS
    node, reason, unreachable_since = None, "lifetime", None
    failures, next_connect = 0, 0.0
    push = Push() if settings.WATCH_PUSH else None
    if spread:
        STOPPING.wait(random.uniform(0, settings.WATCH_TICK_SECONDS))
    try:
        while time.monotonic() < deadline and not STOPPING.is_set():
            started = time.monotonic()
            # A tick that waits out a reconnect back-off opens nothing: only a real attempt is counted.
            connecting = node is None and time.monotonic() >= next_connect
            with database():
                runs = _live_runs_or_none(instance_id)
                held = bool(runs) and _renew(instance_id, owner, lease_seconds, connecting)
            if runs is None:  # the database did not answer: observe nothing, try again next tick
                STOPPING.wait(settings.WATCH_TICK_SECONDS)
                continue
            if not runs:
                reason = "idle"
                break
            if not held:
                reason = "lease lost"
                break
            try:
                if connecting:
                    with database():  # the credential and its grant, read afresh for each connect
                        opening = NodeClient(instance)
                    node = opening.__enter__()  # the handshake, with no connection held
                if node is not None:
                    tick(node, runs, lambda: leases.still_held(instance_id, owner, lease_seconds), push)
                    failures = 0
                    if push is not None:
                        push.ensure(node, runs, deadline - time.monotonic())
                    with database():
                        unreachable_since = _reachable_again(instance_id, owner, unreachable_since)
            except LeaseLost:
                reason = "lease lost"
                break
            except NodeError as exc:
                # The box answered, but our wrapper failed there: say so on the runs; the box is reachable.
                with database():
                    for run in runs:
                        do_note_node_error(run.pk, str(exc))
            except TransportError as exc:
                # Never wait on a broken connection: drop it and re-open it later, backing off up to
                # four ticks so an unreachable box (or a flooded sshd) is not hammered every tick,
                # jittered so the watchers of boxes behind one dropped link do not reconnect in step.
                if node is not None:
                    node.__exit__(None, None, None)
                if push is not None:
                    push.close()  # its channel was on the connection that just broke
                node, failures = None, failures + 1
                backoff = settings.WATCH_TICK_SECONDS * min(2 ** (failures - 1), 4) * random.uniform(0.5, 1.0)
                next_connect = time.monotonic() + backoff
                with database():
                    do_mark_unreachable(instance_id, str(exc))
                    if unreachable_since is None:
                        unreachable_since = timezone.now()
                        leases.set_unreachable(instance_id, owner, unreachable_since)
            except DatabaseError as exc:
                # The database is the truth: without it, observe nothing this tick and try again.
                log.warning("watcher of instance %s skipped a tick: %s", instance_id, exc)
            rest = max(0.0, settings.WATCH_TICK_SECONDS - (time.monotonic() - started))
            if push is not None and node is not None:
                push.wait(rest, STOPPING)  # an attempt that finished writing: probe now
            else:
                STOPPING.wait(rest)
    finally:
        if push is not None:
            push.close()
        if node is not None:
            node.__exit__(None, None, None)
        if reason != "lease lost":
            _release(instance_id, owner)
    return "worker stopping" if STOPPING.is_set() and reason == "lifetime" else reason


def instances_needing_a_watcher() -> list[int]:
    """Instances with live runs whose lease is missing or expired."""
    live = Run.objects.filter(state__in=WATCHED).exclude(instance__watch_lease__expires_at__gte=timezone.now())
    return sorted(set(live.values_list("instance_id", flat=True)))
