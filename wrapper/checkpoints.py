"""What a checkpoint is, read on the box without torch: whether it landed complete, and its step.

A checkpoint is complete when it has its final name (no temporary mark), has held still (unchanged
between two looks, or untouched for a moment: ckpt_mirror's settle), no process holds it open for
writing, and, for torch's zip format, its archive ends in a central directory (a half-written zip
has none). Its step is read from the checkpoint itself: the top-level key the run declares, else
`step`, `global_step`, `iter_num`, `iteration` or `epoch` of the pickled object, unpickled with
nothing imported (every class a stub), so a checkpoint can never run code here.
"""

import io
import os
import pickle
import stat
import zipfile

from .ckpt_names import checkpoint_file
from .digits import ascii_int
from .idle import open_files

STEP_KEYS = ("step", "global_step", "iter_num", "iteration", "epoch")
PICKLE_LIMIT = 64 << 20  # data.pkl holds the structure only (tensors are separate members)


def candidates(ckpt):
    """{name: (inode, bytes, mtime_ns)} of the regular files directly in ckpt with a final name that is
    a checkpoint's (CHECKPOINT_SUFFIXES)."""
    found = {}
    try:
        names = os.listdir(ckpt)
    except OSError:
        return found
    for name in names:
        if not checkpoint_file(name):
            continue
        try:
            info = os.lstat(os.path.join(ckpt, name))
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found[name] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return found


def open_for_writing(path):
    """Whether any process this user can see holds path open for writing (idle.open_files)."""
    real = os.path.realpath(path)
    for pid in (name for name in os.listdir("/proc") if ascii_int(name) is not None):
        try:
            if any(target == real and writing for target, writing in open_files(pid)):
                return True
        except (OSError, ValueError, KeyError):
            continue
    return False


def incomplete(path):
    """Why the file at path is not a whole checkpoint yet, or None."""
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        return "unreadable: " + str(exc)
    if magic == b"PK\x03\x04" and not zipfile.is_zipfile(path):
        return "a zip archive without its central directory (written in place, not renamed)"
    if open_for_writing(path):
        return "open for writing"
    return None


class _Opaque:
    """What every class in a checkpoint's pickle becomes: nothing is imported, nothing runs."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


class _Mapping(dict):
    """An OrderedDict (a state dict): its items kept, its attributes (`_metadata`) dropped."""

    def __setstate__(self, state):
        pass


class _Structure(pickle.Unpickler):
    def find_class(self, module, name):
        return _Mapping if (module, name) == ("collections", "OrderedDict") else _Opaque

    def persistent_load(self, pid):
        return None  # a tensor's storage: not read


def checkpoint_step(path, key=None):
    """The step (or epoch) a torch zip checkpoint records at its top level, or None: key (the run's own
    name for it) first, then the usual names."""
    try:
        with zipfile.ZipFile(path) as archive:
            member = next((i for i in archive.infolist() if i.filename.endswith("data.pkl")), None)
            if member is None or member.file_size > PICKLE_LIMIT:
                return None
            top = _Structure(io.BytesIO(archive.read(member))).load()
    except Exception:  # noqa: BLE001 (any malformed checkpoint: no step, never a crash of the run)
        return None
    if not isinstance(top, dict):
        return None
    for name in (key, *STEP_KEYS) if key else STEP_KEYS:
        value = top.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
