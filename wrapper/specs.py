"""A spec as a subcommand runs it: read from its file, its paths expanded, and placed for the scheduler
that runs it (scheduler.placed: under Slurm, the requeued attempt and its own output)."""

import json

from .files import expand
from .scheduler import placed


def load_spec(path):
    with open(path) as handle:
        spec = json.load(handle)
    for key in ("run_root", "active", "src", "cwd", "ckpt", "output", "partial", "export", "quarantine_base"):
        spec[key] = expand(spec[key])
    return placed(spec)
