"""Node-side push with a real worker whose tick is slow (8 s): a line written on the
node reaches a WebSocket client long before the next probe; each probe is asked over the stream
(no process started on the node per tick); a stream that stops answering is dropped and the tick
probes by command; a stream killed mid-run resumes without losing or repeating a line; with the
stream killed over and over, the probe alone still finishes the run and still delivers every line
once."""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from remotegpu_site.asgi import application
from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.conftest import WorkerProcess, database_url
from tests.runs.conftest import set_config, wait_state
from tests.runs.test_live_channel import ORIGIN, session_cookie
from tests.waiting import wait_until
from tests.worker_env import NODE_ROOT_PATH

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


SLOW_TICK = {"WATCH_TICK_SECONDS": "8", "WATCH_LEASE_SECONDS": "40", "WATCH_LIFETIME_SECONDS": "90", "WATCH_PUSH": "1"}
HEADER = "import os, sys, time\nif os.environ.get('REMOTEGPU_SMOKE') == '1':\n    sys.exit(0)\n"


@pytest.fixture(scope="module")
def _slow_worker(_worker, django_db_blocker, provider_stub):
    """This module's own worker (the session's is stopped meanwhile): the probe every 8 s, push on."""
    from remotegpu_site.celery import app

    _worker.stop()
    app.control.purge()
    with django_db_blocker.unblock():
        url = database_url("remotegpu-push-worker")
    worker = WorkerProcess(url, name="push", REMOTEGPU_LOCAL_NODE="1", **provider_stub.env, **SLOW_TICK)
    worker.start()
    yield worker
    worker.stop()
    app.control.purge()


@pytest.fixture
def slow_worker(_slow_worker):
    """The module's worker, started again if an earlier test stopped it (one does, on purpose)."""
    _slow_worker.start()
    return _slow_worker


STREAM = f"{NODE_ROOT_PATH}.*wrapper-.*follow"


def kill_streams() -> int:
    """SIGKILL every follow stream of this test process's node root, as a dropped connection would end it."""
    return subprocess.run(["pkill", "-9", "-f", STREAM], check=False).returncode


class ProbeCommands:
    """Every `wrapper probe` process of this node root started while it watches (/proc, every 5 ms;
    a probe command lives tens of milliseconds): the probes that were not asked over the stream."""

    def __init__(self):
        self.pids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scan, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _scan(self):
        # Only processes new since the last look are read, and each for its first second (a fork execs
        # the wrapper within milliseconds): reading every process's cmdline every 5 ms kept a core busy.
        listed: set[int] = set()
        young: dict[int, float] = {}
        while not self._stop.is_set():
            now = time.monotonic()
            pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
            for pid in pids - listed:
                young[pid] = now
            listed = pids  # a pid that went away and comes back is a new process
            for pid, since in list(young.items()):
                if pid not in pids or now - since > 1.0:
                    del young[pid]
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:  # it just ended
                    continue
                if len(argv) >= 3 and argv[-2] == b"probe" and any(NODE_ROOT_PATH.encode() in arg for arg in argv):
                    self.pids.add(pid)
                    del young[pid]
            time.sleep(0.005)


def stream_pids() -> list[int]:
    """The wrappers' follow processes themselves (not the shell or the `timeout` each runs under)."""
    found = subprocess.run(["pgrep", "-a", "-f", STREAM], capture_output=True, text=True, check=False).stdout
    return [int(line.split()[0]) for line in found.splitlines() if "python" in line.split()[1]]


def probed_at(run) -> float:
    """The node's clock in the last probe applied to the run (each applied probe moves it)."""
    run.refresh_from_db()
    return (run.last_status or {}).get("now", 0.0)


def wait_for_a_stream(timeout: float = 30) -> None:
    wait_until(lambda: stream_pids(), timeout=timeout, interval=0.1, what="the watcher opening its push stream")


async def listen(run, alice):
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.run_id}/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    return communicator


async def lines_until(communicator, done, timeout=120) -> list[str]:
    """Every log line the page is sent, in order, until done(message) (or the timeout)."""
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = await communicator.receive_json_from(timeout=timeout)
        if message.get("type") == "log":
            lines += message["lines"]
        if done(message, lines):
            break
    return lines


def settled(message, _lines) -> bool:
    return message.get("type") == "event" and message.get("state") in ("exported", "quarantined")


async def test_lines_reach_the_socket_within_a_second_or_so_and_each_probe_rides_the_stream(
    alice, bob, make_run, source, slow_worker
):
    marks = source / "marks"
    body = (
        "print('ready', flush=True)\n"
        f"for n in range(3):\n"
        f"    while not os.path.exists('{marks}-go-' + str(n)):\n        time.sleep(0.02)\n"
        "    print('mark', n, flush=True)\n"
        f"while not os.path.exists('{marks}-stop'):\n    time.sleep(0.05)\n"
    )
    (source / "marks.py").write_text(HEADER + body)
    run = await sync_to_async(make_run)(command=[sys.executable, "marks.py"], expected_minutes=1)
    communicator = await listen(run, alice)
    await sync_to_async(do_start_preflight)(run.pk, actor=bob)
    await lines_until(communicator, lambda m, lines: "ready" in lines, timeout=120)
    await sync_to_async(wait_state)(run, {RunState.RUNNING})
    await sync_to_async(wait_for_a_stream)()
    first = await sync_to_async(probed_at)(run)
    took = []
    with ProbeCommands() as commands:
        for n in range(3):
            started = time.monotonic()
            (marks.parent / f"marks-go-{n}").write_text("")
            await lines_until(communicator, lambda m, lines, n=n: f"mark {n}" in lines, timeout=30)
            took.append(time.monotonic() - started)
            await asyncio.sleep(5.3)  # the next line at another point of the 8 s tick
    last = await sync_to_async(probed_at)(run)
    (marks.parent / "marks-stop").write_text("")
    await communicator.disconnect()
    # The probe comes every 8 s: each line within 2.5 s (about 0.2–0.5 s here) came by push.
    assert max(took) < 2.5, took
    # Two or more ticks were applied in those ~17 s, and not one of them started a process on the
    # node: each probe was a line on the stream's channel (before, every tick started `wrapper probe`).
    assert last - first >= 8, (first, last)
    assert commands.pids == set()


async def test_a_stream_that_stops_answering_is_dropped_and_the_tick_probes_by_command(
    alice, bob, make_run, source, slow_worker
):
    script = f"quiet_{uuid.uuid4().hex[:8]}.py"
    (source / script).write_text(HEADER + "print('up', flush=True)\ntime.sleep(90)\n")
    run = await sync_to_async(make_run)(command=[sys.executable, script], expected_minutes=5)
    await sync_to_async(do_start_preflight)(run.pk, actor=bob)
    await sync_to_async(wait_state)(run, {RunState.RUNNING})
    await sync_to_async(wait_for_a_stream)()
    [stuck] = stream_pids()
    os.kill(stuck, signal.SIGSTOP)  # alive, its channel open, but it answers nothing (a wedged box)
    try:
        before = await sync_to_async(probed_at)(run)
        with ProbeCommands() as commands:
            deadline = time.monotonic() + 45  # a tick (8 s), the stream's half of the probe timeout (10 s), a tick
            while time.monotonic() < deadline and (await sync_to_async(probed_at)(run) <= before or not commands.pids):
                await asyncio.sleep(0.5)
        assert commands.pids, "the tick never fell back to the probe command"
        assert await sync_to_async(probed_at)(run) > before
        # The wedged stream was dropped and another opened after the back-off. (Closing an SSH channel
        # cannot end a stopped process on the box: the `timeout` it runs under ends it at its lifetime.)
        deadline = time.monotonic() + 30
        while not set(stream_pids()) - {stuck} and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert set(stream_pids()) - {stuck}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stuck, signal.SIGCONT)
        kill_streams()
        subprocess.run(["pkill", "-f", script], check=False)


async def test_a_killed_stream_resumes_without_losing_or_repeating_a_line(alice, bob, make_run, source, slow_worker):
    body = "for n in range(1, 101):\n    print('line', n, flush=True)\n    time.sleep(0.2)\n"
    (source / "lines.py").write_text(HEADER + body)
    run = await sync_to_async(make_run)(command=[sys.executable, "lines.py"], expected_minutes=1)
    communicator = await listen(run, alice)
    await sync_to_async(do_start_preflight)(run.pk, actor=bob)
    before = await lines_until(communicator, lambda m, lines: "line 5" in lines, timeout=120)
    await sync_to_async(wait_for_a_stream)()
    assert kill_streams() == 0  # mid-run: the watcher reopens it from the last offset it sent
    after = await lines_until(communicator, settled, timeout=120)
    await communicator.disconnect()
    numbered = [line for line in before + after if line.startswith("line ")]
    assert numbered == [f"line {n}" for n in range(1, 101)]


async def test_the_probe_alone_finishes_a_run_whose_stream_is_killed_over_and_over(
    alice, bob, make_run, source, gate, slow_worker
):
    set_config(source, epochs=3, hold_file=gate.path)  # held after epoch 1 until two streams were killed
    run = await sync_to_async(make_run)()
    stop, killed = threading.Event(), []

    def keep_killing():
        while not stop.is_set():
            if kill_streams() == 0:  # a stream of the live run was there and is gone
                killed.append(time.monotonic())
                if len(killed) >= 2:
                    gate.release()
            time.sleep(0.05)

    killer = threading.Thread(target=keep_killing, daemon=True)
    killer.start()
    try:
        communicator = await listen(run, alice)
        await sync_to_async(do_start_preflight)(run.pk, actor=bob)
        lines = await lines_until(communicator, settled, timeout=150)
        await communicator.disconnect()
    finally:
        stop.set()
        killer.join()
    run = await sync_to_async(wait_state)(run, {RunState.EXPORTED}, timeout=60)
    epochs = [line.split()[1] for line in lines if line.startswith("epoch ")]
    assert epochs == ["1/3", "2/3", "3/3"]
    assert len(killed) >= 2


def test_a_stopping_worker_ends_its_watchers_at_once_and_gives_their_leases_back(bob, make_run, source, slow_worker):
    """A deploy's SIGTERM must not wait out a watcher's 90 s life (nor leave a lease to expire)."""
    from runs.models import WatchLease

    script = f"long_{uuid.uuid4().hex[:8]}.py"
    (source / script).write_text(HEADER + "time.sleep(120)\n")
    run = make_run(command=[sys.executable, script], expected_minutes=5)
    do_start_preflight(run.pk, actor=bob)
    wait_state(run, {RunState.RUNNING})
    wait_until(
        lambda: WatchLease.objects.filter(instance=run.instance).exists(),
        timeout=30,
        interval=0.2,
        what="a watcher taking the run",
    )
    time.sleep(1)  # inside its wait between ticks
    started = time.monotonic()
    slow_worker.stop()
    assert slow_worker.poll() is not None and time.monotonic() - started < 10
    assert not WatchLease.objects.filter(instance=run.instance).exists()  # released, not left to expire
    kill_streams()
    subprocess.run(["pkill", "-f", script], check=False)  # the run itself: nothing watches it any more
