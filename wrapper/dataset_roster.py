"""`dataset-roster`: path, bytes and SHA-256 of every regular file under a dataset's root (stdin names it)."""

import json
import os

from .files import expand
from .staging import StageError, roster_of_dir


def cmd_dataset_roster(request):
    root = expand(str(request.get("root") or ""))
    if not os.path.isdir(root):
        print(json.dumps({"error": f"{request.get('root')} is not a directory on this box"}))
        return 1
    try:
        files = roster_of_dir(root)
    except (StageError, OSError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps({"root": root, "files": files}))
    return 0
