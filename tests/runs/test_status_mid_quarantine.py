"""A probe that lands while the wrapper quarantines an attempt (it moves the attempt's markers into
quarantine/ one by one): the exit code and the wrapper's pid are read where they are at that moment.
Before, it read the attempt dir only, saw no pid and no exit code while the wrapper was still alive,
and the run was called dead without an exit code (found by tests/runs/test_no_edit.py, once)."""

import os

from tests.box_specs import spec_with
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()


def spec_in(tmp_path) -> dict:
    run_root = tmp_path / "proj"
    active = run_root / "active" / "r1"
    for part in ("ckpt", "output", "attempt-1"):
        (active / part).mkdir(parents=True)
    layout = {"run_root": str(run_root), "active": str(active), "ckpt": str(active / "ckpt")}
    layout |= {"output": str(active / "output"), "export": str(run_root / "export" / "r1")}
    return spec_with(
        WRAPPER, **{**layout, "quarantine_base": str(run_root / "quarantine"), "run_id": "r1", "attempt": 1, "cwd": "."}
    )


def test_markers_half_moved_into_quarantine_still_say_alive_and_the_exit_code(tmp_path):
    spec = spec_in(tmp_path)
    attempt = tmp_path / "proj" / "active" / "r1" / "attempt-1"
    (attempt / "log.txt").write_text("iter 20: loss 2.3\n")
    (attempt / "pid").write_text(f"{os.getpid()} 999999\n")  # this process stands for the live wrapper
    (attempt / "exit_code").write_text("137\n")
    assert WRAPPER.run_status(spec)["exit_code"] == 137
    quarantined = tmp_path / "proj" / "quarantine" / "r1--1"
    quarantined.mkdir(parents=True)
    for name in ("exit_code", "pid"):  # sorted order: these two moved, log.txt not yet, no reason.txt
        os.replace(attempt / name, quarantined / name)
    status = WRAPPER.run_status(spec)
    assert status["exit_code"] == 137 and status["wrapper_alive"] is True
    assert status["quarantine_reason"] is None  # not written yet: the wrapper is still at it
