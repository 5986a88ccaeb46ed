"""The no-edit path on the box: a run that declared where its unchanged script leaves its files
(`trainer_files`, docs/contract.md) has its resume arguments added while a checkpoint exists, and its
export built from those files after the command exits 0, by the run helper (remotegpu_run.build_declared)
under the run's own interpreter (the one with torch). The seal then checks it as any export."""

import contextlib
import glob
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys

from .attempts import run_env
from .distributed import box_torchrun_argv, torchrun_argv
from .environment import argv_in_environment

BUILD = "import remotegpu_run, sys; sys.exit(remotegpu_run.build_declared())"
# What the build may print before its answer: bounded, as everything read back from a box.
MAX_ANSWER = 64 * 1024


def declared(spec):
    return spec.trainer_files or {}


DECLARED_KEYS = ("checkpoints", "weights", "metrics", "predictions")
WALK_LIMIT = 100_000  # entries of a declared folder looked at; more is not a checkpoint's folder


def path_problem(cwd, path):
    """Why a declared path is not the run's own regular file (or, for a checkpoint, folder of them) inside
    the working directory, else None. A declared `out/ckpt.pt` that is a link to ~/.ssh/id_ed25519 carried
    the key into the mirror; a fifo there hung the bridge and the export build: neither is ever opened."""
    relative = os.path.relpath(path, cwd)
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"{relative}: cannot be read ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return f"{relative} is a link: a declared file is a regular file inside the working directory, never followed"
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return f"{relative} is not a regular file (a fifo, a socket or a device): never opened"
    root = os.path.realpath(cwd)
    if os.path.commonpath([os.path.realpath(path), root]) != root:
        return f"{relative} lies outside the working directory (a linked folder on its way): never opened"
    if stat.S_ISDIR(info.st_mode):
        return _folder_problem(path, relative)
    return None


def _folder_problem(path, relative):
    seen = 0
    for directory, dirs, names in os.walk(path):
        for name in dirs + names:
            seen += 1
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if seen > WALK_LIMIT or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                inner = os.path.relpath(os.path.join(directory, name), os.path.dirname(path))
                return f"{relative} holds {inner!r}, which is not a regular file or folder: never opened"
    return None


def declared_problems(spec):
    """Every declared path that is not the run's own file, named (the run contract: docs/contract.md)."""
    problems = []
    for key in DECLARED_KEYS:
        pattern = declared(spec).get(key)
        for path in sorted(glob.glob(os.path.join(spec.cwd, pattern)))[:1000] if pattern else []:
            problem = path_problem(spec.cwd, path)
            if problem:
                problems.append(f"{key}: {problem}")
    return problems


def checkpoints_in_place(spec):
    """The declared checkpoint files in the working directory (a retry on the same box finds them)."""
    pattern = declared(spec).get("checkpoints")
    return sorted(glob.glob(os.path.join(spec.cwd, pattern))) if pattern else []


def declared_paths(spec):
    """Every path the declared globs match in the working directory now."""
    found = set()
    for key in DECLARED_KEYS:
        pattern = declared(spec).get(key)
        if pattern:
            found.update(glob.glob(os.path.join(spec.cwd, pattern)))
    return found


def remove_smoke_files(spec, before):
    """The declared files the smoke left in the working directory, removed: an unchanged script that
    ignores REMOTEGPU_SMOKE trains in its own folders, and the attempt must not resume from the smoke's
    checkpoint or export its rows. Returns their paths, relative to the working directory."""
    removed = []
    for path in sorted(declared_paths(spec) - before):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(path)
        removed.append(os.path.relpath(path, spec.cwd))
    return removed


def attempt_argv(spec):
    """The attempt's argv: the run's, plus the declared resume arguments while a checkpoint exists."""
    argv = argv_in_environment(spec)
    extra = declared(spec).get("resume_args")
    if extra and checkpoints_in_place(spec):
        argv += shlex.split(extra)
    if spec.distributed and spec.scheduler == "slurm":  # torchrun on every node of the job
        argv = torchrun_argv(spec, argv)
    elif spec.distributed:  # this box's node of a run over several boxes
        argv = box_torchrun_argv(spec, argv)
    return argv


def smoke_argv(spec):
    """The smoke's argv: the run's, plus the declared smoke arguments (a script that ignores the flag)."""
    return argv_in_environment(spec) + shlex.split(declared(spec).get("smoke_args") or "")


def earlier_logs(spec):
    """The logs of this run's earlier attempts on this box (quarantined), oldest first."""
    pattern = os.path.join(spec.quarantine_base, glob.escape(spec.run_id) + "--*", "log.txt")
    return sorted(glob.glob(pattern), key=lambda path: int(path.rsplit("--", 1)[1].split(os.sep)[0]))


def build_export(spec, log_path):
    """Build output/ from the declared files; the problems found (every one), [] when built or when the
    script wrote its own export (a run.json in output/)."""
    if not declared(spec) or os.path.isfile(os.path.join(spec.output, "run.json")):
        return []
    refused = declared_problems(spec)
    if refused:
        return refused
    argv0 = argv_in_environment(spec)[0]
    python = argv0 if os.path.basename(argv0).startswith("python") else sys.executable
    env = run_env(spec, False)
    env["REMOTEGPU_TRAINER_FILES"] = json.dumps(declared(spec))
    env["REMOTEGPU_CONFIG"] = spec.config or ""
    env["REMOTEGPU_LOGS"] = json.dumps([*earlier_logs(spec), log_path])
    try:
        done = subprocess.run(
            [python, "-c", BUILD],
            cwd=spec.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"the export could not be built from the declared trainer files: {exc}"]
    output = done.stdout[-MAX_ANSWER:].decode(errors="replace")
    with open(log_path, "a") as log:
        log.write(output)
    answer = _answer(output)
    if done.returncode == 0 and answer is not None:
        return []
    if answer:
        return answer
    return ["the export could not be built from the declared trainer files: " + output.strip()[-400:]]


def _answer(output):
    """The build's last line: {"problems": [...]}; None when it printed none (it crashed)."""
    for line in reversed(output.splitlines()):
        if line.startswith('{"problems"'):
            try:
                problems = json.loads(line)["problems"]
            except (ValueError, KeyError, TypeError):
                return None
            return [str(problem)[:500] for problem in problems][:50] if isinstance(problems, list) else None
    return None
