"""`idle ROOT`: processes that work in or write under ROOT (the shutdown check)."""

import json
import os

from .digits import ascii_int


def cmd_idle(root):
    """Processes that work in, or hold a file open for writing under, root (scans /proc)."""
    print(json.dumps({"busy": busy_under(root)}))
    return 0


def open_files(pid):
    """(target, for writing) of each file the process pid holds open; OSError when it cannot be read."""
    for fd in os.listdir("/proc/" + pid + "/fd"):
        target = os.readlink("/proc/" + pid + "/fd/" + fd)
        with open("/proc/" + pid + "/fdinfo/" + fd) as info:
            # "pos:" comes first; the open flags are on their own line, in octal.
            fields = dict(line.split(":", 1) for line in info.read().splitlines() if ":" in line)
        yield target, bool(int(fields["flags"].strip(), 8) & 3)


def busy_under(root, writers_only=True):
    """[{pid, why}] of processes working in root or holding a file under it open (for writing)."""
    root = os.path.realpath(root) + os.sep
    busy = []
    for pid in (name for name in os.listdir("/proc") if ascii_int(name) is not None):
        try:
            cwd = os.path.realpath("/proc/" + pid + "/cwd")
            if (cwd + os.sep).startswith(root):
                busy.append({"pid": int(pid), "why": "works in " + cwd})
                continue
            for target, writing in open_files(pid):
                if target.startswith(root) and (writing or not writers_only):
                    busy.append({"pid": int(pid), "why": "writes " + target})
                    break
        except (OSError, ValueError, KeyError):
            continue
    return busy
