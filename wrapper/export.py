"""Closing an attempt: validate the export, check best.pth loads, seal it or quarantine the attempt."""

import json
import os
import shutil
import subprocess
import sys

from .attempts import attempt_dir, quarantine_dir
from .declared import build_export
from .environment import argv_in_environment
from .files import DISK_FULL, RESERVE, atomic_write, durable_write, sha256_file
from .hardware import hardware_problem
from .roster import roster_of, sealed_roster_path
from .run_secrets import remove_secrets
from .weights import plainly_loads

REQUIRED_EXPORT = ("run.json", "config.yaml", "best.pth")
# Paperwork: its absence cannot make a reported number wrong (the metrics are recomputed from the
# predictions), so it is sealed with the gap recorded (paperwork.json beside the attempt), never
# quarantined as a contract failure (DOMAIN §4: missing paperwork warns).
PAPERWORK = ("train.csv",)
PAPERWORK_FILE = "paperwork.json"


FORBIDDEN_EXPORT = ("latest.pth",)


# The canonical tree (artifact-layout.md): no top-level config/, data/, results/ or vis/ (they belong
# under test/<id>/ or in run.json's bindings), and no status sentinels: the atomic rename is the signal.
FORBIDDEN_TOP = ("config", "data", "results", "vis", "COMPLETE.json", "MANIFEST.json")


# One interpreter start (torch's import is seconds of CPU): exit 3 when this python has no torch.
NO_TORCH = 3


LOAD_CHECK = (
    "import sys\n"
    "try:\n"
    "    import torch\n"
    "except ImportError:\n"
    f"    sys.exit({NO_TORCH})\n"
    "torch.load(sys.argv[1], map_location='cpu', weights_only=True)\n"
    "print('loaded')\n"
)


# A seal refused for the export's own shape starts its reason with this: the control side classes it as
# a contract failure (every problem listed at once, never retried: the same script fails the same way).
CONTRACT = "export contract not met"


def validate_export(spec, partial):
    """Why the staged export may not be sealed (every problem found, one reason), or None."""
    problems = export_problems(spec, partial)
    return contract_reason(problems) if problems else None


def contract_reason(problems):
    """The one wording of a seal refused for the export's shape: the control side keys on CONTRACT."""
    return "{} ({} problem{}): {}".format(
        CONTRACT, len(problems), "" if len(problems) == 1 else "s", "; ".join(problems)
    )


def export_problems(spec, partial):
    """Every rule of the export contract the staged export breaks (docs/contract.md)."""
    if spec.capsule == "hardware":
        return [p for p in (hardware_problem(partial), dataset_bytes_problem(spec, partial)) if p]
    best = os.path.join(partial, "best.pth")
    problems = [f"required file {name} is missing" for name in REQUIRED_EXPORT if not _is_file(partial, name)]
    problems += [
        f"{name} is not allowed at the top of an export (the canonical layout has none)"
        for name in FORBIDDEN_TOP
        if os.path.lexists(os.path.join(partial, name))
    ]
    problems += filter(None, [dataset_bytes_problem(spec, partial)])
    for directory, _dirs, files in os.walk(partial):
        for name in sorted(files):
            if name in FORBIDDEN_EXPORT:
                problems.append(
                    f"{os.path.relpath(os.path.join(directory, name), partial)} is forbidden inside an export"
                )
    tests = os.path.join(partial, "test")
    if os.path.isdir(tests):
        for test_id in sorted(os.listdir(tests)):
            for name in ("metrics.json", "results.parquet"):
                if not _is_file(tests, test_id, name):
                    problems.append(f"test/{test_id}/{name} is missing")
    if os.path.isfile(best):
        problems += filter(None, [check_best_loads(spec, best)])
    return problems


def paperwork_gaps(partial):
    """What the staged export lacks that cannot make a number wrong: said, sealed without it."""
    return [f"{name} is missing: sealed without it" for name in PAPERWORK if not _is_file(partial, name)]


def _is_file(*parts):
    return os.path.isfile(os.path.join(*parts))


def frozen_problem(spec):
    """A last.pth that is a link to another file (ckpt/'s latest, say) may still change after sealing."""
    last = os.path.join(spec.output, "last.pth")
    if os.path.islink(last):
        return "last.pth is a symbolic link: an export holds a frozen copy, never a link"
    if os.path.isfile(last) and os.stat(last).st_nlink > 1:
        return "last.pth is a hard link to a file that may still change: save a frozen copy"
    return None


def dataset_bytes_problem(spec, partial):
    """An export file with the bytes of one of the run's dataset files (its size, then its SHA-256)."""
    wanted = spec.dataset_files or {}
    sizes = set(wanted.values())
    if not sizes:
        return None
    for directory, _dirs, names in os.walk(partial):
        for name in names:
            path = os.path.join(directory, name)
            if os.path.getsize(path) in sizes and sha256_file(path) in wanted:
                relative = os.path.relpath(path, partial)
                return f"{relative} holds the bytes of a dataset file: an export never contains dataset bytes"
    return None


def check_best_loads(spec, best):
    if plainly_loads(best):
        return None  # plain tensors in plain containers, read without torch's import (weights.py)
    # Use the run's own interpreter when it is a python: it is the one that has torch.
    argv0 = argv_in_environment(spec)[0]
    python = argv0 if os.path.basename(argv0).startswith("python") else sys.executable
    try:
        done = subprocess.run(
            [python, "-c", LOAD_CHECK, best], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode == NO_TORCH:
        return None  # torch unavailable on the node: the custody readback loads it later
    if done.returncode != 0:
        return "best.pth does not load with weights_only=True: {}".format(done.stdout.decode(errors="replace")[-500:])
    return None


def stage_export(spec, partial):
    """Copy output/ into the staging directory file by file, so a full disk raises its own errno."""
    if os.path.exists(partial):
        shutil.rmtree(partial)
    source = spec.output
    for directory, _dirs, names in os.walk(source):
        target = os.path.join(partial, os.path.relpath(directory, source))
        os.makedirs(target, exist_ok=True)
        for name in names:
            shutil.copy2(os.path.join(directory, name), os.path.join(target, name), follow_symlinks=False)


def quarantine(spec, reason):
    remove_secrets(spec)  # a quarantined attempt never starts again: its secrets go first
    target = quarantine_dir(spec)
    source = attempt_dir(spec)
    reserve = os.path.join(source, RESERVE)
    try:
        os.makedirs(target, exist_ok=True)
    except OSError as exc:
        if exc.errno not in DISK_FULL or not os.path.isdir(os.path.join(reserve, "quarantine")):
            raise
        os.rename(os.path.join(reserve, "quarantine"), target)  # no new inode: the reserved directory
    if os.path.exists(spec.partial):
        os.replace(spec.partial, os.path.join(target, "export-partial"))
    # The attempt (log, markers) moves; checkpoints stay in active/ so an identical retry resumes.
    for name in sorted(os.listdir(source)):
        if name != RESERVE:
            os.replace(os.path.join(source, name), os.path.join(target, name))
    durable_write(os.path.join(target, "reason.txt"), reason.strip() + "\n", os.path.join(reserve, "reason.txt"))
    shutil.rmtree(reserve, ignore_errors=True)
    os.rmdir(source)


def closeout(spec):
    """Seal the export, or say why not; a full disk is a reason (disk_full), never the wrapper's death."""
    try:
        return seal(spec)
    except OSError as exc:
        shutil.rmtree(spec.partial, ignore_errors=True)  # our own staging: give the space back
        if exc.errno in DISK_FULL:
            return "disk_full: {} while sealing the export ({})".format(os.strerror(exc.errno), exc.filename or "")
        return f"closeout failed: {exc}"
    except ValueError as exc:  # e.g. a symlink in the output: never sealed
        shutil.rmtree(spec.partial, ignore_errors=True)
        return f"closeout failed: {exc}"


def seal(spec):
    if os.path.exists(spec.export):
        return f"export/{spec.run_id} is already sealed; changed bytes need a new run id"
    problems = build_export(spec, os.path.join(attempt_dir(spec), "log.txt"))  # the no-edit path, if declared
    if problems:
        return contract_reason(problems)
    if not os.path.isdir(spec.output):
        return contract_reason([f"the command wrote nothing to $REMOTEGPU_OUTPUT_DIR ({spec.output})"])
    problem = frozen_problem(spec)
    if problem:
        return contract_reason([problem])
    stage_export(spec, spec.partial)
    problem = validate_export(spec, spec.partial)
    if problem:
        return problem
    gaps = paperwork_gaps(spec.partial)
    os.makedirs(attempt_dir(spec), exist_ok=True)
    atomic_write(os.path.join(attempt_dir(spec), PAPERWORK_FILE), json.dumps(gaps))
    # The roster as sealed: later custody checks compare the export against it byte for byte.
    atomic_write(sealed_roster_path(spec), json.dumps(roster_of(spec.partial)))
    os.makedirs(os.path.dirname(spec.export), exist_ok=True)  # export/hardware/ for a capsule
    os.rename(spec.partial, spec.export)  # atomic on one filesystem; never over an existing export
    return None
