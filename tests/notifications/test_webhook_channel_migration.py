"""A project's approval webhook becomes one of its channels, and comes back on the way down."""

import pytest

from tests.migrating import migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("migrated_copy")]

BEFORE = [("projects", "0005_roles_per_project"), ("notifications", "0003_budget_event")]
AFTER = [("projects", "0006_approval_webhook_is_a_channel")]


def test_the_approval_webhook_moves_to_a_channel_and_back():
    old = migrate(BEFORE)
    Project = old.get_model("projects", "Project")
    Project.objects.create(name="Vision", slug="vision", approval_webhook="https://hooks.example.org/v")
    Project.objects.create(name="Audio", slug="audio")  # none: no channel

    new = migrate(AFTER)
    channels = new.get_model("notifications", "Channel").objects.select_related("project")
    assert [(c.project.slug, c.name, c.kind, c.url, c.events) for c in channels] == [
        ("vision", "Approval webhook", "webhook", "https://hooks.example.org/v", ["teardown.requested"])
    ]

    back = migrate(BEFORE)
    projects = back.get_model("projects", "Project").objects
    assert projects.get(slug="vision").approval_webhook == "https://hooks.example.org/v"
    assert projects.get(slug="audio").approval_webhook == ""
    assert not back.get_model("notifications", "Channel").objects.exists()
