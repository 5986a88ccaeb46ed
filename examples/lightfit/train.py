#!/usr/bin/env python3
"""lightfit with RemoteGPU: train_plain.py plus the lines marked `# RemoteGPU` (the run helper,
docs/contract.md): checkpoints where the product looks, always resumed, the smoke, train.csv, the export.
"""

import argparse
import csv
import glob
import os
import time

import remotegpu_run as rg  # RemoteGPU
import torch
from torch import nn


def read_config(path):
    config = {}
    with open(path) as handle:
        for line in handle:
            key, _, value = line.split("#", 1)[0].partition(":")
            if key.strip():
                config[key.strip()] = float(value) if "." in value else int(value)
    return config


class CSVLogger:
    def __init__(self, root):
        self.path = os.path.join(root, "version_0", "metrics.csv")
        os.makedirs(os.path.dirname(self.path), exist_ok=True)

    def log_metrics(self, metrics, step):
        new = not os.path.exists(self.path)
        with open(self.path, "a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["step", *metrics])
            if new:
                writer.writeheader()
            writer.writerow({"step": step, **metrics})


def data(config):
    generator = torch.Generator().manual_seed(config["seed"])
    inputs = torch.randn(config["samples"], 8, generator=generator)
    targets = (inputs @ torch.randn(8, 3, generator=generator)).argmax(dim=1)
    split = int(config["samples"] * 0.8)
    return (inputs[:split], targets[:split]), (inputs[split:], targets[split:])


def held(hold_file, at):
    """Whether hold_file exists and names a number at or below `at` (a demo and test knob)."""
    try:
        with open(hold_file) as handle:
            return at >= int(handle.read())
    except (OSError, ValueError):
        return False


def newest(directory):
    found = glob.glob(os.path.join(directory, "epoch=*-step=*.ckpt"))
    return max(found, key=os.path.getmtime) if found else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--default_root_dir", default="lightning_logs")
    parser.add_argument("--ckpt_path", default=None)
    parser.add_argument("--max_epochs", type=int, default=None)  # overrides the config's
    parser.add_argument("--hold_file", default="")  # a demo and test knob: holds after each save from its epoch
    args = parser.parse_args()
    config = read_config(args.config)
    config["max_epochs"] = args.max_epochs or config["max_epochs"]
    torch.manual_seed(config["seed"])
    (train_x, train_y), (val_x, val_y) = data(config)
    model = nn.Sequential(nn.Linear(8, config["hidden"]), nn.ReLU(), nn.Linear(config["hidden"], 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    checkpoints = rg.CHECKPOINT_DIR  # RemoteGPU
    os.makedirs(checkpoints, exist_ok=True)
    logger, start, step = CSVLogger(args.default_root_dir), 0, 0
    resume = newest(checkpoints)  # RemoteGPU: always from the newest
    if resume:
        state = torch.load(resume, weights_only=True)
        model.load_state_dict(state["state_dict"])
        optimizer.load_state_dict(state["optimizer_states"][0])
        start, step = state["epoch"] + 1, state["global_step"]
    for epoch in range(start, config["max_epochs"]):
        for batch in range(0, len(train_x), 32):
            loss = nn.functional.cross_entropy(model(train_x[batch : batch + 32]), train_y[batch : batch + 32])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
        with torch.no_grad():
            val_loss = nn.functional.cross_entropy(model(val_x), val_y).item()
        logger.log_metrics({"epoch": epoch, "train_loss": round(loss.item(), 6), "val_loss": round(val_loss, 6)}, step)
        print(f"Epoch {epoch}: train_loss={loss.item():.4f} val_loss={val_loss:.4f}", flush=True)
        rg.log(step, epoch=epoch, train_loss=round(loss.item(), 6), val_loss=round(val_loss, 6))  # RemoteGPU
        if rg.SMOKE:  # RemoteGPU
            return
        state = {"epoch": epoch, "global_step": step, "state_dict": model.state_dict()}
        state["optimizer_states"] = [optimizer.state_dict()]
        torch.save(state, os.path.join(checkpoints, f"epoch={epoch}-step={step}.ckpt"))
        while held(args.hold_file, epoch):
            time.sleep(0.05)
    probabilities = torch.softmax(model(val_x), dim=1).detach().tolist()  # RemoteGPU
    val = {"sample_id": list(range(len(val_y))), "target": val_y.tolist(), "probabilities": probabilities}  # RemoteGPU
    rg.export(model.state_dict(), args.config, tests={"val": {**val, "metrics": {"loss": val_loss}}})  # RemoteGPU


if __name__ == "__main__":
    main()
