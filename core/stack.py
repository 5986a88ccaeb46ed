"""Start the whole stack on one machine: web (ASGI), Celery worker and beat, Redis if needed.

Used by `manage.py runstack` (and so by `make run`). Ctrl-C stops every child it started.
"""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import redis

REDIS_MISSING = "redis-server not found and REDIS_URL is not reachable: install it with `apt-get install redis-server`"


def redis_reachable(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def start_private_redis(var_dir: Path) -> tuple[subprocess.Popen, str]:
    """A redis-server bound to loopback, data under var/redis, on a free port, behind a password made
    for this start: loopback is every local user's, the control host's node user included (core/wall.py)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(REDIS_MISSING)
    data_dir = var_dir / "redis"
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir)]
    args += ["--save", "60 1", "--appendonly", "no", "--protected-mode", "yes"]
    password = secrets.token_urlsafe(24)
    # On stdin, not argv: a command line is every local user's to read in /proc.
    process = subprocess.Popen([binary, "-", *args[1:]], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    process.stdin.write(f"requirepass {password}\n")
    process.stdin.close()
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while not redis_reachable(url):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"private redis-server did not start on port {port}")
        time.sleep(0.1)
    return process, url


def child_commands(host: str, port: int, var_dir: Path) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "web": [python, "-m", "daphne", "-b", host, "-p", str(port), "remotegpu_site.asgi:application"],
        "worker": [python, "-m", "celery", "-A", "remotegpu_site", "worker", "-l", "info"],
        "beat": [
            python,
            "-m",
            "celery",
            "-A",
            "remotegpu_site",
            "beat",
            "-l",
            "info",
            "--schedule",
            str(var_dir / "celerybeat-schedule"),
        ],
    }


def is_loopback(host: str) -> bool:
    return host in {"127.0.0.1", "localhost", "::1"}


def child_env(redis_url: str, host: str) -> dict[str, str]:
    # The web process says "starting" instead of DOWN until its worker and beat could have measured.
    env = dict(os.environ, REDIS_URL=redis_url, PYTHONUNBUFFERED="1", REMOTEGPU_STACK_STARTED_AT=f"{time.time():.0f}")
    if is_loopback(host):
        # Plain HTTP on loopback: a Secure cookie would never come back and sign-in would loop.
        env.setdefault("SECURE_COOKIES", "0")
    return env


def stop_all(children: dict[str, subprocess.Popen], grace: float = 10.0) -> None:
    for process in children.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in children.values():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


RESTART_MIN, RESTART_MAX, STABLE_SECONDS = 1.0, 60.0, 60.0


def supervise(children: dict[str, subprocess.Popen], say, start=None) -> int:
    """Keep every child running until we are told to stop; then stop them all.

    A child that exits is restarted with back-off (1 s doubling to 60 s, reset once it has stayed
    up for a minute), and said so: one crashed worker must not take the dashboard down with it.
    Without `start` (a function name -> new process) a child's exit stops the rest, as before.
    """
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    exit_code = 0
    delays = dict.fromkeys(children, RESTART_MIN)
    started = dict.fromkeys(children, time.monotonic())
    pending: dict[str, float] = {}  # name -> when to restart it
    while not stopping:
        now = time.monotonic()
        for name, process in children.items():
            if name in pending or process.poll() is None:
                continue
            code = process.returncode
            if start is None:
                say(f"{name} exited with code {code}; stopping the rest")
                exit_code = code or 1
                stopping.append(name)
                break
            if now - started[name] > STABLE_SECONDS:
                delays[name] = RESTART_MIN
            say(f"{name} exited with code {code}; restarting it in {delays[name]:g} s")
            pending[name] = now + delays[name]
            delays[name] = min(RESTART_MAX, delays[name] * 2)
        for name, when in list(pending.items()):
            if now >= when and not stopping:
                children[name], started[name] = start(name), now
                del pending[name]
                say(f"{name} restarted (pid {children[name].pid})")
        time.sleep(0.3)
    stop_all(children)
    return exit_code


def redis_host_of(url: str) -> str:
    """Where a Redis URL points, never its password."""
    parsed = urlparse(url)
    return f"{parsed.hostname}:{parsed.port or 6379}" if parsed.hostname else "unix socket"
