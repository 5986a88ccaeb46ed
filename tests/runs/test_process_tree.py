"""The wrapper owns the whole process tree its attempt started, whatever session a process is in. torchrun
starts its workers in sessions of their own: with its launcher killed, the worker trained on, unwatched
(../shared/reference/clusters/slurm-on-one-machine.md). Now whatever still carries the attempt's mark when
the command ends is stopped and named. The built wrapper, as a box runs it; torchrun is the real one."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runs.test_protocol_contract import spec, spec_path, wrapper  # noqa: F401 (fixtures)
from tests.waiting import wait_until

# One torchrun worker that trains for ever (it says its pid first): the launcher is what gets killed.
WORKER = """
import os, time
with open(os.path.join(os.environ["REMOTEGPU_OUTPUT_DIR"], "worker.pid"), "w") as handle:
    handle.write(str(os.getpid()))
print("worker training", flush=True)
while True:
    time.sleep(0.2)
"""

# A command that leaves a process behind in a session of its own and exits 0 (a daemonised helper).
LEAVES_ONE = """
import os, subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
with open(os.path.join(os.environ["REMOTEGPU_OUTPUT_DIR"], "helper.pid"), "w") as handle:
    handle.write(str(helper.pid))
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def start(run_spec, tmp_path: Path) -> subprocess.Popen:
    from node.build import wrapper_file

    path = tmp_path / "spec-run.json"
    path.write_text(run_spec.to_json())
    return subprocess.Popen([sys.executable, "-I", "-S", str(wrapper_file()), "run", str(path)])


def test_a_killed_launcher_leaves_no_worker_training_and_the_failure_names_it(spec, tmp_path):  # noqa: F811
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.fail("torchrun is not installed beside this interpreter (make deps installs torch)")
    (tmp_path / "worker.py").write_text(WORKER)
    argv = [str(torchrun), "--standalone", "--nproc-per-node", "1", "--max-restarts", "0", str(tmp_path / "worker.py")]
    run_spec = spec.but(argv=argv, cwd=str(tmp_path), stop_grace_seconds=3, env={"OMP_NUM_THREADS": "1"})
    wrapper_process = start(run_spec, tmp_path)
    worker_pid_file = Path(run_spec.output) / "worker.pid"
    wait_until(lambda: worker_pid_file.exists() and worker_pid_file.read_text().isdigit(), 60, 0.1, what="a worker")
    worker = int(worker_pid_file.read_text())
    launcher = int((Path(run_spec.active) / "attempt-1" / "pid").read_text().split()[1])
    assert os.getsid(worker) != os.getsid(launcher)  # torchrun's worker: a session of its own
    began = time.monotonic()
    os.kill(launcher, signal.SIGKILL)  # the launcher only: as killing its group did, the worker is not touched
    assert wrapper_process.wait(timeout=30) == 1
    assert not alive(worker), "the worker outlived its launcher and the attempt"
    ended_in = time.monotonic() - began
    assert ended_in < 10, ended_in  # the worker stopped at SIGTERM, well inside the grace

    quarantined = Path(run_spec.quarantine_base) / f"{run_spec.run_id}--1"  # the attempt's folder, moved
    stragglers = json.loads((quarantined / "stragglers.json").read_text())
    assert [(found["pid"], found["survived"]) for found in stragglers] == [(worker, False)]
    assert "worker.py" in stragglers[0]["argv"]
    reason = (quarantined / "reason.txt").read_text()
    assert reason.startswith("command exited with code 137; 1 process(es) it started still ran after it ended")
    assert f"(pid {worker})" in reason
    print(f"\nlauncher killed: worker stopped and the attempt closed in {ended_in:.1f} s")


def test_a_process_left_behind_by_a_command_that_succeeded_is_stopped_too(spec, tmp_path):  # noqa: F811
    run_spec = spec.but(argv=[sys.executable, "-c", LEAVES_ONE], cwd=str(tmp_path))
    wrapper_process = start(run_spec, tmp_path)
    wrapper_process.wait(timeout=60)
    helper = int((Path(run_spec.output) / "helper.pid").read_text())
    assert not alive(helper)
    quarantined = Path(run_spec.quarantine_base) / f"{run_spec.run_id}--1"  # no export: the contract
    stragglers = json.loads((quarantined / "stragglers.json").read_text())
    assert [found["pid"] for found in stragglers] == [helper] and not stragglers[0]["survived"]
