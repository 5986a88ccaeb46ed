"""The follow stream is read from an untrusted box: every line that is not a well-formed event is
dropped (the probe stays the truth), and a chunk's bytes past an offset are cut exactly."""

import json

import pytest

from node.protocol import FOLLOW_TEXT, follow_event
from runs.signals import beyond

GOOD = {"type": "log", "run_id": "r1", "attempt": 2, "start": 10, "end": 20, "text": "epoch 1\n"}


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"log"',
        json.dumps({"type": "shell", "cmd": "rm -rf /"}).encode(),
        json.dumps({**GOOD, "attempt": "2"}).encode(),
        json.dumps({**GOOD, "attempt": True}).encode(),
        json.dumps({**GOOD, "start": -1}).encode(),
        json.dumps({**GOOD, "end": 10}).encode(),
        json.dumps({**GOOD, "start": 30}).encode(),
        json.dumps({**GOOD, "text": None}).encode(),
        json.dumps({**GOOD, "text": "x" * (FOLLOW_TEXT + 1)}).encode(),
        json.dumps({"type": "exit", "run_id": 5, "attempt": 1}).encode(),
        json.dumps({k: v for k, v in GOOD.items() if k != "run_id"}).encode(),
        json.dumps({"type": "status", "probe": "1", "run_id": "r1", "status": {}}).encode(),
        json.dumps({"type": "status", "probe": True, "run_id": "r1", "status": {}}).encode(),
        json.dumps({"type": "status", "probe": 1, "run_id": 7, "status": {}}).encode(),
        json.dumps({"type": "probed", "probe": None, "now": 1.0}).encode(),
    ],
)
def test_a_malformed_line_is_no_event(line):
    assert follow_event(line) is None


def test_well_formed_events_pass():
    assert follow_event(json.dumps(GOOD).encode()) == GOOD
    assert follow_event(b'{"type": "heartbeat", "now": 1.5}') == {"type": "heartbeat", "now": 1.5}
    assert follow_event(b'{"type": "exit", "run_id": "r1", "attempt": 1}')["type"] == "exit"


def test_beyond_cuts_at_the_node_byte_offset():
    text = "épоch 1\nepoch 2\n"  # multi-byte characters: offsets are bytes, not characters
    start = 100
    assert beyond(text, start, 90) == text and beyond(text, start, start) == text
    cut = len("épоch 1\n".encode())
    assert beyond(text, start, start + cut) == "epoch 2\n"
    assert beyond(text, start, start + len(text.encode())) == ""
