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
