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

A script that cannot change declares where it leaves its files instead (the run's trainer files): the
wrapper then calls build_declared() after the command exits 0, which writes the same export from them.
"""

import csv
import glob
import hashlib
import json
import math
import os
import re
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
    if SMOKE:  # the smoke proves the code and writes nothing durable: an export there would be a whole run's
        print("remotegpu_run: the smoke writes no export", flush=True)
        return
    _write_export(model_state, config_path, tests, selection or DEFAULT_SELECTION, identity)


DEFAULT_SELECTION = {"split": "val", "metric": "val_loss", "direction": "min"}


def _write_export(model_state, config_path, tests, selection, identity):
    """export()'s files; selection None: run.json says nothing of how best.pth was chosen."""
    import torch

    os.makedirs(OUTPUT_DIR, exist_ok=True)
    best = os.path.join(OUTPUT_DIR, "best.pth")
    torch.save(model_state, best)
    shutil.copyfile(config_path, os.path.join(OUTPUT_DIR, "config.yaml"))
    for test_id, test in (tests or {}).items():
        _write_test(os.path.join(OUTPUT_DIR, "test", str(test_id)), test)
    run = {"run_id": RUN_ID, **identity, "tests": sorted(str(name) for name in tests or {})}
    if selection is not None:
        run["selection"] = selection
    run["checkpoints"] = {"best.pth": {"sha256": _sha256(best)}}
    with open(os.path.join(OUTPUT_DIR, "run.json"), "w") as handle:
        json.dump(run, handle, indent=2)


def predictions(logits, targets):
    """A classifier's test for export(): its logits (one row per sample) and targets, as the probabilities
    the readback recomputes from, with the accuracy and loss it will find (float64, as it computes them)."""
    import torch

    probabilities = torch.softmax(logits.detach().double(), dim=-1)
    test = {"sample_id": list(range(len(probabilities))), "target": [int(target) for target in targets]}
    test.update(prediction=probabilities.argmax(dim=-1).tolist(), probabilities=probabilities.tolist())
    return {**test, "metrics": _claims(test)}


def _claims(test):
    """accuracy, and with probabilities the loss, as the readback recomputes them: the mean of -log of the
    target's probability, clipped at 1e-12."""
    pairs = list(zip(test["prediction"], test["target"], strict=True))
    claims = {"accuracy": sum(p == t for p, t in pairs) / len(pairs)}
    if test["probabilities"]:
        picked = [max(min(row[t], 1.0), 1e-12) for row, t in zip(test["probabilities"], test["target"], strict=True)]
        claims["loss"] = -sum(math.log(p) for p in picked) / len(picked)
    return claims


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


STEP_COLUMNS = ("step", "global_step", "iter_num", "iteration", "epoch")


def build_declared():
    """The export of an unchanged script, from the files its run declared (REMOTEGPU_TRAINER_FILES, paths
    relative to the working directory): train.csv from its metrics file or printed lines, best.pth from its
    weights or newest checkpoint, the run's config, test/<id>/ from its predictions. Prints every problem
    at once as its last line ({"problems": [...]}); 0 when the export was written."""
    declared = json.loads(os.environ["REMOTEGPU_TRAINER_FILES"])
    problems = []
    rows = _declared_rows(declared, problems)
    state = _declared_weights(declared, problems)
    tests = _declared_tests(declared, problems)
    config = os.environ.get("REMOTEGPU_CONFIG") or ""
    if not os.path.isfile(config):
        problems.append(f"the run's config file {config or '(none)'} is missing")
    if not problems:
        # How the script chose its weights is not known: no selection (the readback warns, never guesses).
        _write_export(state, config, tests, None, {"built_from": "trainer files"})
        _write_rows(rows)
    print(json.dumps({"problems": problems}), flush=True)
    return 1 if problems else 0


def _newest(pattern):
    found = [path for path in glob.glob(pattern) if os.path.exists(path)]
    return max(found, key=os.path.getmtime) if found else None


def _declared_rows(declared, problems):
    if "log_pattern" in declared:
        return _rows_from_logs(re.compile(declared["log_pattern"]), problems)
    path = declared["metrics"]
    if not os.path.isfile(path):
        problems.append(f"the declared metrics file {path} is missing")
        return []
    with open(path, newline="") as handle:
        if path.endswith(".csv"):
            raw = list(csv.DictReader(handle))
        else:
            raw = [json.loads(line) for line in handle if line.strip().startswith("{")]
    rows = [row for row in (_numeric(item) for item in raw) if any(key in row for key in STEP_COLUMNS)]
    if not rows:
        problems.append(f"the declared metrics file {path} has no row with a step ({', '.join(STEP_COLUMNS)})")
        return []
    return _one_row_per_step(rows, next(key for key in STEP_COLUMNS if any(key in row for row in rows)))


def _rows_from_logs(pattern, problems):
    """Every printed line the pattern matches, in every attempt's log: a step printed again (a resumed
    attempt evaluates where it stopped) keeps its latest values."""
    rows = []
    for path in json.loads(os.environ.get("REMOTEGPU_LOGS") or "[]"):
        if os.path.isfile(path):
            with open(path, errors="replace") as handle:
                rows += [_numeric(match.groupdict()) for match in map(pattern.search, handle) if match]
    rows = _one_row_per_step(rows, "step")
    if not rows:
        problems.append(f"no printed line matches the declared log_pattern {pattern.pattern}")
    return rows


def _one_row_per_step(rows, step):
    """The rows in step order, one per step under the name `step`: a resumed script logs again the steps
    between its checkpoint and where it was stopped (an evaluation where it resumed), the later winning."""
    by_step = {}
    for row in rows:
        if step in row:
            merged = {**by_step.get(row[step], {}), **{key: value for key, value in row.items() if key != step}}
            by_step[row[step]] = merged
    return [{"step": value, **by_step[value]} for value in sorted(by_step)]


def _numeric(item):
    row = {}
    for key, value in (item or {}).items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            row[str(key)] = int(number) if number.is_integer() and key in STEP_COLUMNS else number
    return row


def _write_rows(rows):
    """train.csv: the step first, then the metrics by name."""
    with open(os.path.join(OUTPUT_DIR, "train.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
        writer.writeheader()
        writer.writerows(rows)


# The model file inside a folder checkpoint (Hugging Face Trainer's checkpoint-<step>/, and the like).
MODEL_FILES = ("pytorch_model.bin", "model.pt", "model.pth")


def _declared_weights(declared, problems):
    pattern = declared.get("weights") or declared["checkpoints"]
    path = _newest(pattern)
    if path is None:
        which = "weights" if "weights" in declared else "checkpoints"
        problems.append(f"no file matches the declared {which} {pattern}")
        return None
    if os.path.isdir(path):
        inside = [os.path.join(path, name) for name in MODEL_FILES if os.path.isfile(os.path.join(path, name))]
        if len(inside) != 1:
            held = f"holds {len(inside)} model files" if inside else "holds none of " + ", ".join(MODEL_FILES)
            problems.append(f"the newest checkpoint {path} is a folder that {held}: declare weights")
            return None
        path = inside[0]
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a file torch cannot read as weights: named, never a traceback
        problems.append(f"{path} is not weights torch can load: {type(exc).__name__}: {str(exc)[:200]}")
        return None
    for key in filter(None, (declared.get("weights_key") or "").split(".")):
        if not isinstance(state, dict) or key not in state:
            problems.append(f"{path} has no key {declared['weights_key']} (its keys: {_keys(state)})")
            return None
        state = state[key]
    if not isinstance(state, dict) or not all(torch.is_tensor(value) for value in state.values()):
        problems.append(f"{path} is not a state dict of tensors: declare weights_key (its keys: {_keys(state)})")
        return None
    print(f"remotegpu_run: best.pth from {path}", flush=True)
    return state


def _keys(state):
    return ", ".join(sorted(str(key) for key in state)[:12]) if isinstance(state, dict) else type(state).__name__


def _declared_tests(declared, problems):
    path = declared.get("predictions")
    if not path:
        return None
    if not os.path.isfile(path):
        problems.append(f"the declared predictions file {path} is missing")
        return None
    with open(path, newline="") as handle:
        raw = list(csv.DictReader(handle))
    needed = {"sample_id", "target", "prediction"}
    if not raw or not needed <= set(raw[0]):
        problems.append(f"{path} needs the columns sample_id, target, prediction (and prob_<class> for a loss)")
        return None
    classes = sorted(int(key[5:]) for key in raw[0] if re.fullmatch(r"prob_[0-9]{1,6}", key))
    test = {name: [int(float(row[name])) for row in raw] for name in needed}
    test["probabilities"] = [[float(row[f"prob_{index}"]) for index in classes] for row in raw] if classes else []
    return {declared.get("test_id") or "val": {**test, "metrics": _claims(test)}}


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
