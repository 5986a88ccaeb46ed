"""The pure parts of VERIFY on real files: metric recomputation and safe checkpoint loading."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from custody.checkpoint import safe_load
from custody.metrics import DOWN, UP, recompute
from tests.built_once import built_once
from tests.conftest import REPO


@pytest.fixture(scope="module")
def tinyfit_output(tmp_path_factory):
    """A real export from the example training (CPU, 3 epochs), trained once per session and shared by
    every module that reads it (test_capsule, test_population): read-only, a test copies it to change it."""

    def train(work):
        config = work / "config.yaml"
        config.write_text((REPO / "examples" / "tinyfit" / "config.yaml").read_text() + "epochs: 3\n")
        env = dict(os.environ, REMOTEGPU_OUTPUT_DIR=str(work / "output"), REMOTEGPU_CHECKPOINT_DIR=str(work / "ckpt"))
        subprocess.run(
            [sys.executable, str(REPO / "examples" / "tinyfit" / "train.py"), "--config", str(config)],
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )

    return built_once(tmp_path_factory, "tinyfit-export", train) / "output"


def test_recomputed_metrics_equal_the_exported_ones(tinyfit_output):
    test_dir = tinyfit_output / "test" / "synthetic"
    claimed = json.loads((test_dir / "metrics.json").read_text())
    results, warnings = recompute(test_dir / "results.parquet", claimed, tolerance=1e-6)
    by_name = {result.name: result for result in results}
    assert warnings == []
    assert by_name["accuracy"].within_tolerance and by_name["accuracy"].direction == UP
    assert by_name["loss"].within_tolerance and by_name["loss"].direction == DOWN
    assert abs(by_name["accuracy"].delta) < 1e-6  # the example computes in float32


def test_a_better_claimed_number_is_drift_with_its_delta(tinyfit_output):
    test_dir = tinyfit_output / "test" / "synthetic"
    claimed = json.loads((test_dir / "metrics.json").read_text())
    inflated = {**claimed, "accuracy": claimed["accuracy"] + 0.05, "f1_macro": 0.9}
    results, warnings = recompute(test_dir / "results.parquet", inflated, tolerance=1e-6)
    accuracy = next(result for result in results if result.name == "accuracy")
    assert not accuracy.within_tolerance
    assert accuracy.delta == pytest.approx(-0.05)
    assert accuracy.recomputed == pytest.approx(claimed["accuracy"])
    assert warnings == ["unknown metric 'f1_macro': not recomputed"]


def test_exported_checkpoint_loads_safely(tinyfit_output):
    result = safe_load(tinyfit_output / "best.pth")
    assert result.ok and result.keys == ("epoch", "model", "val_loss")


class _Payload:
    """Unpickling this would run os.system and create a file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_payload_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    crafted = tmp_path / "best.pth"
    torch.save({"model": {}, "extra": _Payload(marker)}, crafted)
    assert not marker.exists()
    result = safe_load(crafted)
    assert not result.ok and "refused" in result.detail
    assert not Path(marker).exists()
