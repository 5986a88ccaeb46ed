"""`mirror`: copy the sealed export to a durable tier, hashed against the sealed roster."""

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat

from .files import measure, mount_of, read, sha256_file
from .roster import roster_of, sealed_roster_path


def open_regular_file(path):
    """path opened for reading only as the regular file it is: a link is not followed and a fifo never
    waits for a writer (O_NONBLOCK), so a checkpoint swapped for either between a look and its copy is
    refused (OSError), never copied."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def copy_hashing(source, target):
    digest = hashlib.sha256()
    with open_regular_file(source) as src, open(target, "wb") as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            digest.update(block)
            dst.write(block)
        dst.flush()
        os.fsync(dst.fileno())
    return digest.hexdigest()


FICLONE = 0x40049409  # Linux: the target becomes a copy-on-write clone of the source (btrfs, XFS, bcachefs)


def clone_hashing(source, target):
    """target as a copy of source that shares no inode with it, hashed: a reflink where the filesystem
    has them (no bytes moved; a later write to either is the writer's own), else a byte copy. Never a hard
    link: a trainer that saves in place would rewrite the copy held for the control host."""
    with open_regular_file(source) as src, open(target, "wb") as dst:  # a link or a fifo: refused, never copied
        try:
            fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
        except OSError:
            cloned = False
        else:
            cloned = True
    return sha256_file(target) if cloned else copy_hashing(source, target)


def durable_problem(run_root, root, target):
    """Why root cannot hold a durable mirror, measured: it must exist (it is never created: a missing
    mount would put the copy on the system disk), hold target, and be a disk other than the data root's."""
    if not os.path.isdir(root) or os.path.islink(root):
        return "durable root " + root + " does not exist on this box (it is never created: mount the durable disk)"
    real_root = os.path.realpath(root)
    if not (os.path.realpath(os.path.dirname(target)) + "/").startswith(real_root.rstrip("/") + "/"):
        return "refusing a mirror outside the durable root " + root
    durable, data = mount_of(root), mount_of(run_root)
    if durable is None or data is None:
        return "the mounts of " + root + " cannot be read (/proc/self/mountinfo)"
    if durable["device"] == data["device"]:
        facts = (root, durable["device"], durable["fstype"], durable["mountpoint"])
        return "durable root {} is on the data root's disk (device {}, {} at {}): not a separate disk".format(*facts)
    return None


def durable_space_problem(root, files):
    """The durable disk must hold the export: its bytes and its inodes (AutoDL's file storage caps
    inodes near 200K), with the directories the copy makes, before a byte is copied."""
    space = measure(root)
    need_bytes = sum(item["bytes"] for item in files)
    need_inodes = len(files) + len({os.path.dirname(item["path"]) for item in files}) + 8
    if space["free_bytes"] < need_bytes:
        return "the durable disk at {} has {} bytes free; the export needs {}".format(
            root, space["free_bytes"], need_bytes
        )
    if space["total_inodes"] and space["free_inodes"] < need_inodes:
        return "the durable disk at {} has {} inodes free; the export needs {}".format(
            root, space["free_inodes"], need_inodes
        )
    return None


def cmd_mirror(spec, target, root):
    """Copy the sealed export to a durable tier on this node (no bytes through the control host).

    root, the durable root, is measured first (durable_problem). Each file is hashed while it is
    copied and compared with the roster recorded at sealing; the copy is staged under <target>.partial
    and renamed into place only when every file matches. The answer carries the measured mount.
    """
    problem = durable_problem(spec.run_root, root, target)
    if problem:
        print(json.dumps({"error": problem, "mount": mount_of(root) if os.path.isdir(root) else None}))
        return 1
    mount = mount_of(root)
    sealed = read(sealed_roster_path(spec))
    if not sealed:
        print(json.dumps({"error": "no sealed roster for " + spec.export}))
        return 1
    files = json.loads(sealed)
    if os.path.isdir(target):
        same = roster_of(target) == files
        print(json.dumps({"mirror": target, "existing": True, "verified": same, "mount": mount}))
        return 0 if same else 1
    short = durable_space_problem(root, files)
    if short:
        print(json.dumps({"error": short, "mount": mount}))
        return 1
    staging = target + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    for item in files:
        destination = os.path.join(staging, item["path"])
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        if copy_hashing(os.path.join(spec.export, item["path"]), destination) != item["sha256"]:
            shutil.rmtree(staging, ignore_errors=True)
            print(json.dumps({"error": "hash mismatch while mirroring " + item["path"]}))
            return 1
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(staging, target)
    total = sum(item["bytes"] for item in files)
    answer = {"mirror": target, "existing": False, "verified": True, "files": len(files), "bytes": total}
    print(json.dumps({**answer, "mount": mount}))
    return 0
