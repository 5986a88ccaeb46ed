"""Checkpoint cadence advice: W = √(2·μ·C) (Young's formula) for interruptible capacity.

μ is the profile's mean time between interruptions; C is the time to write one checkpoint,
from the run's declared checkpoint size and the write speed measured on the node at preflight.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Cadence:
    interval_minutes: float
    write_seconds: float
    mtbi_hours: float


def checkpoint_environment(run) -> dict[str, str]:
    """What the command is told of its cadence: REMOTEGPU_CHECKPOINT_EVERY_S, whole seconds, when the
    platform interrupts (nothing where it does not: a checkpoint per epoch, as the examples do)."""
    cadence = cadence_for(run)
    if cadence is None:
        return {}
    return {"REMOTEGPU_CHECKPOINT_EVERY_S": str(max(1, int(cadence.interval_minutes * 60)))}


def cadence_for(run) -> Cadence | None:
    spot = run.instance.profile.data["billing"]["spot"]
    mtbi = spot.get("mtbi_hours")
    if not (spot["available"] and mtbi and run.write_bytes_per_second and run.checkpoint_bytes):
        return None
    write_seconds = run.checkpoint_bytes / run.write_bytes_per_second
    interval = math.sqrt(2 * mtbi * 3600 * write_seconds)
    return Cadence(interval / 60, write_seconds, mtbi)
