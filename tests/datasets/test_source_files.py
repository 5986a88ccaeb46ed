"""What a source box's `stage-send` may read: regular files strictly inside its root, every hard link of
them inside it too. A fifo in a dataset root made `stage-send` hang with no timeout (an orphan on the
source box for 16+ minutes); a hard link inside the root sent the bytes of a file outside it. The built
wrapper runs as a box runs it, on real pipes, fifos and links."""

import json
import os
import subprocess
import sys

import pytest

from datasets.roster import of_directory
from node.build import wrapper_file


def stage_send(root, paths) -> subprocess.CompletedProcess:
    need = json.dumps({"need": [{"path": path, "offset": 0} for path in paths]}).encode() + b"\n"
    command = [sys.executable, "-I", "-S", str(wrapper_file()), "stage-send", str(root)]
    return subprocess.run(command, input=need, capture_output=True, timeout=20)


def frames(done) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "dataset"
    root.mkdir()
    (root / "plain.txt").write_text("in the dataset\n")
    return root


def test_a_fifo_in_the_root_is_said_missing_at_once_and_never_read(root):
    os.mkfifo(root / "pipe")
    done = stage_send(root, ["pipe", "plain.txt"])  # before: blocked in open() until the 20 s timeout
    said = frames(done)
    assert said[0] == {"path": "pipe", "missing": True}
    assert said[1]["path"] == "plain.txt" and said[-1] == {"sent": 15, "files": 2}


def test_a_hard_link_to_a_file_outside_the_root_sends_nothing_of_it(root, tmp_path):
    secret = tmp_path / "outside.key"
    secret.write_text("PRIVATE KEY OUTSIDE THE DATASET\n")
    os.link(secret, root / "linked.key")
    done = stage_send(root, ["linked.key"])
    assert b"PRIVATE KEY" not in done.stdout
    assert frames(done)[0] == {"path": "linked.key", "missing": True}


def test_hard_links_that_all_lie_inside_the_root_are_sent(root):
    (root / "sub").mkdir()
    os.link(root / "plain.txt", root / "sub" / "again.txt")
    done = stage_send(root, ["plain.txt", "sub/again.txt"])
    assert frames(done)[-1] == {"sent": 30, "files": 2}
    assert done.stdout.count(b"in the dataset") == 2


def test_the_roster_of_a_root_lists_only_what_a_sender_may_read(root, tmp_path):
    os.mkfifo(root / "pipe")
    (tmp_path / "outside.bin").write_bytes(b"x" * 10)
    os.link(tmp_path / "outside.bin", root / "linked.bin")
    os.symlink(tmp_path / "outside.bin", root / "symlinked.bin")
    files = of_directory(root)
    assert [item["path"] for item in files] == ["plain.txt"]


def test_the_forced_command_ends_at_its_deadline_whatever_the_sender_waits_on(root, settings):
    from datasets.staging import forced_command

    settings.STAGE_TIMEOUT = 1
    command = forced_command(sys.executable, str(wrapper_file()), str(root))
    reader, writer = os.pipe()  # a receiver that never says what it needs: the sender waits on stdin
    try:
        done = subprocess.run(["sh", "-c", command], stdin=reader, capture_output=True, timeout=30)
    finally:
        os.close(reader), os.close(writer)
    assert done.returncode == 124
