"""The export contract at sealing (artifact-layout.md), on the wrapper itself with real files: each
variant breaks one rule and is refused with the rule named, nothing sealed; a complete one seals."""

import hashlib
import json
import os
import sys

import pytest
import torch

from tests.box_specs import spec_with
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()
DATASET_FILE = b"pixels of a dataset image " * 100


@pytest.fixture
def spec(tmp_path):
    root = tmp_path / "proj"
    output, ckpt = root / "active" / "r1" / "output", root / "active" / "r1" / "ckpt"
    output.mkdir(parents=True)
    ckpt.mkdir()
    (root / "export" / ".partial").mkdir(parents=True)
    (output / "run.json").write_text(json.dumps({"run_id": "r1", "seed": 1}))
    (output / "config.yaml").write_text("lr: 0.01\n")
    (output / "train.csv").write_text("epoch,loss\n1,0.5\n")
    torch.save({"model": {"w": torch.zeros(2)}}, output / "best.pth")
    return spec_with(
        WRAPPER,
        **{
            "run_id": "r1",
            "attempt": 1,
            "argv": [sys.executable, "train.py"],
            "environment": "",
            "run_root": str(root),
            "active": str(root / "active" / "r1"),
            "output": str(output),
            "ckpt": str(ckpt),
            "partial": str(root / "export" / ".partial" / "r1"),
            "export": str(root / "export" / "r1"),
            "dataset_files": {hashlib.sha256(DATASET_FILE).hexdigest(): len(DATASET_FILE)},
        },
    )


def refused(spec) -> str:
    reason = WRAPPER.seal(spec)
    assert reason and not os.path.exists(spec.export), reason
    return reason


@pytest.mark.parametrize("name", ["config", "data", "results", "vis"])
def test_a_top_level_directory_of_the_wrong_layout_is_refused(spec, name):
    os.makedirs(os.path.join(spec.output, name))
    open(os.path.join(spec.output, name, "x"), "w").close()
    rule = f"{name} is not allowed at the top of an export (the canonical layout has none)"
    assert refused(spec) == f"{WRAPPER.CONTRACT} (1 problem): {rule}"


@pytest.mark.parametrize("name", ["COMPLETE.json", "MANIFEST.json"])
def test_a_status_sentinel_is_refused(spec, name):
    with open(os.path.join(spec.output, name), "w") as handle:
        handle.write("{}")
    assert name in refused(spec)


def test_a_last_pth_linked_to_the_live_checkpoint_is_refused(spec):
    latest = os.path.join(spec.ckpt, "latest.pth")
    torch.save({"epoch": 3}, latest)
    os.link(latest, os.path.join(spec.output, "last.pth"))
    assert "last.pth is a hard link" in refused(spec)
    os.remove(os.path.join(spec.output, "last.pth"))
    os.symlink(latest, os.path.join(spec.output, "last.pth"))
    assert "last.pth is a symbolic link" in refused(spec)


def test_dataset_bytes_in_an_export_are_refused(spec):
    os.makedirs(os.path.join(spec.output, "test", "t1"))
    for name in ("metrics.json", "results.parquet"):
        open(os.path.join(spec.output, "test", "t1", name), "w").close()
    with open(os.path.join(spec.output, "test", "t1", "sample.png"), "wb") as handle:
        handle.write(DATASET_FILE)
    assert refused(spec).endswith(
        "test/t1/sample.png holds the bytes of a dataset file: an export never contains dataset bytes"
    )


def test_a_complete_export_seals(spec):
    torch.save({"model": {"w": torch.zeros(2)}}, os.path.join(spec.output, "last.pth"))  # a frozen copy
    assert WRAPPER.seal(spec) is None
    assert sorted(os.listdir(spec.export)) == ["best.pth", "config.yaml", "last.pth", "run.json", "train.csv"]


def test_a_missing_train_csv_is_paperwork_sealed_with_the_gap_recorded(spec):
    """Before: a finished training without train.csv was quarantined as a contract failure, never retried and
    with no way to re-seal, though nothing it lacks can make a reported number wrong (DOMAIN §4)."""
    os.remove(os.path.join(spec.output, "train.csv"))
    assert WRAPPER.seal(spec) is None
    assert sorted(os.listdir(spec.export)) == ["best.pth", "config.yaml", "run.json"]
    with open(os.path.join(WRAPPER.attempt_dir(spec), WRAPPER.PAPERWORK_FILE)) as handle:
        gaps = json.load(handle)
    assert gaps == ["train.csv is missing: sealed without it"]


def test_every_problem_of_an_export_is_named_at_once(spec):
    """An unchanged public trainer was refused with only the first of its four missing files; the
    person fixed one, retried, and met the next. The reason lists each problem, and says it is the
    contract's (its class: never retried automatically)."""
    for name in ("run.json", "config.yaml", "best.pth"):
        os.remove(os.path.join(spec.output, name))
    os.makedirs(os.path.join(spec.output, "test", "t1"))
    open(os.path.join(spec.output, "test", "t1", "metrics.json"), "w").close()
    torch.save({"epoch": 3}, os.path.join(spec.output, "latest.pth"))
    reason = refused(spec)
    assert reason.startswith(f"{WRAPPER.CONTRACT} (5 problems): ")
    for problem in (
        "required file run.json is missing",
        "required file config.yaml is missing",
        "required file best.pth is missing",
        "latest.pth is forbidden inside an export",
        "test/t1/results.parquet is missing",
    ):
        assert problem in reason


def test_no_output_at_all_is_the_contracts_failure_too(spec):
    import shutil

    shutil.rmtree(spec.output)
    assert refused(spec).startswith(
        f"{WRAPPER.CONTRACT} (1 problem): the command wrote nothing to $REMOTEGPU_OUTPUT_DIR"
    )
