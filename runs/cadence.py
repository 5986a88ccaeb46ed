"""Checkpoint cadence advice: W = √(2·μ·C) (Young's formula) for interruptible capacity.

μ is the profile's mean time between interruptions of one box, divided by the run's node count (an
N-node run is interrupted N times as often, whichever node is hit: Young/Daly); C is the time to write
one checkpoint: the size of the run's first real checkpoint (read back by the checkpoint mirror), or its
declared size until one was written, at the write speed measured on the node at preflight. Where the run
logs how long each step (or epoch) takes, W is rounded down to whole steps: a checkpoint lands at a step
boundary anyway.
"""

import math
import statistics
from dataclasses import dataclass

# Curve columns that say how long one logged step took, in seconds (tinyfit logs `seconds` per epoch).
STEP_TIME_KEYS = ("step_seconds", "epoch_seconds", "seconds", "step_time")
STEP_TIME_ROWS = 20  # the newest rows the step time is the median of


@dataclass(frozen=True)
class Cadence:
    interval_minutes: float
    write_seconds: float
    mtbi_hours: float
    checkpoint_bytes: int
    measured_size: bool  # C from the first checkpoint the run wrote, not its declared size
    step_seconds: float | None = None
    steps: int | None = None  # W in whole steps, where the run logs its step time
    nodes: int = 1  # the boxes or cluster nodes the run trains on: μ is one box's over this


def checkpoint_environment(run) -> dict[str, str]:
    """What the command is told of its cadence: REMOTEGPU_CHECKPOINT_EVERY_S, whole seconds (and, where
    its step time is known, REMOTEGPU_CHECKPOINT_EVERY_STEPS), when the platform interrupts (nothing
    where it does not: a checkpoint per epoch, as the examples do)."""
    cadence = cadence_for(run)
    if cadence is None:
        return {}
    env = {"REMOTEGPU_CHECKPOINT_EVERY_S": str(max(1, int(cadence.interval_minutes * 60)))}
    if cadence.steps:
        env["REMOTEGPU_CHECKPOINT_EVERY_STEPS"] = str(cadence.steps)
    return env


def step_seconds(curve) -> float | None:
    """The median time of the run's newest logged steps, from the first step-time column it logs."""
    for key in STEP_TIME_KEYS:
        values = []
        for row in (curve or [])[-STEP_TIME_ROWS:]:
            try:
                value = float(row.get(key))
            except (TypeError, ValueError, AttributeError):
                continue
            if math.isfinite(value) and value > 0:
                values.append(value)
        if values:
            return statistics.median(values)
    return None


def node_count(run) -> int:
    """How many boxes (or cluster nodes) the run trains on: any of them interrupted stops it."""
    if run.is_multinode:
        return 1 + (run.peers.count() if run.pk else 0)
    nodes = run.slurm_options.get("nodes") if isinstance(run.slurm_options, dict) else None
    return nodes if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 1 else 1


def cadence_for(run) -> Cadence | None:
    spot = run.instance.profile.data["billing"]["spot"]
    mtbi = spot.get("mtbi_hours")
    first = (run.ckpt_mirror or {}).get("first_written") or {}
    size = first.get("bytes") or run.checkpoint_bytes
    if not (spot["available"] and mtbi and run.write_bytes_per_second and size):
        return None
    write_seconds, nodes = size / run.write_bytes_per_second, node_count(run)
    interval = math.sqrt(2 * (mtbi / nodes) * 3600 * write_seconds)
    step, steps = step_seconds(run.curve), None
    if step:
        steps = max(1, int(interval // step))
        interval = steps * step
    return Cadence(interval / 60, write_seconds, mtbi, size, bool(first.get("bytes")), step, steps, nodes)
