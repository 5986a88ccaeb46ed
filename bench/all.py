#!/usr/bin/env python
"""`make bench`: every benchmark, then one table with each figure beside its baseline from the
same run, so a regression shows as a ratio.

Each benchmark runs in its own process and prints its own report as it goes; the JSON lines it
prints are collected here. Baselines: the same page at 1,000 runs (history), a raw `ssh cat` /
`ssh tar` stream and `scp` (custody), that raw stream between two boxes (dataset staging),
tick-bound polling without push (watch), a worker that loads the verifier at start (worker memory),
a raw `cp` between the same mounts (checkpoint mirror), one process on the same work (two torchrun nodes),
every GPU reading written (GPU use).

    .venv/bin/python bench/all.py [--quick]      # --quick: smaller sizes, for a check that it runs
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(script: str, *args: str) -> list[dict]:
    """Run one benchmark, echoing its output; its JSON lines."""
    print(f"== {script} {' '.join(args)}", flush=True)
    process = subprocess.Popen([sys.executable, str(HERE / script), *args], stdout=subprocess.PIPE, text=True)
    rows = []
    for line in process.stdout:
        print(line, end="", flush=True)
        if line.startswith("{"):
            rows.append(json.loads(line))
    if process.wait() != 0:
        raise SystemExit(f"{script} failed with exit code {process.returncode}")
    return rows


def history_rows(results: list[dict]) -> list[tuple]:
    rows = []
    for result in results:
        size = f"{result['runs']:,} runs / {result['events']:,} events"
        for page in ("history", "history_filtered", "history_page_50", "run_page"):
            small, large = result["small"][page], result["large"][page]
            rows.append(
                (
                    f"{page} p95 ms at {size} ({result['database']})",
                    large["p95_ms"],
                    f"{small['p95_ms']} (same page at {result['small_runs']:,} runs)",
                    large["p95_ms"] / max(small["p95_ms"], 0.1),
                    "≤ 1.3x, queries " + ("equal" if small["queries"] == large["queries"] else "DIFFER"),
                )
            )
    return rows


def custody_rows(report: dict) -> list[tuple]:
    rows = []
    for result in report["results"]:
        large = result["export"] == "large"
        what = f"{result['bytes'] / 2**20:,.0f} MiB file" if large else f"{result['files']:,} files"
        raw = "ssh cat" if large else "ssh tar | tar x"
        ours = result["ours_pull_verify_s"]
        raw_s, scp_s = result["raw_ssh_stream_s"], result["scp_s"]
        rows.append((f"custody pull + verify s, {what}", ours, f"{raw_s} (raw {raw})", ours / raw_s, "≤ 1.15x"))
        rows.append((f"custody pull + verify s, {what}", ours, f"{scp_s} (scp)", ours / scp_s, ""))
    return rows


WATCH_FIGURES = (  # (figure, key in a watch_bench row, goal)
    ("p95 s node line → browser socket", "latency_p95_s", "≤ 1 s"),
    ("probe round-trips / box / tick", "round_trips_per_instance_tick", "≤ 1"),
    ("processes started / box / tick", "processes_per_instance_tick", ""),
    ("MiB per added watched run", "rss_mib_per_added_run", "≤ 1 MiB"),
    ("CPU s per run-hour", "cpu_s_per_run_hour", ""),
    ("handshakes / box after a blip", "blip_reconnects_per_instance", "≈ 1"),
)


def watch_rows(results: list[dict]) -> list[tuple]:
    """Push on, beside push off (tick-bound polling) at the same size."""
    rows = []
    for n in sorted({r["runs"] for r in results}):
        modes = {r["push"]: r for r in results if r["runs"] == n}
        on, off = modes.get(True), modes.get(False)
        if on is None or off is None:
            continue
        where = f"{n} runs / {on['instances']} boxes / 2 workers"
        for figure, key, goal in WATCH_FIGURES:
            ratio = on[key] / off[key] if off[key] else float("nan")
            rows.append((f"{figure}, {where}", on[key], f"{off[key]:.3g} (tick-bound)", ratio, goal))
    return rows


def staging_rows(report: dict) -> list[tuple]:
    rows = []
    for result in report["results"]:
        large = result["dataset"] == "large"
        what = f"{result['bytes'] / 2**20:,.0f} MiB file" if large else f"{result['files']:,} files"
        ours, raw = result["ours_stage_s"], result["raw_ssh_stream_s"]
        floor = "ssh cat" if large else "ssh tar | tar x"
        rows.append((f"dataset stage box to box s, {what}", ours, f"{raw} (raw {floor})", ours / raw, "≤ 1.15x"))
    return rows


def mirror_rows(report: dict) -> list[tuple]:
    ours, raw = report["mirror_s"], report["raw_cp_s"]
    what = f"checkpoint mirror s, {report['mib']} MiB to a tmpfs"
    return [(what, ours, f"{raw:.3g} (raw cp)", ours / raw, "≤ 1.5x (it hashes every byte)")]


def multinode_rows(report: dict) -> list[tuple]:
    two, one = report["two_nodes_s"], report["one_process_s"]
    what = f"tinyfit over two torchrun nodes s, {report['samples']} samples x {report['epochs']} epochs"
    return [(what, two, f"{one:.3g} (one process, same work)", two / one, "the price of a second node")]


def gpu_use_rows(results: list[dict]) -> list[tuple]:
    base, ours = results
    where = f"{ours['runs']} live GPU runs, a minute of ticks"
    return [
        (f"GPU use writes / tick, {where}", ours["writes_per_tick"], f"{base['writes_per_tick']} (every reading)",
         ours["writes_per_tick"] / base["writes_per_tick"], "only what changes; samples equal"),
        (f"GPU use ms / tick, {where}", ours["ms_per_tick"], f"{base['ms_per_tick']} (every reading)",
         ours["ms_per_tick"] / base["ms_per_tick"], ""),
    ]  # fmt: skip


def memory_rows(report: dict) -> list[tuple]:
    ours, baseline = report["idle_worker_rss_mib"], report["baseline_rss_mib"]
    return [("idle worker RSS MiB", ours, f"{baseline} (verifier loaded at start)", ours / baseline, "≤ 150 MiB")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    history = ["--small", "200", "--runs", "2000", "--events", "20000", "--repeat", "5"] if args.quick else []
    custody = ["--large-mib", "64", "--small-files", "500", "--repeat", "1"] if args.quick else []
    watch = ["10"] if args.quick else ["10", "100", "500"]
    rows = history_rows(run("history_bench.py", *history))
    rows += custody_rows(run("custody_bench.py", *custody)[0])
    rows += staging_rows(run("staging_bench.py", *custody)[0])
    rows += watch_rows(run("watch_bench.py", *watch))
    rows += memory_rows(run("worker_memory_bench.py")[0])
    rows += mirror_rows(run("ckpt_mirror_bench.py", *(["--mib", "128"] if args.quick else []))[0])
    rows += multinode_rows(run("multinode_bench.py", *(["--repeat", "1"] if args.quick else []))[0])
    rows += gpu_use_rows(run("gpu_use_bench.py", *(["--runs", "50", "--ticks", "4"] if args.quick else [])))
    width = max(len(row[0]) for row in rows)
    print(f"\n{'figure'.ljust(width)} | {'measured':>9} | baseline (same run)               | ratio  | goal")
    for figure, measured, baseline, ratio, goal in rows:
        print(f"{figure.ljust(width)} | {measured:>9.3g} | {baseline:<34} | {ratio:>5.2f}x | {goal}")


if __name__ == "__main__":
    main()
