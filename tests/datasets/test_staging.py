"""Datasets staged box to box on two loopback sshd boxes (a source and the run's target), in-process tasks.

The stream is cut halfway (its ssh killed on the target): the next stage moves fewer bytes than the
total and finishes. A byte flipped on the source fails the stage naming the file. The control host's
process reads and writes far fewer bytes than the dataset while it stages box to box (its /proc/self/io),
against a control-host stage of the same files that moves them all through it.
"""

import contextlib
import os
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from datasets.actions import do_register_dataset
from datasets.models import DatasetSource, DatasetState
from datasets.roster import identity
from datasets.tasks import scan_dataset
from runs import shipping
from runs.box_spec import run_node
from tests import factories
from tests.sshd import Sshd
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024**2


@pytest.fixture(scope="module")
def source_sshd(tmp_path_factory):
    """A second box; its sshd also reads the authorized_keys file staging grants its temporary key in."""
    directory = tmp_path_factory.mktemp("source-sshd")
    server = Sshd(directory, granted_keys=directory / "granted_keys")
    yield server.start()
    server.stop()


@pytest.fixture
def source_box(project, source_sshd, settings):
    settings.NODE_AUTHORIZED_KEYS = str(source_sshd.granted_keys)
    fields = source_sshd.instance_fields(project)
    return factories.box(name=f"{project.slug}-source-20261202", project=project, **fields)


@pytest.fixture
def files(tmp_path):
    """16 MiB in four files and a few small ones, random bytes."""
    root = tmp_path / "imagenet-mini"
    (root / "train").mkdir(parents=True)
    for index in range(4):
        (root / "train" / f"shard-{index}.bin").write_bytes(os.urandom(4 * MIB))
    for index in range(20):
        (root / "labels" / f"{index:02d}.txt").parent.mkdir(exist_ok=True)
        (root / "labels" / f"{index:02d}.txt").write_text(f"label {index}\n")
    return root


def box_dataset(project, box, root, bob):
    dataset = do_register_dataset(project, f"d{uuid.uuid4().hex[:6]}", DatasetSource.BOX, str(root), box, actor=bob)
    assert dataset.state == DatasetState.SCANNING
    scan_dataset(dataset.pk)
    dataset.refresh_from_db()
    assert dataset.state == DatasetState.READY, dataset.refusal
    return dataset


def stage(run):
    moved = []
    with run_node(run) as node:
        node.prepare()
        staged, problems = shipping.stage_datasets(node, moved.append)
    return staged, problems, moved


def io_bytes() -> int:
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"]) + int(fields["wchar"])


def test_box_to_box_stages_without_the_bytes_crossing_the_control_host(
    bob, project, make_run, source_box, files, source_sshd, node, no_worker
):
    dataset = box_dataset(project, source_box, files, bob)
    assert dataset.file_count == 24 and dataset.total_bytes > 16 * MIB
    assert dataset.roster_sha256 == identity(dataset.roster)
    run = make_run(datasets=[dataset.name])
    before = io_bytes()
    staged, problems, _ = stage(run)
    through_us = io_bytes() - before
    assert problems == [] and staged[0]["moved"] == dataset.total_bytes
    target = Path(staged[0]["target"])
    assert target == node.root / "cache" / "data" / dataset.roster_sha256
    for entry in dataset.roster:
        assert (target / entry["path"]).read_bytes() == (files / entry["path"]).read_bytes()
    # Box to box: the control process moved a small fraction of the dataset (SSH control, the roster).
    assert through_us < dataset.total_bytes / 4, through_us
    # The temporary key is gone from the source box, and its private half from the target.
    assert "remotegpu-stage-" not in source_sshd.granted_keys.read_text()
    assert not [name for name in os.listdir(f"/dev/shm/remotegpu-{os.getuid()}") if name.startswith("stage-")]

    # The baseline in the same run: a control-host dataset of the same bytes passes through this process.
    copy = Path(django_settings.VAR_DIR) / "sources" / f"data-{uuid.uuid4().hex[:6]}"
    subprocess.run(["cp", "-r", str(files), str(copy)], check=True)
    control = do_register_dataset(project, "control-copy", DatasetSource.CONTROL, str(copy), actor=bob)
    assert control.roster_sha256 == dataset.roster_sha256  # the same files: the same identity
    run2 = make_run(datasets=["control-copy"])
    (target / ".complete").unlink()
    for shard in (target / "train").iterdir():
        shard.unlink()
    before = io_bytes()
    staged, problems, _ = stage(run2)
    assert problems == [] and staged[0]["moved"] == 16 * MIB
    assert io_bytes() - before > 16 * MIB  # what a control-host source costs the control host


def arrived(root: Path) -> int:
    """Bytes on disk under root (staged files and their partial copies, renamed while we look)."""
    total = 0
    for path in root.rglob("*") if root.exists() else ():
        with contextlib.suppress(OSError):
            total += path.stat().st_size if path.is_file() else 0
    return total


def test_a_cut_stream_resumes_and_moves_fewer_bytes(bob, project, make_run, source_box, files, settings, no_worker):
    settings.STAGE_BYTES_PER_SECOND = 4 * MIB  # four seconds for the whole set: time to cut it
    dataset = box_dataset(project, source_box, files, bob)
    run = make_run(datasets=[dataset.name])
    killed = []

    def cut_when_halfway():
        def ssh_pids():
            found = subprocess.run(["pgrep", "-f", f"stage-key-.*-p {source_box.port} "], stdout=subprocess.PIPE)
            return [int(pid) for pid in found.stdout.split()]

        wait_until(lambda: ssh_pids(), 20, 0.05, what="the staging ssh starting")
        # Cut by bytes moved, not by time (a loaded machine started the stream late and it finished
        # before a timed cut): once a fifth of the set is on the box, well before all of it.
        target = Path(run.instance.data_root.replace("$HOME", os.path.expanduser("~"))) / project.slug / "cache"
        wait_until(lambda: arrived(target) >= dataset.total_bytes // 5, 30, 0.01, what="a fifth of the set arriving")
        for pid in ssh_pids():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    cutter = threading.Thread(target=cut_when_halfway)
    cutter.start()
    staged, problems, _ = stage(run)
    cutter.join()
    assert killed and staged == [] and len(problems) == 1
    assert "stream" in problems[0] and dataset.name in problems[0], problems

    staged, problems, moved = stage(run)
    assert problems == [] and 0 < staged[0]["moved"] < dataset.total_bytes, staged
    assert moved and moved[-1]["total_bytes"] == dataset.total_bytes  # progress was reported as it went
    target = Path(staged[0]["target"])
    for entry in dataset.roster:
        assert (target / entry["path"]).read_bytes() == (files / entry["path"]).read_bytes()
    assert (target / ".complete").read_text().strip() == dataset.roster_sha256
    # Staged already: the next preflight moves nothing.
    staged, problems, _ = stage(run)
    assert problems == [] and staged[0]["moved"] == 0


def test_a_byte_flipped_on_the_source_fails_naming_the_file(bob, project, make_run, source_box, files, no_worker):
    dataset = box_dataset(project, source_box, files, bob)
    shard = files / "train" / "shard-2.bin"
    data = bytearray(shard.read_bytes())
    data[1234] ^= 0xFF
    shard.write_bytes(bytes(data))
    run = make_run(datasets=[dataset.name])
    staged, problems, _ = stage(run)
    assert staged == [] and len(problems) == 1
    assert "train/shard-2.bin does not match its roster" in problems[0], problems
    target = Path(run.instance.data_root.replace("$HOME", os.path.expanduser("~"))) / project.slug / "cache"
    assert not (target / "data" / dataset.roster_sha256 / "train" / "shard-2.bin").exists()


def test_a_box_dataset_whose_files_differ_from_its_roster_is_refused_naming_the_file(
    bob, project, source_box, files, no_worker
):
    declared = [{"path": "labels/00.txt", "bytes": 8, "sha256": "0" * 64}]  # the right size, not its hash
    dataset = do_register_dataset(project, "declared", DatasetSource.BOX, str(files), source_box, declared, actor=bob)
    scan_dataset(dataset.pk)
    dataset.refresh_from_db()
    assert dataset.state == DatasetState.REFUSED
    assert "labels/00.txt has SHA-256" in dataset.refusal and dataset.roster_sha256 == ""


def test_a_project_that_requires_a_data_identity_refuses_a_run_without_one(project, make_run):
    from runs.actions.lifecycle import do_finish_preflight
    from runs.models import RunState

    project.require_data_identity = True
    project.save()
    run = make_run(state=RunState.PREFLIGHT)
    hashes = {"source_tree_sha256": "a" * 64, "config_sha256": "b" * 64}
    run = do_finish_preflight(run.pk, {"hashes": hashes, "missing": []}, [])
    assert run.state == RunState.FAILED_PREFLIGHT
    assert "requires a data identity: bind a registered dataset" in run.events.get(to_state="failed_preflight").message


def test_a_staged_file_changed_on_the_box_is_caught_and_staged_again(
    bob, project, make_run, source_box, files, settings, no_worker
):
    dataset = box_dataset(project, source_box, files, bob)
    run = make_run(datasets=[dataset.name])
    staged, problems, _ = stage(run)
    target = Path(staged[0]["target"])
    shard = target / "train" / "shard-1.bin"
    data = bytearray(shard.read_bytes())
    data[77] ^= 0x01  # the same size, the same name: only its hash tells
    shard.write_bytes(bytes(data))
    staged, problems, _ = stage(run)
    assert problems == [] and staged[0]["damaged"] == ["train/shard-1.bin"]
    assert staged[0]["moved"] == 4 * MIB and shard.read_bytes() == (files / "train" / "shard-1.bin").read_bytes()
    settings.STAGE_REHASH_MAX_BYTES = 0  # above the size: sizes only, nothing re-read
    shard.write_bytes(bytes(data))
    staged, problems, _ = stage(run)
    assert staged[0]["damaged"] == [] and staged[0]["moved"] == 0


def test_a_preflight_fails_closed_naming_the_file_that_does_not_match(
    bob, project, make_run, source_box, files, no_worker
):
    from runs.models import RunState
    from runs.tasks import preflight_run

    dataset = box_dataset(project, source_box, files, bob)
    (files / "labels" / "07.txt").write_text("label 8\n")  # changed at the source after it was hashed
    run = make_run(datasets=[dataset.name], state=RunState.PREFLIGHT)
    preflight_run(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.FAILED_PREFLIGHT and run.data_sha256 == ""
    message = run.events.get(to_state="failed_preflight").message
    assert f"Dataset {dataset.name}: " in message and "labels/07.txt does not match its roster" in message
