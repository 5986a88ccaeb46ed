"""`clean-caches`: measure and remove the cache paths the control side names."""

import json
import os
import shutil

from .files import tree_bytes


def cmd_clean_caches(request):
    """Remove the named cache directories (the control side chose them and spared every export)."""
    removed, freed = [], 0
    for path in request["paths"]:
        if (
            not os.path.isabs(path)
            or ".." in path.split("/")
            or os.path.realpath(path) in ("/", os.path.expanduser("~"))
        ):
            print(json.dumps({"error": "refusing to remove " + path}))
            return 1
        if os.path.lexists(path):
            freed += tree_bytes(path) if os.path.isdir(path) and not os.path.islink(path) else os.lstat(path).st_size
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
    print(json.dumps({"freed": freed, "removed": removed}))
    return 0
