"""charlm with RemoteGPU: train.py plus the lines marked `# RemoteGPU` (the run helper, docs/contract.md):
its checkpoint saved atomically where the product looks and resumed wherever the run continues, the
smoke, train.csv, and an export whose loss is recomputed from its predictions."""

import ast
import contextlib
import os
import sys
import time

import remotegpu_run as rg  # RemoteGPU
import torch
from torch import nn
from torch.nn import functional as F

# Defaults, overridden by a config file and then --key=value (nanoGPT's configurator).
out_dir = "out"
eval_interval = 10
eval_iters = 4
log_interval = 1
max_iters = 60
always_save_checkpoint = True
init_from = "scratch"  # or "resume": from out_dir/ckpt.pt
batch_size = 16
block_size = 16
n_embd = 32
learning_rate = 1e-2
seed = 1337
data_file = "input.txt"
hold_file = ""
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str))]
for arg in sys.argv[1:]:
    if not arg.startswith("--"):
        with open(arg) as config_file:
            exec(config_file.read())  # noqa: S102 -- nanoGPT's configurator: the config file is Python
    else:
        key, value = arg[2:].split("=", 1)
        assert key in globals(), f"unknown config key {key}"
        with contextlib.suppress(SyntaxError, ValueError):
            value = ast.literal_eval(value)
        globals()[key] = value
config = {k: globals()[k] for k in config_keys}

torch.manual_seed(seed)
with open(data_file) as handle:
    text = handle.read()
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
split = int(0.9 * len(data))
splits = {"train": data[:split], "val": data[split:]}


def get_batch(name):
    source = splits[name]
    starts = torch.randint(len(source) - block_size - 1, (batch_size,))
    x = torch.stack([source[i : i + block_size] for i in starts])
    y = torch.stack([source[i + 1 : i + 1 + block_size] for i in starts])
    return x, y


class CharModel(nn.Module):
    def __init__(self, vocab_size, n_embd, block_size):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, n_embd)
        self.positions = nn.Embedding(block_size, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))
        logits = self.head(x + self.mlp(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


@torch.no_grad()
def estimate_loss():
    model.eval()
    out = {}
    for name in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            losses[k] = model(*get_batch(name))[1].item()
        out[name] = losses.mean().item()
    model.train()
    return out


def held(iter_num):
    if not hold_file or not os.path.exists(hold_file):
        return False
    with open(hold_file) as handle:
        named = handle.read().strip()
    return not named or iter_num >= int(named)


model_args = dict(vocab_size=len(chars), n_embd=n_embd, block_size=block_size)
iter_num, best_val_loss = 0, 1e9
checkpoint = rg.resume()  # RemoteGPU: the newest checkpoint wherever the run continues (never in the smoke)
if checkpoint:  # RemoteGPU
    model_args = checkpoint["model_args"]
    model = CharModel(**model_args)
    model.load_state_dict(checkpoint["model"])
    iter_num, best_val_loss = checkpoint["iter_num"], checkpoint["best_val_loss"]
    print(f"Resuming training from {out_dir} at iter {iter_num}", flush=True)
else:
    model = CharModel(**model_args)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
if checkpoint:  # RemoteGPU
    optimizer.load_state_dict(checkpoint["optimizer"])
os.makedirs(out_dir, exist_ok=True)

t0 = time.time()
while True:
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", flush=True)
        rg.log(iter_num, train_loss=losses["train"], val_loss=losses["val"])  # RemoteGPU
        if losses["val"] < best_val_loss or always_save_checkpoint:
            best_val_loss = losses["val"]
            if iter_num > 0:
                checkpoint = {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "model_args": model_args,
                    "iter_num": iter_num,
                    "best_val_loss": best_val_loss,
                    "config": config,
                }
                print(f"saving checkpoint to {out_dir}", flush=True)
                rg.save(checkpoint, iter_num)  # RemoteGPU: atomic, where the product looks
        while held(iter_num):
            time.sleep(0.05)
    X, Y = get_batch("train")
    logits, loss = model(X, Y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if iter_num % log_interval == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}, time {(time.time() - t0) * 1000:.2f}ms", flush=True)
        t0 = time.time()
    iter_num += 1
    if iter_num > max_iters or (rg.SMOKE and iter_num > 2):  # RemoteGPU
        break
n = (len(splits["val"]) - 1) // block_size * block_size  # RemoteGPU: each next character of the val text
logits = model(splits["val"][:n].view(-1, block_size))[0].view(n, -1)  # RemoteGPU
rg.export(model.state_dict(), sys.argv[1], tests={"val": rg.predictions(logits, splits["val"][1 : n + 1])})  # RemoteGPU
