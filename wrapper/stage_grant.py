"""`stage-grant`: add or remove the temporary staging key in this box's authorized_keys (stdin).

The key is written with `restrict` and `command=` so that it can run nothing but `stage-send` of one
dataset root; it is removed by its marker when the stage ends. A key a dead worker left behind is removed
at the next grant, once its marker's time is before `expire_before`. The file is locked while it changes."""

import contextlib
import fcntl
import json
import os

from .digits import ascii_int
from .files import expand


def expired(line, before):
    """A staging key's line whose marker (remotegpu-stage-<epoch>-<nonce>) is older than before."""
    marker = line.rsplit(" ", 1)[-1]
    if not marker.startswith("remotegpu-stage-"):
        return False
    stamp = ascii_int(marker[len("remotegpu-stage-") :].split("-", 1)[0])
    return stamp is not None and stamp < before


def cmd_stage_grant(request):
    path = expand(request.get("file") or "~/.ssh/authorized_keys")
    marker = str(request["marker"])
    if not marker.startswith("remotegpu-stage-") or any(c.isspace() for c in marker):
        print(json.dumps({"error": "refusing a marker that is not a staging key's"}))
        return 1
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lines = []
        with contextlib.suppress(FileNotFoundError), open(path) as handle:
            lines = handle.read().splitlines()
        expire_before = float(request.get("expire_before") or 0)
        lines = [line for line in lines if not line.endswith(" " + marker) and not expired(line, expire_before)]
        if request.get("action") == "add":
            line = str(request["line"])
            if "\n" in line or not line.startswith("restrict,command=") or not line.endswith(" " + marker):
                print(json.dumps({"error": "refusing a key line that is not restricted to stage-send"}))
                return 1
            lines.append(line)
        staging = f"{path}.tmp-{os.getpid()}"
        with os.fdopen(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write("".join(item + "\n" for item in lines))
        os.replace(staging, path)
    print(json.dumps({"granted": request.get("action") == "add"}))
    return 0
