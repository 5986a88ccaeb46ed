"""The no-edit path's checkpoints made durable (wrapper/declared_ckpt.py), on the wrapper itself with
real files: the newest checkpoint an unchanged script saves in its own folder (nanoGPT's `out/ckpt.pt`, a
Trainer's `checkpoint-<step>/` folder) is copied into ckpt/ where the mirror takes it (its step read as
for any checkpoint), and a fresh attempt on another box gets it back in place, a folder as one unit,
before the command starts with its resume arguments. Before: declared checkpoints stayed on the box,
so a run moved elsewhere started over."""

import os
import tarfile

import pytest
import torch

from tests.box_specs import spec_with
from tests.conftest import REPO
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()
PAST = 10**9  # an mtime long settled


def box(tmp_path, checkpoints: str, name: str = "a") -> dict:
    active = tmp_path / name / "active"
    for part in ("src", "ckpt", "attempt-1"):
        (active / part).mkdir(parents=True)
    return spec_with(
        WRAPPER,
        **{
            "cwd": str(active / "src"),
            "ckpt": str(active / "ckpt"),
            "active": str(active),
            "argv": ["python3", "train.py"],
            "trainer_files": {"checkpoints": checkpoints, "resume_args": "--init_from=resume"},
        },
    )


def settled(path) -> None:
    for directory, _dirs, names in os.walk(path) if os.path.isdir(path) else [(os.path.dirname(path), [], [path])]:
        for name in names:
            os.utime(os.path.join(directory, name), (PAST, PAST))
    os.utime(path, (PAST, PAST))


def looked(spec) -> dict:
    mirror = WRAPPER.CheckpointMirror(spec, os.path.join(spec.active, "attempt-1"))
    mirror.begin()
    mirror.look()
    mirror.look()
    return mirror.state


def test_a_file_saved_in_place_is_taken_by_the_mirror_with_its_step_and_put_back_elsewhere(tmp_path):
    spec = box(tmp_path, "out/ckpt.pt")
    saved = os.path.join(spec.cwd, "out", "ckpt.pt")
    os.makedirs(os.path.dirname(saved))
    torch.save({"model": {"w": torch.ones(3)}, "iter_num": 20}, saved)
    settled(saved)
    state = looked(spec)
    assert os.listdir(spec.ckpt) == ["declared-file-out%2Fckpt.pt"]
    assert state["local"]["name"] == "declared-file-out%2Fckpt.pt" and state["local"]["step"] == 20

    fresh = box(tmp_path, "out/ckpt.pt", "b")  # another box: the restore put the mirrored copy in ckpt/
    copied = os.path.join(fresh.ckpt, "declared-file-out%2Fckpt.pt")
    with open(os.path.join(spec.ckpt, "declared-file-out%2Fckpt.pt"), "rb") as source, open(copied, "wb") as target:
        target.write(source.read())
    assert "--init_from=resume" not in WRAPPER.attempt_argv(fresh)  # nothing in place yet
    assert WRAPPER.restore_declared(fresh) == "out/ckpt.pt"
    with open(saved, "rb") as one, open(os.path.join(fresh.cwd, "out", "ckpt.pt"), "rb") as two:
        assert one.read() == two.read()
    assert WRAPPER.attempt_argv(fresh)[-1] == "--init_from=resume"  # the script now resumes from it
    assert WRAPPER.restore_declared(fresh) is None  # something is in place: never overwritten


def test_a_checkpoint_folder_travels_as_one_unit_and_only_the_newest_is_kept(tmp_path):
    spec = box(tmp_path, "out/checkpoint-*/")
    for step in (10, 20):
        folder = os.path.join(spec.cwd, "out", f"checkpoint-{step}")
        os.makedirs(folder)
        torch.save({"w": torch.full((2,), float(step))}, os.path.join(folder, "pytorch_model.bin"))
        with open(os.path.join(folder, "trainer_state.json"), "w") as handle:
            handle.write(f'{{"global_step": {step}}}')
        settled(folder)
        os.utime(folder, (PAST + step, PAST + step))
        for name in os.listdir(folder):
            os.utime(os.path.join(folder, name), (PAST + step, PAST + step))
        looked(spec)
    assert os.listdir(spec.ckpt) == ["declared-dir-out%2Fcheckpoint-20.tar"]

    fresh = box(tmp_path, "out/checkpoint-*/", "b")
    os.replace(os.path.join(spec.ckpt, "declared-dir-out%2Fcheckpoint-20.tar"), os.path.join(fresh.ckpt, "x"))
    os.replace(os.path.join(fresh.ckpt, "x"), os.path.join(fresh.ckpt, "declared-dir-out%2Fcheckpoint-20.tar"))
    assert WRAPPER.restore_declared(fresh) == "out/checkpoint-20"
    restored = os.path.join(fresh.cwd, "out", "checkpoint-20")
    assert sorted(os.listdir(restored)) == ["pytorch_model.bin", "trainer_state.json"]
    assert torch.load(os.path.join(restored, "pytorch_model.bin"), weights_only=True)["w"].tolist() == [20.0, 20.0]


@pytest.mark.parametrize("name", ["declared-file-..%2F..%2Fetc%2Fpasswd", "declared-dir-%2Ftmp%2Fx.tar"])
def test_a_bridged_name_never_reaches_outside_the_working_directory(name):
    assert WRAPPER.bridged_source(name) is None


def test_a_folder_holding_a_link_is_not_restored(tmp_path):
    fresh = box(tmp_path, "out/checkpoint-*/")
    staged = tmp_path / "staged" / "checkpoint-5"
    staged.mkdir(parents=True)
    os.symlink("/etc/passwd", staged / "pytorch_model.bin")
    with tarfile.open(os.path.join(fresh.ckpt, "declared-dir-out%2Fcheckpoint-5.tar"), "w") as archive:
        archive.add(staged, arcname="checkpoint-5")
    with pytest.raises(OSError, match="not restored"):
        WRAPPER.restore_declared(fresh)
    assert WRAPPER.put_back_declared(fresh).startswith("putting the declared checkpoint back:")


def test_the_export_takes_the_model_file_inside_a_folder_checkpoint_or_names_what_to_declare(tmp_path, monkeypatch):
    """No weights declared: the newest checkpoint is the model; a Trainer's folder holds it as
    pytorch_model.bin (an export run without `weights` failed with IsADirectoryError and a traceback)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rg_helper", REPO / "wrapper" / "run_helper" / "remotegpu_run.py")
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "out" / "checkpoint-40"
    folder.mkdir(parents=True)
    torch.save({"weight": torch.ones(2)}, folder / "pytorch_model.bin")
    torch.save({"state": {}}, folder / "optimizer.pt")
    problems = []
    state = helper._declared_weights({"checkpoints": "out/checkpoint-*/"}, problems)
    assert problems == [] and torch.equal(state["weight"], torch.ones(2))
    (folder / "model.pt").write_bytes((folder / "pytorch_model.bin").read_bytes())
    assert helper._declared_weights({"checkpoints": "out/checkpoint-*/"}, problems) is None
    said = "the newest checkpoint out/checkpoint-40/ is a folder that holds 2 model files: declare weights"
    assert problems == [said]
    problems.clear()
    (tmp_path / "out" / "broken.pt").write_text("not a checkpoint")
    assert helper._declared_weights({"checkpoints": "out/broken.pt"}, problems) is None
    assert problems[0].startswith("out/broken.pt is not weights torch can load: ")
