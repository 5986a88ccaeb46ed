"""The training log kept on the control host: what the watcher read, chunk by chunk, per attempt.

`keep` runs inside the watcher's transaction (the offsets and the chunk commit together, so a
chunk is stored exactly once); the rest reads: a page from the end backwards, what follows an
offset (the CLI's `logs -f` and the API), and the whole attempt as a stream (the download).
"""

from dataclasses import dataclass

from django.conf import settings

from runs.models import LogChunk, Run

PAGE_CHARS = 200_000
SINCE_CHARS = 256_000


def keep(run: Run, start: int, end: int, text: str) -> None:
    """Store one chunk of run's current attempt; past LOG_KEEP_BYTES only a note that the rest stays on the node."""
    if not text or run.log_kept_bytes > settings.LOG_KEEP_BYTES:
        return
    if run.log_kept_bytes + len(text) > settings.LOG_KEEP_BYTES:
        text = (
            f"[RemoteGPU keeps {settings.LOG_KEEP_BYTES // 1024**2} MiB of a log per attempt: "
            f"the rest, from byte {start}, stays in log.txt on the node]\n"
        )
        run.log_kept_bytes = settings.LOG_KEEP_BYTES + 1
    else:
        run.log_kept_bytes += len(text)
    # A file replaced on the node restarts at 0: a second chunk at an offset we hold is not news.
    LogChunk.objects.bulk_create(
        [LogChunk(run=run, attempt=run.attempt, start=start, end=end, text=text)], ignore_conflicts=True
    )


def attempts(run: Run) -> list[int]:
    return list(run.log_chunks.order_by().values_list("attempt", flat=True).distinct().order_by("attempt"))


@dataclass
class Page:
    text: str
    older: int | None  # the `before` of the next older page, None at the start of the log
    newest: bool
    end: int  # the node offset the page ends at: where following picks up


def page(run: Run, attempt: int, before: int | None = None) -> Page:
    """About PAGE_CHARS of the attempt's log ending at byte `before` (the end of the log when None)."""
    chunks = run.log_chunks.filter(attempt=attempt).order_by("-start")
    if before is not None:
        chunks = chunks.filter(start__lt=before)
    taken, size = [], 0
    for chunk in chunks.iterator(chunk_size=200):
        taken.append(chunk)
        size += len(chunk.text)
        if size >= PAGE_CHARS:
            break
    more = bool(taken) and chunks.filter(start__lt=taken[-1].start).exists()
    text = "".join(c.text for c in reversed(taken))
    return Page(text, taken[-1].start if more else None, before is None, taken[0].end if taken else 0)


def since(run: Run, attempt: int, offset: int) -> tuple[str, int, bool]:
    """The attempt's log from byte `offset` on (bounded by SINCE_CHARS), the offset to ask from next,
    and whether more is already kept past it."""
    text, end, size = [], offset, 0
    chunks = run.log_chunks.filter(attempt=attempt, end__gt=offset).order_by("start")
    for chunk in chunks[:10_000].iterator(chunk_size=200):
        if size >= SINCE_CHARS:
            return "".join(text), end, True
        text.append(chunk.text)
        end, size = chunk.end, size + len(chunk.text)
    return "".join(text), end, False


def stream(run: Run, attempt: int):
    """The whole attempt's log, chunk by chunk (a download never holds it all in memory)."""
    for chunk in run.log_chunks.filter(attempt=attempt).order_by("start").iterator(chunk_size=200):
        yield chunk.text
