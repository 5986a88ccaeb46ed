"""`close-active`: move a failed run's active/ into quarantine/ with a reason."""

import json
import os

from .digits import ascii_int
from .files import alive, atomic_write, read


def cmd_close_active(request):
    """Move a failed run's leftover active/<run-id> into quarantine/ with a reason (nothing deleted)."""
    active, target = request["active"], request["quarantine"]
    parents = (os.path.basename(os.path.dirname(active)), os.path.basename(os.path.dirname(target)))
    if parents != ("active", "quarantine"):
        print(json.dumps({"error": "refusing paths outside active/ and quarantine/"}))
        return 1
    if not os.path.isdir(active):
        print(json.dumps({"closed": True, "moved": False, "reason": "no active/ directory left"}))
        return 0
    for attempt in sorted(os.listdir(active)):
        for pid in map(ascii_int, (read(os.path.join(active, attempt, "pid")) or "").split()):
            if pid and alive(pid):
                print(json.dumps({"closed": False, "reason": f"process {pid} of {attempt} is alive"}))
                return 0
    if os.path.exists(target):
        print(json.dumps({"error": "quarantine target already exists: " + target}))
        return 1
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(active, target)
    atomic_write(os.path.join(target, "reason.txt"), request["reason"].strip() + "\n")
    print(json.dumps({"closed": True, "moved": True, "to": target}))
    return 0
