"""Staging checked no free space: a dataset larger than the box's disk filled it halfway, and every run on
the box failed after it. Now the box says how much its cache disk has free (stage-check), and a dataset
that does not fit there with the run's own storage budget and a margin is refused before a byte moves.
The dataset's roster is what the control host measured of a sparse file bigger than the disk: the stage
must refuse on the roster's bytes and the box's measured free space, before anything is read or sent."""

import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from datasets.models import Dataset, DatasetSource, DatasetState
from datasets.roster import identity
from datasets.staging import space_problem
from runs import shipping
from runs.box_spec import run_node

pytestmark = pytest.mark.django_db(transaction=True)

TIB = 1024**4


@pytest.fixture
def source(standin_source):
    return standin_source


def huge_dataset(project, free_bytes: int) -> Dataset:
    root = Path(django_settings.VAR_DIR) / "sources" / f"huge-{uuid.uuid4().hex[:6]}"
    root.mkdir(parents=True)
    size = free_bytes + TIB
    with open(root / "shard-0.bin", "wb") as handle:
        handle.truncate(size)  # sparse: its bytes are never read, the stage is refused before that
    roster = [
        {"path": "shard-0.bin", "bytes": size, "sha256": "0" * 64},
        {"path": "x.txt", "bytes": 4, "sha256": "1" * 64},
    ]
    return Dataset.objects.create(
        project=project, name=f"huge-{uuid.uuid4().hex[:6]}", source_kind=DatasetSource.CONTROL,
        source_path=str(root), state=DatasetState.READY, roster=roster, roster_sha256=identity(roster),
        total_bytes=size + 4, file_count=2,
    )  # fmt: skip


def test_the_rule_counts_what_is_missing_the_run_and_a_margin(settings):
    settings.STORAGE_MARGIN_MIN_BYTES = 10
    dataset = Dataset(name="d", roster=[{"path": "a", "bytes": 100}, {"path": "b", "bytes": 50}])
    need = [{"path": "a", "offset": 40}, {"path": "b", "offset": 0}]  # 110 bytes still to move
    assert space_problem(dataset, need, {"free_bytes": 150}, reserve=30) is None
    said = space_problem(dataset, need, {"free_bytes": 149, "measured_at": "/hy-tmp"}, reserve=30)
    assert said.startswith("dataset d needs 0.00 GiB more on /hy-tmp") and "nothing moved" in said
    assert "did not say how much space" in space_problem(dataset, need, {"free_bytes": "lots"}, reserve=0)


def test_a_dataset_larger_than_the_free_space_is_refused_before_staging(project, make_run, node, no_worker):
    disk = os.statvfs(node.root.parent)
    free = disk.f_bavail * disk.f_frsize  # the loopback box is this machine: its disk, measured here too
    dataset = huge_dataset(project, free)
    run = make_run(datasets=[dataset.name])
    moved = []
    with run_node(run) as box:
        box.prepare()
        staged, problems = shipping.stage_datasets(box, moved.append)
    assert staged == [] and moved == []
    (problem,) = problems
    assert problem.startswith(f"Dataset {dataset.name}: dataset {dataset.name} needs ")
    assert "refused before staging, nothing moved" in problem
    target = node.root / "cache" / "data" / dataset.roster_sha256
    assert not target.exists() or not any(path.is_file() for path in target.rglob("*"))
