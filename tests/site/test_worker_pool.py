"""The worker that `make run` (and compose) starts is a thread pool with room for watchers:
each box with live runs holds one worker thread for its watcher's life, so a prefork pool of two
processes — what `make run` started — held every other task (a launch, a custody pull) behind two
watchers, and a third box waited unwatched."""

import os
import socket
import subprocess
import time
import uuid

import pytest

from core.stack import child_commands
from tests.conftest import REPO, subprocess_env

# Starts processes of its own (a stack, a worker, a web server): end to end, whatever its fixtures.
pytestmark = pytest.mark.e2e


def test_the_stacks_worker_is_a_thread_pool_with_room_for_many_watchers(tmp_path):
    from remotegpu_site.celery import app

    name = f"pool-{os.getpid()}@{socket.gethostname()}"
    command = [*child_commands("127.0.0.1", 8000, tmp_path)["worker"], "-Q", f"pool-{uuid.uuid4().hex}", "-n", name]
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(command, cwd=REPO, env=subprocess_env(), stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not (stats := app.control.inspect(destination=[name], timeout=1).stats()):
            assert process.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker never answered"
        pool = stats[name]["pool"]
        assert "threads" in pool and "processes" not in pool, pool  # a thread pool, not prefork
        assert pool["max-concurrency"] >= 32, pool
    finally:
        process.terminate()
        process.wait(timeout=30)
