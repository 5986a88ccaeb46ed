#!/usr/bin/env python
"""Benchmark: our pull + verify against a raw ssh stream, `scp`, `scp` + `sha256sum`, and hashing alone.

Two exports on a loopback sshd: one large checkpoint (default 1 GiB) and 10,000 small files.
For each it times, in the same run and on the same files:
  * ours: `node.pull.pull_export` (stream, hash while writing, rename on a match) against the
    roster, with the node-side roster pass timed separately (the manual route has none);
  * the raw stream: `ssh cat` of the large file, `ssh tar cf -` piped into `tar xf -` for the small
    files (the bytes alone, nothing checked: the floor custody is held to, within 1.15x);
  * `scp` alone (`scp -r` for the small files), then `scp` followed by `sha256sum`;
  * paramiko `SFTPClient.get` (the large file only), the route we do not take;
  * hashing alone: Python `hashlib` vs coreutils `sha256sum` on the same bytes.

    .venv/bin/python bench/custody_bench.py [--large-mib 1024] [--small-files 10000] [--repeat 3]

Needs openssh-server (sshd) and the OpenSSH client. Prints one JSON line, then a table.
"""

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleet.credentials import resolve_auth  # noqa: E402
from node.pull import pull_export  # noqa: E402
from node.transport import SSHTransport, scan_host_key  # noqa: E402
from tests.sshd import Sshd  # noqa: E402


@dataclass(frozen=True)
class Entry:
    path: str
    bytes: int
    sha256: str


def make_large(root: Path, mib: int) -> None:
    root.mkdir(parents=True)
    with open(root / "best.pth", "wb") as handle:
        for _ in range(mib):
            handle.write(os.urandom(1 << 20))


def make_small(root: Path, count: int) -> None:
    for index in range(count):
        path = root / "test" / f"shard-{index // 500:03d}" / f"sample-{index:05d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(512 + index % 3584))


def roster(root: Path) -> list[Entry]:
    entries = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest = hashlib.file_digest(path.open("rb"), "sha256").hexdigest()
        entries.append(Entry(str(path.relative_to(root)), path.stat().st_size, digest))
    return entries


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def drop(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Bench:
    def __init__(self, work: Path):
        self.work = work
        self.sshd = Sshd(work / "sshd").start()
        self.key = scan_host_key("127.0.0.1", self.sshd.port, timeout=5)
        known = work / "known_hosts"
        known.write_text(f"[127.0.0.1]:{self.sshd.port} {self.key.key_type} {self.key.key_base64}\n")
        self.ssh_options = ["-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes", "-i", str(self.sshd.user_key)]

    def transport(self) -> SSHTransport:
        auth = resolve_auth(str(self.sshd.user_key))
        return SSHTransport("127.0.0.1", self.sshd.port, self.sshd.user, self.key, auth, 10)

    def scp(self, source: Path, target: Path, recursive: bool = False) -> None:
        flags = ["-q", "-P", str(self.sshd.port), *self.ssh_options] + (["-r"] if recursive else [])
        subprocess.run(["scp", *flags, f"{self.sshd.user}@127.0.0.1:{source}", str(target)], check=True)

    def raw_stream(self, source: Path, target: Path, large: bool) -> None:
        """The floor: the bytes over one ssh stream, nothing checked (`cat` one file, `tar` a tree)."""
        ssh = ["ssh", "-p", str(self.sshd.port), *self.ssh_options, f"{self.sshd.user}@127.0.0.1"]
        if large:
            with open(target, "wb") as out:
                subprocess.run([*ssh, "cat", str(source)], stdout=out, check=True)
            return
        target.mkdir()
        sender = subprocess.Popen([*ssh, "tar", "-C", str(source), "-cf", "-", "."], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-C", str(target), "-xf", "-"], stdin=sender.stdout, check=True)
        sender.stdout.close()
        if sender.wait() != 0:
            raise RuntimeError("ssh tar failed")

    def ours(self, source: Path, entries, target: Path) -> None:
        # Bulk streams need no paramiko session; a verification reuses the one it already holds.
        transport = self.transport()
        try:
            pull_export(transport, str(source), entries, target, flush=False)
        finally:
            transport.close()

    def sftp_get(self, source: Path, target: Path) -> None:
        with self.transport() as transport, transport._sftp() as sftp:
            sftp.get(str(source), str(target))

    def node_roster(self, source: Path) -> float:
        """What the node pays before a pull: the wrapper's one streamed pass over the export."""
        from node.build import wrapper_file

        code = f"import runpy; w = runpy.run_path({str(wrapper_file())!r}); "
        code += f"w['roster_of']({str(source)!r})"
        with self.transport() as transport:
            return transport.run([sys.executable, "-c", code], timeout=600).duration

    def close(self) -> None:
        self.sshd.stop()


def sha256sum(paths: list[Path]) -> None:
    # xargs keeps the argument list under the kernel's limit for 10,000 files.
    listing = "\0".join(str(p) for p in paths).encode()
    subprocess.run(["xargs", "-0", "sha256sum"], input=listing, check=True, stdout=subprocess.DEVNULL)


def hashlib_all(paths: list[Path]) -> None:
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)


def measure(bench: Bench, name: str, source: Path, large: bool, repeat: int) -> dict:
    entries = roster(source)
    files = [source / e.path for e in entries]
    total = sum(e.bytes for e in entries)
    out = bench.work / "out"
    result = {"export": name, "files": len(entries), "bytes": total}

    def fresh(label, fn):
        drop(out)
        out.mkdir()
        os.sync()  # start each timing from a clean page cache state
        result.setdefault(label + "_all", []).append(round(timed(fn), 3))
        result[label] = statistics.median(result[label + "_all"])

    scp_source = source / "best.pth" if large else source
    # Interleaved and repeated: this kind of machine is noisy; the medians are compared.
    for _ in range(repeat):
        fresh("scp_s", lambda: bench.scp(scp_source, out / "copy", recursive=not large))
        copied = sorted(p for p in (out / "copy").rglob("*") if p.is_file()) if not large else [out / "copy"]
        result["sha256sum_after_scp_s"] = round(timed(partial(sha256sum, copied)), 3)
        fresh("raw_ssh_stream_s", lambda: bench.raw_stream(scp_source, out / "raw", large))
        fresh("ours_pull_verify_s", lambda: bench.ours(source, entries, out / "custody"))
        # The durability flush custody does before it records a copy (scp never flushes), timed apart.
        result["ours_flush_s"] = round(timed(os.sync), 3)
    result["scp_plus_sha256sum_s"] = round(result["scp_s"] + result["sha256sum_after_scp_s"], 3)
    result["node_roster_s"] = round(bench.node_roster(source), 3)
    if large:
        fresh("paramiko_sftp_get_s", lambda: bench.sftp_get(source / "best.pth", out / "best.pth"))
    result["sha256sum_s"] = round(timed(lambda: sha256sum(files)), 3)
    result["hashlib_s"] = round(timed(lambda: hashlib_all(files)), 3)
    result["ours_vs_raw_ssh_stream"] = round(result["ours_pull_verify_s"] / result["raw_ssh_stream_s"], 2)
    result["ours_vs_scp"] = round(result["ours_pull_verify_s"] / result["scp_s"], 2)
    result["ours_vs_scp_plus_sha256sum"] = round(result["ours_pull_verify_s"] / result["scp_plus_sha256sum_s"], 2)
    result["ours_MiB_per_s"] = round(total / (1 << 20) / result["ours_pull_verify_s"], 1)
    result["scp_MiB_per_s"] = round(total / (1 << 20) / result["scp_s"], 1)
    drop(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--large-mib", type=int, default=1024)
    parser.add_argument("--small-files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of scp and ours; medians compared")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="remotegpu-custody-bench-"))
    bench = Bench(work)
    try:
        make_large(work / "large", args.large_mib)
        make_small(work / "small", args.small_files)
        results = [
            measure(bench, "large", work / "large", True, args.repeat),
            measure(bench, "small", work / "small", False, args.repeat),
        ]
    finally:
        bench.close()
        drop(work)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({"results": results, "control_peak_rss_mib": peak, "cpus": os.cpu_count()}))
    columns = ["export", "files", "raw_ssh_stream_s", "scp_s", "scp_plus_sha256sum_s", "ours_pull_verify_s"]
    columns += ["ours_vs_raw_ssh_stream", "ours_vs_scp", "ours_flush_s"]
    columns += ["node_roster_s"]
    print(" | ".join(columns))
    for row in results:
        print(" | ".join(str(row.get(column, "")) for column in columns))
    for row in results:
        print(f"{row['export']}: sha256sum {row['sha256sum_s']} s vs hashlib {row['hashlib_s']} s; ", end="")
        print(f"paramiko sftp get {row.get('paramiko_sftp_get_s', '—')} s")


if __name__ == "__main__":
    main()
