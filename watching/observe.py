"""What one probe of a run means: a pure function of the run as we knew it, the node's status and
the thresholds. No database, no clock, no channel: `watching.observation.do_observe_run` applies the result.

Truth predicates (DOMAIN §3): finished = no process AND an exit marker (or a quarantine);
dead = no process AND no marker (and launched, and not exported); stalled = alive BUT nothing
written for stall_seconds; stale heartbeat = the wrapper lives but its heartbeat is old.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime

from runs import signals

PRESSURE = {"disk_pressure", "inode_pressure"}
CURVE_LIMIT = 5000


@dataclass(frozen=True)
class Snapshot:
    """The run as the database knew it before this probe (only what observation reads)."""

    state: str
    attempt: int
    health: str
    alerts: tuple[str, ...]
    log_offset: int
    csv_offset: int
    csv_header: list[str] | None
    stall_seconds: float
    ran: dict | None = None

    @classmethod
    def of(cls, run) -> "Snapshot":
        return cls(
            state=run.state,
            attempt=run.attempt,
            health=run.health,
            alerts=tuple(run.alerts),
            log_offset=run.log_offset,
            csv_offset=run.csv_offset,
            csv_header=run.last_status.get("csv_header"),
            stall_seconds=run.stall_seconds,
            ran=run.env_identity.get("ran"),
        )


@dataclass
class Observation:
    applies: bool
    reachable_again: bool = False
    log_chunk: str = ""
    log_start: int = 0  # where log_chunk starts in the node's log.txt (0 after the file was replaced)
    log_offset: int = 0
    csv_offset: int = 0
    csv_header: list[str] | None = None
    rows: list[dict] = field(default_factory=list)
    ran: dict | None = None  # set only when the node reports a new one
    heartbeat_at: datetime | None = None
    heartbeat_age: float | None = None
    alerts: list[str] = field(default_factory=list)  # the run's alerts after this probe, kept ones first
    new_alerts: list[str] = field(default_factory=list)  # material: each becomes an event
    health: str = "ok"
    alive: bool = False
    finished: bool = False
    dead: bool = False
    exit_code: int | None = None
    exported: bool = False
    quarantine_reason: str = ""


def continued(curve: list[dict], rows: list[dict]) -> list[dict]:
    """The curve with rows appended. A row at a step (or epoch) the curve already has replaces that
    point and what follows it: a relaunched attempt logs again from where it resumed (its train.csv is
    read from the start), and the curve stays one line across attempts and boxes."""
    curve = list(curve)
    for row in rows:
        key = "step" if "step" in row else "epoch" if "epoch" in row else None
        while key and curve and key in curve[-1] and curve[-1][key] >= row[key]:
            curve.pop()
        curve.append(row)
    return curve


def _log_start(snapshot: Snapshot, status: dict) -> int:
    """Where the chunk starts: the node says (0 after a replaced file), or where we asked from."""
    start = status.get("log_start")
    if isinstance(start, int) and not isinstance(start, bool) and 0 <= start <= status["log_offset"]:
        return start
    return snapshot.log_offset


def _chunks(snapshot: Snapshot, status: dict) -> tuple[str, int, int, str, int]:
    # A chunk read from an offset we have since moved past was already applied: skip it.
    log_chunk, log_offset, csv_chunk, csv_offset = "", snapshot.log_offset, "", snapshot.csv_offset
    log_start = snapshot.log_offset
    if status.get("log_from", snapshot.log_offset) == snapshot.log_offset:
        log_chunk, log_offset = signals.strip_ansi(status["log_chunk"]), status["log_offset"]
        log_start = _log_start(snapshot, status)
    if status.get("csv_from", snapshot.csv_offset) == snapshot.csv_offset:
        csv_chunk, csv_offset = status["csv_chunk"], status["csv_offset"]
    return log_chunk, log_start, log_offset, csv_chunk, csv_offset


def _signals(snapshot: Snapshot, status: dict, log_chunk: str, alive: bool, thresholds: dict) -> set[str]:
    found = set(signals.log_signals(log_chunk))
    node_now = status["now"]
    newest = max(filter(None, [status.get("log_mtime"), status.get("ckpt_mtime")]), default=None)
    if alive and newest is not None and node_now - newest > snapshot.stall_seconds:
        found.add("stalled")
    heartbeat = status.get("heartbeat_at")
    if status["wrapper_alive"] and heartbeat and node_now - heartbeat > thresholds["stale_heartbeat"]:
        found.add("stale_heartbeat")
    return found


def _pressure(status: dict, thresholds: dict) -> set[str]:
    space = status.get("space")
    keys = ("free_bytes", "total_bytes", "free_inodes", "total_inodes")
    if not isinstance(space, dict) or not all(isinstance(space.get(key), int) for key in keys):
        return set()  # a box that does not say how full it is raises no pressure alert (nor a crash)
    return signals.pressure(space, thresholds["min_free_bytes"], thresholds["min_free_fraction"])


def _health(snapshot: Snapshot, found: set[str], alive: bool) -> str:
    if "stalled" in found:
        return "stalled"
    if alive or snapshot.health == "unreachable":  # it answered: no longer unreachable
        return "ok"
    return snapshot.health or "ok"


def observe(snapshot: Snapshot, status: dict, thresholds: dict) -> Observation:
    """What this probe says about the run; `applies` is False for a run not being watched or an old attempt."""
    if snapshot.state not in ("running", "exited") or status.get("attempt") != snapshot.attempt:
        return Observation(applies=False)
    alive = status["wrapper_alive"] or status["child_alive"]
    log_chunk, log_start, log_offset, csv_chunk, csv_offset = _chunks(snapshot, status)
    header, rows = signals.parse_csv_rows(snapshot.csv_header, csv_chunk)
    found = _signals(snapshot, status, log_chunk, alive, thresholds)
    pressure = _pressure(status, thresholds)
    # Pressure re-arms when it clears, so a new crossing is news again.
    kept = [name for name in snapshot.alerts if name not in PRESSURE or name in pressure]
    new = sorted((found | pressure) - set(kept))
    finished = not alive and (status["exit_code"] is not None or bool(status.get("quarantine_reason")))
    heartbeat = status.get("heartbeat_at")
    return Observation(
        applies=True,
        reachable_again=snapshot.health == "unreachable",
        log_chunk=log_chunk,
        log_start=log_start,
        log_offset=log_offset,
        csv_offset=csv_offset,
        csv_header=header,
        rows=rows,
        ran=status["ran"] if status.get("ran") and snapshot.ran != status["ran"] else None,
        heartbeat_at=datetime.fromtimestamp(heartbeat, tz=UTC) if heartbeat else None,
        heartbeat_age=status["now"] - heartbeat if heartbeat else None,
        alerts=kept + new,
        new_alerts=new,
        health=_health(snapshot, found, alive),
        alive=alive,
        finished=finished,
        dead=not alive and not finished and status["launched"] and not status["exported"],
        exit_code=status["exit_code"],
        exported=status["exported"],
        quarantine_reason=status.get("quarantine_reason") or "",
    )
