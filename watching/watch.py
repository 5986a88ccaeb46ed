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

from fleet import slurm_jobs
from fleet.models import Instance
from fleet.node_client import NodeClient
from node.protocol import NodeError
from node.transport import TransportError
from runs import multinode
from runs.actions.peers import do_observe_peers
from runs.actions.requeues import do_adopt_requeue
from runs.gpu_use import worth_writing
from runs.models import Run, RunState
from watching import leases
from watching.gpu_samples import do_record_gpu_use
from watching.observation import do_mark_unreachable, do_note_node_error, do_observe_run
from watching.push import Push

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
        dead, requeued = _apply(runs, answer, push)
        now = timezone.now()
        for run in runs:  # what nvidia-smi says of the run's GPUs: a fact kept, an idle streak judged
            if run.gpus and worth_writing(run, answer.get("gpus"), settings.GPU_SAMPLE_SECONDS, now):
                do_record_gpu_use(run.pk, answer.get("gpus"), now)
    for run in requeued:  # the attempt Slurm runs now: its spec, where the next probe reads it
        try:
            slurm_jobs.write_requeued_spec(node, run, run.attempt)
        except NodeError as exc:
            with database():
                do_note_node_error(run.pk, f"could not write the requeued attempt's spec: {exc}")
    for run in runs:  # a run over several boxes: its other boxes' nodes, each read and judged
        if "multinode" in (run.scheduler or {}):
            statuses = multinode.peer_statuses(run)  # no database connection held while the boxes answer
            with database():
                do_observe_peers(run.pk, run.attempt, statuses, thresholds()["stale_heartbeat"])
    for observed in dead:
        # No process and no marker: quarantine the attempt on the node (no connection held meanwhile);
        # the next tick closes it.
        try:
            node.abandon(observed)
        except NodeError as exc:  # the box answered: a node error (a full disk?), not unreachability
            with database():
                do_note_node_error(observed.pk, f"could not quarantine the dead attempt on the node: {exc}")


def _apply(runs: list[Run], answer: dict, push: Push | None) -> tuple[list[Run], list[Run]]:
    """Apply each run's answer: (the runs that look dead, the runs whose Slurm job was requeued)."""
    dead_runs, requeued = [], []
    for run in runs:
        status = answer["runs"].get(run.run_id)
        if not status:
            continue
        if "error" in status:  # the box answered for this run, but not with a status we can apply
            do_note_node_error(run.pk, f"the node's status of this run: {status['error']}")
            continue
        if status.get("requeued_to", 0) > run.attempt:  # Slurm runs the job again: the next tick reads that attempt
            requeued.append(do_adopt_requeue(run.pk, status["requeued_to"], status["scheduler"]["said"]))
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
    return dead_runs, requeued


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
    try:
        with database():
            if not leases.claim(instance_id, owner, settings.WATCH_LEASE_SECONDS):
                return "refused"
            instance = Instance.objects.select_related("project", "credential").get(pk=instance_id)
    except DatabaseError as exc:  # a claimed lease expires; beat arms a watcher again
        log.warning("watcher of instance %s could not start: %s", instance_id, exc)
        return "database unavailable"
    if spread:
        STOPPING.wait(random.uniform(0, settings.WATCH_TICK_SECONDS))
    return Watcher(instance, owner).run()


class Watcher:
    """The one watcher of a box while it holds the box's lease: a tick every WATCH_TICK_SECONDS reads
    the live runs, renews the lease, probes the box (through the push stream when it is open) and
    applies what it saw; a broken connection is dropped and re-opened with a jittered back-off."""

    def __init__(self, instance, owner: str):
        self.instance, self.owner = instance, owner
        self.deadline = time.monotonic() + settings.WATCH_LIFETIME_SECONDS
        self.node, self.unreachable_since = None, None
        self.failures, self.next_connect = 0, 0.0
        self.push = Push() if settings.WATCH_PUSH else None

    def run(self) -> str:
        reason = "lifetime"
        try:
            while time.monotonic() < self.deadline and not STOPPING.is_set():
                started = time.monotonic()
                reason = self.tick()
                if reason:
                    break
                self.rest(started)
            else:
                reason = "lifetime"
        finally:
            self.close(release=reason != "lease lost")
        return "worker stopping" if STOPPING.is_set() and reason == "lifetime" else reason

    def tick(self) -> str | None:
        """One tick; why the watcher ends, or None to go on."""
        instance_id = self.instance.pk
        # A tick that waits out a reconnect back-off opens nothing: only a real attempt is counted.
        connecting = self.node is None and time.monotonic() >= self.next_connect
        with database():
            runs = _live_runs_or_none(instance_id)
            held = bool(runs) and _renew(instance_id, self.owner, settings.WATCH_LEASE_SECONDS, connecting)
        if runs is None:  # the database did not answer: observe nothing, try again next tick
            return None
        if not runs:
            return "idle"
        if not held:
            return "lease lost"
        try:
            self.observe(runs, connecting)
        except LeaseLost:
            return "lease lost"
        except NodeError as exc:
            # The box answered, but our wrapper failed there: say so on the runs; the box is reachable.
            with database():
                for run in runs:
                    do_note_node_error(run.pk, str(exc))
        except TransportError as exc:
            self.broken(exc)
        except DatabaseError as exc:
            # The database is the truth: without it, observe nothing this tick and try again.
            log.warning("watcher of instance %s skipped a tick: %s", instance_id, exc)
        return None

    def observe(self, runs: list[Run], connecting: bool) -> None:
        instance_id, owner = self.instance.pk, self.owner
        if connecting:
            with database():  # the credential and its grant, read afresh for each connect
                opening = NodeClient(self.instance)
            self.node = opening.__enter__()  # the handshake, with no connection held
        if self.node is None:
            return
        tick(self.node, runs, lambda: leases.still_held(instance_id, owner, settings.WATCH_LEASE_SECONDS), self.push)
        self.failures = 0
        if self.push is not None:
            self.push.ensure(self.node, runs, self.deadline - time.monotonic())
        with database():
            self.unreachable_since = _reachable_again(instance_id, owner, self.unreachable_since)

    def broken(self, exc: TransportError) -> None:
        """Never wait on a broken connection: drop it and re-open it later, backing off up to four ticks
        so an unreachable box (or a flooded sshd) is not hammered every tick, jittered so the watchers
        of boxes behind one dropped link do not reconnect in step."""
        if self.node is not None:
            self.node.__exit__(None, None, None)
        if self.push is not None:
            self.push.close()  # its channel was on the connection that just broke
        self.node, self.failures = None, self.failures + 1
        backoff = settings.WATCH_TICK_SECONDS * min(2 ** (self.failures - 1), 4) * random.uniform(0.5, 1.0)
        self.next_connect = time.monotonic() + backoff
        with database():
            do_mark_unreachable(self.instance.pk, str(exc))
            if self.unreachable_since is None:
                self.unreachable_since = timezone.now()
                leases.set_unreachable(self.instance.pk, self.owner, self.unreachable_since)

    def rest(self, started: float) -> None:
        rest = max(0.0, settings.WATCH_TICK_SECONDS - (time.monotonic() - started))
        if self.push is not None and self.node is not None:
            self.push.wait(rest, STOPPING)  # an attempt that finished writing: probe now
        else:
            STOPPING.wait(rest)

    def close(self, release: bool) -> None:
        if self.push is not None:
            self.push.close()
        if self.node is not None:
            self.node.__exit__(None, None, None)
        if release:
            _release(self.instance.pk, self.owner)


def instances_needing_a_watcher() -> list[int]:
    """Instances with live runs whose lease is missing or expired."""
    live = Run.objects.filter(state__in=WATCHED).exclude(instance__watch_lease__expires_at__gte=timezone.now())
    return sorted(set(live.values_list("instance_id", flat=True)))
