#!/usr/bin/env python
"""The overhead of two nodes against one on the same total work: the bundled example (tinyfit) trained
once as one process, and once as two torchrun nodes on this machine (static rendezvous on loopback, gloo,
one process each, OMP_NUM_THREADS=1), on the same config and data. Each rank trains half of every epoch,
so the total work is the same; the difference is the rendezvous, the start of a second interpreter and
the gradient all-reduce of every step. Medians of --repeat; prints one JSON line.

    .venv/bin/python bench/multinode_bench.py [--samples 4096] [--epochs 12] [--repeat 3]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TINYFIT = Path(__file__).resolve().parent.parent / "examples" / "tinyfit"


def workdir(samples: int, epochs: int) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="multinode-bench-"))
    lines = [
        line
        for line in (TINYFIT / "config.yaml").read_text().splitlines()
        if not line.startswith(("samples:", "epochs:"))
    ]
    (folder / "config.yaml").write_text("\n".join([*lines, f"samples: {samples}", f"epochs: {epochs}", ""]))
    return folder


def environment(folder: Path, name: str) -> dict:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "REMOTEGPU_CHECKPOINT_DIR": str(folder / name / "ckpt"),
        "REMOTEGPU_OUTPUT_DIR": str(folder / name / "out"),
        "REMOTEGPU_COLLECTIVE_TIMEOUT_S": "60",
    }


def one_process(folder: Path) -> float:
    began = time.monotonic()
    subprocess.run(
        [sys.executable, str(TINYFIT / "train.py"), "--config", "config.yaml"],
        cwd=folder,
        env=environment(folder, f"one-{began}"),
        check=True,
        capture_output=True,
    )
    return time.monotonic() - began


def two_nodes(folder: Path) -> float:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    began = time.monotonic()
    env = environment(folder, f"two-{began}")
    nodes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                f"--node-rank={rank}",
                "--nnodes=2",
                "--nproc-per-node=1",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                "--max-restarts=0",
                str(TINYFIT / "train.py"),
                "--config",
                "config.yaml",
            ],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for rank in (0, 1)
    ]
    if any(node.wait(timeout=600) != 0 for node in nodes):
        raise SystemExit("a node failed")
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = workdir(args.samples, args.epochs)
    try:
        one = statistics.median(one_process(folder) for _ in range(args.repeat))
        two = statistics.median(two_nodes(folder) for _ in range(args.repeat))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        json.dumps(
            {
                "samples": args.samples,
                "epochs": args.epochs,
                "one_process_s": round(one, 2),
                "two_nodes_s": round(two, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
