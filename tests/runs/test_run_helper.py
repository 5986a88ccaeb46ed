"""The run helper (`remotegpu_run`) as a command on a box gets it: written beside the built wrapper and
put on the command's PYTHONPATH by the wrapper's own run_env. A small torch trainer that uses it logs,
checkpoints with its step, resumes, and exports what `check-export` (the seal's rules and the custody
readback) accepts; a checkpoint without optimizer state is said to lack it."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.box_specs import spec_with
from tests.conftest import REPO
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()
pytestmark = pytest.mark.e2e  # torch trainers and check-export as processes of their own

TRAINER = """
import torch
import remotegpu_run as rg

torch.manual_seed(0)
model = torch.nn.Linear(4, 3)
inputs, targets = torch.randn(64, 4), torch.randint(0, 3, (64,))
state = rg.resume()
start = state["step"] + 1 if state else 1
if state:
    model.load_state_dict(state["model"])
for step in range(start, 4):
    loss = torch.nn.functional.cross_entropy(model(inputs), targets)
    rg.log(step, train_loss=round(loss.item(), 6))
    if rg.SMOKE:
        raise SystemExit(0)
    if rg.due(step):
        rg.save({"model": model.state_dict()}, step)
with torch.no_grad():
    probabilities = torch.softmax(model(inputs), dim=1)
loss = torch.nn.functional.cross_entropy(torch.log(probabilities), targets).item()
accuracy = (probabilities.argmax(dim=1) == targets).float().mean().item()
tests = {"val": {"sample_id": list(range(64)), "target": targets.tolist(), "probabilities": probabilities.tolist(),
                 "metrics": {"accuracy": accuracy, "loss": loss}}}
rg.export(model.state_dict(), "config.yaml", tests=tests, seed=0)
print("exported", flush=True)
"""


def run_as_the_box_would(tmp_path, smoke=False) -> subprocess.CompletedProcess:
    active = tmp_path / "active" / "r1"
    spec = spec_with(WRAPPER, run_id="r1", attempt=1, active=str(active), ckpt=str(active / "ckpt"))
    env = WRAPPER.run_env(spec.but(output=str(active / "output")), smoke, hooks={})
    command = [sys.executable, "train.py"]
    return subprocess.run(command, cwd=tmp_path / "src", env=env, capture_output=True, text=True, timeout=300)


def test_a_trainer_using_the_helper_resumes_and_exports_what_verification_accepts(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAINER)
    (tmp_path / "src" / "config.yaml").write_text("lr: 0.1  # kept as written\n")
    smoke = run_as_the_box_would(tmp_path, smoke=True)
    assert smoke.returncode == 0, smoke.stderr
    first = run_as_the_box_would(tmp_path)
    assert first.returncode == 0 and "exported" in first.stdout, first.stderr
    assert "the checkpoint has no optimizer, scheduler, RNG state" in first.stderr
    output = tmp_path / "active" / "r1" / "output"
    assert (output / "train.csv").read_text().splitlines()[0] == "step,train_loss"
    assert WRAPPER.checkpoint_step(str(tmp_path / "active" / "r1" / "ckpt" / "latest.pt"), None) == 3

    again = run_as_the_box_would(tmp_path)  # the identical command after the run ended: it resumes
    assert "resumed from step 3" in again.stdout, again.stdout + again.stderr
    checked = subprocess.run(
        [sys.executable, "-m", "remotegpu", "check-export", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "metric val/accuracy" in checked.stdout and "metric val/loss" in checked.stdout


def test_the_helper_sits_beside_the_wrapper_once_and_is_on_the_commands_path(tmp_path):
    spec = spec_with(WRAPPER, run_id="r", attempt=1, active="/a", ckpt="/c", output="/o")
    env = WRAPPER.run_env(spec, False, hooks={})
    helper = env["PYTHONPATH"].split(":")[0]
    assert (WRAPPER.helper_dir() == helper) and helper.startswith(str(WRAPPER.os.path.dirname(WRAPPER.__file__)))
    written = (REPO / "wrapper" / "run_helper" / "remotegpu_run.py").read_text()
    assert Path(helper, "remotegpu_run.py").read_text() == written
