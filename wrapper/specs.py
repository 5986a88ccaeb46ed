"""A spec as a subcommand runs it: read from its file (wrapper/contract.py: typed, strict), its paths
expanded, and placed for the scheduler that runs it (scheduler.placed: under Slurm, the requeued attempt and
its own output)."""

import json

from .contract import spec_of
from .files import expand
from .scheduler import placed

PATHS = ("run_root", "active", "src", "cwd", "ckpt", "output", "partial", "export", "quarantine_base")


def load_spec(path):
    with open(path) as handle:
        spec = spec_of(json.load(handle))
    return placed(spec.but(**{key: expand(getattr(spec, key)) for key in PATHS}))
