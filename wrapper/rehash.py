"""`rehash`: re-hash copies against a roster the control side sends."""

import json
import os

from .files import mount_of, sha256_file


def rehash_problem(root, files):
    """None when root holds exactly these files with these bytes and SHA-256; else the first problem."""
    if not os.path.isdir(root) or os.path.islink(root):
        return "missing: " + root
    expected = set()
    for item in files:
        rel = item["path"]
        if rel.startswith("/") or ".." in rel.split("/"):
            return "refusing roster path " + rel
        full = os.path.join(root, rel)
        expected.add(rel)
        if os.path.islink(full) or not os.path.isfile(full):
            return rel + " is missing"
        if os.path.getsize(full) != item["bytes"]:
            return rel + " has changed size"
        if sha256_file(full) != item["sha256"]:
            return rel + " no longer matches its SHA-256"
    for directory, _dirs, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")
            if rel not in expected:
                return "unexpected file " + rel
    return None


def cmd_rehash(request):
    """Re-hash copies of a sealed export where they live, against the roster the control side holds.

    The roster comes from the control side (what custody verified), never from the box itself.
    """
    answers = []
    for copy in request["copies"]:
        try:
            problem = rehash_problem(copy["root"], copy["files"])
        except OSError as exc:
            problem = "unreadable: " + str(exc)
        mount = mount_of(copy["root"])
        expected = copy.get("mount")
        if problem is None and expected and (mount or {}).get("device") != expected.get("device"):
            # The copy is on another disk than the one it was verified on (a durable mount that is gone
            # leaves the directory on the disk below it): re-measured, it is not on its tier.
            problem = "its disk changed: verified on {} ({}), now on {}".format(
                expected.get("device"), expected.get("mountpoint"), (mount or {}).get("device")
            )
        answers.append({"root": copy["root"], "intact": problem is None, "problem": problem, "mount": mount})
    print(json.dumps({"schema": 1, "copies": answers}))
    return 0
