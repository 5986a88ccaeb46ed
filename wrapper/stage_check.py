"""`stage-check`: what of a dataset is already staged in its target (stdin: target, roster hash, files).

With `rehash`, a dataset staged before is hashed again whole: a file that changed on the box since it
landed is removed (and named as damaged), so the stage that follows brings it back as the roster says."""

import contextlib
import json
import os

from .files import measure
from .staging import StageError, complete, file_sha256, needed


def damaged_files(target, files):
    """Files in place whose SHA-256 is no longer their roster's: removed, with the dataset's .complete."""
    damaged = []
    for item in files:
        path = os.path.join(target, item["path"])
        if not os.path.isfile(path) or file_sha256(path) != item["sha256"]:
            damaged.append(item["path"])
            with contextlib.suppress(OSError):
                os.remove(path)
    if damaged:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(target, ".complete"))
    return damaged


def cmd_stage_check(request):
    target, files = request["target"], request["files"]
    damaged = []
    if complete(target, request["roster_sha256"]):
        damaged = damaged_files(target, files) if request.get("rehash") else []
        if not damaged:
            print(json.dumps({"complete": True, "need": []}))
            return 0
    try:
        need = needed(target, files)
    except StageError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    sizes = {item["path"]: item["bytes"] for item in files}
    present = sum(sizes.values()) - sum(sizes[item["path"]] - item["offset"] for item in need)
    # How much the disk that will hold it has free now: the control side refuses a stage that cannot fit
    # before a byte moves (a disk filled halfway by a dataset fails every run on the box).
    space = measure(target)
    answer = {"complete": False, "need": need, "present_bytes": present, "damaged": damaged}
    print(json.dumps({**answer, "free_bytes": space["free_bytes"], "measured_at": space["measured_at"]}))
    return 0
