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
import subprocess
import sys

from .attempts import run_env
from .distributed import box_torchrun_argv, torchrun_argv
from .environment import argv_in_environment

BUILD = "import remotegpu_run, sys; sys.exit(remotegpu_run.build_declared())"
# What the build may print before its answer: bounded, as everything read back from a box.
MAX_ANSWER = 64 * 1024


def declared(spec):
    return spec.get("trainer_files") or {}


def checkpoints_in_place(spec):
    """The declared checkpoint files in the working directory (a retry on the same box finds them)."""
    pattern = declared(spec).get("checkpoints")
    return sorted(glob.glob(os.path.join(spec["cwd"], pattern))) if pattern else []


def declared_paths(spec):
    """Every path the declared globs match in the working directory now."""
    found = set()
    for key in ("checkpoints", "weights", "metrics", "predictions"):
        pattern = declared(spec).get(key)
        if pattern:
            found.update(glob.glob(os.path.join(spec["cwd"], pattern)))
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
        removed.append(os.path.relpath(path, spec["cwd"]))
    return removed


def attempt_argv(spec):
    """The attempt's argv: the run's, plus the declared resume arguments while a checkpoint exists."""
    argv = argv_in_environment(spec)
    extra = declared(spec).get("resume_args")
    if extra and checkpoints_in_place(spec):
        argv += shlex.split(extra)
    if spec.get("distributed") and spec.get("scheduler") == "slurm":  # torchrun on every node of the job
        argv = torchrun_argv(spec, argv)
    elif spec.get("distributed"):  # this box's node of a run over several boxes
        argv = box_torchrun_argv(spec, argv)
    return argv


def smoke_argv(spec):
    """The smoke's argv: the run's, plus the declared smoke arguments (a script that ignores the flag)."""
    return argv_in_environment(spec) + shlex.split(declared(spec).get("smoke_args") or "")


def earlier_logs(spec):
    """The logs of this run's earlier attempts on this box (quarantined), oldest first."""
    pattern = os.path.join(spec["quarantine_base"], glob.escape(spec["run_id"]) + "--*", "log.txt")
    return sorted(glob.glob(pattern), key=lambda path: int(path.rsplit("--", 1)[1].split(os.sep)[0]))


def build_export(spec, log_path):
    """Build output/ from the declared files; the problems found (every one), [] when built or when the
    script wrote its own export (a run.json in output/)."""
    if not declared(spec) or os.path.isfile(os.path.join(spec["output"], "run.json")):
        return []
    argv0 = argv_in_environment(spec)[0]
    python = argv0 if os.path.basename(argv0).startswith("python") else sys.executable
    env = run_env(spec, False)
    env["REMOTEGPU_TRAINER_FILES"] = json.dumps(declared(spec))
    env["REMOTEGPU_CONFIG"] = spec.get("config") or ""
    env["REMOTEGPU_LOGS"] = json.dumps([*earlier_logs(spec), log_path])
    try:
        done = subprocess.run(
            [python, "-c", BUILD],
            cwd=spec["cwd"],
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
