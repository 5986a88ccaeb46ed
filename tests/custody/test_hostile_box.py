"""A box can no longer make the control host write without bound.

The box is this machine through the local transport; a hostile box is one whose `tar` lies (a
script first on its PATH). Every byte it sends is counted against the roster before it is written.
"""

import hashlib
import os
import subprocess
import tarfile
import zipfile

import pytest

from custody.checkpoint import safe_load
from custody.roster import RosterEntry
from node.pull import HashMismatch, pull_batch, pull_one
from node.transport import LocalTransport


def entry_for(path: str, data: bytes) -> RosterEntry:
    return RosterEntry(path, len(data), hashlib.sha256(data).hexdigest())


def test_a_five_byte_entry_served_as_megabytes_writes_at_most_five(tmp_path):
    box, custody = tmp_path / "box", tmp_path / "custody"
    box.mkdir()
    (box / "best.pth").write_bytes(b"\0" * (64 << 20))  # what `cat` serves
    with pytest.raises(HashMismatch, match="more than the roster's 5 bytes"):
        pull_one(LocalTransport(), str(box), entry_for("best.pth", b"12345"), custody)
    written = sum(p.stat().st_size for p in custody.rglob("*") if p.is_file())
    assert written == 0  # the partial holding at most those 5 bytes is removed


def test_a_sparse_tar_member_is_refused_before_a_byte_is_written(tmp_path, monkeypatch):
    box, custody, bin_dir = tmp_path / "box", tmp_path / "custody", tmp_path / "bin"
    box.mkdir()
    bin_dir.mkdir()
    sparse = tmp_path / "sparse.bin"
    with open(sparse, "wb") as handle:
        handle.truncate(256 << 20)  # 256 MiB of holes
    crafted = tmp_path / "crafted.tar"
    subprocess.run(["tar", "--sparse", "-C", str(tmp_path), "-cf", str(crafted), "sparse.bin"], check=True)
    assert crafted.stat().st_size < (1 << 20)
    (bin_dir / "tar").write_text(f"#!/bin/sh\ncat {crafted}\n")  # the box's lying tar
    (bin_dir / "tar").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(HashMismatch, match="sparse.bin"):
        pull_batch(LocalTransport(), str(box), [entry_for("sparse.bin", b"tiny")], custody)
    assert sum(p.stat().st_size for p in custody.rglob("*") if p.is_file()) == 0
    with tarfile.open(crafted) as archive:
        assert archive.getmembers()[0].issparse()  # the test really sent a sparse member


def test_a_checkpoint_zip_bomb_is_refused_unloaded(tmp_path):
    bomb = tmp_path / "best.pth"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data/0", b"\0" * (256 << 20))
        archive.writestr("archive/data.pkl", b"")
    assert bomb.stat().st_size < (1 << 20)
    result = safe_load(bomb)
    assert not result.ok and "zip bomb" in result.detail


def test_a_real_checkpoint_still_loads(tmp_path):
    import torch

    path = tmp_path / "best.pth"
    torch.save({"w": torch.zeros(512, 512)}, path)
    assert safe_load(path).ok


def lying_tar(tmp_path, monkeypatch, script: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tar").write_text(f"#!/bin/sh\n{script}\n")  # the box's tar
    (bin_dir / "tar").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


@pytest.mark.parametrize(
    "script",
    [
        "head -c 65536 /dev/urandom",  # bytes that go on: no tar at all
        "printf 'HTTP/1.1 200 OK\\r\\n'; head -c 600 /dev/zero | tr '\\0' 'x'",  # a whole first block, no header
    ],
)
def test_a_stream_that_is_no_tar_is_refused_not_resumed_as_a_dropped_session(tmp_path, monkeypatch, script):
    """Before: "the tar stream … broke; the pull resumes", and the next pull asked the same box again."""
    box, custody = tmp_path / "box", tmp_path / "custody"
    box.mkdir()
    lying_tar(tmp_path, monkeypatch, script)
    with pytest.raises(HashMismatch, match="not a tar .* refused, and nothing of it kept"):
        pull_batch(LocalTransport(), str(box), [entry_for("a.txt", b"abc")], custody)
    assert not custody.exists() or not any(custody.rglob("*"))


def test_a_tar_cut_mid_member_still_resumes(tmp_path, monkeypatch):
    from node.transport.stream import StreamError

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.bin").write_bytes(os.urandom(200_000))
    whole = tmp_path / "whole.tar"
    subprocess.run(["tar", "-C", str(tmp_path / "src"), "-cf", str(whole), "a.bin"], check=True)
    lying_tar(tmp_path, monkeypatch, f"head -c 100000 {whole}")  # the session dropped mid-file
    data = (tmp_path / "src" / "a.bin").read_bytes()
    with pytest.raises(StreamError, match="the pull resumes"):
        pull_batch(LocalTransport(), str(tmp_path / "box"), [entry_for("a.bin", data)], tmp_path / "custody")
