#!/usr/bin/env python
"""The checkpoint mirror's throughput (the wrapper's CheckpointMirror: hashed as copied, staged,
renamed, manifest written) against a raw `cp` of the same file between the same mounts: the data root
on this disk, the durable tier a tmpfs of its own (root only). Medians of --repeat; prints one JSON line.

    .venv/bin/python bench/ckpt_mirror_bench.py [--mib 1024] [--repeat 3]
"""

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from node.build import wrapper_file  # noqa: E402
from tests.box_specs import spec_with  # noqa: E402 (a whole spec, as a launch writes one)


def load_wrapper():
    spec = importlib.util.spec_from_file_location("remotegpu_wrapper", wrapper_file())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    wrapper = load_wrapper()
    work = Path(tempfile.mkdtemp(prefix="ckpt-bench-", dir=os.path.expanduser("~")))
    durable = work / "durable"
    durable.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.mib * 3 + 64}m", "tmpfs", str(durable)], check=True)
    try:
        ckpt = work / "data" / "proj" / "active" / "r" / "ckpt"
        ckpt.mkdir(parents=True)
        with open(ckpt / "latest.pth", "wb") as handle:
            for _ in range(args.mib):
                handle.write(os.urandom(1 << 20))
        ours, raw = [], []
        for index in range(args.repeat):
            target = durable / f"t{index}" / "ckpt"
            mirror_to = {"root": str(durable), "target": str(target), "keep": 1}
            spec = spec_with(wrapper, run_root=str(work / "data" / "proj"), ckpt=str(ckpt), ckpt_mirror=mirror_to)
            mirror = wrapper.CheckpointMirror(spec, str(work))
            mirror.begin()
            subprocess.run(["sync"], check=True)
            began = time.perf_counter()
            found = wrapper.candidates(str(ckpt))["latest.pth"]
            mirror._copy("latest.pth", str(ckpt / "latest.pth"), found)
            ours.append(time.perf_counter() - began)
            assert mirror.state["newest"]["bytes"] == args.mib << 20, mirror.state
            shutil.rmtree(durable / f"t{index}")
            began = time.perf_counter()
            subprocess.run(["cp", str(ckpt / "latest.pth"), str(durable / "raw.pth")], check=True)
            raw.append(time.perf_counter() - began)
            os.remove(durable / "raw.pth")
        report = {"mib": args.mib, "mirror_s": statistics.median(ours), "raw_cp_s": statistics.median(raw)}
        report["mirror_mib_s"] = args.mib / report["mirror_s"]
        report["raw_mib_s"] = args.mib / report["raw_cp_s"]
        print(
            f"checkpoint mirror {args.mib} MiB: {report['mirror_s']:.2f} s ({report['mirror_mib_s']:.0f} MiB/s);"
            f" raw cp {report['raw_cp_s']:.2f} s ({report['raw_mib_s']:.0f} MiB/s)"
        )
        print(json.dumps(report))
    finally:
        subprocess.run(["umount", "-l", str(durable)], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
