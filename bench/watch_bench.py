#!/usr/bin/env python
"""Benchmark: N simulated live runs watched by 2 real Celery worker processes at the default tick,
first tick-bound (WATCH_PUSH=0, the baseline), then with node-side push, in the same run.

Five runs per box; the boxes are spread over loopback sshd processes, one per ten boxes (real boxes
are separate hosts). For each N it reports: SSH handshakes and node round-trips per box per tick,
control-side CPU seconds per run-hour and memory per added watched run (the two worker processes
over their idle size, from /proc), p50/p95 latency from a line appended to a run's log on the node
to its arrival at a browser's WebSocket (a real client, signed in, connected to daphne), and how
the watchers come back after a blip that cuts every SSH connection at once.

    .venv/bin/python bench/watch_bench.py [N ...]        # default: 10 100 500

Needs Redis on 127.0.0.1:6379 (uses database 14), PostgreSQL (BENCH_DATABASE_URL; the database
is dropped and re-created) and openssh-server. Prints one JSON line per N and mode, then a table.
BENCH_WINDOW (60 s), BENCH_BLIP_WINDOW (30 s), BENCH_PUSH (off,on).
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
import threading
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
# The boxes' $HOME (sshd's SetEnv), not this account's: here root's .bashrc runs `pyenv init`, which
# rehashes under a lock on every SSH command; a hundred boxes' sessions queued on that one lock and
# took the machine to a load above 100 — a property of this development machine, not of a box.
NODE_HOME = VAR / "home"
WINDOW = float(os.environ.get("BENCH_WINDOW", "60"))
BLIP_WINDOW = float(os.environ.get("BENCH_BLIP_WINDOW", "30"))
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
    from wrapper.contract import spec_of

    attempt = Path(layout.active) / "attempt-1"
    attempt.mkdir(parents=True, exist_ok=True)
    (attempt / "pid").write_text(f"{sleeper_pid} {sleeper_pid}\n")
    (attempt / "heartbeat").write_text(f"{int(time.time())}\n")
    (attempt / "log.txt").write_text("started\n")
    Path(layout.ckpt).mkdir(parents=True, exist_ok=True)
    Path(layout.spec("attempt-1")).write_text(spec_of(spec).to_json())  # the wrapper's strict reader first


def create_runs(n, sshds, sleeper_pid):
    from django.utils import timezone

    from fleet.models import Instance
    from node.build import wrapper_file, wrapper_name
    from platforms.layout import NodeLayout
    from projects.models import Project
    from runs.models import Run, RunState
    from tests.box_specs import spec_data

    slug = f"bench{uuid.uuid4().hex[:8]}"
    project = Project.objects.create(name=slug, slug=slug)
    home = str(NODE_HOME)
    runs = []
    for index in range(n // 5):
        name = f"{slug}-box{index}-{timezone.localdate():%Y%m%d}"
        # Boxes are separate hosts: spread them over the sshd processes.
        fields = sshds[index % len(sshds)].instance_fields(project)
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
            spec = spec_data(layout, run_id=run_id, attempt=1, argv=["true"], cwd=str(VAR))
            make_node_files(layout, spec, sleeper_pid)
            runs.append((run, layout))
    tools = Path(home) / "proj" / slug / ".remotegpu"
    tools.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wrapper_file(), tools / wrapper_name())
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
        command = [sys.executable, "-m", "celery", "-A", "remotegpu_site", "worker", "--pool=threads", "-c", "64"]
        command += ["-Q", "remotegpu-bench", "-n", f"bench{index}@%h", "-l", "warning"]
        log = (VAR / f"worker{index}.log").open("w")
        workers.append(subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log))
    from remotegpu_site.celery import app

    deadline = time.monotonic() + 60
    while len(app.control.ping(timeout=1)) < count and time.monotonic() < deadline:
        pass
    return workers


async def arrival(socket, marker: str, deadline: float) -> float | None:
    """Seconds until a log message carrying marker arrives (None: not before the deadline)."""
    started = time.monotonic()
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = json.loads(await asyncio.wait_for(socket.recv(), timeout=left))
        except TimeoutError:
            return None
        if message.get("type") == "log" and marker in message.get("lines", []):
            return time.monotonic() - started
    return None


async def latency_samples(runs, port, cookie, seconds):
    """Lines appended on the node, each timed until a browser's WebSocket (to daphne) receives it."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
    results, missed, index = [], 0, 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        run, layout = runs[(index * 7) % len(runs)]
        index += 1
        try:
            async with connect(f"ws://127.0.0.1:{port}/ws/runs/{run.run_id}/", additional_headers=headers) as socket:
                marker = f"bench-marker-{uuid.uuid4().hex}"
                with open(Path(layout.active) / "attempt-1" / "log.txt", "a") as handle:
                    handle.write(marker + "\n")
                took = await arrival(socket, marker, time.monotonic() + 30)
        except (OSError, InvalidHandshake, ConnectionClosed) as exc:
            print(f"a browser socket failed: {exc}", file=sys.stderr, flush=True)
            took = None
        if took is None:
            missed += 1
        else:
            results.append(took)
        # A random phase against the tick, so the samples do not lock onto it.
        await asyncio.sleep(random.uniform(0, 2))
    return results, missed


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))] if ordered else float("nan")


def start_daphne():
    from tests.sshd import free_port

    port = free_port()
    log = (VAR / "daphne.log").open("w")
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "remotegpu_site.asgi:application"]
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/"], check=False).returncode:
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError((VAR / "daphne.log").read_text())
        time.sleep(0.2)
    return process, port


def browser_cookie(project) -> str:
    """A signed-in member's session cookie, as a browser holding the run page open sends it."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_user(f"viewer-{project.slug}", password=uuid.uuid4().hex)
    project.members.add(user)
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


class Counters:
    """Ticks and SSH connects of a project's watchers, summed over every watcher seen, sampled each
    second on a thread of its own. A lease row goes when its watcher ends, its counts with it, so
    the rows' totals alone can fall (they did at 500 runs tick-bound: -739 ticks in the window)."""

    def __init__(self, project):
        self.project, self.last, self.totals = project, {}, [0, 0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sample()
        self._thread.start()

    def sample(self) -> tuple[int, int]:
        from runs.models import WatchLease

        rows = WatchLease.objects.filter(instance__project=self.project)
        for key in rows.values_list("instance_id", "owner", "ticks", "connects"):
            ticks, connects = self.last.get(key[:2], (0, 0))
            self.totals[0] += max(key[2] - ticks, 0)
            self.totals[1] += max(key[3] - connects, 0)
            self.last[key[:2]] = key[2:]
        return tuple(self.totals)

    def now(self) -> tuple[int, int]:
        return tuple(self.totals)

    def _run(self) -> None:
        from django.db import connection

        while not self._stop.wait(1):
            self.sample()
        connection.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def settle_boxes(slug: str) -> None:
    """End what this mode left running on the boxes (probes queued behind a flooded sshd, streams
    not yet told their reader went) and let the machine go quiet, so the next mode does not share
    the CPU with this one's tail (at 500 runs the tick-bound mode's tail slowed push to 0.56 of its
    ticks)."""
    subprocess.run(["pkill", "-KILL", "-f", f"/{slug}/.remotegpu/wrapper-"], check=False)
    deadline = time.monotonic() + 60
    while os.getloadavg()[0] > 1.5 and time.monotonic() < deadline:
        time.sleep(2)


def forks() -> int:
    """Processes started on this machine since boot."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    raise RuntimeError("/proc/stat has no processes line")


def streams(slug: str) -> int:
    done = subprocess.run(["pgrep", "-fc", f"/{slug}/.remotegpu/wrapper-.* follow"], capture_output=True, check=False)
    return int(done.stdout or 0)


def warm_up(project, instances: int, push: bool) -> float:
    """Until every instance's watcher ticked twice (and holds its stream, with push): seconds taken."""
    from runs.models import WatchLease

    started = time.monotonic()
    deadline = started + 180
    while time.monotonic() < deadline:
        ticking = WatchLease.objects.filter(instance__project=project, ticks__gte=2).count()
        if ticking >= instances and (not push or streams(project.slug) >= instances):
            break
        time.sleep(0.5)
    return time.monotonic() - started


def blip(sshds, counted: "Counters", instances: int, seconds: float) -> dict:
    """Cut every SSH connection at once (a network blip): how the watchers come back."""
    _, before = counted.now()
    for sshd in sshds:
        subprocess.run(["pkill", "-KILL", "-P", str(sshd.process.pid)], check=False)
    started, seen, peak, back = time.monotonic(), before, 0, None
    while time.monotonic() - started < seconds:
        time.sleep(1)
        _, now = counted.now()
        peak = max(peak, now - seen)
        seen = now
        if back is None and now - before >= instances:
            back = time.monotonic() - started
    return {
        "blip_reconnects_per_instance": (seen - before) / instances,
        "blip_peak_handshakes_per_s": peak,
        "blip_all_back_s": back,
    }


def stop_mode(beat, workers, project) -> None:
    from remotegpu_site.celery import app
    from runs.models import Run, RunState, WatchLease

    beat.terminate()
    for worker in workers:
        # Warm shutdown: its watchers stop at once and give their leases back (a cold one cannot
        # cancel a thread pool's tasks in Celery 5 and would wait out their lifetimes).
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.wait(timeout=60)
    # This mode's runs leave the watched states and its queued tasks go: otherwise every later
    # mode's workers also watch this mode's boxes (the sleeper keeps their pids alive), and the
    # 500-run push mode, run after the others, watched 244 boxes instead of 100.
    Run.objects.filter(project=project).update(state=RunState.QUARANTINED)
    app.control.purge()
    WatchLease.objects.all().delete()
    settle_boxes(project.slug)
    shutil.rmtree(NODE_HOME / "proj" / project.slug, ignore_errors=True)


def bench(n, sshds, sleeper, push: bool, port: int):
    from watching.tasks import arm_watchers

    project, runs = create_runs(n, sshds, sleeper.pid)
    cookie = browser_cookie(project)
    instances = n // 5
    os.environ["WATCH_PUSH"] = "1" if push else "0"  # the workers inherit it: node-side push on or off
    workers = start_workers(2)
    beat = start_beat()
    m = {}
    try:
        time.sleep(3)
        m["idle"] = [cpu_and_rss(worker.pid) for worker in workers]  # before any watcher: the fixed cost
        arm_watchers()
        m["warm_s"] = warm_up(project, instances, push)
        m["before"] = [cpu_and_rss(worker.pid) for worker in workers]
        counted = Counters(project)
        ticks_before, connects_before = counted.now()
        forks_before = forks()
        started = time.monotonic()
        m["latencies"], m["missed"] = asyncio.run(latency_samples(runs, port, cookie, WINDOW))
        while time.monotonic() - started < WINDOW:
            time.sleep(0.5)
        m["elapsed"] = time.monotonic() - started
        m["after"] = [cpu_and_rss(worker.pid) for worker in workers]
        ticks_after, connects_after = counted.now()
        m["forked"] = forks() - forks_before
        m["blip"] = blip(sshds, counted, instances, BLIP_WINDOW)
        counted.stop()
    finally:
        stop_mode(beat, workers, project)
    m["ticks"], m["connects"] = ticks_after - ticks_before, connects_after - connects_before
    return {"runs": n, "push": push, "instances": instances, "sshd_processes": len(sshds), **figures(n, instances, m)}


def figures(n: int, instances: int, m: dict) -> dict:
    """What one mode measured (m), as the report's figures."""
    from django.conf import settings

    ticks, connects, elapsed = m["ticks"], m["connects"], m["elapsed"]
    cpu = sum(a[0] - b[0] for a, b in zip(m["after"], m["before"], strict=True))
    rss, rss_idle = sum(a[1] for a in m["after"]), sum(i[1] for i in m["idle"])
    latencies = m["latencies"]
    return {
        "tick_s": settings.WATCH_TICK_SECONDS,
        "warm_up_s": round(m["warm_s"], 1),
        "ticks": ticks,
        "ticks_per_instance_per_tick": ticks / instances / (elapsed / settings.WATCH_TICK_SECONDS),
        "handshakes_per_instance_tick": connects / ticks if ticks else float("nan"),
        # Each tick is one probe command; a (re)connect adds one $HOME lookup.
        "round_trips_per_instance_tick": (ticks + connects) / ticks if ticks else float("nan"),
        # Processes this machine started (boxes and control side together; /proc/stat), per box per
        # tick: an exec'd probe is an sshd session, a shell and a Python start on the box.
        "processes_per_instance_tick": m["forked"] / ticks if ticks else float("nan"),
        "cpu_s_per_run_hour": cpu / (n * elapsed / 3600),
        "rss_mib_total": rss / 1024**2,
        "rss_mib_idle": rss_idle / 1024**2,
        # What one more watched run costs: the two workers' growth over their idle size, per run.
        "rss_mib_per_added_run": (rss - rss_idle) / n / 1024**2,
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p95_s": percentile(latencies, 0.95),
        "latency_samples": len(latencies),
        "latency_missed": m["missed"],
        "latencies_s": sorted(round(value, 2) for value in latencies),
        **m["blip"],
    }


def main():
    sizes = [int(arg) for arg in sys.argv[1:]] or [10, 100, 500]
    setup_django()
    from tests.sshd import Sshd

    # Real boxes are separate hosts, each with its own sshd: one sshd process per ten boxes here, each
    # allowed the handshakes of ten boxes reconnecting at once (several times over).
    boxes = max(sizes) // 5
    NODE_HOME.mkdir()
    limits = ("MaxStartups 60:30:120", "MaxSessions 50", f"SetEnv HOME={NODE_HOME}")
    sshds = [Sshd(VAR / f"sshd{index}", extra_config=limits).start() for index in range(max(1, (boxes + 9) // 10))]
    sleeper = subprocess.Popen(["sleep", "100000"])
    daphne, port = start_daphne()
    rows = []
    try:
        for n in sizes:
            for push in MODES:  # the tick-bound baseline first, then push, in the same run
                rows.append(bench(n, sshds[: max(1, (n // 5 + 9) // 10)], sleeper, push, port))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        daphne.terminate()
        sleeper.kill()
        for sshd in sshds:
            sshd.stop()
        shutil.rmtree(VAR, ignore_errors=True)
    print(TABLE_HEADER)
    for row in rows:
        print(table_row(row))


TABLE_HEADER = (
    "runs  push  inst  sshd  ticks/inst/tick  handshakes/inst/tick  round-trips/inst/tick  procs/inst/tick  cpu-s/run-h"
    "  RSS MiB idle→total (per added run)  p50 s  p95 s  (n, missed)  blip: reconnects/inst, peak/s, all back s"
)


def table_row(r: dict) -> str:
    back = "—" if r["blip_all_back_s"] is None else f"{r['blip_all_back_s']:.0f}"
    return (
        f"{r['runs']:>4}  {'on' if r['push'] else 'off':>4}  {r['instances']:>4}  {r['sshd_processes']:>4}  "
        f"{r['ticks_per_instance_per_tick']:>15.2f}  {r['handshakes_per_instance_tick']:>20.3f}  "
        f"{r['round_trips_per_instance_tick']:>21.3f}  {r['processes_per_instance_tick']:>15.2f}  "
        f"{r['cpu_s_per_run_hour']:>11.1f}  "
        f"{r['rss_mib_idle']:>6.0f} → {r['rss_mib_total']:>5.0f} ({r['rss_mib_per_added_run']:.2f})".ljust(38)
        + f"  {r['latency_p50_s']:>5.2f}  {r['latency_p95_s']:>5.2f}  ({r['latency_samples']}, {r['latency_missed']})"
        f"  {r['blip_reconnects_per_instance']:.2f}, {r['blip_peak_handshakes_per_s']}, {back}"
    )


if __name__ == "__main__":
    main()
