#!/usr/bin/env python3
"""tinyfit — the RemoteGPU example training script, and a template for yours.

What RemoteGPU expects from a training script (copy these habits):
  * REMOTEGPU_SMOKE=1: do 1–2 batches on CPU with tiny shapes, write nothing durable, exit 0.
  * Checkpoints go to $REMOTEGPU_CHECKPOINT_DIR, atomically (tmp -> fsync -> rename), with model,
    optimizer, epoch (or step) and RNG state at the top level; on start, resume from the latest one
    unconditionally, so the identical command after a crash or preemption continues instead of
    restarting. RemoteGPU copies each completed checkpoint to the box's durable tier while the run
    goes on, reads its `epoch`/`step`, and proves a relaunch resumed: its first checkpoint must be
    beyond the step it was given (else "resume broken"). Keep what the run needs to go on (here, the
    logged rows) in the checkpoint: on another box only the checkpoint is restored. Where the platform
    interrupts, $REMOTEGPU_CHECKPOINT_EVERY_S is the cadence RemoteGPU advises (Young's W = √(2·μ·C)):
    the latest checkpoint is written once that long has passed (and after the last epoch); where it
    also gives $REMOTEGPU_CHECKPOINT_EVERY_STEPS (the cadence in whole logged steps, here epochs),
    every that many epochs instead. SIGUSR1 means the walltime is near (a Slurm run's checkpoint signal,
    passed on by RemoteGPU): save the latest checkpoint now, or at the end of the step.
  * Results go to $REMOTEGPU_OUTPUT_DIR in the sealed-export layout: run.json, config.yaml,
    train.csv, best.pth (state dict only), last.pth, test/<test-id>/metrics.json + results.parquet.
    Never write latest.pth there: the wrapper refuses to seal an export that holds one.
  * CUDA when available, CPU otherwise.
  * Over several nodes (torchrun sets WORLD_SIZE > 1; RemoteGPU starts it on every node of a multi-node
    run): data-parallel (DDP), each rank its own share of every epoch. $REMOTEGPU_COLLECTIVE_TIMEOUT_S
    bounds how long a collective waits for a peer (torch's default is 30 minutes: a frozen peer would
    hang the job that long). Rank 0 restores the latest checkpoint and sends it to every rank, and
    alone writes checkpoints and the export. Every rank meets at a barrier before the process group is
    destroyed: without it an abort at exit hit 3 of 14 runs and failed a finished training.

Run by hand: python train.py --config config.yaml   (outputs under ./output and ./ckpt)
"""

import argparse
import csv
import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import sys
import threading
import time

import torch
from torch import nn


def read_config(path):
    """Flat `key: value` lines; numbers become numbers. Enough for a template, no YAML dependency."""
    config = {}
    with open(path) as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            key, _, value = line.partition(":")
            value = value.strip()
            for cast in (int, float):
                try:
                    value = cast(value)
                    break
                except ValueError:
                    continue
            config[key.strip()] = value
    return config


CHECKPOINTS = ("best.pth", "last.pth")


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def deterministic() -> dict:
    """The same numbers on a re-run: deterministic kernels, no autotuning; what was set, for run.json."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts (CUDA ≥ 10.2)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    return {
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "use_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cublas_workspace_config": os.environ["CUBLAS_WORKSPACE_CONFIG"],
    }


def make_data(config):
    """Synthetic, fully determined by the data seed (the seed unless `data_seed` is set): a random linear
    teacher labels Gaussian points. Replicates vary `seed` only and share their data and test set."""
    generator = torch.Generator().manual_seed(config.get("data_seed", config["seed"]))
    n, d, k = config["samples"], config["features"], config["classes"]
    inputs = torch.randn(n, d, generator=generator)
    teacher = torch.randn(d, k, generator=generator)
    targets = (inputs @ teacher + 0.5 * torch.randn(n, k, generator=generator)).argmax(dim=1)
    order = torch.randperm(n, generator=generator)
    n_test = int(n * config["test_fraction"])
    n_val = int(n * config["val_fraction"])
    split = {"test": order[:n_test], "val": order[n_test : n_test + n_val], "train": order[n_test + n_val :]}
    return inputs, targets, split


# Each parameter's shape in config keys: custody checks the checkpoint against config.yaml with it.
ARCHITECTURE = {
    "0.weight": ["hidden", "features"],
    "0.bias": ["hidden"],
    "2.weight": ["classes", "hidden"],
    "2.bias": ["classes"],
}


def build_model(config):
    return nn.Sequential(
        nn.Linear(config["features"], config["hidden"]), nn.ReLU(), nn.Linear(config["hidden"], config["classes"])
    )


def atomic_save(obj, path):
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def rng_state():
    return {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}


def restore_rng(state):
    torch.set_rng_state(state["torch"])
    random.setstate((3, tuple(state["python"]), None))


def evaluate(model, inputs, targets, device):
    model.eval()
    with torch.no_grad():
        logits = model(inputs.to(device)).cpu()
    loss = nn.functional.cross_entropy(logits, targets).item()
    accuracy = (logits.argmax(dim=1) == targets).float().mean().item()
    return logits, loss, accuracy


def write_results(path, sample_ids, targets, logits):
    import pyarrow as pa
    import pyarrow.parquet as pq

    probabilities = torch.softmax(logits, dim=1)
    columns = {
        "sample_id": pa.array(sample_ids.tolist(), pa.int64()),
        "target": pa.array(targets.tolist(), pa.int64()),
        "prediction": pa.array(logits.argmax(dim=1).tolist(), pa.int64()),
    }
    for index in range(probabilities.shape[1]):
        columns[f"prob_{index}"] = pa.array(probabilities[:, index].tolist(), pa.float64())
    pq.write_table(pa.table(columns), path)


# SIGUSR1 (Slurm's --signal before the walltime, passed on by the wrapper): save at the end of this epoch.
SAVE_NOW = threading.Event()


def distributed():
    """(rank, world size): (0, 1) alone; under torchrun the process group, its collectives bounded by
    $REMOTEGPU_COLLECTIVE_TIMEOUT_S."""
    world = int(os.environ.get("WORLD_SIZE") or 1)
    if world <= 1:
        return 0, 1
    import datetime

    import torch.distributed as dist

    seconds = float(os.environ.get("REMOTEGPU_COLLECTIVE_TIMEOUT_S") or 1800)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=seconds))
    print(f"rank {dist.get_rank()} of {world} joined ({backend}, collectives time out after {seconds:g} s)", flush=True)
    return dist.get_rank(), world


def shared_state(state, world):
    """Rank 0's checkpoint state, the same on every rank (a node's own disk may not hold it)."""
    if world == 1:
        return state
    import torch.distributed as dist

    box = [state]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def leave(world):
    """Every rank at a barrier, then the group destroyed: none aborts at exit while another still talks."""
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


def train(config, config_path, smoke):
    ckpt_dir = os.environ.get("REMOTEGPU_CHECKPOINT_DIR", "ckpt")
    out_dir = os.environ.get("REMOTEGPU_OUTPUT_DIR", "output")
    os.makedirs(ckpt_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    rank, world = (0, 1) if smoke else distributed()
    device = torch.device(
        f"cuda:{int(os.environ.get('LOCAL_RANK') or 0)}" if torch.cuda.is_available() and not smoke else "cpu"
    )
    if smoke:
        config = dict(config, samples=256, hidden=8, epochs=1, epoch_pause=0)
    torch.manual_seed(config["seed"])
    random.seed(config["seed"])
    determinism = deterministic()
    inputs, targets, split = make_data(config)
    model = build_model(config).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)

    latest = os.path.join(ckpt_dir, "latest.pth")
    start_epoch, best_val, state = 0, math.inf, {}
    if rank == 0 and os.path.exists(latest) and not smoke:
        state = torch.load(latest, map_location="cpu", weights_only=True)
    state = shared_state(state, world)
    if state:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        restore_rng(state["rng"])
        start_epoch, best_val = state["epoch"], state["best_val"]
        print(f"resumed from epoch {start_epoch}", flush=True)
    net = model  # what is saved and evaluated: the model itself, not its DDP wrapper
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)

    train_csv = os.path.join(out_dir, "train.csv")
    # The rows logged so far travel in the checkpoint: a run continued on another box (its checkpoint
    # restored from the durable tier, its output/ empty) still exports its whole train.csv.
    rows = list(state.get("rows") or []) if start_epoch else []
    if start_epoch and not rows and os.path.exists(train_csv):
        with open(train_csv) as handle:
            rows = [row for row in csv.DictReader(handle) if int(row["epoch"]) <= start_epoch]
    if rows and rank == 0:  # written at once: a resume from the last epoch trains nothing more and must still export it
        write_rows(train_csv, rows)

    every = float(os.environ.get("REMOTEGPU_CHECKPOINT_EVERY_S") or 0)  # 0: after every epoch
    every_steps = int(os.environ.get("REMOTEGPU_CHECKPOINT_EVERY_STEPS") or 0)  # an epoch is a logged step
    saved_at, saved_epoch = time.monotonic(), start_epoch
    train_ids = split["train"]
    share = len(train_ids) // world  # every rank the same number of batches: DDP steps together
    batches = math.ceil(share / config["batch_size"])
    for epoch in range(start_epoch + 1, config["epochs"] + 1):
        model.train()
        started, total = time.time(), 0.0
        order = train_ids[torch.randperm(len(train_ids))][rank * share : (rank + 1) * share]
        for batch in range(2 if smoke else batches):
            ids = order[batch * config["batch_size"] : (batch + 1) * config["batch_size"]]
            logits = model(inputs[ids].to(device))
            loss = nn.functional.cross_entropy(logits, targets[ids].to(device))
            if not torch.isfinite(loss):
                print(f"loss is {loss.item()} at epoch {epoch}", flush=True)
                return 3
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        _, val_loss, val_acc = evaluate(net, inputs[split["val"]], targets[split["val"]], device)
        if rank > 0:  # rank 0 logs, checkpoints and exports; the others train their share
            hold(config.get("hold_file"), epoch)
            continue
        rows.append(
            {
                "epoch": epoch,
                "train_loss": f"{total / max(1, batches):.6f}",
                "val_loss": f"{val_loss:.6f}",
                "val_accuracy": f"{val_acc:.6f}",
                "seconds": f"{time.time() - started:.3f}",
            }
        )
        print(
            f"epoch {epoch}/{config['epochs']} train_loss={rows[-1]['train_loss']} val_loss={val_loss:.4f}", flush=True
        )
        if smoke:
            print("smoke ok: 2 batches on cpu", flush=True)
            return 0
        if val_loss < best_val:
            best_val = val_loss
            atomic_save(
                {"model": net.state_dict(), "epoch": epoch, "val_loss": val_loss}, os.path.join(ckpt_dir, "best.pth")
            )
        state = {
            "model": net.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "best_val": best_val,
            "rng": rng_state(),
            "rows": rows,
        }
        by_time = not every or time.monotonic() - saved_at >= every
        due = epoch - saved_epoch >= every_steps if every_steps else by_time
        if due or epoch == config["epochs"] or SAVE_NOW.is_set():
            atomic_save(state, latest)
            saved_at, saved_epoch = time.monotonic(), epoch
            if SAVE_NOW.is_set():
                print(f"checkpoint saved at epoch {epoch} on SIGUSR1 (the walltime is near)", flush=True)
                SAVE_NOW.clear()
        write_rows(train_csv, rows)
        time.sleep(float(config.get("epoch_pause", 0)))
        hold(config.get("hold_file"), epoch)

    if rank == 0:
        finish(config, config_path, net, inputs, targets, split, ckpt_dir, out_dir, device, determinism)
    leave(world)
    return 0


def hold(path, epoch):
    """While the config's hold_file exists, wait before the next epoch: whoever watches (a demo, a
    test) keeps the run at a logged, checkpointed epoch as long as it needs, and removing the file
    lets it go on at once. A file that holds a number holds only from that epoch on (it is read on
    each look: rewriting it moves the hold). No file named: no wait."""
    while path and os.path.exists(str(path)):
        try:
            with open(str(path)) as handle:
                text = handle.read().strip()
        except OSError:  # removed between the two looks
            return
        if re.fullmatch(r"[0-9]{1,9}", text) and epoch < int(text):
            return
        time.sleep(0.05)


def write_rows(train_csv, rows):
    """train.csv from the rows logged so far, replaced atomically."""
    with open(train_csv + ".tmp", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(train_csv + ".tmp", train_csv)


def finish(config, config_path, model, inputs, targets, split, ckpt_dir, out_dir, device, determinism):
    """Write the sealed-export layout: the wrapper validates it and renames it into export/."""
    best = torch.load(os.path.join(ckpt_dir, "best.pth"), map_location=device, weights_only=True)
    model.load_state_dict(best["model"])
    shutil.copyfile(os.path.join(ckpt_dir, "best.pth"), os.path.join(out_dir, "best.pth"))
    last = torch.load(os.path.join(ckpt_dir, "latest.pth"), map_location="cpu", weights_only=True)
    torch.save({"model": last["model"], "epoch": last["epoch"]}, os.path.join(out_dir, "last.pth"))
    shutil.copyfile(config_path, os.path.join(out_dir, "config.yaml"))
    test_dir = os.path.join(out_dir, "test", str(config["test_id"]))
    os.makedirs(test_dir, exist_ok=True)
    test_ids = split["test"]
    logits, loss, accuracy = evaluate(model, inputs[test_ids], targets[test_ids], device)
    write_results(os.path.join(test_dir, "results.parquet"), test_ids, targets[test_ids], logits)
    with open(os.path.join(test_dir, "metrics.json"), "w") as handle:
        json.dump({"accuracy": accuracy, "loss": loss}, handle, indent=2)
    run = {
        "run_id": os.environ.get("REMOTEGPU_RUN_ID", "manual"),
        "model": "mlp",
        "architecture": ARCHITECTURE,
        "seed": config["seed"],
        "seeds": {"torch": config["seed"], "data": config.get("data_seed", config["seed"])},
        "determinism": determinism,
        "selection": {"split": "val", "metric": "val_loss", "direction": "min", "epoch": best["epoch"]},
        "epochs": config["epochs"],
        "tests": [str(config["test_id"])],
        "splits": {name: sorted(ids.tolist()) for name, ids in split.items()},
        # Which bytes the selection chose: the export's checkpoints, bound by their SHA-256.
        "checkpoints": {
            name: {"sha256": file_sha256(os.path.join(out_dir, name))} for name in ("best.pth", "last.pth")
        },
    }
    with open(os.path.join(out_dir, "run.json"), "w") as handle:
        json.dump(run, handle, indent=2)
    print(f"done: best epoch {best['epoch']}, test accuracy {accuracy:.4f}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--config", default="config.yaml")
    args = parser.parse_args(argv)
    smoke = os.environ.get("REMOTEGPU_SMOKE") == "1"
    signal.signal(signal.SIGUSR1, lambda signum, frame: SAVE_NOW.set())
    return train(read_config(args.config), args.config, smoke)


if __name__ == "__main__":
    sys.exit(main())
