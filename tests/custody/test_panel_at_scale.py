"""The instance page's consequences at team scale (issue 49): each check opens with its verdict in one
line and its failing items first, the passing ones counted and folded; the evidence section counts the
exports ("12 exports: 11 kept by a verified copy, 1 without one") and folds their copies, with one
deletion request over the exports a person ticks; a released box offers none."""

import re

import pytest
from django.utils import timezone

from custody.models import CustodyRecord, CustodyStatus
from runs.models import RunState
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_box(bob):
    project = factories.project(bob)
    box = factories.box(project, host="203.0.113.9", user="root", state="running")
    runs = [factories.run(box, state=RunState.EXPORTED, launched_at=timezone.now()) for _ in range(12)]
    for run in runs[1:]:
        factories.verified_record(run, uri="/c/x")
    return box, runs[0]


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_verdict_comes_first_and_the_unkept_export_is_named(client, bob, busy_box):
    box, unverified = busy_box
    client.force_login(bob)
    page = client.get(box.get_absolute_url()).content.decode()
    summary = page[page.index('id="exports-summary">') + len('id="exports-summary">') :]
    said = text_of(summary[: summary.index("</p>")])
    assert said == f"12 exports: 11 kept by a verified copy, 1 without one ( {unverified.run_id} )."
    exports = page[page.index('<details class="exports"') :]
    assert exports.startswith('<details class="exports">')  # folded: twelve exports are detail, not the page
    assert exports.index(unverified.run_id) < min(exports.index(r.run_id) for r in box.runs.exclude(pk=unverified.pk))
    # One deletion request over the exports a person ticks, not a form per export (issue 49).
    assert exports.count('type="checkbox" name="run"') == 12 and exports.count("Request deletion") == 1
    release = page[page.index('id="consequence-release"') :]
    verdict = release[release.index('class="verdict') :]
    verdict = text_of(verdict[: verdict.index("</p>")])
    assert f"Blocked: A verified copy of {unverified.run_id} survives" in verdict
    first_item = release[release.index('<ul class="checks">') :]
    assert first_item.index("✗") < first_item.index("</ul>")  # the failing item is the first one shown
    assert re.search(r"<summary[^>]*>\d+ passing checks</summary>", release)


def test_a_released_box_offers_no_deletion_form(client, bob, busy_box):
    box, _ = busy_box
    box.state = "released"
    box.save()
    client.force_login(bob)
    page = client.get(box.get_absolute_url()).content.decode()
    assert "Request deletion" not in page and 'id="exports-summary"' in page


def test_the_page_stays_the_same_size_and_queries_from_10_to_1000_exports(client, bob):
    """Pinned: the instance page's HTML and its query count do not grow with the runs on its box (the
    exports past the first 25 are counted, and listed only on ?exports=all)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    project = factories.project(bob)
    box = factories.box(project, host="203.0.113.9", user="root", state="running")
    client.force_login(bob)
    seen = {}
    for total in (10, 30, 1000):
        made = factories.runs(box, total - box.runs.count(), state=RunState.EXPORTED, launched_at=timezone.now())
        verified = {"status": CustodyStatus.VERIFIED, "verified_at": timezone.now(), "uri": "/c"}
        CustodyRecord.objects.bulk_create([CustodyRecord(run=run, **verified) for run in made])
        with CaptureQueriesContext(connection) as queries:
            page = client.get(box.get_absolute_url()).content.decode()
        seen[total] = (len(queries.captured_queries), len(page))
        assert f"{total} exports: {total} kept by a verified copy." in text_of(page)
    assert seen[10][0] == seen[30][0] == seen[1000][0], seen
    assert seen[1000][1] - seen[30][1] < 600, seen  # the counts' digits, not a row per run
    assert "975 more, each kept by a verified copy" in text_of(page)
    listed = client.get(box.get_absolute_url() + "?exports=all").content.decode()
    assert listed.count('type="checkbox" name="run"') == 1000
