"""A full disk during closeout: the wrapper quarantines the attempt as disk_full, never dies.

The run root is a real tmpfs mounted with a small size or few inodes; the command fills it, then
exits 0, so sealing the export is what runs out of space. Once the wrapper died there and the run
stayed `exited` forever; with inodes gone it flapped between unreachable and reachable.
"""

import os
import subprocess
import sys

import pytest

from runs import shipping
from runs.box_spec import run_node
from runs.models import RunState
from runs.tasks import launch_run
from tests.mounts import tmpfs
from tests.runs.conftest import load_wrapper, wait_state

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


# The sealed-export files, then fill what is left: blocks (one big file) or inodes (many empty ones).
MAKE_EXPORT = """
import os, sys
out = os.environ["REMOTEGPU_OUTPUT_DIR"]
os.makedirs(out, exist_ok=True)
files = {"run.json": b"{}", "config.yaml": b"lr: 1\\n", "train.csv": b"epoch\\n0\\n", "best.pth": b"x"}
for name, data in files.items():
    with open(os.path.join(out, name), "wb") as handle:
        handle.write(data)
"""
FILL_BLOCKS = (
    MAKE_EXPORT
    + """
pad = os.path.join(out, "pad.bin")
# Unbuffered: a write that hits ENOSPC leaves nothing behind for close() to fail on (with a buffer, the
# command exited 1 whenever the space left was not a whole number of 64 KiB chunks).
with open(pad, "wb", buffering=0) as handle:
    try:
        while handle.write(b"\\0" * 65536):
            pass
    except OSError:
        pass
os.truncate(pad, max(0, os.path.getsize(pad) - 256 * 1024))  # leave a little: the copy needs it all
"""
)
FILL_INODES = (
    MAKE_EXPORT
    + """
made = []
try:
    while True:
        path = os.path.join(out, "f%06d" % len(made))
        open(path, "w").close()
        made.append(path)
except OSError:
    pass
for path in made[-3:]:
    os.remove(path)  # three inodes free: the copy needs hundreds
"""
)


@pytest.fixture(scope="module")
def wrapper():
    return load_wrapper()


@pytest.fixture
def small_root(tmp_path, instance):
    def mount(options: str):
        root = tmp_path / "full"
        root.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(root)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(root)
        instance.data_root_override = str(root)
        instance.save()
        return root

    mounted = []
    yield mount
    for root in mounted:
        subprocess.run(["umount", "-l", str(root)], check=False)


@pytest.mark.parametrize(
    ("options", "script"),
    [("size=6m,nr_inodes=4096", FILL_BLOCKS), ("size=64m,nr_inodes=400", FILL_INODES)],
    ids=["blocks", "inodes"],
)
def test_a_full_disk_during_closeout_quarantines_as_disk_full(
    make_run, small_root, celery_worker_process, options, script
):
    root = small_root(options)
    run = make_run(command=[sys.executable, "-c", script], state=RunState.LAUNCHING, attempt=1)
    with run_node(run) as node:  # what preflight does (its storage budget would refuse this disk)
        node.prepare()
        shipping.ship_source(node)
    launch_run(run.pk, 1)
    run = wait_state(run, {RunState.QUARANTINED, RunState.EXPORTED}, timeout=120, refresh=True)
    assert run.state == RunState.QUARANTINED and run.close_reason.startswith("disk_full"), run.close_reason
    assert run.failure_class == "disk_full"
    quarantined = root / run.project.slug / "quarantine" / f"{run.run_id}--1"
    assert (quarantined / "reason.txt").read_text().startswith("disk_full")
    assert (quarantined / "exit_code").read_text().strip() == "0"
    assert not (root / run.project.slug / "export" / ".partial" / run.run_id).exists()  # its staging freed
    messages = list(run.events.values_list("message", flat=True))
    assert not any("Unreachable" in message for message in messages), messages


# A trainer whose torch.save runs out of space and says so with no errno: the .tmp fills the disk, then
# "unexpected pos", exit 1. Before, this was a code error ("a retry would fail the same way").
SAVE_FAILS = """
import os, sys
tmp = os.path.join(os.environ["REMOTEGPU_CHECKPOINT_DIR"], "latest.pth.tmp")
with open(tmp, "wb", buffering=0) as handle:
    try:
        while handle.write(b"\\1" * 65536):
            pass
    except OSError:
        pass
print("RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 1088 vs 982", flush=True)
sys.exit(1)
"""


def test_a_write_that_fails_without_an_errno_on_a_full_disk_is_disk_full(make_run, small_root, celery_worker_process):
    small_root("size=6m,nr_inodes=4096")
    run = make_run(command=[sys.executable, "-c", SAVE_FAILS], state=RunState.LAUNCHING, attempt=1)
    with run_node(run) as node:
        node.prepare()
        shipping.ship_source(node)
    launch_run(run.pk, 1)
    run = wait_state(run, {RunState.QUARANTINED, RunState.EXPORTED}, timeout=120, refresh=True)
    assert run.close_reason.startswith("disk_full: command exited with code 1"), run.close_reason
    assert "when it exited" in run.close_reason
    assert run.failure_class == "disk_full"


def test_the_lowest_free_space_while_it_ran_counts_after_the_trainer_removed_its_tmp(tmp_path, wrapper):
    """The trainer's own cleanup frees the space before it exits: the sample taken while it ran decides."""
    with tmpfs(tmp_path / "disk") as root:
        watch = wrapper.DiskWatch(str(root))
        watch.sample()
        fill = root / "latest.pth.tmp"
        with open(fill, "wb", buffering=0) as handle:
            try:
                while handle.write(b"\1" * 65536):
                    pass
            except OSError:
                pass
        watch.sample()  # what the sampler sees while the trainer's .tmp fills the disk
        os.remove(fill)
        watch.exited()
        assert wrapper.nearly_full(watch.at_exit) is None
        reason = watch.full_reason(1)
        assert reason.startswith("disk_full: command exited with code 1") and "while it ran" in reason


def test_a_roomy_disk_leaves_a_failure_a_code_error(tmp_path, wrapper):
    watch = wrapper.DiskWatch(str(tmp_path))
    watch.sample()
    watch.exited()
    assert watch.full_reason(1) is None
