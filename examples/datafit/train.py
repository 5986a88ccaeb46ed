#!/usr/bin/env python3
"""datafit — a classifier on a registered dataset, with a run secret and a platform hook's cache.

What it needs from RemoteGPU (see README.md):
  * $REMOTEGPU_DATA_DIR: the staged dataset (points.csv, meta.json), hashed as it landed on the box.
  * the secret named by `secret_env` in config.yaml: used, and recorded only as its SHA-256.
  * $HF_HOME: the project's cache on the box (a platform hook); the parsed dataset is cached there.
Like tinyfit: REMOTEGPU_SMOKE=1 is 2 batches on CPU; checkpoints are atomic and resumed; the output is
the sealed-export layout.
"""

import argparse
import csv
import hashlib
import json
import os
import shutil
import sys

import torch
from torch import nn

ARCHITECTURE = {"0.weight": ["hidden", 2], "0.bias": ["hidden"], "2.weight": [3, "hidden"], "2.bias": [3]}


def read_config(path):
    config = {}
    with open(path) as handle:
        lines = handle.readlines()
    for line in lines:
        key, _, value = line.split("#", 1)[0].partition(":")
        if key.strip():
            value = value.strip()
            for cast in (int, float):
                try:
                    value = cast(value)
                    break
                except ValueError:
                    pass
            config[key.strip()] = value
    return config


NEEDS = {
    "REMOTEGPU_DATA_DIR": "bind the registered dataset (examples/datafit-data) to the run",
    "HF_HOME": "the platform hooks set it to the project's cache on the box",
}


def need(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"datafit needs ${name}: {NEEDS.get(name, 'bind the run secret exported as ' + name)}")
    return value


def load_points(data_dir, cache_dir):
    """The dataset's points as tensors, parsed once and kept in the hook's cache (keyed by the CSV's hash)."""
    csv_path = os.path.join(data_dir, "points.csv")
    with open(csv_path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    cached = os.path.join(cache_dir, f"points-{digest[:16]}.pt")
    if os.path.exists(cached):
        return torch.load(cached, weights_only=True), digest, True
    with open(csv_path) as handle:
        rows = list(csv.DictReader(handle))
    data = {
        "ids": torch.tensor([int(row["id"]) for row in rows]),
        "x": torch.tensor([[float(row["x1"]), float(row["x2"])] for row in rows]),
        "y": torch.tensor([int(row["label"]) for row in rows]),
    }
    os.makedirs(cache_dir, exist_ok=True)
    torch.save(data, cached + ".tmp")
    os.replace(cached + ".tmp", cached)
    return data, digest, False


def atomic_save(obj, path):
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="config.yaml")
    config_path = parser.parse_args(argv).config
    config = read_config(config_path)
    smoke = os.environ.get("REMOTEGPU_SMOKE") == "1"
    data_dir = need("REMOTEGPU_DATA_DIR")
    cache_dir = os.path.join(need("HF_HOME"), "datafit")
    secret_sha256 = None if smoke else hashlib.sha256(need(config["secret_env"]).encode()).hexdigest()
    # The smoke gets no secret (unless the run asks): say so, rather than print a hash of None.
    given = f"sha256={secret_sha256}" if secret_sha256 else "not given to the smoke"
    print(f"secret {config['secret_env']} {given}", flush=True)
    with open(os.path.join(data_dir, "meta.json")) as handle:
        meta = json.load(handle)
    data, data_sha256, was_cached = load_points(data_dir, cache_dir)
    print(f"dataset {meta['rows']} rows, points.csv sha256={data_sha256}, cached={was_cached}", flush=True)

    torch.manual_seed(config["seed"])
    order = torch.randperm(len(data["ids"]), generator=torch.Generator().manual_seed(config["seed"]))
    n_test, n_val = int(len(order) * config["test_fraction"]), int(len(order) * config["val_fraction"])
    split = {"test": order[:n_test], "val": order[n_test : n_test + n_val], "train": order[n_test + n_val :]}
    model = nn.Sequential(nn.Linear(2, config["hidden"]), nn.ReLU(), nn.Linear(config["hidden"], 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    ckpt_dir = os.environ.get("REMOTEGPU_CHECKPOINT_DIR", "ckpt")
    out_dir = os.environ.get("REMOTEGPU_OUTPUT_DIR", "output")
    os.makedirs(ckpt_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    latest, start, best_val, rows = os.path.join(ckpt_dir, "latest.pth"), 0, float("inf"), []
    if os.path.exists(latest) and not smoke:
        state = torch.load(latest, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start, best_val, rows = state["epoch"], state["best_val"], state["rows"]
        print(f"resumed from epoch {start}", flush=True)

    loss_of = nn.functional.cross_entropy
    for epoch in range(start + 1, config["epochs"] + 1):
        model.train()
        ids = split["train"][torch.randperm(len(split["train"]))]
        batches = [ids[i : i + config["batch_size"]] for i in range(0, len(ids), config["batch_size"])]
        for batch in batches[:2] if smoke else batches:
            loss = loss_of(model(data["x"][batch]), data["y"][batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = loss_of(model(data["x"][split["val"]]), data["y"][split["val"]]).item()
        rows.append({"epoch": epoch, "train_loss": f"{loss.item():.6f}", "val_loss": f"{val_loss:.6f}"})
        print(f"epoch {epoch}/{config['epochs']} train_loss={loss.item():.4f} val_loss={val_loss:.4f}", flush=True)
        if smoke:
            print("smoke ok: 2 batches on cpu", flush=True)
            return 0
        if val_loss < best_val:
            best_val = val_loss
            atomic_save({"model": model.state_dict(), "epoch": epoch}, os.path.join(ckpt_dir, "best.pth"))
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
        atomic_save({**state, "best_val": best_val, "rows": rows}, latest)

    best = torch.load(os.path.join(ckpt_dir, "best.pth"), weights_only=True)
    model.load_state_dict(best["model"])
    shutil.copyfile(os.path.join(ckpt_dir, "best.pth"), os.path.join(out_dir, "best.pth"))
    torch.save({"model": model.state_dict(), "epoch": config["epochs"]}, os.path.join(out_dir, "last.pth"))
    shutil.copyfile(config_path, os.path.join(out_dir, "config.yaml"))
    with open(os.path.join(out_dir, "train.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_test(model, data, split["test"], os.path.join(out_dir, "test", config["test_id"]))
    run = {
        "run_id": os.environ.get("REMOTEGPU_RUN_ID", "manual"),
        "model": "mlp",
        "architecture": ARCHITECTURE,
        "seed": config["seed"],
        "deterministic": True,
        "selection": {"split": "val", "metric": "val_loss", "direction": "min", "epoch": best["epoch"]},
        "epochs": config["epochs"],
        "tests": [config["test_id"]],
        "splits": {name: sorted(data["ids"][ids].tolist()) for name, ids in split.items()},
        "data": {"points_csv_sha256": data_sha256, "rows": meta["rows"]},
        "secrets": {config["secret_env"]: {"sha256": secret_sha256}},
    }
    with open(os.path.join(out_dir, "run.json"), "w") as handle:
        json.dump(run, handle, indent=2)
    print(f"done: best epoch {best['epoch']}", flush=True)
    return 0


def write_test(model, data, ids, test_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with torch.no_grad():
        logits = model(data["x"][ids])
    probabilities = torch.softmax(logits, dim=1)
    targets, predictions = data["y"][ids], logits.argmax(dim=1)
    columns = {
        "sample_id": pa.array(data["ids"][ids].tolist(), pa.int64()),
        "target": pa.array(targets.tolist(), pa.int64()),
        "prediction": pa.array(predictions.tolist(), pa.int64()),
    }
    for index in range(3):
        columns[f"prob_{index}"] = pa.array(probabilities[:, index].tolist(), pa.float64())
    os.makedirs(test_dir, exist_ok=True)
    pq.write_table(pa.table(columns), os.path.join(test_dir, "results.parquet"))
    metrics = {
        "accuracy": (predictions == targets).float().mean().item(),
        "loss": nn.functional.cross_entropy(logits, targets).item(),
    }
    with open(os.path.join(test_dir, "metrics.json"), "w") as handle:
        json.dump(metrics, handle, indent=2)


if __name__ == "__main__":
    sys.exit(main())
