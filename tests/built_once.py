"""What a test session builds once and many tests only read (a trained tinyfit export): built by the
first xdist worker that asks, under a file lock, in the directory all of the session's workers share;
every other worker waits for that build and reads it. A test that changes one copies it first."""

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path


def session_dir(tmp_path_factory) -> Path:
    """The session's temporary directory every xdist worker shares (each worker's basetemp is inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A directory `name` that build(directory) filled, once per session; a build that failed is not
    kept (the next asker builds it again and sees the failure itself)."""
    root = session_dir(tmp_path_factory) / name
    done = root.with_name(f"{name}.built")
    with open(root.with_name(f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            build(root)
            done.touch()
    return root


def migrated_sqlite(tmp_path_factory) -> Path:
    """An embedded SQLite database with every migration applied, as `runstack` leaves it on its first start:
    migrated once per session (~7 s of CPU each time) and copied by each stack or process that needs one."""
    import subprocess
    import sys

    from tests.conftest import REPO, subprocess_env

    def migrate(directory: Path) -> None:
        env = subprocess_env(REMOTEGPU_VAR_DIR=str(directory), DATABASE_URL="")
        command = [sys.executable, "manage.py", "migrate", "-v", "0"]
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()[-2000:]

    return built_once(tmp_path_factory, "migrated-sqlite", migrate) / "remotegpu.sqlite3"
