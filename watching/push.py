"""The watcher's fast path: one push stream per instance, read by its own thread.

The wrapper's `follow` emits what the runs write as they write it; a reader thread forwards each
log event to the run's page at once. It never waits on the watcher: while the watcher's probe is
out (a second or more on a loaded box), the stream is still read — reading it only between ticks
made every line written during a probe wait for that probe. The stream decides nothing: the
per-tick probe stays the truth (finished, dead, stalled) and the only writer of the database; an
"exit" event only wakes the watcher to probe at once. Offsets are the node's bytes of log.txt:
each page message says which range it carries, `sent` remembers how far each run's log went out,
and neither a reconnect nor the probe's own push sends a byte twice — the watcher applies a probe
under `lock`, the reader forwards under it.

The reader thread alone reads and closes its feed: closing a file descriptor another thread may
be reading can hand that thread whatever the number is reused for next. A probe is written to the
feed under `lock` while it is still the current feed, so a write never meets a closed one.

The stream also answers the watcher's probe (`ask`): one request line on the channel already open,
the same answer back (a "status" line per run, then "probed"). At 100 boxes the exec'd probe — an
SSH session and a Python start on the box per box per tick — was most of the boxes' work.
"""

import itertools
import json
import logging
import random
import threading
import time

from django.conf import settings

from node.protocol import follow_event
from node.transport import TransportError
from runs.live import push_run_update
from runs.signals import beyond, strip_ansi
from watching.masking import mask_text, values_for

log = logging.getLogger(__name__)
MAX_PUSHED_LINES = 200
READ_SLICE = 0.5  # how long the reader blocks on the stream before it looks whether it was dropped


class Asked:
    """One probe asked over the stream, filled in by the reader thread."""

    def __init__(self, number: int, feed, runs: int):
        self.number, self.feed, self.runs = number, feed, runs
        self.statuses: dict = {}
        self.answer: dict | None = None
        self.done = threading.Event()

    def take(self, event: dict) -> None:
        """A "status" or "probed" line of this probe (under the push lock)."""
        if self.done.is_set():
            return  # answered (or given up on): its answer is the caller's now
        if event["type"] == "status":
            # At most one status per run asked about: a box cannot grow this beyond its request.
            if event["run_id"] in self.statuses or len(self.statuses) < self.runs:
                self.statuses[event["run_id"]] = event.get("status")
            return
        self.answer = {"now": event.get("now"), "gpus": event.get("gpus"), "runs": self.statuses}
        self.done.set()


class Push:
    def __init__(self):
        self.lock = threading.Lock()
        self.feed = None
        self.following: tuple = ()
        self.sent: dict[tuple[str, int], int] = {}  # (run_id, attempt) -> the log's end already on the pages
        self.finished: set[tuple[str, int]] = set()  # attempts that finished writing (no stream for them)
        self.masking: dict[tuple[int, int], list[str]] = {}  # (run pk, attempt) -> its secret values
        self.failures = 0
        self.retry_at = 0.0
        self.wake = threading.Event()  # an attempt finished writing: the watcher probes now
        self.asked: Asked | None = None
        self._numbers = itertools.count(1)
        self._reader: threading.Thread | None = None

    def ask(self, request: dict, timeout: float) -> dict | None:
        """The probe's answer over the stream, unchecked (the caller checks it as any probe answer);
        None when there is no stream or it did not answer (it is then dropped): probe by command."""
        with self.lock:
            if self.feed is None:
                return None
            asked = self.asked = Asked(next(self._numbers), self.feed, len(request["runs"]))
            try:
                self.feed.send(json.dumps({"probe": asked.number, **request}).encode())
            except TransportError as exc:
                self._broke(exc)
                return None
        answered = asked.done.wait(timeout)
        with self.lock:
            self.asked = None
            if not answered and self.feed is asked.feed:
                self._broke(f"the stream did not answer a probe within {timeout:.0f} s")
        return asked.answer

    def until(self, run) -> int | None:
        """How far the run's current attempt's log has been pushed (None: nothing yet). Under `lock`."""
        return self.sent.get((run.run_id, run.attempt))

    def sent_to(self, run, end: int) -> None:
        """Under `lock`."""
        key = (run.run_id, run.attempt)
        self.sent[key] = max(self.sent.get(key, 0), end)

    def ensure(self, node, runs, lifetime: float) -> None:
        """A stream for the runs still writing: (re)opened when that set changed or the stream ended."""
        with self.lock:
            writing = [run for run in runs if (run.run_id, run.attempt) not in self.finished]
            keys = tuple(sorted((run.run_id, run.attempt) for run in writing))
            if self.feed is not None and keys == self.following:
                return
            offsets = {run.run_id: max(self.until(run) or 0, run.log_offset) for run in writing}
        self.close()
        if not writing or lifetime < 1 or time.monotonic() < self.retry_at:
            return
        try:
            feed = node.follow(writing, offsets, lifetime)
        except TransportError as exc:
            with self.lock:
                self._broke(exc)
            return
        with self.lock:
            self.feed, self.following = feed, keys
        by_id = {run.run_id: run for run in writing}
        self._reader = threading.Thread(target=self._read, args=(feed, by_id), name="push-reader", daemon=True)
        self._reader.start()

    def wait(self, seconds: float, stopping) -> bool:
        """Sleep up to `seconds` (less once `stopping` is set); True when an attempt finished writing,
        so the watcher probes at once rather than at its next tick."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0 and not stopping.is_set():
            if self.wake.wait(min(remaining, READ_SLICE)):
                self.wake.clear()
                return True
        return False

    def _read(self, feed, by_id: dict) -> None:
        """The reader thread: forward what the stream says until it ends, breaks or is dropped."""
        said_end = False
        try:
            while True:
                try:
                    lines = feed.lines(READ_SLICE)
                except TransportError as exc:
                    with self.lock:
                        if self.feed is feed:
                            self._broke(exc)
                    return
                with self.lock:
                    if self.feed is not feed:
                        return  # dropped by the watcher (runs changed, connection broke, shutting down)
                    if lines:
                        self.failures = 0  # the stream delivers again: the next break backs off from one tick
                    said_end = self._handle(lines, by_id) or said_end
                    if feed.ended:
                        if said_end:
                            self.feed, self.following = None, ()
                        else:
                            # It stopped without saying so (killed, refused, crashed): reopening it every
                            # tick would start a process on the box per tick for nothing; back off.
                            self._broke("the follow stream ended early")
                        return
        finally:
            with self.lock:
                if self.feed is feed:  # an unexpected error: nothing may write to it once closed
                    self.feed, self.following = None, ()
                if self.asked is not None and self.asked.feed is feed:
                    self.asked.done.set()  # no answer is coming: the watcher probes by command now
            feed.close()

    def _handle(self, lines: list[bytes], by_id: dict) -> bool:
        """Apply a batch of events (under `lock`); True when the stream said it ends."""
        said_end = False
        for line in lines:
            event = follow_event(line)
            if event is None:
                continue
            if event["type"] == "end":
                said_end = True
                continue
            if event["type"] in ("status", "probed"):
                if self.asked is not None and event["probe"] == self.asked.number:
                    self.asked.take(event)
                continue
            run = by_id.get(event.get("run_id"))
            if run is None or event.get("attempt") != run.attempt:
                continue
            if event["type"] == "log":
                self._forward(run, event)
            elif event["type"] == "exit":
                self.finished.add((run.run_id, run.attempt))
                self.wake.set()
        return said_end

    def _forward(self, run, event: dict) -> None:
        already = self.until(run) or 0
        if event["end"] <= already:
            return
        text = mask_text(strip_ansi(beyond(event["text"], event["start"], already)), self._mask_values(run))
        lines = text.splitlines()[-MAX_PUSHED_LINES:]
        if lines:
            payload = {"type": "log", "lines": lines, "attempt": run.attempt, "end": event["end"]}
            push_run_update(run.run_id, payload)
        self.sent_to(run, event["end"])

    def _mask_values(self, run) -> list[str]:
        """The run's secret values, read once per run and attempt of this stream (watching.masking)."""
        key = (run.pk, run.attempt)
        if key not in self.masking:
            self.masking[key] = values_for(run)
        return self.masking[key]

    def _broke(self, exc) -> None:
        """Under `lock`: drop the stream; reopen after a jittered, bounded back-off (no handshake
        storm after a blip). Its reader sees it dropped and closes it."""
        self.feed, self.following = None, ()
        self.failures += 1
        delay = settings.WATCH_TICK_SECONDS * min(2 ** (self.failures - 1), 8) * random.uniform(0.5, 1.0)
        self.retry_at = time.monotonic() + delay
        log.info("push stream dropped (%s); reopening in %.1f s", exc, delay)

    def close(self) -> None:
        """Drop the stream and let its reader close it (within READ_SLICE)."""
        with self.lock:
            self.feed, self.following = None, ()
            reader, self._reader = self._reader, None
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=2 * READ_SLICE + 1)
