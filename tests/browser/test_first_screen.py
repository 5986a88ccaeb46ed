"""The first screen at 1,280×800 (issue 63): what a person came to a page for is on it without scrolling.
Before: a 40-export batch's "Approve each approvable one" stood below its 40-line list."""

import uuid

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from delivery.models import TeardownStatus
from runs.models import RunState
from tests import factories
from tests.browser.conftest import read_in_chromium
from tests.personas import join

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]  # it starts its own Chromium

MEASURE = """
    button = page.locator("#BATCH form.batch-decision button[value=approve]")
    box = button.bounding_box()
    print(json.dumps({"bottom": box["y"] + box["height"], "items": page.locator("#BATCH .batch-items li").count(),
                      "scrolled": page.evaluate("window.scrollY")}))
"""


def test_a_forty_export_batchs_decision_is_on_the_first_screen(client, live_server, alice, bob):
    project = factories.project(bob)
    join(project, alice)
    box = factories.box(project, host="203.0.113.9", user="root", state="running")
    batch = uuid.uuid4()
    for run in factories.runs(box, 40, state=RunState.EXPORTED, launched_at=timezone.now()):
        factories.teardown_request(
            box, bob, "delete_evidence", run=run, location="node", batch=batch, status=TeardownStatus.PENDING
        )
    client.force_login(alice)
    script = MEASURE.replace("BATCH", f"batch-{batch}")
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    seen = read_in_chromium(script, live_server.url + reverse("approval-queue"), cookie)
    assert seen["items"] == 40 and seen["scrolled"] == 0, seen
    assert seen["bottom"] <= 800, seen
