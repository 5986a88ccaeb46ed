"""The watcher's fast path: one push stream per instance, read between ticks (issue 19).

The wrapper's `follow` emits what the runs write as they write it; the watcher forwards each log
event to the run's page at once, instead of at its next probe. The stream decides nothing: the
per-tick probe stays the truth (finished, dead, stalled) and the only writer of the database; an
"exit" event only makes the watcher probe at once. Offsets are the node's bytes of log.txt: each
page message says which range it carries, the watcher remembers how far each run's log was sent,
and neither a reconnect nor the probe's own push sends a byte twice.
"""

import logging
import random
import time

from django.conf import settings

from profiles.protocol import follow_event
from profiles.transport import TransportError
from runs.live import push_run_update
from runs.signals import beyond, strip_ansi

log = logging.getLogger(__name__)
MAX_PUSHED_LINES = 200


class Push:
    def __init__(self):
        self.feed = None
        self.following: tuple = ()
        self.sent: dict[tuple[str, int], int] = {}  # (run_id, attempt) -> the log's end already on the pages
        self.finished: set[tuple[str, int]] = set()  # attempts that finished writing (no stream for them)
        self.failures = 0
        self.retry_at = 0.0
        self.said_end = False  # the open stream ended as the wrapper ends it (its runs done, its life over)

    def until(self, run) -> int | None:
        """How far the run's current attempt's log has been pushed (None: nothing yet)."""
        return self.sent.get((run.run_id, run.attempt))

    def sent_to(self, run, end: int) -> None:
        key = (run.run_id, run.attempt)
        self.sent[key] = max(self.sent.get(key, 0), end)

    def ensure(self, node, runs, lifetime: float) -> None:
        """A stream for the runs still writing: (re)opened when that set changed or the stream ended."""
        writing = [run for run in runs if (run.run_id, run.attempt) not in self.finished]
        keys = tuple(sorted((run.run_id, run.attempt) for run in writing))
        if self.feed is not None and not self.feed.ended and keys == self.following:
            return
        self.close()
        if not writing or lifetime < 1 or time.monotonic() < self.retry_at:
            return
        offsets = {run.run_id: max(self.until(run) or 0, run.log_offset) for run in writing}
        try:
            self.feed = node.follow(writing, offsets, lifetime)
            self.following, self.said_end = keys, False
        except TransportError as exc:
            self._broke(exc)

    def wait(self, seconds: float, runs, stopping) -> bool:
        """Read the stream for up to `seconds` (less once `stopping` is set), forwarding each log event;
        True when an attempt finished writing (the watcher probes at once rather than at its next tick)."""
        deadline = time.monotonic() + seconds
        by_id = {run.run_id: run for run in runs}
        while (remaining := deadline - time.monotonic()) > 0 and not stopping.is_set():
            if self.feed is None or self.feed.ended:
                stopping.wait(remaining)
                return False
            try:
                lines = self.feed.lines(min(remaining, 0.5))
            except TransportError as exc:
                self._broke(exc)
                continue
            finished = False
            if lines:
                self.failures = 0  # the stream delivers again: the next break backs off from one tick
            for line in lines:
                event = follow_event(line)
                if event is None:
                    continue
                if event["type"] == "end":
                    self.said_end = True
                    continue
                run = by_id.get(event.get("run_id"))
                if run is None or event.get("attempt") != run.attempt:
                    continue
                if event["type"] == "log":
                    self._forward(run, event)
                elif event["type"] == "exit":
                    self.finished.add((run.run_id, run.attempt))
                    finished = True
            if self.feed.ended and not self.said_end:
                # It stopped without saying so (killed, refused, crashed): reopening it every tick
                # would start a process on the box per tick for nothing; back off as for a break.
                self._broke("the follow stream ended early")
            if finished:
                return True
        return False

    def _forward(self, run, event: dict) -> None:
        already = self.until(run) or 0
        if event["end"] <= already:
            return
        lines = strip_ansi(beyond(event["text"], event["start"], already)).splitlines()[-MAX_PUSHED_LINES:]
        if lines:
            payload = {"type": "log", "lines": lines, "attempt": run.attempt, "end": event["end"]}
            push_run_update(run.run_id, payload)
        self.sent_to(run, event["end"])

    def _broke(self, exc) -> None:
        """Drop the stream; reopen after a jittered, bounded back-off (no handshake storm after a blip)."""
        self.close()
        self.failures += 1
        delay = settings.WATCH_TICK_SECONDS * min(2 ** (self.failures - 1), 8) * random.uniform(0.5, 1.0)
        self.retry_at = time.monotonic() + delay
        log.info("push stream dropped (%s); reopening in %.1f s", exc, delay)

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
        self.feed, self.following = None, ()
