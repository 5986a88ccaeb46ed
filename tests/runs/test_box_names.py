"""A rented box is a source of names and files for the next box (docs/SECURITY.md). Before: a box that said
it held `declared-file-torch.py` had it kept by the control host and put back on the next box as
`<cwd>/torch.py`, where the unchanged script imported it inside the attempt holding the run's secrets; a
declared `out/ckpt.pt` that was a link to the box user's SSH key was copied into the mirror; a fifo there
hung the bridge and the export build. Each rule is attacked where it stands: on the wrapper with real
files, and on the control host's reading of a box's mirror state."""

import os
import tarfile
import threading

import pytest
import torch

from runs.checkpoints import parse_mirror
from tests.runs.conftest import load_wrapper
from tests.runs.test_declared_checkpoints import box, looked, settled

WRAPPER = load_wrapper()
SHA = "ab" * 32

HOSTILE = [
    "declared-file-torch.py",  # <cwd>/torch.py: imported by `import torch`
    "declared-file-numpy.py",
    "declared-file-out%2Ftorch.py",  # inside out/, but not the declared file
    "declared-file-out%2Fckpt.pt%0A",  # a trailing newline
    "declared-file-out%2F%E2%80%AEtp.ckpt",  # a bidi override
    "declared-file-..%2Fckpt.pt",
    "..",
    "latest.pth\n",
    "model.py",  # not a checkpoint's name at all
]


def hostile_copy(ckpt, name, mtime):
    path = os.path.join(ckpt, name)
    if name.startswith("declared-dir-"):
        package = os.path.join(os.path.dirname(ckpt), "staged", "numpy")
        os.makedirs(package, exist_ok=True)
        with open(os.path.join(package, "__init__.py"), "w") as handle:
            handle.write("import os; os.system('id')\n")
        with tarfile.open(path, "w") as archive:
            archive.add(package, arcname="numpy")
    else:
        with open(path, "w") as handle:
            handle.write("import os; os.system('id')\n")
    os.utime(path, (mtime, mtime))


@pytest.mark.parametrize("name", [*HOSTILE[:6], "declared-dir-numpy.tar", "declared-dir-out.tar"])
def test_the_next_box_puts_back_only_what_the_declaration_matches(tmp_path, name):
    fresh = box(tmp_path, "out/ckpt.pt")
    good = os.path.join(fresh.ckpt, "declared-file-out%2Fckpt.pt")
    torch.save({"iter_num": 3}, good)
    os.utime(good, (10**9, 10**9))
    hostile_copy(fresh.ckpt, name, 2 * 10**9)  # newer: the restore took the newest bridged copy
    assert WRAPPER.restore_declared(fresh) == "out/ckpt.pt"
    assert sorted(os.listdir(fresh.cwd)) == ["out"] and os.listdir(os.path.join(fresh.cwd, "out")) == ["ckpt.pt"]


def test_a_hostile_copy_alone_is_never_put_back(tmp_path):
    fresh = box(tmp_path, "out/ckpt.pt")
    hostile_copy(fresh.ckpt, "declared-file-torch.py", 2 * 10**9)
    assert WRAPPER.restore_declared(fresh) is None and os.listdir(fresh.cwd) == []


def checkpoint(name, **extra):
    return {"name": name, "step": 3, "bytes": 10, "at": 1.0, **extra}


@pytest.mark.parametrize("name", HOSTILE)
def test_the_control_host_refuses_and_names_what_no_declaration_allows(name):
    state = {
        "local": checkpoint(name),
        "held": {name: checkpoint(name, sha256=SHA)},
        "files": [checkpoint(name, sha256=SHA, file="000001-x.pt", seq=1)],
        "restored": [{"name": name, "file": "000001-x.pt", "step": 3}],
    }
    mirror = parse_mirror(state, "out/ckpt.pt")
    assert (mirror["local"], mirror["held"], mirror["files"], mirror["restored"]) == (None, {}, {}, [])
    assert list(mirror["refused"]) == [repr(name[:120])]


def test_the_declared_copy_and_the_checkpoint_rules_are_kept():
    declared = "declared-file-out%2Fckpt.pt"
    state = {"local": checkpoint(declared), "held": {"latest.pth": checkpoint("latest.pth", sha256=SHA)}}
    mirror = parse_mirror(state, "out/ckpt.pt")
    assert mirror["local"]["name"] == declared and list(mirror["held"]) == ["latest.pth"] and mirror["refused"] == {}
    folder = parse_mirror({"local": checkpoint("declared-dir-out%2Fcheckpoint-20.tar")}, "out/checkpoint-*/")
    assert folder["local"] is not None and folder["refused"] == {}
    assert parse_mirror({"local": checkpoint(declared)})["refused"]  # a run that declares nothing: refused


@pytest.mark.parametrize("stored", ["../../etc/passwd", ".hidden", "a/b", "x\u202e.pt", ""])
def test_a_stored_copys_file_name_is_a_plain_name(stored):
    files = [checkpoint("latest.pth", sha256=SHA, file=stored, seq=1)]
    mirror = parse_mirror({"files": files})
    assert mirror["files"] == {} and mirror["refused"]


def test_a_declared_checkpoint_that_is_a_link_carries_nothing_into_the_mirror(tmp_path):
    spec = box(tmp_path, "out/ckpt.pt")
    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    os.makedirs(os.path.join(spec.cwd, "out"))
    os.symlink(key, os.path.join(spec.cwd, "out", "ckpt.pt"))
    os.utime(os.path.join(spec.cwd, "out", "ckpt.pt"), (10**9, 10**9), follow_symlinks=False)
    state = looked(spec)
    assert os.listdir(spec.ckpt) == []
    assert "refuses the declared checkpoint out/ckpt.pt is a link" in state["error"]
    assert WRAPPER.declared_problems(spec) == [
        "checkpoints: " + WRAPPER.path_problem(spec.cwd, spec.cwd + "/out/ckpt.pt")
    ]


def test_a_linked_folder_on_the_way_is_outside_the_working_directory(tmp_path):
    spec = box(tmp_path, "out/ckpt.pt")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    torch.save({"iter_num": 1}, elsewhere / "ckpt.pt")
    settled(str(elsewhere / "ckpt.pt"))
    os.symlink(elsewhere, os.path.join(spec.cwd, "out"))
    state = looked(spec)
    assert os.listdir(spec.ckpt) == [] and "outside the working directory" in state["error"]


def test_a_fifo_where_a_file_is_declared_never_hangs_the_wrapper(tmp_path):
    spec = box(tmp_path, "out/ckpt.pt")
    os.makedirs(os.path.join(spec.cwd, "out"))
    fifo = os.path.join(spec.cwd, "out", "ckpt.pt")
    os.mkfifo(fifo)
    os.utime(fifo, (10**9, 10**9))
    seen = {}
    looking = threading.Thread(target=lambda: seen.update(looked(spec)), daemon=True)
    looking.start()
    looking.join(30)  # the bridge blocked on open() forever before
    assert not looking.is_alive() and "is not a regular file" in seen["error"]

    spec = spec.but(trainer_files={"weights": "out/ckpt.pt", "metrics": "out/m.csv"})
    spec = spec.but(output=str(tmp_path / "output"))
    building = threading.Thread(target=lambda: seen.update(built=WRAPPER.build_export(spec, str(tmp_path / "log"))))
    building.start()
    building.join(30)  # the export build waited out its 900 s bound before
    assert not building.is_alive() and seen["built"] == ["weights: out/ckpt.pt is not a regular file" + NOT_OPENED]


NOT_OPENED = " (a fifo, a socket or a device): never opened"


def test_a_copy_swapped_for_a_link_is_refused_at_the_copy(tmp_path):
    os.symlink("/etc/hostname", tmp_path / "latest.pth")
    with pytest.raises(OSError):
        WRAPPER.copy_hashing(str(tmp_path / "latest.pth"), str(tmp_path / "copy"))
    with pytest.raises(OSError):
        WRAPPER.clone_hashing(str(tmp_path / "latest.pth"), str(tmp_path / "clone"))
