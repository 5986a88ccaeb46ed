"""The control host's node user is walled off from the control plane, measured from its own seat.

Before: a command on the control host ran as REMOTEGPU_LOCAL_NODE_USER and still reached Redis with no
password (a task queued there runs as the worker) and a loopback-trusting PostgreSQL as any role. Now a
process that runs commands there (runstack, a Celery worker) measures the wall as that user at start-up and
refuses to start while anything answers, naming what to set.
"""

import glob
import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from core import stack, wall
from tests.conftest import REPO, subprocess_env

NODE_USER = "nobody"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="measuring as another OS user needs root")
OPEN_DATABASE = {"ENGINE": "django.db.backends.postgresql", "HOST": "127.0.0.1", "PORT": 5432}
INITDB = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))


@pytest.fixture
def shared_tmp():
    """A folder other OS users may traverse (pytest's tmp_path is the worker's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="remotegpu-wall-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def sqlite_var(root: Path, mode: int) -> tuple[dict, Path]:
    var = root / "var"
    var.mkdir(mode=0o755)
    (var / "remotegpu.sqlite3").write_bytes(b"SQLite format 3\0")
    (var / "secret_key").write_text("canary-secret-key")
    (var / "secret_key").chmod(0o644)
    var.chmod(mode)
    return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(var / "remotegpu.sqlite3")}, var


def test_an_open_broker_a_trusting_database_and_a_readable_var_are_each_named(shared_tmp):
    found = wall.problems(NODE_USER, "redis://127.0.0.1:6379/0", {**OPEN_DATABASE, "NAME": "postgres"}, shared_tmp)
    assert len(found) == 2
    assert "broker at 127.0.0.1:6379 answers the node user with no password" in found[0] and "requirepass" in found[0]
    assert "database at 127.0.0.1:5432 lets the node user in" in found[1] and "scram-sha-256" in found[1]
    database, var = sqlite_var(shared_tmp, 0o755)
    files = wall.problems(NODE_USER, "redis://127.0.0.1:6379/0", database, var)
    assert [line.split(":")[0] for line in files[1:]] == [
        f"the node user can read {var / 'remotegpu.sqlite3'}",
        f"the node user can read {var / 'secret_key'}",
    ]
    assert all("canary" not in line for line in files)


@pytest.fixture
def walled_postgres(shared_tmp):
    """A private PostgreSQL that asks every client for a password (scram-sha-256), on a free port."""
    if not INITDB or shutil.which("runuser") is None:
        pytest.skip("no PostgreSQL server binaries here")
    owner = pwd.getpwnam("postgres")
    data, sockets = shared_tmp / "pg", shared_tmp / "pgsock"
    for folder in (data, sockets):
        folder.mkdir()
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    password = shared_tmp / "pgpass"
    password.write_text("wall-test-password\n")
    os.chown(password, owner.pw_uid, owner.pw_gid)
    as_postgres = ["runuser", "-u", "postgres", "--"]
    init = [INITDB[-1], "-D", str(data), "--auth=scram-sha-256", f"--pwfile={password}", "-U", "postgres"]
    subprocess.run([*as_postgres, *init], check=True, capture_output=True, timeout=120)
    port = stack.free_port()
    ctl = Path(INITDB[-1]).with_name("pg_ctl")
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run([*as_postgres, str(ctl), "-D", str(data), "-o", options, "-w", "start"], check=True, timeout=60)
    yield {**OPEN_DATABASE, "PORT": port, "NAME": "postgres", "USER": "postgres", "PASSWORD": "wall-test-password"}
    subprocess.run([*as_postgres, str(ctl), "-D", str(data), "-m", "immediate", "stop"], timeout=60)


def test_a_broker_with_a_password_a_database_that_asks_and_a_private_var_pass(shared_tmp, walled_postgres):
    redis_server, url = stack.start_private_redis(shared_tmp)  # runstack's own: behind a password of its start
    try:
        assert "@" in url and wall.problems(NODE_USER, url, walled_postgres, shared_tmp) == []
        (shared_tmp / "site").mkdir()
        database, var = sqlite_var(shared_tmp / "site", 0o700)
        assert wall.problems(NODE_USER, url, database, var) == []
    finally:
        stack.stop_all({"redis": redis_server})


def start(*argv, **env) -> subprocess.CompletedProcess:
    env = subprocess_env(REMOTEGPU_LOCAL_NODE="1", REMOTEGPU_LOCAL_NODE_USER=NODE_USER, **env)
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)


def test_a_worker_and_the_stack_refuse_to_start_while_the_node_user_reaches_the_broker(tmp_path):
    worker = start(sys.executable, "-m", "celery", "-A", "remotegpu_site", "worker", "-P", "solo")
    assert worker.returncode == 78, worker.stderr[-2000:]
    assert "RemoteGPU will not start" in worker.stderr and "'nobody'" in worker.stderr
    assert "broker at 127.0.0.1:6379 answers the node user with no password" in worker.stderr
    assert "ready." not in worker.stderr  # it never took a task
    site = tmp_path / "var"
    runstack = start(sys.executable, "manage.py", "runstack", REMOTEGPU_VAR_DIR=str(site), DATABASE_URL="")
    assert runstack.returncode != 0 and "RemoteGPU will not start" in runstack.stderr, runstack.stderr[-2000:]
    assert "broker at 127.0.0.1:6379" in runstack.stderr and "Traceback" not in runstack.stderr
    assert "RemoteGPU is up" not in runstack.stdout
    with sqlite3.connect(site / "remotegpu.sqlite3") as database:  # refused before it migrated anything
        assert database.execute("select count(*) from sqlite_master").fetchone() == (0,)
