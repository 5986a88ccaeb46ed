"""An idle GPU past its project's window is on the first screen: the dashboard and the project page say it
with its box's $/h (before: only the run page and the box's waste alarm did), and the project's live runs
come before its members and envelope."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import RunState
from tests import factories

pytestmark = pytest.mark.django_db


def test_the_dashboard_and_the_project_page_show_runs_whose_gpus_idle_past_the_window(client, alice, bob):
    project = factories.project(alice, bob, gpu_idle_minutes=30)
    box = factories.box(project, state="running", rate_running="3.20")
    long_idle = factories.run(box, state=RunState.RUNNING, gpus=[0], gpu_idle_since=timezone.now() - timedelta(hours=1))
    just_idle = factories.run(
        box, state=RunState.RUNNING, gpus=[1], gpu_idle_since=timezone.now() - timedelta(minutes=5)
    )
    client.force_login(bob)
    for page in (client.get("/").content.decode(), client.get(project.get_absolute_url()).content.decode()):
        banner = page[page.index('id="idle-gpus"') :].split("</section>")[0]
        assert long_idle.run_id in banner and "$3.20/h" in banner and just_idle.run_id not in banner
    page = client.get(project.get_absolute_url()).content.decode()
    assert page.index('id="project-live"') < page.index('id="members"') < page.index('id="envelope"')
    factories.run(box, state=RunState.EXPORTED, gpus=[2], gpu_idle_since=timezone.now() - timedelta(hours=2))
    long_idle.gpu_idle_since = None
    long_idle.save()
    assert 'id="idle-gpus"' not in client.get("/").content.decode()  # none live and idle past its window
