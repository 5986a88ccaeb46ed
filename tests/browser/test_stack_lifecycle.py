"""`make run`'s stack: the admin password is printed once, and Ctrl-C stops every process."""

import os
import socket
import time

import pytest

from tests.browser.conftest import Stack, free_port, migrated_var
from tests.built_once import migrated_sqlite

# Starts processes of its own (a stack, a worker, a web server): end to end, whatever its fixtures.
pytestmark = pytest.mark.e2e


def test_ctrl_c_stops_web_worker_and_beat(tmp_path):
    stack = Stack(tmp_path, free_port())  # on nothing, as on a fresh machine: it migrates first
    try:
        stack.wait_for(r"Created admin user 'admin' with password: (\S+)")
        stack.wait_for(r"RemoteGPU is up at")
        stack.wait_listening()
        # Every child up, not still importing: a Ctrl-C inside an import prints its own traceback.
        stack.wait_for(r"beat: Starting")
        stack.wait_for(r"celery@\S+ ready")
        assert stack.interrupt() == 0
    finally:
        stack.kill()
    time.sleep(1)
    try:
        os.killpg(stack.process.pid, 0)
        survivors = True
    except ProcessLookupError:
        survivors = False
    assert not survivors, "a child of runstack outlived Ctrl-C"
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", stack.port)) != 0
    assert not any("Traceback" in line for line in stack.lines), "\n".join(stack.lines[-40:])


def start_then_stop(var_dir, says: str) -> Stack:
    """A stack on var_dir that printed `says` and listened, then got Ctrl-C."""
    stack = Stack(var_dir, free_port())
    try:
        stack.wait_for(says)
        stack.wait_listening()
    finally:
        stack.interrupt()
    return stack


def test_second_start_does_not_print_the_password_again(tmp_path, tmp_path_factory):
    start_then_stop(migrated_var(tmp_path, migrated_sqlite(tmp_path_factory)), r"Created admin user")
    second = start_then_stop(tmp_path, r"Admin user already exists")
    assert not any("password:" in line for line in second.lines)


def _children(pid: int) -> dict[int, str]:
    """The direct children of a process and their command lines, read from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            found[int(entry)] = command
    return found


def test_a_killed_worker_is_restarted_and_the_dashboard_stays_up(tmp_path, tmp_path_factory):
    import signal
    import urllib.request

    stack = Stack(migrated_var(tmp_path, migrated_sqlite(tmp_path_factory)), free_port())
    try:
        stack.wait_for(r"RemoteGPU is up at")
        stack.wait_listening()
        worker = next(pid for pid, command in _children(stack.process.pid).items() if " worker " in command)
        os.kill(worker, signal.SIGKILL)
        stack.wait_for(r"worker exited with code -9; restarting it in 1 s")
        stack.wait_for(r"worker restarted \(pid \d+\)")
        with urllib.request.urlopen(stack.url + "/login/", timeout=10) as response:  # noqa: S310
            assert response.status == 200
        assert stack.process.poll() is None
        assert any(" worker " in command for command in _children(stack.process.pid).values())
    finally:
        stack.interrupt()
        stack.kill()
