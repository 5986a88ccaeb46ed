"""`stage-receive`: a dataset's frames on stdin, after one request line (target, roster hash, files)."""

import json
import sys

from .staging import FrameStream, StageError, finish, receive_frames


def cmd_stage_receive():
    stream = FrameStream(sys.stdin.fileno())
    request = json.loads(stream.readline(1 << 26) or b"{}")
    target, files = request["target"], request["files"]
    try:
        answer = receive_frames(stream, target, files)
    except (StageError, OSError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    answer["complete"] = finish(target, request["roster_sha256"], files)
    print(json.dumps(answer))
    return 0
