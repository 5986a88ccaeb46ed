"""The no-edit path's checkpoints made durable: the newest checkpoint an unchanged script saves where it
always does (a declared file such as `out/ckpt.pt`, or a folder such as `out/checkpoint-500/`) is copied
into the run's ckpt/ under a name that says where it came from, so the mirror treats it as any
checkpoint (durable tier or the control host's pull, its step read, the resume proved); a fresh attempt
on another box gets it back in place, a folder as one unit, before the command starts.

A file keeps its bytes (`declared-file-<quoted path>`); a folder travels as one tar
(`declared-dir-<quoted path>.tar`). Only the newest bridged copy stays in ckpt/: the mirror keeps its own
history. A declared file whose name is not a checkpoint's (docs/contract.md) is not bridged.
"""

import contextlib
import os
import shutil
import tarfile
import time

from .checkpoints import incomplete
from .ckpt_names import bridged_name, bridged_source, checkpoint_file, name_problem
from .declared import checkpoints_in_place, declared, path_problem
from .mirror import clone_hashing, open_regular_file

# A declared checkpoint must be untouched this long before it is copied (a folder is several writes).
BRIDGE_SETTLE_SECONDS = 1.0


def declared_fingerprint(path):
    """(newest mtime in ns, total bytes) of a declared file or folder, never following a link."""
    if not os.path.isdir(path) or os.path.islink(path):
        info = os.lstat(path)
        return info.st_mtime_ns, info.st_size
    newest, total = os.stat(path).st_mtime_ns, 0
    for directory, _dirs, names in os.walk(path):
        for name in names:
            info = os.lstat(os.path.join(directory, name))
            newest, total = max(newest, info.st_mtime_ns), total + info.st_size
    return newest, total


def bridge_declared(spec, bridged):
    """Copy the newest declared checkpoint into ckpt/ once it has settled; bridged: {path: fingerprint}
    of what was copied already (the caller keeps it between looks). Returns why the newest declared
    checkpoint is refused (a link, a fifo, a folder holding either: the run contract), else None."""
    try:
        found = {path.rstrip(os.sep): declared_fingerprint(path) for path in checkpoints_in_place(spec)}
    except OSError:
        return None  # replaced while looked at: the next look
    if not found:
        return None
    newest = max(found, key=lambda path: found[path][0])
    fingerprint = found[newest]
    if bridged.get(newest) == fingerprint:
        return None
    refused = path_problem(spec.cwd, newest)
    if refused:
        bridged[newest] = fingerprint  # said once for this state of it
        return "the run contract refuses the declared checkpoint " + refused
    is_dir = os.path.isdir(newest)
    if not is_dir and (not checkpoint_file(os.path.basename(newest)) or incomplete(newest)):
        return None
    if time.time_ns() - fingerprint[0] < BRIDGE_SETTLE_SECONDS * 1e9:
        return None
    name = bridged_name(os.path.relpath(newest, spec.cwd), is_dir)
    staging = os.path.join(spec.ckpt, ".bridge-" + name)
    try:
        if is_dir:
            with tarfile.open(staging, "w") as archive:
                archive.add(newest, arcname=os.path.basename(newest))
        else:
            clone_hashing(newest, staging)
        if declared_fingerprint(newest) != fingerprint:
            os.remove(staging)  # rewritten while copied: the next look takes the new one
            return None
        os.replace(staging, os.path.join(spec.ckpt, name))
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(staging)
        return None
    for other in os.listdir(spec.ckpt):
        if other != name and bridged_source(other) is not None:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(spec.ckpt, other))
    bridged[newest] = fingerprint
    return None


def restore_declared(spec):
    """A bridged checkpoint in ckpt/ (restored from the durable tier or the control host) put back where
    the script looks for it, unless something is there already (an attempt on the same box keeps its own,
    newer one). Only a copy whose path the declaration's glob matches is put back (ckpt_names): a copy named
    anything else, whoever sent it, stays where it is. Returns the path it restored, relative to the
    working directory, or None."""
    pattern = declared(spec).get("checkpoints")
    if not pattern:
        return None
    names = sorted(os.listdir(spec.ckpt))
    copies = [name for name in names if bridged_source(name) is not None and name_problem(name, pattern) is None]
    if not copies:
        return None
    name = max(copies, key=lambda copy: os.stat(os.path.join(spec.ckpt, copy)).st_mtime_ns)
    relative, is_dir = bridged_source(name)
    target = os.path.join(spec.cwd, relative)
    if os.path.lexists(target):
        return None
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if is_dir:
        with tarfile.open(os.path.join(spec.ckpt, name)) as archive:
            extract_folder(archive, os.path.dirname(target), os.path.basename(target))
    else:
        with open_regular_file(os.path.join(spec.ckpt, name)) as source, open(target, "xb") as copy:
            shutil.copyfileobj(source, copy)
    return relative


def extract_folder(archive, parent, folder):
    """One folder of plain files and folders, into parent: no link, no device, nothing outside folder
    (checked member by member: a box's python may predate tarfile's extraction filters)."""
    for member in archive.getmembers():
        parts = os.path.normpath(member.name).split(os.sep)
        if parts[0] != folder or ".." in parts or os.path.isabs(member.name) or not (member.isfile() or member.isdir()):
            raise OSError(f"a bridged folder holds {member.name!r}: not restored")
    for member in archive.getmembers():
        path = os.path.join(parent, member.name)
        if member.isdir():
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with archive.extractfile(member) as source, open(path, "wb") as target:
            shutil.copyfileobj(source, target)
