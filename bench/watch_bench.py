#!/usr/bin/env python
"""Benchmark: N simulated live runs watched by 2 real Celery worker processes at the default tick,
first tick-bound (WATCH_PUSH=0, the baseline), then with node-side push, in the same run.

Five runs per instance, every instance on one loopback sshd. For each N it reports, next to the
tick: SSH handshakes and node round-trips per instance per tick, control-side CPU seconds and
memory per watched run-hour (the two worker processes, read from /proc), and p50/p95 latency
from a line appended to a run's log on the node to its arrival on the run's live group (received
on the Channels Redis layer, the hop a WebSocket consumer forwards from).

    .venv/bin/python bench/watch_bench.py [N ...]        # default: 10 100 500

Needs Redis on 127.0.0.1:6379 (uses database 14), PostgreSQL (BENCH_DATABASE_URL; the database
is dropped and re-created) and openssh-server. Prints one JSON line per N, then a table.
"""

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
VAR = Path(tempfile.mkdtemp(prefix="remotegpu-bench-"))
# PostgreSQL, as a team runs it: SQLite serialises writers and locks up with 100 watchers in 2 processes.
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/remotegpu_bench")
os.environ.update(
    DJANGO_SETTINGS_MODULE="remotegpu_site.settings",
    REMOTEGPU_VAR_DIR=str(VAR),
    DATABASE_URL=DATABASE_URL,
    REDIS_URL="redis://127.0.0.1:6379/14",
    CELERY_QUEUE="remotegpu-bench",
    LOG_LEVEL="WARNING",
    DATABASE_CONN_MAX_AGE="0",
    WATCH_ARM_INTERVAL="5",
    # The node's interpreter, not a version manager's shim: on this machine `python3` is a pyenv
    # shim (a bash script that may rehash under a lock), and a hundred watchers starting it at once
    # piled up hundreds of shells and SSH sessions behind that lock — the harness, not the product.
    NODE_PYTHON=os.path.join(sys.base_exec_prefix, "bin", "python3"),
)
WINDOW = float(os.environ.get("BENCH_WINDOW", "60"))
MODES = [mode == "on" for mode in os.environ.get("BENCH_PUSH", "off,on").split(",")]


def setup_django():
    import django
    import psycopg

    name = DATABASE_URL.rsplit("/", 1)[1]
    with psycopg.connect(DATABASE_URL.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, check=True)
    django.setup()


def make_node_files(layout, spec, sleeper_pid):
    attempt = Path(layout.active) / "attempt-1"
    attempt.mkdir(parents=True, exist_ok=True)
    (attempt / "pid").write_text(f"{sleeper_pid} {sleeper_pid}\n")
    (attempt / "heartbeat").write_text(f"{int(time.time())}\n")
    (attempt / "log.txt").write_text("started\n")
    Path(layout.ckpt).mkdir(parents=True, exist_ok=True)
    Path(layout.spec("attempt-1")).write_text(json.dumps(spec))


def create_runs(n, sshd, sleeper_pid):
    from django.utils import timezone

    from profiles.layout import NodeLayout
    from profiles.models import Instance
    from profiles.nodes import WRAPPER_FILE, wrapper_name
    from projects.models import Project
    from runs.models import Run, RunState

    slug = f"bench{uuid.uuid4().hex[:8]}"
    project = Project.objects.create(name=slug, slug=slug)
    fields = sshd.instance_fields(project)
    home = os.path.expanduser("~")
    runs = []
    for index in range(n // 5):
        name = f"{slug}-box{index}-{timezone.localdate():%Y%m%d}"
        instance = Instance.objects.create(name=name, project=project, **fields)
        for _ in range(5):
            run_id = f"{slug}-{uuid.uuid4().hex[:8]}"
            run = Run.objects.create(
                run_id=run_id,
                project=project,
                instance=instance,
                source_kind="node_path",
                source_path=str(VAR),
                command=["true"],
                config_path="c.yaml",
                state=RunState.RUNNING,
                attempt=1,
                launched_at=timezone.now(),
                expected_minutes=600,
            )
            layout = NodeLayout(f"{home}/proj", slug, run_id, str(VAR))
            spec = {**layout.as_dict(), "run_id": run_id, "attempt": 1, "argv": ["true"], "cwd": str(VAR)}
            make_node_files(layout, spec, sleeper_pid)
            runs.append((run, layout))
    tools = Path(home) / "proj" / slug / ".remotegpu"
    tools.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(WRAPPER_FILE, tools / wrapper_name())
    return project, runs


def cpu_and_rss(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS")
    )
    return cpu, rss * 1024


def start_beat():
    log = (VAR / "beat.log").open("w")
    command = [sys.executable, "-m", "celery", "-A", "remotegpu_site", "beat", "-l", "warning"]
    command += ["--schedule", str(VAR / "beat-schedule")]
    return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log)


def start_workers(count):
    workers = []
    for index in range(count):
        command = [sys.executable, "-m", "celery", "-A", "remotegpu_site", "worker", "--pool=threads", "-c", "60"]
        command += ["-Q", "remotegpu-bench", "-n", f"bench{index}@%h", "-l", "warning"]
        log = (VAR / f"worker{index}.log").open("w")
        workers.append(subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log))
    from remotegpu_site.celery import app

    deadline = time.monotonic() + 60
    while len(app.control.ping(timeout=1)) < count and time.monotonic() < deadline:
        pass
    return workers


async def latency_samples(runs, samples, spacing):
    from channels.layers import get_channel_layer

    from runs.live import run_group

    layer = get_channel_layer()
    results = []
    for index in range(samples):
        run, layout = runs[(index * 7) % len(runs)]
        channel = await layer.new_channel()
        await layer.group_add(run_group(run.run_id), channel)
        marker = f"bench-marker-{uuid.uuid4().hex}"
        started = time.monotonic()
        with open(Path(layout.active) / "attempt-1" / "log.txt", "a") as handle:
            handle.write(marker + "\n")
        deadline = started + 60
        while time.monotonic() < deadline:
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=deadline - time.monotonic())
            except Exception:  # noqa: S112  a timed-out read of the layer: keep waiting until the deadline
                continue
            payload = message.get("payload", {})
            if payload.get("type") == "log" and marker in payload.get("lines", []):
                results.append(time.monotonic() - started)
                break
        await layer.group_discard(run_group(run.run_id), channel)
        # A random phase against the tick, so the samples do not lock onto it.
        await asyncio.sleep(random.uniform(0, spacing))
    return results


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))] if ordered else float("nan")


def bench(n, sshd, sleeper, push: bool):
    from django.conf import settings
    from django.db.models import Sum

    from runs.models import WatchLease
    from runs.tasks import arm_watchers

    project, runs = create_runs(n, sshd, sleeper.pid)
    os.environ["WATCH_PUSH"] = "1" if push else "0"  # the workers inherit it: node-side push on or off
    workers = start_workers(2)
    beat = start_beat()
    try:
        arm_watchers()
        instances = n // 5
        deadline = time.monotonic() + 60
        while WatchLease.objects.filter(instance__project=project).count() < instances and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2 * settings.WATCH_TICK_SECONDS)  # warm: every watcher connected and ticking
        before = [cpu_and_rss(worker.pid) for worker in workers]
        totals = WatchLease.objects.filter(instance__project=project).aggregate(t=Sum("ticks"), c=Sum("connects"))
        started = time.monotonic()
        latencies = asyncio.run(latency_samples(runs, 12, settings.WATCH_TICK_SECONDS))
        while time.monotonic() - started < WINDOW:
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        after = [cpu_and_rss(worker.pid) for worker in workers]
        later = WatchLease.objects.filter(instance__project=project).aggregate(t=Sum("ticks"), c=Sum("connects"))
    finally:
        beat.terminate()
        for worker in workers:
            # Warm shutdown: its watchers stop at once and give their leases back (a cold one cannot
            # cancel a thread pool's tasks in Celery 5 and would wait out their lifetimes).
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)
        WatchLease.objects.all().delete()
        shutil.rmtree(Path.home() / "proj" / project.slug, ignore_errors=True)
    ticks = (later["t"] or 0) - (totals["t"] or 0)
    connects = (later["c"] or 0) - (totals["c"] or 0)
    cpu = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    rss = sum(a[1] for a in after)
    run_hours = n * elapsed / 3600
    return {
        "runs": n,
        "push": push,
        "instances": n // 5,
        "tick_s": settings.WATCH_TICK_SECONDS,
        "ticks": ticks,
        "handshakes_per_instance_tick": connects / ticks if ticks else float("nan"),
        # Each tick is one probe command; a (re)connect adds one $HOME lookup.
        "round_trips_per_instance_tick": (ticks + connects) / ticks if ticks else float("nan"),
        "cpu_s_per_run_hour": cpu / run_hours,
        "rss_mib_per_run": rss / n / 1024**2,
        "rss_mib_total": rss / 1024**2,
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p95_s": percentile(latencies, 0.95),
        "latency_samples": len(latencies),
        "latencies_s": [round(value, 2) for value in latencies],
    }


def main():
    sizes = [int(arg) for arg in sys.argv[1:]] or [10, 100, 500]
    setup_django()
    from tests.sshd import Sshd

    # One sshd stands in for every instance: let it accept as many handshakes as 100 boxes would.
    sshd = Sshd(VAR / "sshd", extra_config=("MaxStartups 400:30:800", "MaxSessions 100")).start()
    sleeper = subprocess.Popen(["sleep", "100000"])
    rows = []
    try:
        for n in sizes:
            for push in MODES:  # the tick-bound baseline first, then push, in the same run
                rows.append(bench(n, sshd, sleeper, push))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        sleeper.kill()
        sshd.stop()
        shutil.rmtree(VAR, ignore_errors=True)
    header = (
        "runs  push  inst  tick  handshakes/inst/tick  round-trips/inst/tick  cpu-s/run-h  RSS MiB (per run)"
        "  p50 s  p95 s"
    )
    print(header)
    for r in rows:
        print(
            f"{r['runs']:>4}  {'on' if r['push'] else 'off':>4}  {r['instances']:>4}  {r['tick_s']:>4g}  "
            f"{r['handshakes_per_instance_tick']:>20.3f}  "
            f"{r['round_trips_per_instance_tick']:>21.3f}  {r['cpu_s_per_run_hour']:>11.1f}  "
            f"{r['rss_mib_total']:>8.0f} ({r['rss_mib_per_run']:.2f})  "
            f"{r['latency_p50_s']:>5.2f}  {r['latency_p95_s']:>5.2f}"
        )


if __name__ == "__main__":
    main()
