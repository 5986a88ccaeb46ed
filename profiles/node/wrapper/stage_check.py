"""`stage-check`: what of a dataset is already staged in its target (stdin: target, roster hash, files)."""

import json
import os

from .staging import StageError, complete, needed


def cmd_stage_check(request):
    target, files = request["target"], request["files"]
    if complete(target, request["roster_sha256"]):
        print(json.dumps({"complete": True, "need": []}))
        return 0
    try:
        need = needed(target, files)
    except StageError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    sizes = {item["path"]: item["bytes"] for item in files}
    present = sum(sizes.values()) - sum(sizes[item["path"]] - item["offset"] for item in need)
    print(
        json.dumps({"complete": False, "need": need, "present_bytes": present, "target_exists": os.path.isdir(target)})
    )
    return 0
