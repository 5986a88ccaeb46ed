"""remotegpu_run: the run contract (docs/contract.md) as a few calls, for a script that may change a few
lines. Shipped beside the wrapper and on the command's PYTHONPATH on every box; stdlib only (torch is
imported to save or load a checkpoint, pyarrow to write predictions: the script has them already).

    import remotegpu_run as rg

    state = rg.resume()                                  # the newest checkpoint's state, or None
    for step in range(state["step"] + 1 if state else 1, steps + 1):
        loss = train_one(step)                           # 1-2 batches on CPU when rg.SMOKE
        rg.log(step, train_loss=loss)                    # a row of train.csv
        if rg.SMOKE:
            raise SystemExit(0)
        if rg.due(step):
            rg.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, step)
    rg.export(model.state_dict(), "config.yaml", tests={"val": predictions})
"""

import csv
import hashlib
import json
import os
import shutil
import sys
import time

SMOKE = os.environ.get("REMOTEGPU_SMOKE") == "1"
OUTPUT_DIR = os.environ.get("REMOTEGPU_OUTPUT_DIR", "output")
CHECKPOINT_DIR = os.environ.get("REMOTEGPU_CHECKPOINT_DIR", "ckpt")
DATA_DIR = os.environ.get("REMOTEGPU_DATA_DIR", "")
RUN_ID = os.environ.get("REMOTEGPU_RUN_ID", "manual")
ATTEMPT = int(os.environ.get("REMOTEGPU_ATTEMPT") or 1)
EVERY_S = float(os.environ.get("REMOTEGPU_CHECKPOINT_EVERY_S") or 0)
EVERY_STEPS = int(os.environ.get("REMOTEGPU_CHECKPOINT_EVERY_STEPS") or 0)
LATEST = "latest.pt"
# What a checkpoint needs to go on where it stopped, beside the model: named once if it is missing.
RESUMABLE = {"optimizer": ("optim",), "scheduler": ("sched",), "RNG state": ("rng", "random")}

_saved = {"at": time.monotonic(), "step": None, "warned": False}


def resume(map_location="cpu"):
    """The newest checkpoint's state (a dict with its "step"), or None: never in the smoke."""
    path = os.path.join(CHECKPOINT_DIR, LATEST)
    if SMOKE or not os.path.exists(path):
        return None
    import torch

    state = torch.load(path, map_location=map_location, weights_only=True)
    _saved["step"] = state.get("step")
    print(f"resumed from step {state.get('step')}", flush=True)
    return state


def log(step, **metrics):
    """One row of train.csv (step first, then the metrics by name): a new metric widens the header."""
    os.makedirs(OUTPUT_DIR, exist_ok=True)
    path = os.path.join(OUTPUT_DIR, "train.csv")
    rows = []
    if os.path.exists(path):
        with open(path, newline="") as handle:
            rows = [row for row in csv.DictReader(handle) if int(float(row["step"])) < step]
    rows.append({"step": step, **metrics})
    fields = list(dict.fromkeys(name for row in rows for name in row))
    with open(path + ".tmp", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(path + ".tmp", path)
    print(f"step {step} " + " ".join(f"{name}={value}" for name, value in metrics.items()), flush=True)


def due(step):
    """Whether a checkpoint is due at this step: the cadence RemoteGPU advises, else every step."""
    if EVERY_STEPS:
        return _saved["step"] is None or step - _saved["step"] >= EVERY_STEPS
    return not EVERY_S or time.monotonic() - _saved["at"] >= EVERY_S


def save(state, step):
    """The checkpoint, atomically (tmp, fsync, rename) in $REMOTEGPU_CHECKPOINT_DIR, with its step at
    the top level (what proves a resume); says once what a resume would lack."""
    import torch

    state = {**state, "step": step}
    missing = [what for what, marks in RESUMABLE.items() if not any(m in key.lower() for key in state for m in marks)]
    if missing and not _saved["warned"]:
        print(
            f"remotegpu_run: the checkpoint has no {', '.join(missing)}: a resume starts those afresh", file=sys.stderr
        )
        _saved["warned"] = True
    os.makedirs(CHECKPOINT_DIR, exist_ok=True)
    path = os.path.join(CHECKPOINT_DIR, LATEST)
    with open(path + ".tmp", "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
    _saved.update(at=time.monotonic(), step=step)


def export(model_state, config_path, tests=None, selection=None, **identity):
    """The export: best.pth (the state dict given), config.yaml, run.json and, per test,
    test/<id>/results.parquet (sample_id, target, prediction, prob_<class>) with metrics.json.

    tests: {test_id: {"sample_id": [...], "target": [...], "probabilities": [[p0, p1, ...], ...],
    "metrics": {"accuracy": ..., "loss": ...}}} (prediction is the most probable class unless given)."""
    import torch

    os.makedirs(OUTPUT_DIR, exist_ok=True)
    best = os.path.join(OUTPUT_DIR, "best.pth")
    torch.save(model_state, best)
    shutil.copyfile(config_path, os.path.join(OUTPUT_DIR, "config.yaml"))
    for test_id, test in (tests or {}).items():
        _write_test(os.path.join(OUTPUT_DIR, "test", str(test_id)), test)
    run = {"run_id": RUN_ID, **identity, "tests": sorted(str(name) for name in tests or {})}
    run["selection"] = selection or {"split": "val", "metric": "val_loss", "direction": "min"}
    run["checkpoints"] = {"best.pth": {"sha256": _sha256(best)}}
    with open(os.path.join(OUTPUT_DIR, "run.json"), "w") as handle:
        json.dump(run, handle, indent=2)


def _write_test(directory, test):
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(directory, exist_ok=True)
    probabilities = test.get("probabilities") or []
    columns = {"sample_id": pa.array(list(test["sample_id"]), pa.int64())}
    columns["target"] = pa.array(list(test["target"]), pa.int64())
    predicted = test.get("prediction") or [max(range(len(row)), key=row.__getitem__) for row in probabilities]
    columns["prediction"] = pa.array(list(predicted), pa.int64())
    for index in range(len(probabilities[0]) if probabilities else 0):
        columns[f"prob_{index}"] = pa.array([float(row[index]) for row in probabilities], pa.float64())
    pq.write_table(pa.table(columns), os.path.join(directory, "results.parquet"))
    with open(os.path.join(directory, "metrics.json"), "w") as handle:
        json.dump(test.get("metrics") or {}, handle, indent=2)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
