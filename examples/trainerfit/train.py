"""trainerfit — a classifier trained the way a Hugging Face Trainer user's script runs, without
transformers and with no RemoteGPU in mind: TrainingArguments-style flags, a `checkpoint-<step>/` folder
per save (`pytorch_model.bin`, `optimizer.pt`, `trainer_state.json` with the global step and the log
history), at most `--save_total_limit` of them kept, `--resume_from_checkpoint True` continuing from the
newest folder, a JSON-lines log (`log.jsonl`) and the final model in `<output_dir>/pytorch_model.bin`
with its evaluation's predictions in `<output_dir>/predictions.csv`.

It runs on a box unchanged through the no-edit path (its trainer files declared with the run,
docs/contract.md): folder checkpoints are found by a glob ending in `/`. `train_rg.py` is this file with
the run helper's lines for train.csv and the export. `--hold_file` (a demo and test knob) holds the run
after each save from the step the file names, while it exists.
"""

import argparse
import csv
import glob
import json
import os
import shutil
import time

import torch
from torch import nn


def arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", default="out")
    parser.add_argument("--num_train_epochs", type=int, default=4)
    parser.add_argument("--per_device_train_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--logging_steps", type=int, default=5)
    parser.add_argument("--save_steps", type=int, default=10)
    parser.add_argument("--save_total_limit", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--resume_from_checkpoint", default=None)
    parser.add_argument("--hold_file", default="")
    return parser.parse_args()


def dataset(seed):
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(480, 6, generator=generator)
    labels = (inputs @ torch.randn(6, 4, generator=generator)).argmax(dim=1)
    return (inputs[:400], labels[:400]), (inputs[400:], labels[400:])


def last_checkpoint(output_dir):
    folders = glob.glob(os.path.join(output_dir, "checkpoint-*"))
    return max(folders, key=lambda folder: int(folder.rsplit("-", 1)[1])) if folders else None


def save_checkpoint(args, model, optimizer, state):
    folder = os.path.join(args.output_dir, f"checkpoint-{state['global_step']}")
    os.makedirs(folder, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))
    torch.save(optimizer.state_dict(), os.path.join(folder, "optimizer.pt"))
    with open(os.path.join(folder, "trainer_state.json"), "w") as handle:
        json.dump(state, handle, indent=2)
    folders = sorted(glob.glob(os.path.join(args.output_dir, "checkpoint-*")), key=lambda f: int(f.rsplit("-", 1)[1]))
    for old in folders[: -args.save_total_limit]:
        shutil.rmtree(old)


def held(hold_file, at):
    """Whether hold_file exists and names a number at or below `at` (a demo and test knob)."""
    try:
        with open(hold_file) as handle:
            return at >= int(handle.read())
    except (OSError, ValueError):
        return False


def log(args, state, entry):
    state["log_history"].append(entry)
    with open(os.path.join(args.output_dir, "log.jsonl"), "a") as handle:
        handle.write(json.dumps(entry) + "\n")
    print(entry, flush=True)


def main():
    args = arguments()
    torch.manual_seed(args.seed)
    (train_x, train_y), (eval_x, eval_y) = dataset(args.seed)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    os.makedirs(args.output_dir, exist_ok=True)
    state = {"global_step": 0, "epoch": 0, "log_history": []}
    resume = last_checkpoint(args.output_dir) if args.resume_from_checkpoint == "True" else args.resume_from_checkpoint
    if resume:
        model.load_state_dict(torch.load(os.path.join(resume, "pytorch_model.bin"), weights_only=True))
        optimizer.load_state_dict(torch.load(os.path.join(resume, "optimizer.pt"), weights_only=True))
        with open(os.path.join(resume, "trainer_state.json")) as handle:
            state = json.load(handle)
        print(f"Continuing training from checkpoint {resume}, global step {state['global_step']}", flush=True)
    batch = args.per_device_train_batch_size
    steps_per_epoch = len(train_x) // batch
    for step in range(state["global_step"] + 1, args.num_train_epochs * steps_per_epoch + 1):
        start = (step - 1) % steps_per_epoch * batch
        loss = nn.functional.cross_entropy(model(train_x[start : start + batch]), train_y[start : start + batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        state["global_step"], state["epoch"] = step, step / steps_per_epoch
        if step % args.logging_steps == 0:
            log(args, state, {"loss": round(loss.item(), 6), "epoch": state["epoch"], "step": step})
        if step % args.save_steps == 0:
            save_checkpoint(args, model, optimizer, state)
            while held(args.hold_file, step):
                time.sleep(0.05)
    with torch.no_grad():
        probabilities = torch.softmax(model(eval_x), dim=1)
    log(args, state, {"eval_accuracy": (probabilities.argmax(1) == eval_y).float().mean().item(), "step": step})
    torch.save(model.state_dict(), os.path.join(args.output_dir, "pytorch_model.bin"))
    with open(os.path.join(args.output_dir, "predictions.csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sample_id", "target", "prediction", *(f"prob_{k}" for k in range(4))])
        for index, (target, row) in enumerate(zip(eval_y.tolist(), probabilities.tolist(), strict=True)):
            writer.writerow([index, target, max(range(4), key=row.__getitem__), *row])


if __name__ == "__main__":
    main()
