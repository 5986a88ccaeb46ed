"""The control host's copy of a run's checkpoint, where its box has no durable tier.

The wrapper holds the newest checkpoint in the attempt's outbox, hashed on the box; the watcher asks
for it and a worker pulls it here with custody's machinery (one stream, hashed while it is written,
resumed from its `.partial` after a killed pull, renamed only on a match, at most
CUSTODY_PULL_MAX_RATE). What arrived is kept one copy per checkpoint name, plus whatever a pending
continuation is about to upload to its new box.
"""

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from node.pull import Pace, only_puller, pull_one

CONTROL = "control"  # durable_ckpt["target"] of copies on the control host


@dataclass(frozen=True)
class Held:
    """The outbox's checkpoint as pull_one reads an entry: its name there, bytes and SHA-256."""

    path: str
    bytes: int
    sha256: str


def control_dir(run) -> Path:
    return Path(settings.CKPT_CONTROL_ROOT) / run.project.slug / run.run_id


def pull_lock(directory: Path):
    """One pull per run at a time (a redelivered task beside a re-asked one): True when held."""
    return only_puller(directory / ".lock")


def incoming(directory: Path, sha256: str) -> Path:
    """Where one held checkpoint arrives: by its hash, so a resumed pull continues its own bytes only."""
    return directory / ".incoming" / sha256[:16]


def pull_held(node, pending: dict, directory: Path) -> Path:
    """The checkpoint the box holds (as the watcher asked for it) into incoming(): its path there."""
    # In the outbox under its hash (the wrapper's held_name), here under its own name.
    entry = Held(f"{pending['sha256'][:16]}-{pending['name']}", pending["bytes"], pending["sha256"])
    target = incoming(directory, entry.sha256)
    pull_one(node.transport, node.layout.ckpt_outbox, entry, target, Pace(settings.CUSTODY_PULL_MAX_RATE).advance)
    return target / entry.path


def store(arrived: Path, directory: Path, stored: str) -> None:
    os.replace(arrived, directory / stored)
    shutil.rmtree(arrived.parent, ignore_errors=True)


def prune(directory: Path, keep: set[str]) -> None:
    """Every stored copy but those named; arrivals in progress and the lock stay."""
    with contextlib.suppress(FileNotFoundError):
        for path in directory.iterdir():
            if path.is_file() and not path.name.startswith(".") and path.name not in keep:
                path.unlink(missing_ok=True)
