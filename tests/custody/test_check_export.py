"""`python -m remotegpu check-export DIR`, as a person runs it before renting: offline (no server,
no token), the seal's rules and the custody readback on a local directory, every problem at once."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, subprocess_env
from tests.custody.test_verification_parts import tinyfit_output  # noqa: F401 (the session's real export)

pytestmark = pytest.mark.e2e  # check-export as a process of its own (torch's import each time)


def check_export(directory) -> subprocess.CompletedProcess:
    env = subprocess_env(REMOTEGPU_URL="http://127.0.0.1:9", REMOTEGPU_TOKEN="")  # nothing listens there
    command = [sys.executable, "-m", "remotegpu", "check-export", str(directory)]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_the_examples_export_would_seal_and_verify(tinyfit_output):  # noqa: F811
    done = check_export(tinyfit_output)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "metric synthetic/accuracy: claimed" in done.stdout and " ok" in done.stdout
    assert "would seal on the box and verify on the control host" in done.stdout


def test_every_problem_of_a_broken_export_is_listed_with_the_contract_page(tinyfit_output, tmp_path):  # noqa: F811
    broken = tmp_path / "output"
    shutil.copytree(tinyfit_output, broken)
    (broken / "run.json").unlink()
    metrics = broken / "test" / "synthetic" / "metrics.json"
    claimed = json.loads(metrics.read_text())
    metrics.write_text(json.dumps({**claimed, "accuracy": claimed["accuracy"] + 0.05}))
    (broken / "latest.pth").write_bytes((broken / "best.pth").read_bytes())
    done = check_export(broken)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL seal: required file run.json is missing" in done.stdout
    assert "FAIL seal: latest.pth is forbidden inside an export" in done.stdout
    assert "FAIL verify: metric drift in test/synthetic: accuracy claimed" in done.stdout
    assert "docs/contract.md" in done.stdout


def test_a_path_that_is_not_a_directory_is_a_usage_error(tmp_path):
    done = check_export(tmp_path / "nowhere")
    assert done.returncode == 2 and "is not a directory" in done.stderr
