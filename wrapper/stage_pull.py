"""`stage-pull`: stage a dataset on this box from its source, with no byte through the control host.

The request (one line on stdin) names the target, the roster and the source: a directory on this box
(`local_root`), or another box reached by ssh with a temporary key that may run only `stage-send` there
and a known_hosts line with that box's pinned key (a host key that differs ends the stage). The key and
known_hosts are written 0600 beside the run secrets, and deleted when the stage ends, however it ends.
Progress lines go to stdout as frames land; the last line is the answer.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from .run_secrets import NotPrivate, private_dir, write_private
from .staging import FrameStream, StageError, finish, needed, receive_frames, send_frames


def private_file(name, text):
    try:
        return write_private(os.path.join(private_dir(), f"{name}-{os.getpid()}"), text)
    except NotPrivate as exc:
        raise StageError(str(exc)) from None


def reporter():
    last = [0.0]

    def progress(received, files):
        if time.monotonic() - last[0] >= 0.5:
            last[0] = time.monotonic()
            print(json.dumps({"progress": {"bytes": received, "files": files}}), flush=True)

    return progress


def from_local(root, need, rate, receive):
    """This box's own directory as the source: a sender thread and the receiver, joined by a pipe."""
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb", buffering=0) as reader, os.fdopen(write_end, "wb") as writer:

        def send():
            with contextlib.suppress(BrokenPipeError, OSError):
                send_frames(root, need, writer, rate)
                writer.close()

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            return receive(FrameStream(reader.fileno()))
        finally:
            reader.close()
            sender.join(timeout=5)


def from_box(source, need, rate, receive):
    """Another box as the source: one ssh stream, its key good for `stage-send` only."""
    ssh = shutil.which("ssh")
    if not ssh:
        raise StageError("this box has no ssh client (openssh-client): it cannot stage from another box")
    key = private_file("stage-key", source["key"])
    known = private_file("stage-known-hosts", source["known_host"] + "\n")
    argv = [ssh, "-i", key, "-p", str(int(source["port"])), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
    argv += ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}"]
    argv += ["-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=20", "-o", "ServerAliveInterval=15"]
    argv += ["-o", "LogLevel=ERROR", f"{source['user']}@{source['host']}", "stage-send"]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    try:
        child.stdin.write(json.dumps({"need": need, "rate": rate}).encode() + b"\n")
        child.stdin.close()
        try:
            return receive(FrameStream(child.stdout.fileno()))
        except StageError as exc:
            child.kill()
            said = child.stderr.read(2000).decode(errors="replace").strip()
            raise StageError(f"{exc}{': ' + said if said else ''}") from None
    finally:
        for path in (key, known):
            with contextlib.suppress(OSError):
                os.remove(path)
        if child.poll() is None:
            child.kill()
        child.wait()


def cmd_stage_pull():
    request = json.loads(sys.stdin.buffer.readline(1 << 26) or b"{}")
    target, files, source = request["target"], request["files"], request["source"]
    rate = int(request.get("rate") or 0)
    try:
        need = needed(target, files)
        progress = reporter()

        def receive(stream):
            return receive_frames(stream, target, files, progress)

        if not need:
            answer = {"received": 0, "files": 0}
        elif source.get("local_root"):
            answer = from_local(source["local_root"], need, rate, receive)
        else:
            answer = from_box(source, need, rate, receive)
    except (StageError, OSError) as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    answer["complete"] = finish(target, request["roster_sha256"], files)
    print(json.dumps(answer), flush=True)
    return 0
