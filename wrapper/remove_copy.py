"""`remove-copy`: delete one copy of a sealed export, strictly inside the root named."""

import json
import os
import shutil

from .files import tree_bytes


def cmd_remove_copy(request):
    """Delete one copy of a sealed export: a directory strictly inside the root the control side
    names (the project's export/ or its durable mirror), never a link, never the root itself, never
    reached through "..". Gone already: answered as removed nothing, so a retry is harmless."""
    path, root = request["path"], request["root"]
    parts = path.split("/")
    if not (os.path.isabs(path) and os.path.isabs(root)) or ".." in parts or os.path.islink(path):
        print(json.dumps({"error": "refusing to remove " + path}))
        return 1
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if real == real_root or not real.startswith(real_root.rstrip("/") + "/") or real in ("/", os.path.expanduser("~")):
        print(json.dumps({"error": "refusing to remove " + path + ": not strictly inside " + root}))
        return 1
    if not os.path.lexists(path):
        print(json.dumps({"removed": False, "bytes": 0}))
        return 0
    size = tree_bytes(path) if os.path.isdir(path) else os.lstat(path).st_size
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    print(json.dumps({"removed": True, "bytes": size}))
    return 0
