"""A probe asked over the push stream, against boxes that answer badly: the answer is bounded by
the request, an answer that breaks the protocol is refused as a probe command's would be, and a
stream that does not answer is dropped so the tick probes by command (watching/push.py, Push.ask)."""

import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from node.protocol import NodeError, check_answer
from node.transport.feed import process_feed
from watching.push import Push

RUN = SimpleNamespace(run_id="r1", attempt=1, log_offset=0)
REQUEST = {"runs": [{"spec": "/nowhere/spec.json", "log_offset": 0, "csv_offset": 0}]}


class Box:
    """A box whose follow stream is this script (stdin: the request line, then probe lines)."""

    def __init__(self, script: str):
        self.script = textwrap.dedent(script)

    def follow(self, runs, offsets, lifetime):
        prelude = "import json, sys\nrequest = json.loads(sys.stdin.readline())\n"
        return process_feed([sys.executable, "-c", prelude + self.script], b"{}")


def streaming(script: str) -> Push:
    push = Push()
    push.ensure(Box(script), [RUN], lifetime=60)
    assert push.feed is not None
    return push


def test_a_box_that_floods_statuses_fills_no_more_than_the_runs_asked_about():
    push = streaming("""
        for line in sys.stdin:
            probe = json.loads(line)["probe"]
            for n in range(5000):
                print(json.dumps({"type": "status", "probe": probe, "run_id": f"r{n}", "status": {}}), flush=True)
            print(json.dumps({"type": "probed", "probe": probe, "now": 1.0, "gpus": None}), flush=True)
    """)
    try:
        answer = push.ask(REQUEST, timeout=20)
    finally:
        push.close()
    assert answer is not None and list(answer["runs"]) == ["r0"]  # one run asked, one status kept


def test_an_answer_that_breaks_the_protocol_is_refused_as_the_command_s_would_be():
    push = streaming("""
        for line in sys.stdin:
            probe = json.loads(line)["probe"]
            print(json.dumps({"type": "probed", "probe": probe, "now": "soon"}), flush=True)
    """)
    try:
        answer = push.ask(REQUEST, timeout=20)
    finally:
        push.close()
    with pytest.raises(NodeError, match="now"):
        check_answer("probe", answer)


def test_an_answer_to_another_probe_is_not_taken_and_a_silent_stream_is_dropped():
    push = streaming("""
        for line in sys.stdin:
            probe = json.loads(line)["probe"]
            print(json.dumps({"type": "probed", "probe": probe + 1, "now": 1.0}), flush=True)
    """)
    try:
        started = time.monotonic()
        assert push.ask(REQUEST, timeout=1.5) is None
        assert 1.5 <= time.monotonic() - started < 5
        assert push.feed is None and push.retry_at > time.monotonic()  # dropped, reopened after a back-off
        assert push.ask(REQUEST, timeout=1.5) is None  # no stream: the tick probes by command at once
    finally:
        push.close()


def test_a_stream_that_ends_while_asked_gives_up_at_once():
    push = streaming("""
        sys.stdin.readline()
    """)
    try:
        started = time.monotonic()
        assert push.ask(REQUEST, timeout=20) is None
        assert time.monotonic() - started < 5  # not the 20 s asked: the reader said no answer is coming
    finally:
        push.close()
