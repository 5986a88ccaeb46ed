"""What the control host tells a box about one attempt: the spec, typed. The control side builds it
(runs/box_spec.py, fleet/node_client.py) and writes `to_json`; every subcommand reads it back with `load`,
which names an unknown or a missing key rather than running on a guess. Its answers have their own
schema (node/protocol.py). Stdlib only: this module is part of the one file a box runs.
"""

import dataclasses
import json
from dataclasses import dataclass, field


class SpecError(ValueError):
    """A spec that is not what this wrapper reads: a key it does not know, one it needs and lacks."""


@dataclass(frozen=True)
class CkptMirror:
    """Checkpoints copied to the box's durable tier as they land (root None: the box has none)."""

    root: str | None
    target: str | None
    keep: int
    poll_seconds: float
    hold_seconds: float
    step_key: str | None  # read first, before the usual keys


@dataclass(frozen=True)
class Restore:
    """The durable checkpoints an attempt starts from: where they are, which files, and whether they are
    the control host's uploads (consumed there)."""

    files: list
    consume: bool = False
    source: str = ""  # "from" in JSON


@dataclass(frozen=True)
class Distributed:
    """torchrun on every node: the job's shape (Slurm), or this box's node of a run over several boxes."""

    nodes: int
    tasks_per_node: int
    timeout: int  # a collective's wait, seconds
    ifname: str | None = None  # the collectives' interface, named or measured
    node_rank: int = 0
    role: str = ""  # "head" or "peer" over several boxes
    master_addr: str = ""
    master_port: int = 0
    cpus_per_task: int | None = None  # each process's CPUs: its OMP threads (None: one)


@dataclass(frozen=True)
class BootRelaunch:
    """The box's start hook may start the attempt again after a restart, at most `max` more times."""

    max: int


@dataclass(frozen=True)
class Spec:
    # Where the run lives on the box (platforms/layout.NodeLayout).
    run_root: str
    active: str
    src: str
    ckpt: str
    output: str
    partial: str
    export: str
    quarantine_base: str
    cache: str
    # The attempt.
    run_id: str
    attempt: int
    scheduler: str | None  # "slurm": the job's requeues count as attempts, each with its own output
    distributed: Distributed | None
    argv: list
    cwd: str
    env: dict
    secrets: list  # the names the command gets its run secrets under (values only on put-secrets' stdin)
    hooks: dict  # the platform's and the box's hooks (wrapper/hooks.py)
    gpus: list
    gpus_at_preflight: dict | None  # whether nvidia-smi answered at preflight
    environment: str  # the interpreter's environment, "" for the box's own
    inputs: list  # [label, path]: what the command refuses to start without
    config: str
    manifest: str | None
    heartbeat_seconds: float
    stop_grace_seconds: float
    boot_marker: str
    smoke_timeout: float
    data_tier_path: str | None  # a declared tier, measured at preflight
    ckpt_mirror: CkptMirror
    restore: Restore | None
    dataset_files: dict | None
    trainer_files: dict | None  # the no-edit path: where the unchanged script leaves its files
    capsule: str  # "software" or "hardware": the export's contract at sealing
    boot_relaunch: BootRelaunch | None
    tree_mark: str = field(default="")  # set by the run itself: every process it starts carries it

    def to_json(self) -> str:
        return json.dumps(_plain(self), sort_keys=True)

    def but(self, **changes) -> "Spec":
        """The same spec with these fields changed (it is frozen: a run never edits the one it read)."""
        return dataclasses.replace(self, **changes)


PARTS = {"distributed": Distributed, "ckpt_mirror": CkptMirror, "restore": Restore, "boot_relaunch": BootRelaunch}
RENAMED = {"source": "from"}  # a field whose JSON name is a Python keyword


def _plain(value):
    if dataclasses.is_dataclass(value):
        return {RENAMED.get(f.name, f.name): _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _typed(kind, data, where: str):
    if not isinstance(data, dict):
        raise SpecError(f"{where}: an object, not {type(data).__name__}")
    names = {RENAMED.get(f.name, f.name): f for f in dataclasses.fields(kind)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise SpecError(f"{where}: {', '.join(unknown)} is not a key this wrapper reads")
    required = [key for key, f in names.items() if f.default is dataclasses.MISSING]
    missing = [key for key in required if key not in data]
    if missing:
        raise SpecError(f"{where}: {', '.join(missing)} missing")
    values = {}
    for key, value in data.items():
        name = names[key].name
        part = PARTS.get(name) if kind is Spec else None
        values[name] = _typed(part, value, f"{where}.{key}") if part and value is not None else value
    return kind(**values)


def spec_of(data) -> Spec:
    """The spec a JSON object says, or SpecError naming what is unknown or missing."""
    return _typed(Spec, data, "spec")


def local_spec(directory: str, argv: list) -> Spec:
    """The spec of a check run on this machine, not a box's attempt (`remotegpu check-export`): an export in
    directory judged as a software run's, its weights loaded by argv's interpreter."""
    paths = {key: directory for key in ("run_root", "active", "src", "ckpt", "output", "partial", "export")}
    plain = {"quarantine_base": directory, "cache": "", "run_id": "local", "attempt": 1, "scheduler": None}
    plain |= {"distributed": None, "argv": list(argv), "cwd": directory, "env": {}, "secrets": [], "hooks": {}}
    plain |= {"gpus": [], "gpus_at_preflight": None, "environment": "", "inputs": [], "config": "", "manifest": None}
    plain |= {"heartbeat_seconds": 10, "stop_grace_seconds": 30, "boot_marker": "", "smoke_timeout": 600}
    plain |= {"data_tier_path": None, "restore": None, "dataset_files": {}, "trainer_files": None}
    mirror = {"root": None, "target": None, "keep": 2, "poll_seconds": 5, "hold_seconds": 60, "step_key": None}
    return spec_of(paths | plain | {"ckpt_mirror": mirror, "capsule": "software", "boot_relaunch": None})
