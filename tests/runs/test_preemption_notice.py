"""A preemption notice (a SIGTERM to the wrapper that no person asked for: a container stop, Slurm's
--signal, a spot reclaim) reaches the command, which gets its grace to save; the attempt is closed as
interrupted, so an opted-in run is relaunched, not failed. The built wrapper, as a box runs it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runs.signals import classify
from tests.runs.test_protocol_contract import spec, spec_path, wrapper  # noqa: F401 (fixtures)
from tests.waiting import wait_until

SAVES_ON_SIGTERM = """
import os, signal, sys, time
def save(signum, frame):
    with open(os.path.join(os.environ["REMOTEGPU_CHECKPOINT_DIR"], "latest.pth"), "w") as handle:
        handle.write("saved at the notice")
    sys.exit(143)
signal.signal(signal.SIGTERM, save)
print("training", flush=True)
time.sleep(60)
"""


def test_a_sigterm_nobody_asked_for_reaches_the_command_and_closes_it_as_interrupted(spec, tmp_path):  # noqa: F811
    from node.build import wrapper_file

    # paths in the spec are absolute, under tmp_path/data
    run_spec = spec.but(argv=[sys.executable, "-c", SAVES_ON_SIGTERM], stop_grace_seconds=5, cwd=str(tmp_path))
    path = tmp_path / "spec-run.json"
    path.write_text(run_spec.to_json())
    wrapper_process = subprocess.Popen([sys.executable, "-I", "-S", str(wrapper_file()), "run", str(path)])
    attempt = os.path.join(run_spec.active, "attempt-1")
    log = Path(attempt) / "log.txt"
    wait_until(lambda: log.exists() and "training" in log.read_text(), 30, 0.1, what="the command training")
    began = time.monotonic()
    wrapper_process.send_signal(signal.SIGTERM)  # the platform's notice, not a person's stop
    assert wrapper_process.wait(timeout=30) == 1
    assert time.monotonic() - began < 5  # the command saved and left within its grace; no SIGKILL needed

    assert (Path(run_spec.ckpt) / "latest.pth").read_text() == "saved at the notice"
    quarantined = os.path.join(run_spec.quarantine_base, f"{run_spec.run_id}--1")
    reason = (Path(quarantined) / "reason.txt").read_text()
    assert reason.startswith("interrupted: SIGTERM to the wrapper (a preemption notice")
    assert "had 5 s to save and ended with exit code 143" in reason
    # What the control side makes of it: an interruption (relaunched where the run opted in), not a crash.
    assert classify(143, set(), interrupted=reason.startswith("interrupted")) == "interrupted"
