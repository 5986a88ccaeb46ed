"""A Redis restart under a busy worker: the worker reconnects and keeps consuming.

With celery 5.7.0 a thread-pool worker with a task in flight logged "Restoring 1 unacknowledged
message(s)" and died with `AttributeError: 'NoneType' object has no attribute 'hostname'` as soon
as the broker connection dropped. The broker here is a private redis-server, so restarting it
touches nothing else on the machine.
"""

import shutil
import subprocess
import time

import pytest
import redis
from django.conf import settings
from django.utils import timezone
from kombu import Connection

from runs.models import RunState
from tests.browser.conftest import free_port
from tests.conftest import WorkerProcess, database_url
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


class PrivateRedis:
    def __init__(self):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self):
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        args = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                return self
            except redis.RedisError:
                time.sleep(0.1)
        raise AssertionError("private redis-server did not start")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def send(url: str, task, *args):
    with Connection(url) as connection:
        task.apply_async(args, connection=connection, queue=settings.CELERY_TASK_DEFAULT_QUEUE)


def test_a_redis_restart_under_a_busy_worker_leaves_it_consuming(make_run):
    from core.health import RECORD_KEY
    from runs.tasks import record_health
    from watching.tasks import watch_instance

    broker = PrivateRedis().start()
    worker = WorkerProcess(database_url(), name="redis-restart", REDIS_URL=broker.url)
    try:
        worker.start()
        run = make_run(state=RunState.RUNNING, attempt=1, launched_at=timezone.now())
        send(broker.url, watch_instance, run.instance_id)  # in flight for the watcher's whole life
        time.sleep(3)
        broker.stop()
        time.sleep(3)
        broker.start()
        time.sleep(8)  # the 5.7.0 worker had died by now
        assert worker.poll() is None, f"the worker exited; see {worker.log_path}"
        send(broker.url, record_health)
        client = redis.Redis.from_url(broker.url, socket_connect_timeout=1)
        ran = lambda: client.get(RECORD_KEY) is not None  # noqa: E731
        wait_until(ran, 30, 0.3, what="the reconnected worker running the next task")
    finally:
        worker.stop()
        broker.stop()
