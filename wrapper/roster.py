"""`roster`: relative path, bytes and SHA-256 of every file of the sealed export."""

import json
import os

from .files import read, sha256_file


def roster_of(root):
    """Relative path, bytes and SHA-256 of every file under root, in one streamed pass."""
    files = []
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(directory, name)
            if os.path.islink(full):
                raise ValueError("symlink in an export: " + os.path.relpath(full, root))
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            files.append({"path": rel, "bytes": os.path.getsize(full), "sha256": sha256_file(full)})
    return files


def sealed_roster_path(spec):
    return os.path.join(spec.active, "sealed-roster.json")


def cmd_roster(spec):
    """The sealed export's roster now, next to the roster recorded when it was sealed.

    Only export/<run-id> (or a capsule's export/hardware/<run-id>) is ever rostered: active/, cache/ and
    .partial/ are mutable or unsealed.
    """
    root = spec.export
    parent = os.path.dirname(root)
    if os.path.basename(parent) == "hardware":
        parent = os.path.dirname(parent)
    if not os.path.isdir(root) or os.path.basename(parent) != "export":
        print(json.dumps({"error": "no sealed export at " + root}))
        return 1
    try:
        files = roster_of(root)
    except ValueError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    sealed = read(sealed_roster_path(spec))
    print(json.dumps({"export": root, "files": files, "sealed": json.loads(sealed) if sealed else None}))
    return 0
