"""A run page that tells one story (issue 49): only the remedy of the run's own failure class (a stopped,
then retried run showed the disk-space remedy's list of regenerable files), a "Copying…" line about
a checkpoint copy that clears once the run ends instead of staying forever, and a checkpoint panel that
names the newest attempt's newest checkpoint beside an older durable copy (it said "step 5" alone while
the retried attempt had trained to step 12)."""

import re

import pytest

from runs.models import RunState
from tests import factories

pytestmark = pytest.mark.django_db

REGENERABLE = [{"path": "/root/proj/cache/pip", "bytes": 10_000_000}]
PULL = {"name": "latest.pth", "step": 5, "bytes": 4096}


@pytest.fixture
def box(bob):
    return factories.box(factories.project(bob), host="203.0.113.9", user="root", state="running")


def page_of(client, bob, run) -> str:
    client.force_login(bob)
    return client.get(run.get_absolute_url()).content.decode()


@pytest.mark.parametrize(("failure_class", "shown"), [("disk_full", True), ("probabilistic", False)])
def test_the_regenerable_list_belongs_to_a_disk_full_failure_only(client, bob, box, failure_class, shown):
    run = factories.run(
        box, state=RunState.QUARANTINED, failure_class=failure_class, last_status={"regenerable": REGENERABLE}
    )
    page = page_of(client, bob, run)
    assert 'id="failure"' in page
    assert ("Largest regenerable items" in page) is shown and ("/root/proj/cache/pip" in page) is shown


@pytest.mark.parametrize(("state", "shown"), [(RunState.RUNNING, True), (RunState.QUARANTINED, False)])
def test_a_checkpoint_copy_in_progress_is_said_only_while_the_run_is_live(client, bob, box, state, shown):
    run = factories.run(box, state=state, durable_ckpt={"pull": PULL})
    page = page_of(client, bob, run)
    assert ('id="control-pull"' in page) is shown and ("Copying latest.pth of step" in page) is shown


def test_the_panel_names_the_newest_attempts_checkpoint_beside_an_older_copy(client, bob, box):
    copied = {"name": "latest.pth", "step": 5, "bytes": 4096, "at": 1000.0, "sha256": "a" * 64, "seq": 1}
    copied.update(file="000001-latest.pth", attempt=1)
    durable = {"target": "control", "seq": 1, "files": {"latest.pth": copied}}
    on_box = {"name": "latest.pth", "step": 12, "bytes": 4096, "at": 1300.0}
    mirror = {"durable": False, "local": on_box, "held": {}}
    run = factories.run(box, state=RunState.EXPORTED, attempt=2, durable_ckpt=durable, ckpt_mirror=mirror)
    page = " ".join(re.sub(r"<[^>]+>", " ", page_of(client, bob, run)).split())
    assert "Newest copy on the control host (no durable tier on the box): latest.pth of step 5 (attempt 1)," in page
    assert "Newest checkpoint on the box: latest.pth of step 12 (attempt 2), newer than its copy." in page
    # Once the copy caught up, one line says it all.
    run.ckpt_mirror = {**mirror, "local": {**on_box, "step": 5, "at": 1000.0}}
    run.durable_ckpt = {**durable, "files": {"latest.pth": {**copied, "attempt": 2}}}
    run.save()
    page = " ".join(re.sub(r"<[^>]+>", " ", page_of(client, bob, run)).split())
    assert "latest.pth of step 5 (attempt 2)," in page and "Newest checkpoint on the box" not in page


def test_an_empty_dashboard_shows_the_three_first_steps_as_links(client, admin_user, bob, box):
    """A fresh stack's first screen: project, box, run as links, each ticked once done; gone after a run."""
    client.force_login(admin_user)
    steps = client.get("/").content.decode()
    steps = steps[steps.index('id="first-steps"') :]
    steps = steps[: steps.index("</ol>")]
    assert "✓ Create a project" in steps and "✓ Register a box" in steps  # the box fixture made both
    assert re.search(r'<a\s+href="/runs/new/">Create a run and start its preflight</a>', steps)
    factories.run(box)
    assert 'id="first-steps"' not in client.get("/").content.decode()


def test_a_person_with_nothing_yet_is_shown_where_to_start(client, admin_user):
    client.force_login(admin_user)
    page = client.get("/").content.decode()
    assert re.search(r'<a\s+href="/projects/new/">Create a project</a>', page)
    assert re.search(r'<a\s+href="/instances/new/">', page)


def test_a_project_page_lists_a_live_run_older_than_a_hundred_newer_ones(client, bob, box):
    """It listed the live runs among the newest 100 only: a week-long training vanished from its
    project's page once a sweep had made 100 runs after it."""
    old = factories.run(box, state=RunState.RUNNING, title="the long one")
    factories.runs(box, 120, state=RunState.EXPORTED)
    client.force_login(bob)
    page = client.get(f"/projects/{box.project.slug}/").content.decode()
    live = page[page.index("<tbody") : page.index("</tbody>")]
    assert old.run_id in live
    recent = page[page.index("<h2>Recent runs</h2>") :]
    assert recent.count("<li>") == 20 and f'href="/runs/?project={box.project.slug}" id="all-runs"' in recent
