"""Every malformed answer from the wrapper becomes a clear failure, never an uncaught
exception or a stuck state. A real sshd whose ForceCommand shim answers every wrapper call with
garbage (and passes anything else, such as uploads, through) stands in for a hostile box."""

import json
import stat
import uuid

import pytest

from custody.models import CustodyStatus
from custody.verify import verify
from fleet.node_client import NodeClient
from node.protocol import NodeError
from runs.box_spec import run_node
from runs.models import RunState
from tests import factories
from tests.sshd import Sshd
from watching.watch import tick

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


SHIM = """#!/bin/sh
# Any call of our wrapper gets the planted answer; everything else (uploads, mkdir, $HOME) runs.
case "$SSH_ORIGINAL_COMMAND" in
  *python*wrapper-*.py*) cat {answer}; cat {stderr} >&2; exit "$(cat {code})" ;;
  internal-sftp|sftp|*sftp-server*) exec /usr/lib/openssh/sftp-server ;;
  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
esac
"""

GARBAGE = {
    "nothing": ("", "", 0),
    "not json": ("all good, trust me\n", "", 0),
    "a list": ("[1, 2, 3]\n", "", 0),
    "an object of nothing": ('{"unexpected": true}\n', "", 0),
    "an error": ('{"error": "disk on fire"}\n', "", 0),
    "a crash": ("", "Traceback (most recent call last):\nMemoryError\n", 1),
    "wrong types": ('{"now": "yesterday", "runs": [], "files": "all", "verified": "yes", "copies": 3}\n', "", 0),
    "a flood": ("A" * 2_000_000 + "\n", "", 0),
}


class GarbageBox:
    def __init__(self, directory):
        self.answer, self.stderr, self.code = directory / "answer", directory / "stderr", directory / "code"
        shim = directory / "shim.sh"
        shim.write_text(SHIM.format(answer=self.answer, stderr=self.stderr, code=self.code))
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.plant("", "", 0)
        self.sshd = Sshd(directory / "sshd", extra_config=(f"ForceCommand {shim}",)).start()

    def plant(self, stdout: str, stderr: str, code: int) -> None:
        self.answer.write_text(stdout)
        self.stderr.write_text(stderr)
        self.code.write_text(str(code))


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    garbage = GarbageBox(tmp_path_factory.mktemp("garbage-box"))
    yield garbage
    garbage.sshd.stop()


@pytest.fixture
def hostile_run(box, project, make_run, tmp_path):
    instance = factories.box(
        name=f"{project.slug}-hostile-20261130",
        project=project,
        **{**box.sshd.instance_fields(project), "data_root_override": str(tmp_path / "data")},
    )
    return make_run(instance=instance, state=RunState.RUNNING, attempt=1)


def every_wrapper_call(run):
    """Each control-side call of a wrapper subcommand, as the tasks make it."""
    with run_node(run) as node:
        node.prepare()
        spec = node.attempt_spec(1)
        yield "preflight", lambda: node.call("preflight", spec)
        yield "smoke", lambda: node.call("smoke", spec)
        yield "extract", lambda: node.call("extract", spec)
        yield "status", lambda: node.call("status", spec)
        yield "gpus", lambda: node.call("gpus", spec)
        yield "roster", node.roster
        yield "mirror", lambda: node.mirror(f"{node.home}/mirror/run", f"{node.home}/mirror")
        yield "probe", lambda: node.probe([run])
        yield "abandon", lambda: node.abandon(run)
        yield "stop", lambda: node.stop(run, "bob")
        yield "close-active", lambda: node.close_active(run, "test")
        yield "rehash", lambda: node.rehash(run, [{"root": node.layout.export, "files": []}])
        yield "idle", lambda: node.idle(node.layout.run_root)
        yield "clean-caches", lambda: node.clean_caches([f"{node.home}/.cache/remotegpu-garbage-test"])
        yield "remove-copy", lambda: node.remove_copy(node.layout.export, f"{node.layout.run_root}/export")


def test_every_garbage_answer_to_every_call_is_a_node_error_naming_the_call(box, hostile_run):
    calls = every_wrapper_call(hostile_run)
    checked = 0
    for subcommand, call in calls:
        for garbage, answer in GARBAGE.items():
            box.plant(*answer)
            with pytest.raises(NodeError) as error:
                call()
            assert str(error.value).startswith(subcommand), (garbage, subcommand, str(error.value)[:200])
            assert len(str(error.value)) < 600  # a flood is not copied into the message
            checked += 1
    assert checked == 15 * len(GARBAGE)


def test_a_garbage_roster_fails_the_custody_record_instead_of_leaving_it_pulling(box, hostile_run):
    box.plant('{"export": "/x", "files": [{"path": "a", "bytes": "many"}]}\n', "", 0)
    hostile_run.state = RunState.EXPORTED
    hostile_run.save(update_fields=["state"])
    record = factories.pulling_record(hostile_run, provider="generic-ssh")  # as the action makes it
    verify(record)
    record.refresh_from_db()
    assert record.status == CustodyStatus.FAILED
    assert "valid size" in record.failure


def test_a_garbage_run_status_inside_a_valid_probe_is_a_node_error_on_that_run(box, hostile_run):
    status = {"exit_code": "zero", "now": 1.0}
    box.plant(json.dumps({"now": 1.0, "gpus": [], "runs": {hostile_run.run_id: status}}) + "\n", "", 0)
    node = NodeClient(hostile_run.instance).__enter__()
    try:
        tick(node, [hostile_run])
    finally:
        node.__exit__(None, None, None)
    hostile_run.refresh_from_db()
    assert hostile_run.state == RunState.RUNNING and "node_error" in hostile_run.alerts
    message = hostile_run.events.filter(kind="alert").latest("at").message
    assert "lacks or mistypes" in message and "exit_code" in message


def test_uploads_pass_through_the_shim(box, hostile_run):
    """The shim is not simply broken: non-wrapper commands and SFTP reach the box."""
    marker = f"ok-{uuid.uuid4().hex}"
    with run_node(hostile_run) as node:
        node.prepare()
        assert node.transport.stat(f"{node.layout.tools}/") is not None
        assert node.transport.run(["echo", marker], timeout=10).stdout.strip() == marker


def valid_status(run, **extra) -> dict:
    """A run's status as the wrapper sends it (every field observation reads), plus extra."""
    return {
        "run_id": run.run_id,
        "attempt": 1,
        "now": 1.0,
        "launched": True,
        "wrapper_alive": True,
        "child_alive": True,
        "exit_code": None,
        "heartbeat_at": None,
        "exported": False,
        "quarantine_reason": None,
        "rebooted": False,
        "ran": None,
        "log_mtime": None,
        "ckpt_mtime": None,
        "log_from": 0,
        "log_chunk": "",
        "log_start": 0,
        "log_offset": 0,
        "csv_from": 0,
        "csv_chunk": "",
        "csv_offset": 0,
        "log_tail": "step 1\n",
        **extra,
    }


def probe_once(box, run, status) -> None:
    box.plant(json.dumps({"now": 1.0, "gpus": [], "runs": {run.run_id: status}}) + "\n", "", 0)
    with NodeClient(run.instance) as node:
        tick(node, [run])
    run.refresh_from_db()


def test_a_forty_mebibyte_answer_is_ended_at_the_bound_not_held(box, hostile_run, settings):
    """A hostile box answered 40 MiB and the worker held it all. Past
    NODE_ANSWER_MAX_BYTES the command is ended and the answer is a node error on the run."""
    settings.NODE_ANSWER_MAX_BYTES = 1024**2
    box.plant("A" * (40 * 1024**2) + "\n", "", 0)
    with NodeClient(hostile_run.instance) as node:
        node.transport.connect()
        with pytest.raises(NodeError, match="answered more than 1048576 bytes"):
            node.probe([hostile_run])
        assert node.transport.max_answer == 1024**2
    hostile_run.refresh_from_db()
    assert hostile_run.state == RunState.RUNNING


def test_an_over_long_field_is_a_node_error_and_an_unknown_one_is_never_stored(box, hostile_run):
    """An 8 MiB log_tail once reached Run.last_status and the run page; unknown fields were kept."""
    probe_once(box, hostile_run, valid_status(hostile_run, log_tail="x" * 1024**2))
    assert "node_error" in hostile_run.alerts and hostile_run.last_status.get("log_tail", "") == ""
    message = hostile_run.events.filter(kind="alert").latest("at").message
    assert "over-long log_tail" in message
    probe_once(box, hostile_run, valid_status(hostile_run, evil="<script>" * 1000, ran={"python": "3.11"}))
    assert "evil" not in hostile_run.last_status
    assert hostile_run.last_status["log_tail"] == "step 1\n" and hostile_run.last_status["ran"] == {"python": "3.11"}


def test_stored_answers_keep_their_schema_and_bounds(box, hostile_run):
    """What a run stores whole (its preflight report, its smoke output) keeps only the named fields."""
    preflight = {"missing": [], "hashes": {}, "space": {}, "tmux": True, "python": "3.11.7", "evil": "x" * 100_000}
    box.plant(json.dumps(preflight) + "\n", "", 0)
    with run_node(hostile_run) as node:
        node.prepare()
        spec = node.attempt_spec(1)
        assert "evil" not in node.call("preflight", spec)
        box.plant(json.dumps({**preflight, "environment": {"blob": "y" * 100_000}}) + "\n", "", 0)
        with pytest.raises(NodeError, match="over-long environment"):
            node.call("preflight", spec)
        box.plant(json.dumps({"exit_code": 0, "output": "z" * 1_000_000, "seconds": 1.0}) + "\n", "", 0)
        with pytest.raises(NodeError, match="output longer than"):
            node.call("smoke", spec)
