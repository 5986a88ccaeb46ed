"""What a checkpoint may be called, read alike on the box and on the control host (which imports it from
here): a rented box is a source of names for the next box, so a name it reports is a checkpoint's only as
the checkpoint rules or the run's own declaration say, and anything else is refused and named.

A checkpoint in ckpt/ is a plain file name with a checkpoint's suffix and no temporary mark. A copy of a
declared checkpoint (`declared-file-<quoted path>`, `declared-dir-<quoted path>.tar`) names the path it
came from in the working directory: that path must be one the run's declared glob matches, segment by
segment as glob matches it, and a file there must have a checkpoint's suffix. Without that rule a box that
said it held `declared-file-torch.py` had `<cwd>/torch.py` put back on the next box, where the unchanged
script imported it inside the attempt that holds the run's secrets.
"""

import fnmatch
import os
import unicodedata
import urllib.parse

TEMPORARY = (".tmp", ".partial", ".part", ".incomplete", ".swp")
# What a checkpoint file is called (torch, Lightning, safetensors, pickles, archives): a CSV or log a
# trainer keeps beside them is not one, and was once shown as the newest copy on the control host.
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".pkl", ".pickle", ".tar", ".npz", ".h5")
FILE_PREFIX = "declared-file-"
DIR_PREFIX = "declared-dir-"
NAME_LIMIT = 200
# Control characters, format characters (bidi overrides, zero-width joiners), line and paragraph
# separators, surrogates, unassigned code points: none is in a name a person can read as it is.
UNREADABLE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}


def readable(text):
    return all(unicodedata.category(char) not in UNREADABLE for char in text)


def checkpoint_file(name):
    """A file name the mirror takes as a checkpoint: its suffix, no temporary mark, not hidden."""
    if name.startswith(".") or name.endswith("~") or any(mark in name for mark in TEMPORARY):
        return False
    return name.lower().endswith(CHECKPOINT_SUFFIXES)


def bridged_name(relative, is_dir):
    quoted = urllib.parse.quote(relative, safe="")
    return DIR_PREFIX + quoted + ".tar" if is_dir else FILE_PREFIX + quoted


def bridged_source(name):
    """(path relative to the working directory, is a folder) of a bridged copy's name, or None."""
    if name.startswith(DIR_PREFIX) and name.endswith(".tar"):
        relative, is_dir = urllib.parse.unquote(name[len(DIR_PREFIX) : -len(".tar")]), True
    elif name.startswith(FILE_PREFIX):
        relative, is_dir = urllib.parse.unquote(name[len(FILE_PREFIX) :]), False
    else:
        return None
    normal = os.path.normpath(relative)
    if os.path.isabs(normal) or normal == "." or normal.split(os.sep)[0] == "..":
        return None  # never outside the working directory, whatever a restored copy is called
    return normal, is_dir


def glob_matches(relative, pattern):
    """Whether glob.glob(pattern) in the working directory could list relative: the same number of
    segments, each matched by its own (a "*" never crosses a "/"), no hidden segment unless named so."""
    have, want = relative.split("/"), os.path.normpath(pattern).split("/")
    if len(have) != len(want):
        return False
    return all(
        fnmatch.fnmatchcase(part, glob) and (not part.startswith(".") or glob.startswith("."))
        for part, glob in zip(have, want, strict=True)
    )


def file_problem(name):
    """Why name is not a plain file name in one folder (a stored copy's, a checkpoint's), else None."""
    if not isinstance(name, str) or not 0 < len(name) <= NAME_LIMIT:
        return "not a file name of 1 to 200 characters"
    if "/" in name or name.startswith(".") or not readable(name):
        return "not a plain file name (a '/', a leading '.', or a control, format or bidi character)"
    return None


def name_problem(name, declared_checkpoints=None):
    """Why a checkpoint name a box reports is not one of this run's, else None. declared_checkpoints: the
    run's declared glob (its trainer files' `checkpoints`), or None where it declares none."""
    problem = file_problem(name)
    if problem:
        return problem
    source = bridged_source(name)
    if source is None:
        if name.startswith((FILE_PREFIX, DIR_PREFIX)):
            return "a declared checkpoint's copy whose path is not inside the working directory"
        return None if checkpoint_file(name) else "not a checkpoint's name (its suffix, no temporary mark)"
    relative, is_dir = source
    if not declared_checkpoints:
        return "a declared checkpoint's copy, but the run declares no checkpoints"
    if not readable(relative) or not glob_matches(relative, declared_checkpoints):
        return f"a copy of {relative!r}, which is not where the run declares its checkpoints ({declared_checkpoints})"
    if not is_dir and not checkpoint_file(os.path.basename(relative)):
        return f"a copy of {relative!r}, which is not a checkpoint's name (its suffix, no temporary mark)"
    return None
