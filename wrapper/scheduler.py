"""A run under Slurm (spec.scheduler == "slurm"): which attempt this is, where it writes, and the fence
that keeps an older attempt from sealing the export.

Slurm requeues a job in place (preemption, a node failure, a requeue by the product): the same batch
script runs again with SLURM_RESTART_COUNT set (unset on the first run), so the attempt is the launched
one plus that count. After a NODE_FAIL the old copy can still be running on the "dead" node while the
requeued one starts: each attempt writes its output under its own attempt directory, and an attempt that
finds a newer one started closes as superseded instead of sealing.
"""

import os

from .attempts import attempt_dir
from .digits import ascii_int
from .files import atomic_write, read

RESTARTS_LIMIT = 10_000  # a job requeued more often than this is not a count Slurm keeps (node/slurm.py)
CURRENT = "slurm-attempt"  # in active/: the newest attempt that started


def under_slurm(spec):
    return spec.scheduler == "slurm"


def placed(spec, environ=None):
    """The spec as this process runs it: under Slurm, the attempt counts the job's requeues (only the job's
    own processes see SLURM_RESTART_COUNT) and the output is the attempt's own."""
    if not under_slurm(spec):
        return spec
    restarts = (environ if environ is not None else os.environ).get("SLURM_RESTART_COUNT", "")
    spec = spec.but(attempt=spec.attempt + (ascii_int(restarts, RESTARTS_LIMIT) or 0))
    return spec.but(output=os.path.join(attempt_dir(spec), "output"))


def claim(spec):
    """This attempt is the newest that started (a requeued one claims over the one it replaces)."""
    if under_slurm(spec) and spec.attempt > (newest(spec) or 0):
        atomic_write(os.path.join(spec.active, CURRENT), f"{spec.attempt}\n")


def newest(spec):
    found = (read(os.path.join(spec.active, CURRENT)) or "").strip()
    return ascii_int(found)


def superseded(spec):
    """Why this attempt must not seal (a newer attempt of the job started), or None."""
    if not under_slurm(spec):
        return None
    current = newest(spec) or spec.attempt
    if current > spec.attempt:
        return f"superseded: Slurm requeued the job and attempt {current} runs now; this copy does not seal"
    return None
