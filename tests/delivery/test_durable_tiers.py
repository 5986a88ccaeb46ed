"""A "durable" copy on an ephemeral disk. A tier was whatever a path string said, and the
wrapper's mirror ran `os.makedirs` on a missing durable root: on AutoDL without file storage, or a
Gpushare box not marked 内网存储, the mirror landed on the system or data disk but counted as surviving
a release. Now the durable root is measured (/proc/self/mountinfo) on the box: real mounts here."""

import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from delivery.actions.base import TeardownRefused
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownKind
from delivery.tasks import execute_teardown
from node.protocol import NodeError
from platforms.catalog import mount_problem
from runs.box_spec import run_node
from runs.models import RunState
from tests.custody import sealed
from tests.delivery.test_evidence_invariant import CUSTODY, as_platform, delete
from tests.runs.conftest import load_wrapper
from tests.worker_env import NODE_ROOT, NODE_ROOT_PATH

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]


def sealed_on_the_box(run, files: dict[str, bytes] | None = None) -> None:
    """The export sealed on the box with the roster the wrapper records at closeout."""
    sealed.seal(run, files)
    export = sealed.export_dir(run)
    roster = [
        {
            "path": str(p.relative_to(export)),
            "bytes": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        }
        for p in sorted(export.rglob("*"))
        if p.is_file()
    ]
    active = Path(NODE_ROOT_PATH) / run.project.slug / "active" / run.run_id
    active.mkdir(parents=True, exist_ok=True)
    (active / "sealed-roster.json").write_text(json.dumps(roster))


def mirror_with_root(run, root: str):
    run.instance.mirror_root = root
    run.instance.save()
    with run_node(run) as node:
        node.prepare()
        return node.mirror(node.mirror_target())


def test_a_mounted_durable_root_takes_the_mirror_with_its_measured_disk(exported, make_run):
    run = make_run(state=RunState.EXPORTED, attempt=1)
    sealed_on_the_box(run)
    answer = mirror_with_root(run, sealed.MIRROR_ROOT)
    data = load_wrapper().mount_of(NODE_ROOT_PATH)
    assert answer["verified"] and answer["mount"]["fstype"] == "tmpfs"
    assert answer["mount"]["mountpoint"] == str(sealed.node_path(sealed.MIRROR_ROOT))
    assert answer["mount"]["device"] != data["device"]
    sealed.cleanup(run)


def test_a_durable_root_on_the_data_disk_or_missing_is_refused_and_never_created(exported, make_run):
    run = make_run(state=RunState.EXPORTED, attempt=1)
    sealed_on_the_box(run)
    plain = f"{NODE_ROOT}-plain-durable"
    Path(NODE_ROOT_PATH + "-plain-durable").mkdir(exist_ok=True)  # a directory, not a disk of its own
    with pytest.raises(NodeError, match="on the data root's disk"):
        mirror_with_root(run, plain)
    missing = f"$HOME/no-durable-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NodeError, match="does not exist on this box"):
        mirror_with_root(run, missing)
    assert not sealed.node_path(missing).exists()  # before: os.makedirs made it on the system disk
    sealed.cleanup(run)


def test_the_mount_must_be_the_tiers_disk():
    tier = {"name": "file storage", "path": "/root/autodl-fs"}
    assert mount_problem(tier, {"mountpoint": "/root/autodl-fs", "fstype": "fuse", "device": "0:99"}) is None
    refused = mount_problem(tier, {"mountpoint": "/", "fstype": "overlay", "device": "0:44"})
    assert "overlay mounted at / (device 0:44), not on the file storage tier" in refused


@pytest.fixture
def disks():
    """mount(options): a tmpfs of this test's own; each is unmounted at the end if the test has not."""
    roots = []

    def mount(options: str = "size=16m") -> Path:
        root = Path(os.path.expanduser("~")) / f"proj-disk-{uuid.uuid4().hex[:8]}"
        root.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(root)], check=True)
        roots.append(root)
        return root

    yield mount
    for root in roots:
        if os.path.ismount(root):
            subprocess.run(["umount", "-l", str(root)], check=False)
        subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture
def second_disk(disks):
    return disks()


def test_a_durable_disk_without_room_for_the_export_is_refused_before_a_byte_is_copied(exported, make_run, disks):
    """The durable tier is budgeted, bytes and inodes (AutoDL's file storage caps inodes)."""
    run = make_run(state=RunState.EXPORTED, attempt=1)
    sealed_on_the_box(run, {**sealed.FILES, "best.pth": os.urandom(256 * 1024)})
    small = disks("size=64k")
    with pytest.raises(NodeError, match=r"has \d+ bytes free; the export needs \d+"):
        mirror_with_root(run, str(small))
    assert not any(small.iterdir())  # nothing was copied
    few_inodes = disks("size=16m,nr_inodes=6")
    with pytest.raises(NodeError, match=r"has \d+ inodes free; the export needs \d+"):
        mirror_with_root(run, str(few_inodes))
    sealed.cleanup(run)


def test_a_mirror_whose_disk_went_away_no_longer_survives_a_release(
    alice, bob, instance, exported, second_disk, no_worker
):
    """The mirror was measured on a durable disk; the disk is unmounted and the same bytes sit in the
    directory below it. Re-hashed, the bytes match; re-measured, it is not on its tier: after the custody
    copy is deleted, a release is refused (before, it destroyed the last copy)."""
    as_platform(instance, "runpod", data_tier="volume disk", mirror_tier="network volume")
    run = exported()
    record = sealed.verify(run)
    mirror = second_disk / "remotegpu-custody" / run.project.slug / run.run_id
    files = {a.path: (sealed.custody_dir(run) / a.path).read_bytes() for a in record.artifacts.all()}
    sealed.write_tree(mirror, files)
    record.mirror_uri, record.mirror_verified, record.mirror_tier = str(mirror), True, "network volume"
    record.mirror_mount = load_wrapper().mount_of(str(second_disk))
    record.save()
    assert execute_teardown(delete(run, CUSTODY, bob, alice).pk) == "deleted"

    subprocess.run(["umount", str(second_disk)], check=True)
    sealed.write_tree(mirror, files)  # the same bytes, now on the disk below
    with pytest.raises(TeardownRefused, match="its disk changed"):
        do_request_teardown(instance.pk, TeardownKind.RELEASE, "done", actor=bob)
    assert sealed.export_dir(run).is_dir()


def test_a_declared_data_tier_that_is_not_the_data_roots_disk_fails_preflight(bob, instance, make_run, no_worker):
    """A data root declared on AutoDL's shared file storage (survives release) that measures on the system
    disk is refused at preflight with the measured facts; declared as the system disk, it passes that check."""
    from runs.tasks import preflight_run

    storage = Path("/root/autodl-fs")
    created = not storage.exists()
    storage.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(storage)], check=True)
    try:
        instance.profile_key, instance.data_tier = "autodl", "shared file storage"
        instance.save()
        run = make_run(state=RunState.PREFLIGHT)
        preflight_run(run.pk)
        run.refresh_from_db()
        assert run.state == RunState.FAILED_PREFLIGHT
        problem = next(p for p in run.preflight_report["problems"] if "declared tier" in p)
        assert "not on the declared tier “shared file storage” (tmpfs at /root/autodl-fs" in problem
        instance.data_tier = "system disk"
        instance.save()
        again = make_run(state=RunState.PREFLIGHT)
        preflight_run(again.pk)
        again.refresh_from_db()
        assert not [p for p in again.preflight_report["problems"] if "declared tier" in p]
    finally:
        subprocess.run(["umount", "-l", str(storage)], check=False)
        if created:
            storage.rmdir()
