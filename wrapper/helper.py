"""The run helper (`remotegpu_run`) on the command's PYTHONPATH, written once beside the wrapper."""

import hashlib
import os

from .files import atomic_write

HELPER_MODULE = "remotegpu_run"


def helper_source():
    """The helper's text: embedded by the build in the one file a box runs (RUN_HELPER_SOURCE), read from
    wrapper/run_helper/ when this package is imported on the control host."""
    embedded = globals().get("RUN_HELPER_SOURCE")
    if embedded is not None:
        return embedded
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "run_helper", HELPER_MODULE + ".py")) as handle:
        return handle.read()


def helper_dir():
    """tools/lib-<sha of the helper>/, beside the wrapper's file: written once, never rewritten (a live
    run keeps importing the bytes it started with); None where it cannot be written."""
    source = helper_source()
    tools = os.path.dirname(os.path.abspath(__file__))
    directory = os.path.join(tools, "lib-" + hashlib.sha256(source.encode()).hexdigest()[:12])
    path = os.path.join(directory, HELPER_MODULE + ".py")
    try:
        if not os.path.exists(path):
            os.makedirs(directory, exist_ok=True)
            atomic_write(path, source)
    except OSError:
        return None  # a full disk: the command runs without the helper on its path
    return directory
