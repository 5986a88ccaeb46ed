#!/usr/bin/env python
"""Benchmark: staging a dataset box to box against a raw ssh stream between the same two boxes.

A source box (a loopback sshd) holds two datasets: one large file (default 1 GiB) and 10,000 small
files. The target box is this machine. For each, in the same run, on the same files:
  * ours: the built wrapper's `stage-pull` on the target, as a run's preflight starts it: one ssh stream
    to the source with a key that may run only `stage-send` there, every file hashed as it lands and
    renamed into cache/data/<roster>/ on a match;
  * the raw stream: `ssh cat` of the large file, `ssh tar cf -` piped into `tar xf -` for the small
    files (the bytes alone, nothing checked: the floor staging is held to, within 1.15x).

    .venv/bin/python bench/staging_bench.py [--large-mib 1024] [--small-files 10000] [--repeat 3]

Needs openssh-server (sshd) and the OpenSSH client. Prints one JSON line, then a table.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.custody_bench import make_large, make_small  # noqa: E402
from node.build import wrapper_file  # noqa: E402
from node.transport import scan_host_key  # noqa: E402
from tests.sshd import Sshd  # noqa: E402


def roster_of(root: Path) -> list[dict]:
    code = "import json, runpy, sys; w = runpy.run_path(sys.argv[1]); "
    code += "print(json.dumps(w['roster_of_dir'](sys.argv[2])))"
    done = subprocess.run([sys.executable, "-c", code, str(wrapper_file()), str(root)], capture_output=True, check=True)
    return json.loads(done.stdout)


class Boxes:
    def __init__(self, work: Path):
        self.work = work
        self.sshd = Sshd(work / "sshd", granted_keys=work / "granted_keys").start()
        key = scan_host_key("127.0.0.1", self.sshd.port, timeout=5)
        self.known_host = f"[127.0.0.1]:{self.sshd.port} {key.key_type} {key.key_base64}"
        (work / "known_hosts").write_text(self.known_host + "\n")
        self.ssh = ["ssh", "-p", str(self.sshd.port), "-o", f"UserKnownHostsFile={work / 'known_hosts'}"]
        self.ssh += ["-o", "BatchMode=yes", "-i", str(self.sshd.user_key), f"{self.sshd.user}@127.0.0.1"]

    def grant(self, root: Path) -> str:
        """A key for stage-send of root only, as staging installs it: its private half."""
        key = self.work / "stage_key"
        for suffix in ("", ".pub"):
            Path(f"{key}{suffix}").unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        command = shlex.join([sys.executable, "-I", "-S", str(wrapper_file()), "stage-send", str(root)])
        public = (self.work / "stage_key.pub").read_text().split()[:2]
        line = f'restrict,command="{command}" {" ".join(public)} remotegpu-stage-{int(time.time())}-bench'
        (self.work / "granted_keys").write_text(line + "\n")
        return key.read_text()

    def ours(self, root: Path, files: list[dict], target: Path, private: str) -> None:
        source = {"host": "127.0.0.1", "port": self.sshd.port, "user": self.sshd.user, "key": private}
        source["known_host"] = self.known_host
        request = {"target": str(target), "roster_sha256": "bench", "files": files, "source": source}
        command = [sys.executable, "-I", "-S", str(wrapper_file()), "stage-pull"]
        done = subprocess.run(command, input=json.dumps(request).encode() + b"\n", capture_output=True, check=True)
        answer = json.loads(done.stdout.splitlines()[-1])
        if not answer.get("complete"):
            raise RuntimeError(f"stage-pull did not finish: {answer}")

    def raw(self, root: Path, target: Path, large: bool) -> None:
        if large:
            target.mkdir()
            with open(target / "best.pth", "wb") as out:
                subprocess.run([*self.ssh, "cat", str(root / "best.pth")], stdout=out, check=True)
            return
        target.mkdir()
        sender = subprocess.Popen([*self.ssh, "tar", "-C", str(root), "-cf", "-", "."], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-C", str(target), "-xf", "-"], stdin=sender.stdout, check=True)
        sender.stdout.close()
        if sender.wait() != 0:
            raise RuntimeError("ssh tar failed")

    def close(self) -> None:
        self.sshd.stop()


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--large-mib", type=int, default=1024)
    parser.add_argument("--small-files", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="staging-bench-"))
    boxes = Boxes(work)
    results = []
    try:
        for kind in ("large", "small"):
            root = work / f"source-{kind}"
            make_large(root, args.large_mib) if kind == "large" else make_small(root, args.small_files)
            files = roster_of(root)
            private = boxes.grant(root)
            ours, raw = [], []
            for attempt in range(args.repeat):
                target, floor = work / f"staged-{attempt}", work / f"raw-{attempt}"
                ours.append(timed(lambda: boxes.ours(root, files, target, private)))  # noqa: B023
                raw.append(timed(lambda: boxes.raw(root, floor, kind == "large")))  # noqa: B023
                shutil.rmtree(target)
                shutil.rmtree(floor)
            total = sum(item["bytes"] for item in files)
            results.append(
                {
                    "dataset": kind,
                    "files": len(files),
                    "bytes": total,
                    "ours_stage_s": round(statistics.median(ours), 3),
                    "raw_ssh_stream_s": round(statistics.median(raw), 3),
                }
            )
            shutil.rmtree(root)
    finally:
        boxes.close()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"results": results, "cpus": os.cpu_count()}))
    print(f"\n{'dataset':<28} | {'ours s':>8} | {'raw s':>8} | ratio (goal ≤ 1.15x)")
    for result in results:
        large = result["dataset"] == "large"
        what = f"{result['bytes'] / 2**20:,.0f} MiB file" if large else f"{result['files']:,} files"
        ratio = result["ours_stage_s"] / result["raw_ssh_stream_s"]
        print(f"{what:<28} | {result['ours_stage_s']:>8} | {result['raw_ssh_stream_s']:>8} | {ratio:.2f}x")


if __name__ == "__main__":
    main()
