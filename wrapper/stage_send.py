"""`stage-send ROOT`: the frames of what a receiver needs (one request line on stdin), read strictly inside ROOT.

On a source box this is the only command the temporary staging key may run (authorized_keys `command=`)."""

import json
import os
import sys

from .files import expand
from .staging import send_frames


def cmd_stage_send(root):
    request = json.loads(sys.stdin.buffer.readline(1 << 26) or b"{}")
    root = expand(root)
    if not os.path.isdir(root):
        sys.stdout.buffer.write(json.dumps({"error": f"{root} is not a directory on the source box"}).encode() + b"\n")
        return 1
    out = open(sys.stdout.fileno(), "wb", buffering=1 << 20, closefd=False)  # noqa: SIM115 (stdout stays open)
    send_frames(root, request.get("need") or [], out, int(request.get("rate") or 0))
    return 0
