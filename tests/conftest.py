"""Shared fixtures: the personas, a real Celery worker process, and helpers for subprocesses."""

import functools
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from providers import ADAPTERS
from tests.provider_stub import API_KEY, KEY_ENV, ProviderStub

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"


# A run secret's value for this session, set before any worker starts (each inherits this environment):
# tests prove it reaches a training child and nothing else (tests/runs/test_run_secrets.py).
RUN_SECRET_ENV = "RGPU_TEST_RUN_SECRET"
RUN_SECRET_VALUE = os.environ.setdefault(RUN_SECRET_ENV, f"canary-{uuid.uuid4().hex}")

WORKER_APPLICATION = "remotegpu-test-worker"  # how the session worker's PostgreSQL backends are named


def database_url(application_name: str = "") -> str:
    """The URL of the database the tests are using (the test database once it exists)."""
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{config['NAME']}"
    user = quote(config.get("USER") or "")
    password = f":{quote(config['PASSWORD'])}" if config.get("PASSWORD") else ""
    host, port = config.get("HOST") or "127.0.0.1", config.get("PORT") or 5432
    query = f"?application_name={application_name}" if application_name else ""
    return f"postgres://{user}{password}@{host}:{port}/{config['NAME']}{query}"


def subprocess_env(**extra) -> dict[str, str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="remotegpu_site.settings", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


# The personas: one meaning each, everywhere (as healthchecks' alice/bob/charlie). The project
# fixtures make alice, bob and carol members; charlie has no access to any of their stuff.
PERSONAS = {
    "alice": "operator and approver, a member",
    "bob": "operator, a member",
    "carol": "a member with no role (reads only)",
    "charlie": "signed in, no role, a member of nothing: an outsider",
    "dave": "a second plain operator",
    "erin": "a second approver (operator and approver)",
}


@pytest.fixture(scope="session", autouse=True)
def fewer_hashing_rounds():
    """This process hashes passwords with Django's PBKDF2 at fewer rounds (tests/hashers.py)."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.hashers.FewerRounds"]):
        yield


@pytest.fixture
def migrated_copy():
    """A migration test migrates a copy of the worker's database made for it (PostgreSQL), or the
    database itself, migrated back to its newest state after (elsewhere)."""
    from tests.migrating import migrate
    from tests.template_db import scratch_copy

    with scratch_copy() as copied:
        yield
    if not copied:
        migrate([])


@functools.cache
def password_hash(password: str) -> str:
    """A real PBKDF2 hash of a password, made once per process."""
    from django.contrib.auth.hashers import make_password

    return make_password(password)


def _password_hash(name: str) -> str:
    return password_hash(f"{name}-pass-1234")


def _persona(django_user_model, name: str):
    """A person with no role anywhere yet: tests.personas.join gives them their roles in a project."""
    return django_user_model.objects.create(username=name, email=f"{name}@example.org", password=_password_hash(name))


@pytest.fixture(scope="session")
def django_db_setup(
    request, django_test_environment, django_db_blocker, django_db_use_migrations, django_db_modify_db_settings
):
    """On PostgreSQL each worker's database is a copy of one migrated template (tests/template_db.py);
    elsewhere (SQLite) pytest-django's own setup."""
    if connection.vendor != "postgresql":
        yield from _pytest_django_setup(request, django_test_environment, django_db_blocker, django_db_use_migrations)
        return
    from pytest_django.fixtures import _disable_migrations

    from tests.template_db import clone_from_template, delete_instead_of_truncate, drop_clone

    delete_instead_of_truncate()
    if not django_db_use_migrations:
        _disable_migrations()
    with django_db_blocker.unblock():
        name = clone_from_template(migrate=django_db_use_migrations)
    yield
    with django_db_blocker.unblock():
        drop_clone(name)


def _pytest_django_setup(request, environment, blocker, use_migrations):
    from pytest_django.fixtures import django_db_setup as original

    yield from original.__wrapped__(request, environment, blocker, use_migrations, False, False, None)


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """Each test gets a new channel layer instance. channels_redis keeps its receive state (a lock
    and a count of receivers) per layer instance, not per event loop, and pytest-asyncio gives each
    test a loop of its own: a consumer an earlier test left receiving handed a later test's
    consumer a lock bound to a closed loop ("bound to a different event loop", seen once in a full
    run). A server has one loop per process and never meets this."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield


@pytest.fixture
def admin_user(db, django_user_model):
    """pytest-django's admin (username "admin", password "password"), its hash made once per process."""
    try:
        return django_user_model._default_manager.get_by_natural_key("admin")
    except django_user_model.DoesNotExist:
        fields = {"email": "admin@example.com", "is_staff": True, "is_superuser": True}
        return django_user_model._default_manager.create(username="admin", password=password_hash("password"), **fields)


@pytest.fixture
def alice(django_user_model):
    return _persona(django_user_model, "alice")


@pytest.fixture
def bob(django_user_model):
    return _persona(django_user_model, "bob")


@pytest.fixture
def carol(django_user_model):
    return _persona(django_user_model, "carol")


@pytest.fixture
def charlie(django_user_model):
    return _persona(django_user_model, "charlie")


@pytest.fixture
def dave(django_user_model):
    return _persona(django_user_model, "dave")


@pytest.fixture
def erin(django_user_model):
    return _persona(django_user_model, "erin")


# Fast watchers for tests: a 1 s tick, a 5 s lease, a 30 s life; a 3 s grace between a stop's SIGTERM and SIGKILL;
# the checkpoint mirror looks twice a second, and a box without a durable tier holds a newer copy every 3 s.
WATCH_ENV = {
    "WATCH_TICK_SECONDS": "1",
    "WATCH_LEASE_SECONDS": "5",
    "WATCH_LIFETIME_SECONDS": "30",
    "RUN_STOP_GRACE_SECONDS": "3",
    "CKPT_MIRROR_POLL_SECONDS": "0.5",
    "CKPT_HOLD_SECONDS": "3",
}


class WorkerProcess:
    """A real `celery worker` process on the machine's Redis, reading the test database."""

    def __init__(self, database: str, name: str = "test", **extra_env: str):
        self.database = database
        self.extra_env = extra_env
        self.name = f"{name}-{os.getpid()}@{socket.gethostname()}"
        self.log_path = ARTIFACTS / "celery-worker.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        from remotegpu_site.celery import app

        if self.process is not None and self.process.poll() is None:
            return
        self.log_path.parent.mkdir(exist_ok=True)
        log = self.log_path.open("a")
        # Threads: long-lived watcher tasks must not block preflights; one process dies as a whole.
        command = [sys.executable, "-m", "celery", "-A", "remotegpu_site", "worker", "--pool=threads", "-c", "6"]
        command += ["-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "-n", self.name, "-l", "info"]
        env = subprocess_env(DATABASE_URL=self.database, **{**WATCH_ENV, **self.extra_env})
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while not self._ready(app):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery worker did not start; see {self.log_path}")

    def _ready(self, app) -> bool:
        if "REDIS_URL" in self.extra_env:  # a broker of its own: the worker's log says when it is ready
            time.sleep(0.3)
            return f"{self.name} ready." in self.log_path.read_text(errors="replace")
        return bool(app.control.ping(timeout=0.5, destination=[self.name]))

    def kill(self) -> None:
        """SIGKILL, as when a worker machine dies: no warm shutdown, no cleanup."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def poll(self):
        return self.process.poll() if self.process else 0


@pytest.fixture(scope="session")
def provider_stub():
    """The cloud providers' HTTP APIs, local: the worker is pointed at it through its environment."""
    stub = ProviderStub()
    yield stub
    stub.close()


@pytest.fixture
def provider_api(provider_stub, settings, monkeypatch):
    """Point this test process (tasks called in-process) at the stub as well."""
    settings.PROVIDER_API_BASES = {key: provider_stub.url for adapter in ADAPTERS.values() for key in adapter.bases}
    settings.PROVIDER_API_RETRY_SECONDS = 0.05
    monkeypatch.setenv(KEY_ENV, API_KEY)
    provider_stub.reset()
    yield provider_stub
    # A stand-in that answered outside its provider's published schema is a defect the test must not pass over.
    violations = list(provider_stub.schema_violations)
    provider_stub.reset()
    assert violations == [], violations


@pytest.fixture(scope="session")
def _worker(django_db_setup, django_db_blocker, provider_stub):
    from remotegpu_site.celery import app

    with django_db_blocker.unblock():
        url = database_url(WORKER_APPLICATION)
    app.control.purge()
    # The test deployment's webhooks go to the stub on loopback over http, which it allows explicitly.
    worker = WorkerProcess(
        url, **provider_stub.env, WEBHOOK_ALLOW_HTTP="1", WEBHOOK_ALLOW_PRIVATE="1", REMOTEGPU_LOCAL_NODE="1"
    )
    yield worker
    worker.stop()


@pytest.fixture
def celery_worker_process(_worker):
    """The session's worker, (re)started if an earlier test stopped it."""
    _worker.start()
    return _worker


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """One real sshd for the session (tests that change its host key use their own)."""
    from tests.sshd import Sshd

    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture
def local_node(settings):
    """This process may use the control host as a node (as the one-person `make run` does)."""
    settings.LOCAL_NODE = True


@pytest.fixture
def no_worker(_worker):
    """Tasks run in this process only: the session's worker, if an earlier test started it, is stopped
    and the queue emptied, so a task the test enqueues (an approval's execution, a rent's create) never
    runs beside the test's own call of it (or after it)."""
    from remotegpu_site.celery import app

    _worker.stop()
    app.control.purge()
    yield
    app.control.purge()


# What makes a test end-to-end: a real worker process (no_worker, which stops one, asks for _worker too),
# an sshd box, the local node, a browser or a stack.
E2E_FIXTURES = {"_worker", "sshd", "local_node", "stack", "page", "slurm", "login"}


def pytest_collection_modifyitems(config, items):
    """unit / db / e2e from the fixtures a test really uses (transitively): a marker nobody can forget."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & E2E_FIXTURES or item.get_closest_marker("e2e"):  # or a module that starts its own processes
            item.add_marker(pytest.mark.e2e)
        elif item.get_closest_marker("django_db") or used & {"db", "transactional_db", "client", "admin_user"}:
            item.add_marker(pytest.mark.db)
        else:
            item.add_marker(pytest.mark.unit)
        if item.nodeid.split("::")[0].endswith("_migration.py"):  # a database migrated down and up again
            item.add_marker(pytest.mark.migration)
