#!/usr/bin/env python
"""Benchmark: what keeping GPU use costs the database at a watcher's tick, with N live GPU runs, on
PostgreSQL: the baseline writes each run's reading at every tick (a transaction and a row lock each),
the product writes only what changes something (a sample due, an idle streak that starts or ends:
`runs.gpu_use.worth_writing`), both over the same simulated minute of ticks in the same run.

Each tick every run gets a reading (most busy, some idle, a few flipping); the figures are the writes
per tick, the control-side seconds per tick and the samples kept, which must be the same in both.

    .venv/bin/python bench/gpu_use_bench.py [--runs 500] [--ticks 12]

PostgreSQL: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/remotegpu_gpu_bench; the
database is dropped and re-created). Prints one JSON line per mode, then a table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/remotegpu_gpu_bench")
os.environ.update(
    DJANGO_SETTINGS_MODULE="remotegpu_site.settings",
    DATABASE_URL=URL,
    REMOTEGPU_VAR_DIR=tempfile.mkdtemp(prefix="remotegpu-gpu-bench-"),
    LOG_LEVEL="WARNING",
)
TICK = 5.0  # WATCH_TICK_SECONDS' default


def fresh_database() -> None:
    name = URL.rsplit("/", 1)[1]
    admin = URL.rsplit("/", 1)[0] + "/postgres"
    for sql in (f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"):
        subprocess.run(["psql", admin, "-q", "-c", sql], check=True)


def seed(count: int) -> list:
    from tests import factories

    project = factories.project(name="GPU bench", slug="gpubench")
    boxes = [factories.box(project, host="203.0.113.9", user="root", state="running") for _ in range(count // 5)]
    return [factories.run(boxes[i % len(boxes)], state="running", gpus=[0], attempt=1) for i in range(count)]


def reading(index: int, tick: int) -> list[dict]:
    """Most runs busy; one in ten idle throughout; one in fifty flips between the two each tick."""
    idle = index % 10 == 0 or (index % 50 == 1 and tick % 2)
    return [{"index": 0, "utilization_pct": 1 if idle else 93, "memory_used_mib": 20000 + index}]


def simulate(runs: list, ticks: int, prefilter: bool) -> dict:
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from runs.gpu_use import worth_writing
    from runs.models import GpuSample, Run
    from watching.gpu_samples import do_record_gpu_use

    Run.objects.filter(pk__in=[run.pk for run in runs]).update(gpu_idle_since=None, gpu_sampled_at=None)
    GpuSample.objects.all().delete()
    start, writes, seconds, queries = timezone.now(), 0, 0.0, 0
    for tick in range(ticks):
        now = start + timedelta(seconds=TICK * tick)
        # What the watcher holds at a tick: the live runs read afresh (watching.watch.live_runs).
        live = list(
            Run.objects.select_related("project", "instance").filter(pk__in=[run.pk for run in runs]).order_by("pk")
        )
        connection.queries_log.clear()  # a deque of 9,000 at most: a full one counts nothing new
        began = time.perf_counter()
        with CaptureQueriesContext(connection) as captured:
            for index, run in enumerate(live):
                answer = reading(index, tick)
                if not prefilter or worth_writing(run, answer, settings.GPU_SAMPLE_SECONDS, now):
                    do_record_gpu_use(run.pk, answer, now)
                    writes += 1
        seconds += time.perf_counter() - began
        queries += len(captured)
    idle = Run.objects.filter(pk__in=[run.pk for run in runs], gpu_idle_since__isnull=False).count()
    return {
        "mode": "only what changes" if prefilter else "every reading (baseline)",
        "runs": len(runs),
        "ticks": ticks,
        "writes_per_tick": round(writes / ticks, 1),
        "queries_per_tick": round(queries / ticks, 1),
        "ms_per_tick": round(1000 * seconds / ticks, 1),
        "samples_kept": GpuSample.objects.count(),
        "idle_runs_at_end": idle,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--ticks", type=int, default=12)
    args = parser.parse_args()
    fresh_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    runs = seed(args.runs)
    results = [simulate(runs, args.ticks, prefilter) for prefilter in (False, True)]
    for result in results:
        print(json.dumps({"bench": "gpu_use", **result}), flush=True)
    base, product = results
    assert (base["samples_kept"], base["idle_runs_at_end"]) == (product["samples_kept"], product["idle_runs_at_end"])
    print(f"{'mode':28} {'writes/tick':>12} {'queries/tick':>13} {'ms/tick':>9} {'samples':>8}")
    for result in results:
        print(
            f"{result['mode']:28} {result['writes_per_tick']:>12} {result['queries_per_tick']:>13}"
            f" {result['ms_per_tick']:>9} {result['samples_kept']:>8}"
        )


if __name__ == "__main__":
    main()
