#!/usr/bin/env python3
"""standin — tinyfit's contract without torch, for tests about everything around the training.

The product treats a run's command as opaque: what it watches, mirrors, stops, resumes and seals is
the contract (REMOTEGPU_* variables, checkpoints in $REMOTEGPU_CHECKPOINT_DIR, the export layout, the
log lines), never the arithmetic. This script keeps that contract the way tinyfit does (the same
config lines, log lines, hold file, checkpoint cadence, resume from the latest checkpoint, export)
while its "training" is a formula of the epoch. Its checkpoints are real torch files, written once per
test session by the test process (tests/runs/conftest.py:standin_checkpoints) and copied here byte for
byte, so a trainer process costs a python start (tens of milliseconds) instead of torch's import
(seconds of CPU: most of the suite's CPU went to importing torch in tinyfit's smoke and attempt).

Tests about training itself, verification and recomputed metrics keep the real example.
"""

import argparse
import csv
import hashlib
import json
import math
import os
import shutil
import sys
import time


def read_config(path):
    """tinyfit's config (flat `key: value` lines) read as the YAML it also is."""
    import yaml  # the test environment's interpreter runs this script: it has PyYAML

    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def file_sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def copy_atomically(source, path):
    """The prebuilt checkpoint's bytes at path: tmp, fsync, rename, as tinyfit saves."""
    tmp = f"{path}.tmp"
    with open(source, "rb") as reader, open(tmp, "wb") as writer:
        shutil.copyfileobj(reader, writer)
        writer.flush()
        os.fsync(writer.fileno())
    os.replace(tmp, path)


def row(epoch):
    """What epoch `epoch` logs: a loss that falls every epoch, so every epoch is the best so far."""
    loss = 1.0 / (epoch + 1)
    return {
        "epoch": epoch,
        "train_loss": f"{loss:.6f}",
        "val_loss": f"{loss + 0.01:.6f}",
        "val_accuracy": f"{1 - loss:.6f}",
        "seconds": "0.001",
    }


def resumed_epoch(latest, prebuilt):
    """The epoch of the checkpoint the attempt starts from, known by its bytes (no unpickling here)."""
    if not os.path.exists(latest):
        return 0
    with open(os.path.join(prebuilt, "index.json")) as handle:
        return json.load(handle)[file_sha256(latest)]


def train(config, config_path, smoke):
    ckpt_dir = os.environ.get("REMOTEGPU_CHECKPOINT_DIR", "ckpt")
    out_dir = os.environ.get("REMOTEGPU_OUTPUT_DIR", "output")
    os.makedirs(ckpt_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    # The batches an epoch would take, as tinyfit counts them: a config it cannot train with (batch_size
    # 0, say) fails here too, in the smoke.
    batches = math.ceil(
        config["samples"] * (1 - config["val_fraction"] - config["test_fraction"]) / config["batch_size"]
    )
    if smoke:
        print(f"epoch 1/1 train_loss={row(1)['train_loss']} val_loss=0.5100", flush=True)
        print(f"smoke ok: 2 of {batches} batches on cpu", flush=True)
        return 0
    prebuilt = str(config["prebuilt"])
    latest = os.path.join(ckpt_dir, "latest.pth")
    start = resumed_epoch(latest, prebuilt)
    if start:
        print(f"resumed from epoch {start}", flush=True)
    rows = [row(epoch) for epoch in range(1, start + 1)]
    train_csv = os.path.join(out_dir, "train.csv")
    if rows:
        write_rows(train_csv, rows)
    every = float(os.environ.get("REMOTEGPU_CHECKPOINT_EVERY_S") or 0)
    every_steps = int(os.environ.get("REMOTEGPU_CHECKPOINT_EVERY_STEPS") or 0)
    saved_at, saved_epoch = time.monotonic(), start
    for epoch in range(start + 1, config["epochs"] + 1):
        rows.append(row(epoch))
        print(f"epoch {epoch}/{config['epochs']} train_loss={rows[-1]['train_loss']} val_loss={rows[-1]['val_loss']}")
        sys.stdout.flush()
        copy_atomically(os.path.join(prebuilt, f"best-{epoch}.pth"), os.path.join(ckpt_dir, "best.pth"))
        by_time = not every or time.monotonic() - saved_at >= every
        due = epoch - saved_epoch >= every_steps if every_steps else by_time
        if due or epoch == config["epochs"]:
            copy_atomically(os.path.join(prebuilt, f"latest-{epoch}.pth"), latest)
            saved_at, saved_epoch = time.monotonic(), epoch
        write_rows(train_csv, rows)
        time.sleep(float(config.get("epoch_pause", 0)))
        hold(config.get("hold_file"), epoch)
    finish(config, config_path, prebuilt, ckpt_dir, out_dir)
    return 0


def hold(path, epoch):
    """tinyfit's hold file: while it exists, wait before the next epoch (from the epoch it names)."""
    while path and os.path.exists(str(path)):
        try:
            with open(str(path)) as handle:
                text = handle.read().strip()
        except OSError:
            return
        if text.isdigit() and epoch < int(text):
            return
        time.sleep(0.05)


def write_rows(train_csv, rows):
    with open(train_csv + ".tmp", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(train_csv + ".tmp", train_csv)


def finish(config, config_path, prebuilt, ckpt_dir, out_dir):
    """The export tinyfit writes, less test/ (optional in the layout): run.json, config.yaml, train.csv,
    best.pth, last.pth."""
    epochs = config["epochs"]
    shutil.copyfile(os.path.join(ckpt_dir, "best.pth"), os.path.join(out_dir, "best.pth"))
    shutil.copyfile(os.path.join(prebuilt, f"last-{epochs}.pth"), os.path.join(out_dir, "last.pth"))
    shutil.copyfile(config_path, os.path.join(out_dir, "config.yaml"))
    run = {
        "run_id": os.environ.get("REMOTEGPU_RUN_ID", "manual"),
        "model": "mlp",
        "seed": config["seed"],
        "selection": {"split": "val", "metric": "val_loss", "direction": "min", "epoch": epochs},
        "epochs": epochs,
        "tests": [],
        "checkpoints": {
            name: {"sha256": file_sha256(os.path.join(out_dir, name))} for name in ("best.pth", "last.pth")
        },
    }
    with open(os.path.join(out_dir, "run.json"), "w") as handle:
        json.dump(run, handle, indent=2)
    print(f"done: best epoch {epochs}, test accuracy {1 - 1.0 / (epochs + 1):.4f}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--config", default="config.yaml")
    args = parser.parse_args(argv)
    return train(read_config(args.config), args.config, os.environ.get("REMOTEGPU_SMOKE") == "1")


if __name__ == "__main__":
    sys.exit(main())
