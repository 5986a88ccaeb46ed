"""Nothing prints `None` where a value is expected (issue 49: the smoke printed `sha256=None`, which
reads like a failure): the main pages of a project with a run in each common state, read as text."""

import re

import pytest
from django.utils import timezone

from runs.models import RunState
from tests import factories

pytestmark = pytest.mark.django_db

STATES = [RunState.DRAFT, RunState.RUNNING, RunState.QUARANTINED, RunState.EXPORTED, RunState.FAILED_SMOKE]


def visible_text(html: str) -> str:
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def printed_nones(text: str) -> list[str]:
    """Each printed None value (`sha256=None`, "step None") with its context; not the English word
    ("None yet.", "None registered.")."""
    return [text[max(0, m.start() - 60) : m.end() + 20] for m in re.finditer(r"\bNone\b(?! [a-z])", text)]


def test_no_page_says_none(client, bob):
    project = factories.project(bob)
    box = factories.box(project, host="203.0.113.9", user="root", state="running")
    runs = [factories.run(box, state=state, launched_at=timezone.now(), attempt=1) for state in STATES]
    client.force_login(bob)
    pages = ["/", "/runs/", "/instances/", project.get_absolute_url(), box.get_absolute_url(), "/approvals/"]
    pages += [run.get_absolute_url() for run in runs]
    said = {}
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        found = printed_nones(visible_text(response.content.decode()))
        if found:
            said[url] = found
    assert said == {}


def test_the_check_sees_a_printed_none():
    text = visible_text("<p>secret DATAFIT_TOKEN sha256=None</p><p>None yet.</p><td>None</td>")
    assert len(printed_nones(text)) == 2
