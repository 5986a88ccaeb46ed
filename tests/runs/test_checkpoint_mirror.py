"""The wrapper's checkpoint mirror on real disks: a tmpfs mounted as the durable tier, real torch
checkpoints written atomically or in place, a mirror disk that fills up. What it leaves is read the
way the control side reads it (runs/checkpoints.py)."""

import hashlib
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import torch

from runs.checkpoints import lag_problem, parse_mirror, resume_floor, resume_problem
from tests.box_specs import spec_with
from tests.runs.conftest import load_wrapper

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

WRAPPER = load_wrapper()


@pytest.fixture
def disks(tmp_path):
    """A data root on this disk and a durable root that is a tmpfs of its own (size in KiB asked)."""
    mounts = []

    def make(durable_kib: int = 65536):
        durable = tmp_path / f"durable-{uuid.uuid4().hex[:6]}"
        durable.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={durable_kib}k", "tmpfs", str(durable)], check=True)
        mounts.append(durable)
        data = tmp_path / "data"
        active = data / "proj" / "active" / "r1"
        (active / "ckpt").mkdir(parents=True, exist_ok=True)
        (active / "attempt-1").mkdir(exist_ok=True)
        spec = spec_with(
            WRAPPER,
            **{
                "run_root": str(data / "proj"),
                "active": str(active),
                "ckpt": str(active / "ckpt"),
                "attempt": 1,
                "ckpt_mirror": {
                    "root": str(durable),
                    "target": str(durable / "remotegpu-ckpt/proj/r1/ckpt"),
                    "keep": 2,
                },
            },
        )
        return spec, active / "attempt-1"

    yield make
    for durable in mounts:
        subprocess.run(["umount", "-l", str(durable)], check=False)


def save(path: Path, epoch: int, size: int = 64) -> bytes:
    """A real torch checkpoint, written atomically (tmp, fsync, rename) as the examples do."""
    state = {"model": torch.nn.Linear(size, size).state_dict(), "epoch": epoch}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path.read_bytes()


def looked_twice(mirror) -> dict:
    mirror.look()
    mirror.look()
    return parse_mirror(mirror.state)


def test_each_complete_checkpoint_is_mirrored_hashed_with_its_step_keeping_the_newest_and_the_best(disks):
    spec, attempt = disks()
    ckpt = Path(spec.ckpt)
    mirror = WRAPPER.CheckpointMirror(spec, str(attempt))
    mirror.begin()
    for epoch in range(1, 5):
        latest = save(ckpt / "latest.pth", epoch)
        if epoch == 2:
            best = save(ckpt / "best.pth", epoch)
        state = looked_twice(mirror)
    assert state["durable"] and state["error"] is None
    assert state["newest"]["step"] == 4 and state["newest"]["sha256"] == hashlib.sha256(latest).hexdigest()
    manifest = json.loads((Path(spec.ckpt_mirror.target) / "manifest.json").read_text())
    kept = [(entry["name"], entry["step"]) for entry in manifest["entries"]]
    assert kept == [("best.pth", 2), ("latest.pth", 3), ("latest.pth", 4)]  # K = 2 plus the best
    target = Path(spec.ckpt_mirror.target)
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [*(e["file"] for e in manifest["entries"]), "manifest.json"]
    )
    best_copy = next(entry for entry in manifest["entries"] if entry["name"] == "best.pth")
    assert (target / best_copy["file"]).read_bytes() == best
    # What the state file says is what `status` sends and the control side reads.
    on_disk = parse_mirror(json.loads((attempt / "ckpt-mirror.json").read_text()))
    assert on_disk["newest"] == state["newest"] and on_disk["first_written"]["step"] == 1


def test_a_restore_named_from_an_older_look_takes_the_newer_copy_the_mirror_kept(disks, tmp_path):
    """CI: a box lost just after its mirror replaced best.pth's copy: the control side, which last looked
    before, named the pruned copy and the continuation was quarantined ("not at ... on this box")."""
    spec, attempt = disks()
    ckpt = Path(spec.ckpt)
    mirror = WRAPPER.CheckpointMirror(spec, str(attempt))
    mirror.begin()
    save(ckpt / "best.pth", 1)
    save(ckpt / "latest.pth", 1)
    looked = looked_twice(mirror)
    assert sorted(looked["files"]) == ["best.pth", "latest.pth"]  # every kept name, not only the newest
    named = [{k: v for k, v in entry.items() if k != "at"} for entry in looked["files"].values()]
    for epoch in (2, 3):
        save(ckpt / "latest.pth", epoch)
        best = save(ckpt / "best.pth", epoch)
        latest_bytes = (ckpt / "latest.pth").read_bytes()
        now = looked_twice(mirror)
    target = Path(spec.ckpt_mirror.target)
    assert not (target / next(e["file"] for e in named if e["name"] == "best.pth")).exists()  # pruned

    fresh = tmp_path / "box2-ckpt"
    fresh.mkdir()
    box2 = spec.but(ckpt=str(fresh), restore=WRAPPER.Restore(files=named, source=str(target)))
    problem, restored = WRAPPER.restore_checkpoints(box2)
    assert problem is None
    assert (fresh / "best.pth").read_bytes() == best and (fresh / "latest.pth").read_bytes() == latest_bytes
    assert {item["name"]: item["step"] for item in restored} == {"best.pth": 3, "latest.pth": 3}
    assert {item["file"] for item in restored} == {entry["file"] for entry in now["files"].values()}

    # The newer copy is hashed against the manifest like any other: bytes changed on the tier are refused.
    newer_best = now["files"]["best.pth"]["file"]
    (target / newer_best).write_bytes(b"flipped")
    (fresh / "best.pth").unlink()
    problem, _ = WRAPPER.restore_checkpoints(box2)
    assert problem == f"the durable checkpoint {newer_best} does not match its recorded SHA-256"
    assert not (fresh / "best.pth").exists()
    # A named copy with no newer one of its name is still required.
    (target / newer_best).unlink()
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["entries"] = [entry for entry in manifest["entries"] if entry["name"] != "best.pth"]
    (target / "manifest.json").write_text(json.dumps(manifest))
    problem, _ = WRAPPER.restore_checkpoints(box2)
    assert problem.startswith("the durable checkpoint ") and "is not at" in problem


def test_a_checkpoint_written_in_place_or_still_open_is_never_mirrored(disks):
    spec, attempt = disks()
    ckpt = Path(spec.ckpt)
    mirror = WRAPPER.CheckpointMirror(spec, str(attempt))
    mirror.begin()
    whole = save(ckpt / "whole.pth", 1)
    (ckpt / "latest.pth").write_bytes(whole[: len(whole) // 2])  # half a file, at its final name
    writer = open(ckpt / "open.pth", "wb")  # noqa: SIM115 (held open while the mirror looks)
    writer.write(whole)
    writer.flush()
    (ckpt / "next.pth.tmp").write_bytes(whole)  # a temporary name
    try:
        for _ in range(3):
            state = looked_twice(mirror)
    finally:
        writer.close()
    manifest = json.loads((Path(spec.ckpt_mirror.target) / "manifest.json").read_text())
    assert [entry["name"] for entry in manifest["entries"]] == ["whole.pth"]
    assert state["newest"]["name"] == "whole.pth"
    looked_twice(mirror)  # closed now: it is whole, and taken
    manifest = json.loads((Path(spec.ckpt_mirror.target) / "manifest.json").read_text())
    assert sorted(entry["name"] for entry in manifest["entries"]) == ["open.pth", "whole.pth"]


def test_a_trainer_that_saves_more_often_than_the_mirror_looks_is_still_mirrored_while_it_trains(disks):
    """CI: tinyfit saving every 0.55 s under a 0.5 s poll was never unchanged between two looks, so
    nothing reached the durable tier until training ended (a resume test waited on it past its run).
    Here the trainer saves a new checkpoint between every two looks, each already older than the settle
    when looked at (its mtime set back, as a trainer between two saves leaves it): every look takes the
    epoch it finds. The looks are driven one by one: a loaded machine once mirrored one of twelve
    sleep-paced saves, as the saves and the loop's looks drifted against each other."""
    spec, attempt = disks()
    mirror = WRAPPER.CheckpointMirror(spec, str(attempt))
    mirror.begin()
    latest = Path(spec.ckpt) / "latest.pth"
    mirrored = []
    for epoch in range(1, 13):
        save(latest, epoch)
        written = time.time() - 2 * mirror.settle - 1
        os.utime(latest, (written, written))
        mirror.look()
        mirrored.append((mirror.state.get("newest") or {}).get("step"))
    assert mirrored == list(range(1, 13))
    manifest = json.loads((Path(spec.ckpt_mirror.target) / "manifest.json").read_text())
    assert [entry["step"] for entry in manifest["entries"]][-2:] == [11, 12]  # keep: 2


def test_a_checkpoint_untouched_longer_than_the_settle_is_mirrored_at_its_first_look(disks):
    """The settle rule alone, with no clock to wait on: a checkpoint whose last write is older than the
    settle (its mtime set back) is taken at the first look, with no second look to compare it to. A
    trainer that saves more often than the poll is never unchanged between two looks."""
    spec, attempt = disks()
    mirror = WRAPPER.CheckpointMirror(spec, str(attempt))
    mirror.begin()
    latest = Path(spec.ckpt) / "latest.pth"
    save(latest, 1)
    written = time.time() - 2 * mirror.settle - 1
    os.utime(latest, (written, written))
    mirror.look()
    assert (mirror.state.get("newest") or {}).get("step") == 1


def test_a_mirror_disk_that_fills_up_raises_the_lag_and_never_breaks_the_run(disks):
    spec, attempt = disks(durable_kib=512)
    ckpt = Path(spec.ckpt)
    mirror = WRAPPER.CheckpointMirror(spec, str(attempt))
    stop = threading.Event()
    looking = threading.Thread(target=mirror.loop, args=(stop,))
    mirror.poll = 0.05
    looking.start()
    try:
        save(ckpt / "latest.pth", 1, size=64)  # about 17 KiB: fits
        deadline = time.monotonic() + 10
        while (mirror.state.get("newest") or {}).get("step") != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mirror.state["newest"]["step"] == 1
        save(ckpt / "latest.pth", 2, size=400)  # about 640 KiB: the 512 KiB disk fills
        deadline = time.monotonic() + 10
        while not mirror.state.get("error") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        looking.join(10)
    assert not looking.is_alive()  # the loop ended as asked: the failure did not kill it
    state = parse_mirror(mirror.state)
    assert "No space left on device" in state["error"]
    assert state["newest"]["step"] == 1 and state["local"]["step"] == 2
    target = Path(spec.ckpt_mirror.target)
    assert not [p for p in target.iterdir() if p.name.startswith(".partial")]  # nothing half-copied left
    assert lag_problem(state, time.time(), allowance=3600).startswith(
        "the checkpoint mirror failed: copy of latest.pth"
    )


def test_a_durable_root_on_the_data_disk_mirrors_nothing_and_says_why(tmp_path):
    data = tmp_path / "data" / "proj"
    (data / "active" / "r1" / "ckpt").mkdir(parents=True)
    (data / "plain").mkdir()
    spec = spec_with(
        WRAPPER,
        **{
            "run_root": str(data),
            "active": str(data / "active" / "r1"),
            "ckpt": str(data / "active" / "r1" / "ckpt"),
            "attempt": 1,
            "ckpt_mirror": {"root": str(data / "plain"), "target": str(data / "plain" / "x" / "ckpt"), "keep": 2},
        },
    )
    spec = spec.but(ckpt_mirror=WRAPPER.dataclasses.replace(spec.ckpt_mirror, hold_seconds=1.0))
    mirror = WRAPPER.CheckpointMirror(spec, str(tmp_path))
    mirror.begin()
    save(Path(spec.ckpt) / "latest.pth", 3)
    state = looked_twice(mirror)
    assert not state["durable"] and "on the data root's disk" in state["unusable"] and state["error"] is None
    assert not (data / "plain" / "x").exists()
    assert state["local"]["step"] == 3  # the step is still read: a relaunch is proved against it
    # No durable tier: the newest checkpoint is held (a copy of its own, hashed) for the control host's pull,
    # and lags once the control host has not taken it within the allowance.
    first = state["held"]["latest.pth"]["sha256"]
    held = Path(spec.active) / "ckpt-outbox" / WRAPPER.held_name(first, "latest.pth")
    assert first == hashlib.sha256(held.read_bytes()).hexdigest()
    assert held.stat().st_ino != (Path(spec.ckpt) / "latest.pth").stat().st_ino
    assert lag_problem(state, time.time(), 60) is None
    assert "is not on the control host (nothing is copied yet" in lag_problem(state, time.time() + 120, 60)
    hashed = held.read_bytes()
    save(Path(spec.ckpt) / "latest.pth", 4)  # saved by rename: the held copy keeps the bytes it was hashed with
    assert held.read_bytes() == hashed != (Path(spec.ckpt) / "latest.pth").read_bytes()
    # The held copy stays its time (hold_seconds) before a newer one replaces it: a pull asked for it finds it.
    assert looked_twice(mirror)["held"]["latest.pth"]["sha256"] == first
    time.sleep(1.1)
    state = looked_twice(mirror)
    second = state["held"]["latest.pth"]["sha256"]
    assert state["held"]["latest.pth"]["step"] == 4 and second != first
    # The copy a pull may be reading stays beside the newer one; the one before it goes at the next.
    assert sorted(os.listdir(held.parent)) == sorted(WRAPPER.held_name(sha, "latest.pth") for sha in (first, second))
    save(Path(spec.ckpt) / "latest.pth", 5)
    time.sleep(1.1)
    third = looked_twice(mirror)["held"]["latest.pth"]["sha256"]
    assert sorted(os.listdir(held.parent)) == sorted(WRAPPER.held_name(sha, "latest.pth") for sha in (second, third))


def test_a_relaunch_is_proved_against_the_step_it_was_given():
    def mirror(start, first):
        as_checkpoint = lambda step: step is not None and {"name": "latest.pth", "step": step, "bytes": 1, "at": 1.0}  # noqa: E731
        return parse_mirror({"start": as_checkpoint(start) or None, "first_written": as_checkpoint(first) or None})

    assert resume_problem(mirror(5, 6), floor=5) is None
    assert resume_problem(mirror(5, None), floor=5) is None  # not told yet
    assert "started again instead of resuming" in resume_problem(mirror(5, 1), floor=5)
    assert "below the last durable checkpoint's step 5" in resume_problem(mirror(3, 4), floor=5)
    assert "started with no checkpoint" in resume_problem(mirror(None, 1), floor=5)
    assert resume_problem(mirror(None, 1), floor=None) is None
    durable = parse_mirror(
        {
            "durable": True,
            "newest": {
                "name": "latest.pth",
                "file": "000003-latest.pth",
                "seq": 3,
                "sha256": "a" * 64,
                "bytes": 1,
                "at": 1,
                "step": 4,
            },
            "local": {"name": "latest.pth", "step": 6, "bytes": 1, "at": 2},
        }
    )
    assert resume_floor(durable, same_box=True) == 6 and resume_floor(durable, same_box=False) == 4


def test_a_lying_box_mirror_state_is_dropped_field_by_field():
    state = parse_mirror(
        {
            "durable": "yes",
            "error": 7,
            "newest": {"name": "../../etc/passwd", "file": "x", "seq": 1, "sha256": "a" * 64, "bytes": 1, "at": 1},
            "local": {"name": "latest.pth", "step": True, "bytes": -1, "at": 1},
            "start": {"name": "latest.pth", "step": "9", "bytes": 1, "at": 1},
            "mirrored": "many",
        }
    )
    assert state["durable"] is False and state["error"] is None and state["newest"] is None and state["local"] is None
    assert state["start"]["step"] is None and state["mirrored"] == 0
    assert parse_mirror(["not", "an", "object"]) is None


def test_the_wrapper_s_own_markers_never_count_as_the_command_writing(tmp_path):
    """Stalled means the command wrote nothing: the heartbeat and the mirror's state file, rewritten
    every few seconds by the wrapper itself, kept a silent run from ever reading stalled."""
    active = tmp_path / "proj" / "active" / "r1"
    attempt, output = active / "attempt-1", active / "output"
    attempt.mkdir(parents=True)
    output.mkdir()
    (attempt / "log.txt").write_text("started\n")
    os.utime(attempt / "log.txt", (1000, 1000))
    for marker in ("heartbeat", "ckpt-mirror.json", "pid"):
        (attempt / marker).write_text("fresh")
    spec = spec_with(WRAPPER, **{"output": str(output)})
    assert WRAPPER.written_at(spec, str(attempt)) == 1000
    (output / "train.csv").write_text("epoch\n1\n")
    assert WRAPPER.written_at(spec, str(attempt)) > time.time() - 60


@pytest.mark.django_db
def test_a_restore_that_took_a_newer_copy_is_said_once_on_the_run(make_run):
    from runs.actions.checkpoints import _took_newer
    from runs.models import RunState

    named = {"name": "latest.pth", "file": "000003-latest.pth", "sha256": "a" * 64, "bytes": 1, "step": 3, "seq": 3}
    run = make_run(state=RunState.RUNNING, attempt=2, durable_ckpt={"restore": {"attempt": 2, "files": [named]}})
    as_restored = [{"name": "latest.pth", "file": "000005-latest.pth", "step": 4}, {"name": "x/../y", "file": "z"}]
    mirror = parse_mirror({"restored": as_restored})
    assert mirror["restored"] == [{"name": "latest.pth", "file": "000005-latest.pth", "step": 4}]  # a bad name dropped
    for _ in range(2):
        _took_newer(run, mirror)
        run.save()
    said = list(run.events.filter(message__startswith="Restored latest.pth").values_list("message", flat=True))
    assert said == [
        "Restored latest.pth from the newer durable copy 000005-latest.pth (step 4): the box mirrored it after it"
        " was last looked at, instead of 000003-latest.pth"
    ]
    same = make_run(state=RunState.RUNNING, attempt=2, durable_ckpt={"restore": {"attempt": 2, "files": [named]}})
    _took_newer(same, parse_mirror({"restored": [{"name": "latest.pth", "file": "000003-latest.pth", "step": 3}]}))
    assert not same.events.filter(message__startswith="Restored").exists()  # the named copy: nothing to say


def test_a_held_copy_keeps_its_bytes_when_the_trainer_saves_in_place(tmp_path):
    """A common habit: torch.save(state, "ckpt.pt") straight over the file (same inode, truncated and
    rewritten). Held copies were hard links, so every held copy was rewritten with it: "HashMismatch …
    expected c390… got d030…" on the first checkpoint of every run, and the control host's copy stayed old."""
    data = tmp_path / "data" / "proj"
    ckpt = data / "active" / "r1" / "ckpt"
    ckpt.mkdir(parents=True)
    spec = spec_with(WRAPPER, **{"run_root": str(data), "active": str(ckpt.parent), "ckpt": str(ckpt), "attempt": 1})
    spec = spec.but(
        ckpt_mirror=WRAPPER.dataclasses.replace(spec.ckpt_mirror, root=None, target=None, keep=2, hold_seconds=60)
    )
    mirror = WRAPPER.CheckpointMirror(spec, str(tmp_path))
    mirror.begin()
    live = ckpt / "ckpt.pt"
    torch.save({"model": torch.nn.Linear(64, 64).state_dict(), "step": 1}, live)
    held_state = looked_twice(mirror)["held"]["ckpt.pt"]
    held = ckpt.parent / "ckpt-outbox" / WRAPPER.held_name(held_state["sha256"], "ckpt.pt")
    assert held.stat().st_ino != live.stat().st_ino and held.stat().st_nlink == 1
    inode = live.stat().st_ino
    torch.save({"model": torch.nn.Linear(64, 64).state_dict(), "step": 2}, live)  # in place: same inode
    assert live.stat().st_ino == inode
    assert hashlib.sha256(held.read_bytes()).hexdigest() == held_state["sha256"]
    assert held_state["step"] == 1
