"""The contract between the node wrapper and the control side: the wrapper's own functions, called
directly, answer what profiles/protocol.ANSWERS says the control side reads — for every subcommand."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import pytest

from node.build import wrapper_file
from node.protocol import ANSWERS, check_answer, follow_event, parse_answer, status_problem
from node.transport.feed import process_feed
from platforms.layout import NodeLayout
from tests.box_specs import spec_data
from tests.runs.conftest import load_wrapper
from tests.sshd import free_port


@pytest.fixture(scope="module")
def wrapper():
    return load_wrapper()


@pytest.fixture
def spec_path(tmp_path):
    """A whole spec written where a launch writes it, its source tarball and an export beside it."""
    layout = NodeLayout(str(tmp_path / "data"), "vision", "vision-contract-1", "")
    data = spec_data(layout, gpus="", boot_marker=str(tmp_path / "data" / "vision" / ".remotegpu-boot"))
    for directory in (layout.active, layout.quarantine_base, layout.export):
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)
    tarball = io.BytesIO()
    with tarfile.open(fileobj=tarball, mode="w") as tar:
        data_file = b"lr: 0.1\n"
        info = tarfile.TarInfo("config.yaml")
        info.size = len(data_file)
        tar.addfile(info, io.BytesIO(data_file))
    (tmp_path / layout.active / "src.tar").write_bytes(tarball.getvalue())
    (tmp_path / layout.export / "metrics.json").write_text('{"loss": 0.5}')
    path = tmp_path / layout.active / "spec.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def spec(wrapper, spec_path):
    """The spec as a subcommand reads it (the wrapper's own strict reader)."""
    return wrapper.load_spec(spec_path)


def answer_of(subcommand: str, function, *args) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = function(*args)
    return parse_answer(subcommand, code or 0, out.getvalue(), err.getvalue())


def run_wrapper(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """The built wrapper file, as a box runs it: the byte-stream subcommands read and write real pipes."""
    command = [sys.executable, "-I", "-S", str(wrapper_file()), *args]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=60)


def last_answer(subcommand: str, done: subprocess.CompletedProcess) -> dict:
    return parse_answer(subcommand, done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode())


def staging_answers(wrapper, tmp_path) -> dict:
    """dataset-roster, stage-check, stage-send piped into stage-receive, stage-pull and stage-grant."""
    root = tmp_path / "dataset"
    (root / "a").mkdir(parents=True)
    (root / "a" / "one.bin").write_bytes(b"1" * 3000)
    (root / "two.txt").write_text("two\n")
    checked = {"dataset-roster": answer_of("dataset-roster", wrapper.cmd_dataset_roster, {"root": str(root)})}
    files = checked["dataset-roster"]["files"]
    assert [item["path"] for item in files] == ["a/one.bin", "two.txt"] and files[0]["bytes"] == 3000
    target = tmp_path / "data" / "vision" / "cache" / "data" / "roster"
    request = {"target": str(target), "roster_sha256": "r" * 64, "files": files}
    checked["stage-check"] = answer_of("stage-check", wrapper.cmd_stage_check, request)
    assert checked["stage-check"]["need"] == [{"path": "a/one.bin", "offset": 0}, {"path": "two.txt", "offset": 0}]
    need = json.dumps({"need": checked["stage-check"]["need"]}).encode() + b"\n"
    frames = run_wrapper("stage-send", str(root), stdin=need).stdout
    checked["stage-send"] = parse_answer("stage-send", 0, frames.decode(errors="replace"), "")
    assert checked["stage-send"] == {"sent": 3004, "files": 2}
    received = run_wrapper("stage-receive", stdin=json.dumps(request).encode() + b"\n" + frames)
    checked["stage-receive"] = last_answer("stage-receive", received)
    assert checked["stage-receive"] == {"received": 3004, "files": 2, "complete": True}
    assert (target / "a" / "one.bin").read_bytes() == b"1" * 3000
    again = {**request, "target": str(tmp_path / "second"), "source": {"local_root": str(root)}}
    checked["stage-pull"] = last_answer(
        "stage-pull", run_wrapper("stage-pull", stdin=json.dumps(again).encode() + b"\n")
    )
    assert checked["stage-pull"]["complete"] is True and (tmp_path / "second" / "two.txt").read_text() == "two\n"
    keys = tmp_path / "authorized_keys"
    stale = 'restrict,command="x" ssh-ed25519 AAAAold remotegpu-stage-1000-dead'
    keys.write_text(f"ssh-ed25519 AAAAkept person@laptop\n{stale}\n")
    grant = {"file": str(keys), "marker": "remotegpu-stage-1234", "action": "add", "expire_before": 2000}
    grant["line"] = 'restrict,command="python3 w.py stage-send /d" ssh-ed25519 AAAAtemp remotegpu-stage-1234'
    checked["stage-grant"] = answer_of("stage-grant", wrapper.cmd_stage_grant, grant)
    assert keys.read_text().splitlines()[1:] == [grant["line"]]  # a dead worker's stale key went with it
    assert answer_of("stage-grant", wrapper.cmd_stage_grant, {**grant, "action": "remove"}) == {"granted": False}
    assert keys.read_text() == "ssh-ed25519 AAAAkept person@laptop\n"  # only the temporary key went
    refused = io.StringIO()
    with contextlib.redirect_stdout(refused):
        assert wrapper.cmd_stage_grant({**grant, "line": "ssh-ed25519 AAAAopen remotegpu-stage-1234"}) == 1
    assert "refusing" in refused.getvalue()
    return checked


def test_every_subcommand_answers_what_the_control_side_reads(wrapper, spec, spec_path, tmp_path):
    checked = {
        "extract": answer_of("extract", wrapper.cmd_extract, spec),
        "preflight": answer_of("preflight", wrapper.cmd_preflight, spec),
        "smoke": answer_of("smoke", wrapper.cmd_smoke, spec),
        "status": answer_of("status", wrapper.cmd_status, spec),
    }
    assert checked["extract"]["extracted"] is True and checked["smoke"]["exit_code"] == 0
    assert "smoke ok" in checked["smoke"]["output"] and checked["preflight"]["missing"] == []

    sys.stdin = io.StringIO(json.dumps({"runs": [{"spec": spec_path, "log_offset": 0, "csv_offset": 0}]}))
    try:
        checked["probe"] = answer_of("probe", wrapper.cmd_probe, json.load(sys.stdin))
    finally:
        sys.stdin = sys.__stdin__
    assert set(checked["probe"]["runs"]) == {"vision-contract-1"}

    checked["roster"] = answer_of("roster", wrapper.cmd_roster, spec)
    files = checked["roster"]["files"]
    assert [item["path"] for item in files] == ["metrics.json"]
    (tmp_path / spec.active / "sealed-roster.json").write_text(json.dumps(files))
    from tests.custody import sealed

    if not sealed.mount_durable_root():
        pytest.skip("the mirror needs a durable disk of its own: mounting a tmpfs needs root")
    durable = sealed.node_path(sealed.MIRROR_ROOT)
    target = durable / f"contract-{tmp_path.name}" / "vision-contract-1"
    checked["mirror"] = answer_of("mirror", wrapper.cmd_mirror, spec, str(target), str(durable))
    assert checked["mirror"]["verified"] is True and checked["mirror"]["mount"]["fstype"] == "tmpfs"
    shutil.rmtree(target.parent, ignore_errors=True)
    checked["rehash"] = answer_of("rehash", wrapper.cmd_rehash, {"copies": [{"root": spec.export, "files": files}]})
    assert checked["rehash"]["copies"][0]["intact"] is True
    checked["stop"] = answer_of("stop", wrapper.cmd_stop, spec, {"by": "contract", "grace_seconds": 1})
    assert checked["stop"]["stopped"] is False  # nothing runs this attempt: refused, not pretended
    checked["abandon"] = answer_of("abandon", wrapper.cmd_abandon, spec, {})
    target = f"{spec.quarantine_base}/vision-contract-1--closed-1"
    request = {"active": spec.active, "quarantine": target, "reason": "contract"}
    checked["close-active"] = answer_of("close-active", wrapper.cmd_close_active, request)
    assert checked["close-active"]["moved"] is True
    checked["reseal"] = answer_of("reseal", wrapper.cmd_reseal, spec)
    assert checked["reseal"]["sealed"] is False  # sealed already: never over an existing export

    cache = tmp_path / "home" / ".cache" / "pip"
    cache.mkdir(parents=True)
    (cache / "wheel.whl").write_bytes(b"x" * 1234)
    checked["clean-caches"] = answer_of("clean-caches", wrapper.cmd_clean_caches, {"paths": [str(cache)]})
    assert checked["clean-caches"] == {"freed": 1234, "removed": [str(cache)]} and not cache.exists()
    refused = io.StringIO()
    with contextlib.redirect_stdout(refused):
        assert wrapper.cmd_clean_caches({"paths": ["/"]}) == 1
    assert "refusing" in refused.getvalue()
    writer = open(tmp_path / "data" / "busy.log", "w")  # noqa: SIM115 (held open while idle looks)
    try:
        checked["idle"] = answer_of("idle", wrapper.cmd_idle, str(tmp_path / "data"))
    finally:
        writer.close()
    assert any(item["why"].startswith("writes") for item in checked["idle"]["busy"])

    exports = tmp_path / "data" / "vision" / "export"
    copy = exports / "vision-contract-gone"
    copy.mkdir(parents=True)
    (copy / "best.pth").write_bytes(b"w" * 500)
    request = {"path": str(copy), "root": str(exports)}
    checked["remove-copy"] = answer_of("remove-copy", wrapper.cmd_remove_copy, request)
    assert checked["remove-copy"] == {"removed": True, "bytes": 500} and not copy.exists()
    assert answer_of("remove-copy", wrapper.cmd_remove_copy, request) == {"removed": False, "bytes": 0}
    outside = tmp_path / "data" / "elsewhere"
    outside.mkdir()
    (exports / "sneaky").symlink_to(outside)
    for path in (str(exports), str(exports / "sneaky"), f"{exports}/../elsewhere", str(outside)):
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            assert wrapper.cmd_remove_copy({"path": path, "root": str(exports)}) == 1, path
        assert "refusing" in said.getvalue()
    assert outside.exists() and exports.exists()  # the root, a link out of it and what it points at stay

    checked["gpus"] = answer_of("gpus", wrapper.cmd_gpus, spec)
    assert checked["gpus"]["gpus"]["nvidia_smi"] is (shutil.which("nvidia-smi") is not None)

    secret_spec = spec.but(secrets=["TOKEN"])
    request = {"values": {"TOKEN": "contract-secret-1"}}
    checked["put-secrets"] = answer_of("put-secrets", wrapper.cmd_put_secrets, secret_spec, request)
    assert checked["put-secrets"]["written"] == ["TOKEN"]
    assert oct(os.stat(wrapper.secrets_path(secret_spec)).st_mode & 0o777) == "0o600"
    assert wrapper.take_secrets(secret_spec) == {"TOKEN": "contract-secret-1"}  # read once, then gone
    assert not os.path.exists(wrapper.secrets_path(secret_spec)) and wrapper.take_secrets(secret_spec) == {}

    checked.update(staging_answers(wrapper, tmp_path))
    checked["boot-resume"] = answer_of("boot-resume", wrapper.cmd_boot_resume, str(tmp_path / "data" / "vision"))
    assert checked["boot-resume"]["relaunched"] == []  # nothing there opted in to relaunches on the box

    # Rank 0's box listens (the built wrapper, in its own process) while another box connects to it.
    port = free_port()
    listener = subprocess.Popen(
        [sys.executable, str(wrapper_file()), "rendezvous"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    listener.stdin.write(json.dumps({"listen": port, "expect": 1, "seconds": 10}))
    listener.stdin.close()
    reached = answer_of("rendezvous", wrapper.cmd_rendezvous, {"connect": ["127.0.0.1", port], "seconds": 10})
    assert reached == {"reached": True, "ifname": "lo"}  # the interface its connection went through
    checked["rendezvous"] = check_answer(
        "rendezvous", parse_answer("rendezvous", listener.wait(20), listener.stdout.read(), "")
    )
    assert checked["rendezvous"] == {"listening": True, "reached_by": 1, "ifname": "lo"}

    assert set(checked) == set(ANSWERS)  # every subcommand of the protocol was exercised


def events_until(feed, kind: str, timeout: float = 20) -> list[dict]:
    """The follow stream's events up to and including the first of `kind` (read with a deadline)."""
    events, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in filter(None, map(follow_event, feed.lines(0.2))):
            events.append(event)
            if event["type"] == kind:
                return events
    raise AssertionError(f"no {kind} event within {timeout} s: {events}")


def test_a_probe_asked_over_the_follow_stream_answers_as_the_probe_command(wrapper, spec, spec_path, tmp_path):
    """The real wrapper file, as the box runs it: the request line, then probes on the open stdin."""
    item = {"spec": spec_path, "log_offset": 0, "csv_offset": 0}
    attempt = tmp_path / spec.active / "attempt-1"
    attempt.mkdir(parents=True)
    (attempt / "log.txt").write_text("epoch 1\n")
    argv = [sys.executable, "-I", "-S", str(wrapper_file()), "follow"]
    feed = process_feed(argv, json.dumps({"runs": [item], "lifetime": 60, "poll": 0.1}).encode())
    try:
        assert events_until(feed, "log")[-1]["text"] == "epoch 1\n"

        # A line that is not a probe is refused on the stream, which goes on answering.
        feed.send(b'{"probe": "one", "runs": []}\n[not json')
        refusals = [event for event in events_until(feed, "error") if event["type"] == "error"]
        assert "refused" in refusals[0]["error"]

        asked = time.monotonic()
        feed.send(json.dumps({"probe": 7, "runs": [item]}).encode())
        events = events_until(feed, "probed")
        took = time.monotonic() - asked
        statuses = {e["run_id"]: e["status"] for e in events if e["type"] == "status" and e["probe"] == 7}
        probed = events[-1]
        assert probed["probe"] == 7
        streamed = check_answer("probe", {"now": probed["now"], "gpus": probed["gpus"], "runs": statuses})
    finally:
        feed.close()
    commanded = answer_of("probe", wrapper.cmd_probe, {"runs": [item]})
    assert streamed.keys() == commanded.keys() and streamed["runs"].keys() == commanded["runs"].keys()
    over_stream, by_command = streamed["runs"]["vision-contract-1"], commanded["runs"]["vision-contract-1"]
    assert status_problem(over_stream) is None
    moving = {"now", "space"}  # the node's clock and its free bytes at each call
    assert {k: v for k, v in over_stream.items() if k not in moving} == {
        k: v for k, v in by_command.items() if k not in moving
    }
    assert over_stream["log_chunk"] == "epoch 1\n"
    assert took < 1  # within a poll (0.1 s here) and no process start, not the next heartbeat (2 s)
