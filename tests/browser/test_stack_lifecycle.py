"""`make run`'s stack: the admin password is printed once, and Ctrl-C stops every process."""

import os
import socket
import time

from tests.browser.conftest import Stack, free_port


def test_ctrl_c_stops_web_worker_and_beat(tmp_path):
    stack = Stack(tmp_path, free_port())
    try:
        stack.wait_for(r"Created admin user 'admin' with password: (\S+)")
        stack.wait_for(r"RemoteGPU is up at")
        stack.wait_listening()
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


def test_second_start_does_not_print_the_password_again(tmp_path):
    first = Stack(tmp_path, free_port())
    try:
        first.wait_for(r"Created admin user")
        first.wait_listening()
    finally:
        first.interrupt()
    second = Stack(tmp_path, free_port())
    try:
        second.wait_for(r"Admin user already exists")
        second.wait_listening()
    finally:
        second.interrupt()
    assert not any("password:" in line for line in second.lines)
