"""`follow`: push what the runs write as they write it, and answer probes asked on stdin."""

import json
import os
import select
import sys
import time

from .attempts import attempt_dir, quarantine_dir
from .files import read, read_from
from .probe import probe_answer
from .specs import load_spec


def emit(event):
    """One event line on the follow stream; False once the reader has gone (the stream ends)."""
    try:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()
        return True
    except (BrokenPipeError, OSError):
        return False


def finished_writing(spec):
    """The attempt wrote its exit marker, or it was quarantined: nothing more will be appended."""
    return read(os.path.join(attempt_dir(spec), "exit_code")) is not None or os.path.isdir(quarantine_dir(spec))


def cmd_follow(request, requests):
    """Push what the runs write as it is written: the watcher's fast path (its probe stays the truth).

    One event per JSON line. "log": whole lines of log.txt as [start, end) byte offsets, so a
    reconnect asks from the last end it got and nothing repeats or goes missing; "exit": the
    attempt finished writing (its log drained first); "heartbeat" every few seconds, so the reader
    can tell a quiet run from a dead stream; "end" when no followed run writes any more, the
    lifetime ran out, or the reader went away. Memory is bounded: at most 64 KiB per run per poll.
    A probe written on stdin meanwhile is answered on the stream within a poll (`answer_probe`).
    """
    poll = min(max(float(request.get("poll", 0.2)), 0.05), 5.0)
    beat = min(max(float(request.get("heartbeat", 2.0)), 0.5), 60.0)
    deadline = time.time() + min(float(request.get("lifetime", 120)), 3600)
    followed = []
    for item in request["runs"]:
        try:
            followed.append([load_spec(item["spec"]), int(item.get("log_offset", 0))])
        except (OSError, ValueError, KeyError) as exc:
            emit({"type": "error", "spec": str(item.get("spec")), "error": str(exc)})
    last_beat = 0.0
    while followed and time.time() < deadline:
        for entry in list(followed):
            spec, offset = entry
            done = finished_writing(spec)  # read before the log: a marker seen means the log is complete
            base = attempt_dir(spec) if os.path.isdir(attempt_dir(spec)) else quarantine_dir(spec)
            text, start, end = read_from(os.path.join(base, "log.txt"), offset)
            if text:
                event = {"type": "log", "run_id": spec.run_id, "attempt": spec.attempt}
                if not emit({**event, "start": start, "end": end, "text": text}):
                    return 0
                entry[1] = end
            elif done:
                if not emit({"type": "exit", "run_id": spec.run_id, "attempt": spec.attempt}):
                    return 0
                followed.remove(entry)
        if time.time() - last_beat >= beat:
            if not emit({"type": "heartbeat", "now": time.time()}):
                return 0
            last_beat = time.time()
        for line in requests.wait(poll):  # the poll's pause, cut short by a probe asked meanwhile
            if not answer_probe(line):
                return 0
    emit({"type": "end"})
    return 0


class Requests:
    """The lines the control side writes on the follow stream's stdin: the request, then its probes.

    Read from the descriptor without blocking past the timeout asked; a line is at most LIMIT bytes
    (a longer one is dropped), and what stdin held when it closed without a newline is a last line
    (a request written whole, then EOF)."""

    LIMIT = 1 << 20

    def __init__(self, fd=0):
        self.fd, self.buffer, self.open, self.pending = fd, b"", True, []

    def wait(self, timeout):
        """The whole lines that arrive within timeout seconds (a plain pause once stdin is closed)."""
        if self.pending:
            lines, self.pending = self.pending, []
            return lines
        if not self.open:
            time.sleep(timeout)
            return []
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.fd, 1 << 16)
        self.buffer += data if data else b"\n"
        self.open = bool(data)
        *lines, self.buffer = self.buffer.split(b"\n")
        if len(self.buffer) > self.LIMIT:
            self.buffer = b""
            emit({"type": "error", "error": f"a request line longer than {self.LIMIT} bytes was dropped"})
        return [line for line in lines if line.strip() and len(line) <= self.LIMIT]

    def first(self, timeout=30.0):
        deadline = time.time() + timeout
        while time.time() < deadline and (self.open or self.buffer):
            lines = self.wait(min(1.0, max(deadline - time.time(), 0.0)))
            if lines:
                self.pending = lines[1:]  # probes written right behind the request
                return json.loads(lines[0])
        raise ValueError("no follow request on stdin")


def follow_on_stdin():
    """`follow` as the box runs it: the request, then the probes, read from stdin."""
    requests = Requests()
    return cmd_follow(requests.first(), requests)


def answer_probe(line):
    """A probe asked over the follow stream: the same answer as `probe`, as one "status" line per run
    (each within the stream's line limit) and a closing "probed" line; no process, no exec. False
    once the reader has gone."""
    try:
        request = json.loads(line)
        asked, runs = request["probe"], request["runs"]
        if not isinstance(asked, int) or not isinstance(runs, list):
            raise ValueError("a probe needs an integer id and a list of runs")
        answer = probe_answer(request)
    except (ValueError, KeyError, TypeError) as exc:
        return emit({"type": "error", "error": f"a probe request was refused: {exc}"})
    for run_id, status in answer["runs"].items():
        if not emit({"type": "status", "probe": asked, "run_id": str(run_id), "status": status}):
            return False
    return emit({"type": "probed", "probe": asked, "now": answer["now"], "gpus": answer["gpus"]})
