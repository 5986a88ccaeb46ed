"""The node computes the sealed export's roster over real SSH; the control side refuses bad entries."""

import hashlib
import json

import pytest

from custody.roster import RosterError, parse_roster
from node.protocol import NodeError
from runs.box_spec import run_node
from runs.models import RunState

pytestmark = pytest.mark.django_db(transaction=True)


def test_roster_of_a_sealed_export_matches_the_bytes(make_run, node):
    run = make_run(state=RunState.EXPORTED, attempt=1)
    export = node.export(run)
    (export / "test" / "synthetic").mkdir(parents=True)
    files = {"best.pth": b"\x00" * 4096, "run.json": b"{}", "test/synthetic/metrics.json": b'{"accuracy": 1}'}
    for name, data in files.items():
        (export / name).write_bytes(data)
    (node.active(run) / "scratch.bin").parent.mkdir(parents=True, exist_ok=True)
    (node.active(run) / "scratch.bin").write_bytes(b"mutable")  # never part of a roster
    sealed = [{"path": n, "bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in sorted(files.items())]
    (node.active(run) / "sealed-roster.json").write_text(json.dumps(sealed))  # as the wrapper seals it
    with run_node(run) as session:
        session.prepare()
        entries = parse_roster(session.roster())
    assert {entry.path: (entry.bytes, entry.sha256) for entry in entries} == {
        name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in files.items()
    }


def test_no_sealed_export_is_an_error_not_an_empty_roster(make_run):
    run = make_run(state=RunState.RUNNING, attempt=1)
    with run_node(run) as session:
        session.prepare()
        with pytest.raises(NodeError, match="roster failed on the node: no sealed export"):
            session.roster()


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../x", "path traversal"),
        ("test/../../etc/passwd", "path traversal"),
        ("/etc/passwd", "not a relative path"),
        ("active/ckpt.pth", "does not belong"),
        ("ckpt/latest.pth", "does not belong"),
    ],
)
def test_bad_roster_entries_are_refused(path, problem):
    document = {"files": [{"path": path, "bytes": 1, "sha256": "0" * 64}]}
    with pytest.raises(RosterError, match=problem):
        parse_roster(document)


def test_bad_sizes_and_digests_are_refused():
    with pytest.raises(RosterError, match="valid SHA-256"):
        parse_roster({"files": [{"path": "best.pth", "bytes": 1, "sha256": "xyz"}]})
    with pytest.raises(RosterError, match="valid size"):
        parse_roster({"files": [{"path": "best.pth", "bytes": -1, "sha256": "0" * 64}]})


def test_a_missing_sealed_roster_fails_closed():
    """A flipped digit plus a removed sealed-roster.json once verified as "verified"."""
    entry = {"path": "train.csv", "bytes": 3, "sha256": "0" * 64}
    with pytest.raises(RosterError, match="no sealed roster on the node"):
        parse_roster({"files": [entry], "sealed": None})
    with pytest.raises(RosterError, match="no sealed roster on the node"):
        parse_roster({"files": [entry]})


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([{"path": "best.pth"}], "not a JSON object"),
        ({"files": {"best.pth": 1}}, "something other than files"),
        ({"files": [["best.pth", 1]]}, "something other than files"),
        ({"files": [{"bytes": 1, "sha256": "0" * 64}]}, "not a relative path"),
        ({"files": [{"path": 7, "bytes": 1, "sha256": "0" * 64}]}, "has no path"),
        ({"files": [{"path": "a", "bytes": 1, "sha256": "0" * 64}], "sealed": {"a": 1}}, "malformed"),
        ({"files": [{"path": "a", "bytes": 1, "sha256": "0" * 64}], "sealed": [{"path": "a"}]}, "malformed"),
    ],
)
def test_garbage_from_a_box_is_a_roster_error_not_a_crash(document, problem):
    with pytest.raises(RosterError, match=problem):
        parse_roster(document)


@pytest.mark.parametrize(
    "paths",
    [["x", "x/y"], ["test/metrics.json", "test"], ["a/b", "a/b/c/d.bin"]],
)
def test_a_file_and_a_directory_of_the_same_name_are_refused(paths):
    """A roster with x and x/y crashed verify() (FileExistsError), the record left pulling."""
    files = [{"path": path, "bytes": 1, "sha256": "0" * 64} for path in paths]
    with pytest.raises(RosterError, match="both as a file and as the directory"):
        parse_roster({"files": files, "sealed": files})
