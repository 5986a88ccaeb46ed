"""The instance page of a box with 50 runs, in headless Chromium at 1,280 px (issue 49): under 2,500 px
tall (12 runs made it 6,358 px), its teardown verdict in the first screen, and no card wider than itself."""

import pytest
from django.conf import settings
from django.utils import timezone

from runs.models import RunState
from tests import factories
from tests.browser.conftest import read_in_chromium

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]  # it starts its own Chromium

MEASURE = """
    verdict = page.wait_for_selector("#teardown-verdict").bounding_box()
    wide = page.evaluate(
        "[...document.querySelectorAll('section.card')].filter(c => c.scrollWidth > c.clientWidth).map(c => c.id)"
    )
    height = page.evaluate("document.documentElement.scrollHeight")
    print(json.dumps({"height": height, "verdict": verdict["y"] + verdict["height"], "wide": wide,
                      "said": page.inner_text("#teardown-verdict")}))
"""


def test_a_box_with_fifty_runs_fits_and_says_its_verdict_first(client, live_server, bob):
    box = factories.box(factories.project(bob), host="203.0.113.9", user="root", state="running")
    runs = [factories.run(box, state=RunState.EXPORTED, launched_at=timezone.now()) for _ in range(50)]
    for run in runs[1:]:
        factories.verified_record(run, uri="/c/x")
    client.force_login(bob)
    url = live_server.url + box.get_absolute_url()
    page = read_in_chromium(MEASURE, url, client.cookies[settings.SESSION_COOKIE_NAME].value)
    assert page["height"] < 2500, page
    assert page["verdict"] <= 800, page  # in the first screen
    assert f"A verified copy of {runs[0].run_id} survives" in page["said"]
    assert "50 exports, 49 kept by a verified copy, 1 without one" in " ".join(page["said"].split())
    assert page["wide"] == [], page
