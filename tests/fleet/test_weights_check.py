"""The seal's check that best.pth loads (the built wrapper's plainly_loads and check_best_loads), on real
torch checkpoints: a state dict of plain tensors is accepted without importing torch; anything it cannot
vouch for goes to torch as before, which refuses what is hostile."""

import functools
import os
import pickle
import sys
import zipfile

import pytest
import torch

from tests.box_specs import spec_with
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()


def checkpoint(path, **extra):
    """What a training script saves: a model's and an optimizer's state, an epoch, both RNG states."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 16)).sum().backward()
    optimizer.step()
    import random

    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3, "best_val": 0.25}
    state["rng"] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    torch.save({**state, **extra}, path)
    return path


def rezipped(source, target, change):
    """The same archive, member by member, with change(name, bytes) applied (stored, as torch writes)."""
    with zipfile.ZipFile(source) as before, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as after:
        for info in before.infolist():
            after.writestr(info.filename, change(info.filename, before.read(info)))
    return target


def first_record(change, member, data):
    return change(data) if member.endswith("/data/0") else data


class Hostile:
    def __reduce__(self):
        return (os.system, ("touch /tmp/never",))


@pytest.fixture
def recording_python(tmp_path):
    """An 'interpreter' that only says it was run, and fails: check_best_loads used it only if it asked torch."""
    script = tmp_path / "python3"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\necho 'no torch here'\nexit 1\n")
    script.chmod(0o755)
    return script


def test_a_training_scripts_checkpoint_is_accepted_without_torch(tmp_path, recording_python):
    path = checkpoint(tmp_path / "best.pth")
    assert WRAPPER.plainly_loads(str(path))
    assert (
        WRAPPER.check_best_loads(spec_with(WRAPPER, **{"argv": [str(recording_python), "train.py"]}), str(path)) is None
    )
    assert not (tmp_path / "ran").exists()  # no interpreter started: no torch import on the box
    torch.load(path, map_location="cpu", weights_only=True)  # and torch agrees


def test_a_pickle_calling_anything_goes_to_torch_which_refuses_it(tmp_path, recording_python):
    path = checkpoint(tmp_path / "best.pth", hook=Hostile())
    assert not WRAPPER.plainly_loads(str(path))
    problem = WRAPPER.check_best_loads(spec_with(WRAPPER, **{"argv": [sys.executable, "train.py"]}), str(path))
    assert problem.startswith("best.pth does not load with weights_only=True") and "system" in problem
    assert not os.path.exists("/tmp/never")
    assert WRAPPER.check_best_loads(spec_with(WRAPPER, **{"argv": [str(recording_python), "train.py"]}), str(path))
    assert (tmp_path / "ran").exists()  # undecided here: the run's interpreter was asked


def test_a_storage_of_another_size_or_a_tensor_past_its_storage_is_not_vouched_for(tmp_path):
    plain = checkpoint(tmp_path / "best.pth")
    for name, change in {"cut": lambda data: data[:-4], "longer": lambda data: data + b"\0" * 4}.items():
        changed = rezipped(plain, tmp_path / f"{name}.pth", functools.partial(first_record, change))
        assert not WRAPPER.plainly_loads(str(changed)), name
        with pytest.raises(RuntimeError, match="record size"):  # torch refuses both
            torch.load(changed, map_location="cpu", weights_only=True)

    # The first weight (8 x 16 floats) now claims a storage of 64 elements: its view reaches past it.
    def shrink(name, data):
        return data.replace(b"K\x80", b"K@", 1) if name.endswith("data.pkl") else data

    with zipfile.ZipFile(plain) as archive:
        pickled = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    assert b"K\x80" in pickled  # BININT1 128: the storage's element count, as torch writes it
    past = rezipped(plain, tmp_path / "past.pth", shrink)
    assert not WRAPPER.plainly_loads(str(past))
    assert WRAPPER.plainly_loads(str(rezipped(plain, tmp_path / "same.pth", lambda name, data: data)))


def test_what_is_not_a_plain_zip_checkpoint_is_left_to_torch(tmp_path):
    legacy = tmp_path / "legacy.pth"
    torch.save({"w": torch.ones(3)}, legacy, _use_new_zipfile_serialization=False)
    assert not WRAPPER.plainly_loads(str(legacy))
    plain = checkpoint(tmp_path / "best.pth")
    squeezed = tmp_path / "deflated.pth"
    with zipfile.ZipFile(plain) as before, zipfile.ZipFile(squeezed, "w", zipfile.ZIP_DEFLATED) as after:
        for info in before.infolist():
            after.writestr(info.filename, before.read(info))
    assert not WRAPPER.plainly_loads(str(squeezed))
    # A set is pickled as a call of builtins.set: not one of a state dict's globals.
    assert not WRAPPER.plainly_loads(str(checkpoint(tmp_path / "set.pth", names={"a", "b"})))
    (tmp_path / "text.pth").write_text("not a checkpoint")
    assert not WRAPPER.plainly_loads(str(tmp_path / "text.pth"))


def test_nothing_in_the_file_is_called(tmp_path):
    """Even a global the stand-ins know is never resolved to the real object: a REDUCE of an allowed name
    with a payload the real function would run gets a stand-in."""
    payload = pickle.dumps(Hostile(), protocol=2)
    archive = tmp_path / "best.pth"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        out.writestr("best/data.pkl", payload)
        out.writestr("best/version", b"3\n")
    assert not WRAPPER.plainly_loads(str(archive))
    assert not os.path.exists("/tmp/never")
