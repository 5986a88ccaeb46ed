"""Cache cleanup also frees the checkpoint copies nothing resumes from any more: those of runs whose
export is verified in custody, on the box's durable tier and on the control host. A run still going
keeps its copies, and so does a verified run whose copies were made from another box."""

import shutil

import pytest

from delivery.caches import clean
from runs import ckpt_pull
from runs.models import RunState
from tests import factories
from tests.custody import sealed

pytestmark = pytest.mark.django_db


def copies(run, instance, on_control: bool = False):
    """Checkpoint copies of run as its box's mirror and the control host's pull leave them."""
    on_box = sealed.node_path(sealed.MIRROR_ROOT) / "remotegpu-ckpt" / run.project.slug / run.run_id / "ckpt"
    on_box.mkdir(parents=True)
    (on_box / "000003-latest.pth").write_bytes(b"c" * 4096)
    target = ckpt_pull.CONTROL if on_control else str(on_box)
    run.durable_ckpt = {"target": target, "instance_id": instance.pk, "seq": 3, "files": {}}
    run.save()
    control = ckpt_pull.control_dir(run)
    control.mkdir(parents=True, exist_ok=True)
    (control / "000003-latest.pth").write_bytes(b"c" * 1000)
    return on_box.parent, control


def test_verified_runs_lose_their_checkpoint_copies_and_running_ones_keep_them(exported, make_run, instance):
    instance.mirror_root = sealed.MIRROR_ROOT
    instance.save()
    done = exported()
    factories.verified_record(done)
    going = make_run(state=RunState.RUNNING)
    elsewhere = exported()
    factories.verified_record(elsewhere)
    done_box, done_control = copies(done, instance, on_control=True)
    going_box, going_control = copies(going, instance)
    other_box, _ = copies(elsewhere, instance)
    elsewhere.durable_ckpt = {**elsewhere.durable_ckpt, "instance_id": instance.pk + 1000}
    elsewhere.save()
    try:
        answer = clean(instance.pk)
        assert str(done_box).replace(str(sealed.node_path("$HOME")), "", 1) in " ".join(answer["paths"])
        assert not done_box.exists() and not done_control.exists()
        assert going_box.exists() and going_control.exists() and other_box.exists()
        assert answer["freed"] >= 4096 + 1000
        assert sealed.export_dir(done).exists()  # the sealed export is evidence, never a cache
    finally:
        for path in (going_box, other_box):
            shutil.rmtree(path, ignore_errors=True)
