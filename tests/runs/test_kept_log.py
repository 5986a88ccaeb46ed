"""The full training log kept on the control host: exactly once per byte range, bounded,
paged from the end, downloadable, and read by offset through the API; a hostile start is not believed."""

import time

import pytest
from django.utils import timezone

from runs import logs
from runs.models import RunState
from tests.runs.test_observe import THRESHOLDS, status
from watching.observation import do_observe_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]


def probe(run, chunk: str, start: int | None = None, **fields) -> dict:
    """The node's answer to one tick: `chunk` appended to log.txt after what the run has read."""
    now = time.time()
    begin = run.log_offset if start is None else start
    return status(
        attempt=run.attempt,
        now=now,
        heartbeat_at=now - 1,
        log_from=run.log_offset,
        log_start=begin,
        log_chunk=chunk,
        log_offset=begin + len(chunk.encode()),
        **fields,
    )


@pytest.fixture
def running(make_run):
    return make_run(state=RunState.RUNNING, launched_at=timezone.now(), attempt=1)


def test_each_range_is_kept_once_even_when_a_tick_is_applied_twice(running):
    first = probe(running, "epoch 1/2 loss=1.0\n")
    run, _ = do_observe_run(running.pk, first, THRESHOLDS)
    do_observe_run(running.pk, first, THRESHOLDS)  # a redelivered tick: its offset is behind us now
    run, _ = do_observe_run(run.pk, probe(run, "epoch 2/2 loss=0.5\n\x1b[31mdone\x1b[0m\n"), THRESHOLDS)
    assert logs.since(run, 1, 0) == ("epoch 1/2 loss=1.0\nepoch 2/2 loss=0.5\ndone\n", run.log_offset, False)
    assert logs.since(run, 1, len(b"epoch 1/2 loss=1.0\n"))[0] == "epoch 2/2 loss=0.5\ndone\n"
    assert "".join(logs.stream(run, 1)) == "epoch 1/2 loss=1.0\nepoch 2/2 loss=0.5\ndone\n"
    assert run.log_kept_bytes == len("epoch 1/2 loss=1.0\nepoch 2/2 loss=0.5\ndone\n")


def test_a_hostile_start_is_not_believed(running):
    """A box cannot place a chunk before what it already sent or past its own end offset."""
    run, _ = do_observe_run(running.pk, probe(running, "one\n"), THRESHOLDS)
    for bogus in (-5, 10**12, True):
        hostile = probe(run, "two\n")
        hostile["log_start"] = bogus
        run, _ = do_observe_run(run.pk, hostile, THRESHOLDS)
    assert "".join(logs.stream(run, 1)) == "one\ntwo\ntwo\ntwo\n"
    assert [c.start for c in run.log_chunks.all()] == [0, 4, 8, 12]


def test_past_the_cap_only_a_note_is_kept(running, settings):
    settings.LOG_KEEP_BYTES = 64
    run = running
    for n in range(6):
        run, _ = do_observe_run(run.pk, probe(run, f"line {n} " + "x" * 20 + "\n"), THRESHOLDS)
    kept = "".join(logs.stream(run, 1))
    assert kept.startswith("line 0 ") and "line 1 " in kept and "line 2 " not in kept
    assert kept.endswith("stays in log.txt on the node]\n") and kept.count("RemoteGPU keeps") == 1
    assert run.log_offset == 6 * 28  # the watcher still reads it all: signals and offsets go on


def test_pages_run_from_the_end_back_to_the_start(running, monkeypatch):
    monkeypatch.setattr(logs, "PAGE_CHARS", 30)
    run = running
    for n in range(10):
        run, _ = do_observe_run(run.pk, probe(run, f"line {n:02d}\n"), THRESHOLDS)  # 8 bytes each
    newest = logs.page(run, 1)
    assert newest.text == "".join(f"line {n:02d}\n" for n in range(6, 10)) and newest.end == 80
    older = logs.page(run, 1, newest.older)
    assert older.text == "".join(f"line {n:02d}\n" for n in range(2, 6)) and not older.newest
    oldest = logs.page(run, 1, older.older)
    assert oldest.text == "line 00\nline 01\n" and oldest.older is None


def test_the_log_page_download_and_api(client, bob, charlie, running):
    run, _ = do_observe_run(running.pk, probe(running, "<b>epoch</b> 1\n"), THRESHOLDS)
    client.force_login(bob)
    page = client.get(f"/runs/{run.run_id}/log/")
    assert page.status_code == 200 and b"&lt;b&gt;epoch&lt;/b&gt; 1" in page.content
    assert b'id="log-follow"' in page.content  # a running run's newest page follows
    download = client.get(f"/runs/{run.run_id}/log/download/?attempt=1")
    assert download["Content-Disposition"] == f'attachment; filename="{run.run_id}-attempt1.log"'
    assert b"".join(download.streaming_content) == b"<b>epoch</b> 1\n"
    assert client.get(f"/runs/{run.run_id}/log/download/?attempt=7").status_code == 404
    answer = client.get(f"/api/runs/{run.run_id}/log/?offset=0").json()
    assert (answer["text"], answer["next_offset"], answer["attempt"]) == ("<b>epoch</b> 1\n", 15, 1)
    for hostile in ("offset=-1", "offset=%C2%B2", "offset=" + "9" * 5000, "attempt=" + "9" * 30):
        assert client.get(f"/api/runs/{run.run_id}/log/?{hostile}").status_code == 400, hostile  # never a 500
    assert client.get(f"/api/runs/{run.run_id}/events/?after=%C2%B2").status_code == 400
    assert client.get(f"/runs/{run.run_id}/log/?before={'9' * 30}&attempt={'9' * 30}").status_code == 200
    assert client.get(f"/runs/{run.run_id}/log/?attempt=x&before=y").status_code == 200  # ignored, not a 500
    client.force_login(charlie)  # not a member of the project
    assert client.get(f"/runs/{run.run_id}/log/").status_code == 404
    assert client.get(f"/runs/{run.run_id}/log/download/").status_code == 404
    assert client.get(f"/api/runs/{run.run_id}/log/").status_code == 404
