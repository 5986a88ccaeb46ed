"""The real stack (`manage.py runstack`, as `make run` starts it) and a headless Chromium."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests.built_once import migrated_sqlite
from tests.conftest import ARTIFACTS, REPO, subprocess_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stack:
    """A running `manage.py runstack` with its printed output collected line by line."""

    def __init__(self, var_dir, port, **extra_env):
        self.port = port
        self.var_dir = var_dir
        self.url = f"http://127.0.0.1:{port}"
        self.lines: list[str] = []
        env = subprocess_env(
            REMOTEGPU_VAR_DIR=str(var_dir),
            DATABASE_URL="",
            CELERY_QUEUE=f"remotegpu-e2e-{os.getpid()}-{port}",  # a queue per stack: two stacks in one worker
            LOG_LEVEL="WARNING",
            REMOTEGPU_LOCAL_NODE="1",  # as `make run` sets it: the one-person stack may use this machine
            # Nothing answers on port 1: the stack starts a private redis-server, as on a fresh machine,
            # instead of sharing this test worker's Redis database (its beat's health record, its groups).
            REDIS_URL="redis://127.0.0.1:1/0",
            **extra_env,
        )
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runstack", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                match = re.search(pattern, line)
                if match:
                    return match
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"runstack never printed {pattern!r}; output:\n" + "\n".join(self.lines[-40:]))

    def wait_listening(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.2)
        raise AssertionError("web server never listened:\n" + "\n".join(self.lines[-40:]))

    def interrupt(self, timeout: float = 30) -> int:
        """Ctrl-C as a terminal sends it: SIGINT to the whole process group."""
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=timeout)

    def kill(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def migrated_var(var_dir, database: Path) -> Path:
    """var_dir holding a copy of a migrated database (tests.built_once.migrated_sqlite): a stack started on
    it skips the ~10 s of CPU of migrating an empty one."""
    Path(var_dir).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(database, Path(var_dir) / "remotegpu.sqlite3")
    return Path(var_dir)


def started_stack(var_dir, database: Path | None = None, **extra_env) -> Stack:
    """A `runstack` on a free port, up and listening, its admin's one-time password read. Given a migrated
    database (tests.built_once.migrated_sqlite), it starts on a copy of it: its own migrate finds nothing to
    do (test_stack_lifecycle starts stacks on nothing, as a fresh machine does)."""
    if database is not None:
        migrated_var(var_dir, database)
    running = Stack(var_dir, free_port(), **extra_env)
    running.password = running.wait_for(r"Created admin user 'admin' with password: (\S+)").group(1)
    running.wait_for(r"RemoteGPU is up at")
    running.wait_listening()
    return running


SIGNED_IN_PAGE = """
import json, sys
from playwright.sync_api import sync_playwright
url, cookie, chromium, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, headless=True, args=args)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_cookies([{"name": "sessionid", "value": cookie, "url": url}])
    page = context.new_page()
    page.goto(url)
"""


def read_in_chromium(body: str, url: str, session_cookie: str, timeout: float = 120) -> dict:
    """Run Playwright lines in a process of their own (a live_server test's thread must not hold
    Playwright's event loop) with `page` open at url at 1,280 px, signed in by the session cookie; the
    JSON they print."""
    import json
    import textwrap

    script = SIGNED_IN_PAGE + textwrap.indent(textwrap.dedent(body), "    ") + "\n    browser.close()\n"
    seen = subprocess.run(
        [sys.executable, "-c", script, url, session_cookie, CHROMIUM, json.dumps(CHROMIUM_ARGS)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert seen.returncode == 0, seen.stderr[-2000:]
    return json.loads(seen.stdout)


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    running = started_stack(tmp_path_factory.mktemp("stack-var"), migrated_sqlite(tmp_path_factory))
    yield running
    running.kill()


@pytest.fixture(scope="module")
def browser():
    """Per module: Playwright's sync API keeps an event loop running in this thread while it is open,
    and Django refuses database calls from a thread with a running loop (the next module's tests)."""
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    yield page
    context.close()
