"""The export's copy on the box gets its tier from the disk the box measured, not from a path.

`get_profile("gpushare").tier_of("/hy-netdisk")` said netdisk whatever the box had mounted there, and
`RunNode.prepare` made the run root with `mkdir -p`, so on a Gpushare box not marked 内网存储 the copy on
the system disk counted as surviving shutdown and release: deleting the custody copy, then a shutdown,
lost the last verified copy. Real mounts here: a tmpfs where the tier should be, a plain directory, the
mount gone between two runs; measured by the wrapper's own `mount_of`, as a preflight measures."""

from pathlib import Path

import pytest

from custody.copies import copies_of
from custody.models import EvidenceLocation
from node.protocol import NodeError
from platforms.catalog import get_profile, on_its_mount
from runs.box_spec import run_node
from runs.models import RunState
from tests import factories
from tests.mounts import tmpfs
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()
GPUSHARE = get_profile("gpushare")
NETDISK = GPUSHARE.tier_named("netdisk")


def measured(root: Path) -> dict:
    """What a preflight reports of a data root (its run root measured once prepare made it)."""
    return {"data": WRAPPER.mount_of(str(root / "proj"))}


def test_a_tier_counts_only_on_its_own_mount_and_not_once_the_mount_is_gone(tmp_path):
    disk = tmp_path / "netdisk"
    disk.mkdir()
    tier = {**NETDISK, "path": str(disk)}  # the netdisk tier, its disk mounted here for the test
    assert on_its_mount(tier, measured(disk), declared=False)["name"] == "the system disk"  # a plain directory
    with tmpfs(disk):
        assert on_its_mount(tier, measured(disk), declared=False) == tier  # the mount present
    gone = on_its_mount(tier, measured(disk), declared=False)  # the mount gone between two runs
    assert gone["name"] == "the system disk" and not any(gone["survives"].values())


def test_nothing_measured_is_the_least_surviving_reading():
    tier = GPUSHARE.measured_tier("/hy-netdisk", None)
    assert tier["name"] == "the system disk" and GPUSHARE.loses(tier, "shutdown") and GPUSHARE.loses(tier, "release")
    assert GPUSHARE.measured_tier("/root", None)["name"] == "system disk"  # no mount of its own: its path says


@pytest.mark.skipif(Path("/hy-netdisk").exists(), reason="this machine has a /hy-netdisk of its own")
@pytest.mark.django_db
def test_the_copy_on_a_gpushare_box_without_its_netdisk_counts_as_lost_by_a_shutdown(alice, bob):
    box = factories.box(factories.project(alice, bob), "gpushare")  # its data root: /hy-netdisk
    mounts = {"data": WRAPPER.mount_of("/hy-netdisk/proj"), "declared_tier": None}  # not there: the root disk
    run = factories.run(box, state=RunState.EXPORTED, preflight_report={"mounts": mounts})
    factories.verified_record(run)
    node = next(copy for copy in copies_of(run) if copy.location == EvidenceLocation.NODE)
    assert node.tier["name"] == "the system disk"  # before: netdisk, surviving shutdown and release
    assert GPUSHARE.loses(node.tier, "shutdown")


@pytest.mark.skipif(Path("/hy-netdisk").exists(), reason="this machine has a /hy-netdisk of its own")
@pytest.mark.django_db(transaction=True)
def test_a_tier_root_is_never_created(instance, make_run, no_worker):
    instance.profile_key, instance.data_root_override = "gpushare", ""
    instance.save()
    run = make_run()
    with pytest.raises(NodeError, match=r"netdisk \(/hy-netdisk\) is not on this box"), run_node(run) as node:
        node.prepare()
    assert not Path("/hy-netdisk").exists()  # before: mkdir -p made it a plain directory of the system disk


@pytest.mark.django_db
def test_a_gpushare_box_whose_netdisk_is_mounted_keeps_its_copy_there(alice, bob):
    root = Path("/hy-netdisk")
    if root.exists():
        pytest.skip("this machine has a /hy-netdisk of its own")
    try:
        with tmpfs(root):
            mounts = {"data": WRAPPER.mount_of("/hy-netdisk/proj")}
            box = factories.box(factories.project(alice, bob), "gpushare")
            run = factories.run(box, state=RunState.EXPORTED, preflight_report={"mounts": mounts})
            node = next(copy for copy in copies_of(run) if copy.location == EvidenceLocation.NODE)
            assert node.tier == NETDISK and not GPUSHARE.loses(node.tier, "release")
    finally:
        root.rmdir()


ACTIVE = "Every active/ directory closed or waived"


@pytest.mark.skipif(Path("/hy-netdisk").exists(), reason="this machine has a /hy-netdisk of its own")
@pytest.mark.django_db
def test_a_shutdown_judges_unclosed_active_dirs_by_the_measured_mount_not_the_path(alice, bob):
    """Before: `shutdown_checks` read the tier from the path: a Gpushare /hy-netdisk that was a plain directory
    of the system disk read as "netdisk", survived the shutdown, and the "active/ closed" item was skipped:
    a quarantined run's checkpoints kept for a retry went with the reset."""
    from delivery.checks import shutdown_checks
    from delivery.evidence import Consequence as Planned
    from delivery.models import TeardownKind
    from runs.actions.lifecycle import record_mounts

    box = factories.box(factories.project(alice, bob), "gpushare", state="running")
    factories.run(box, state=RunState.QUARANTINED)  # its active/ kept for a retry
    planned = Planned(TeardownKind.SHUTDOWN, box.pk)

    def items():
        box.refresh_from_db()
        return {item["label"]: item for item in shutdown_checks(box, planned, deep=False)["items"]}

    assert ACTIVE in items()  # nothing measured: the least-surviving reading
    record_mounts(box, {"data": WRAPPER.mount_of("/")})  # the "netdisk" measured on the system disk
    assert ACTIVE in items() and not items()[ACTIVE]["ok"]
    try:
        with tmpfs(Path("/hy-netdisk")):
            record_mounts(box, {"data": WRAPPER.mount_of("/hy-netdisk/proj")})  # its own disk, at its path
            assert ACTIVE not in items()  # the netdisk survives a shutdown: nothing there is lost
    finally:
        Path("/hy-netdisk").rmdir()


@pytest.mark.skipif(Path("/hy-netdisk").exists(), reason="this machine has a /hy-netdisk of its own")
@pytest.mark.django_db(transaction=True)
def test_a_declared_mount_that_is_a_plain_directory_refuses_the_box(instance, make_run, no_worker):
    instance.profile_key, instance.data_root_override = "gpushare", ""
    instance.save()
    run = make_run()
    root = Path("/hy-netdisk")
    root.mkdir()
    try:
        refused = r"netdisk \(/hy-netdisk\) is not a disk mounted there: .* mounted at /,"
        with pytest.raises(NodeError, match=refused), run_node(run) as node:
            node.prepare()
        assert list(root.iterdir()) == []  # nothing was made on the system disk
        with tmpfs(root), run_node(run) as node:
            node.check_tier_root()  # its own disk there: accepted
    finally:
        for path in sorted(root.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        root.rmdir()
