"""A release that "needs a person" (its execution's outcome unknown: a worker vanished mid-call, the
provider still lists the box) showed on no dashboard count and in no approval queue: nobody was told
to settle it. It is now a dashboard tile and a section of the approval queue, for its project only."""

import pytest
from django.urls import reverse

from console.dashboard import tiles_for
from delivery.models import TeardownStatus
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def stuck(alice, bob):
    box = factories.box(factories.project(alice, bob), "runpod")
    return factories.teardown_request(
        box,
        bob,
        approver=alice,
        status=TeardownStatus.NEEDS_ATTENTION,
        failure="The provider still lists the box 120 s after its release was answered.",
    )


def needs_person(user) -> int:
    return next(tile for tile in tiles_for(user) if tile.label == "Needs a person").value


def test_a_release_that_needs_a_person_is_counted_and_queued_for_its_project(client, alice, bob, erin, stuck):
    assert needs_person(alice) == needs_person(bob) == 1
    assert needs_person(erin) == 0  # another project's member is told nothing of it
    client.force_login(alice)
    queue = client.get(reverse("approval-queue")).content.decode()
    section = queue.split('id="needs-person"', 1)[1].split('id="spending"', 1)[0]
    assert f'id="attention-{stuck.pk}"' in section and "still lists the box" in section and "Settle it" in section
    dashboard = client.get("/").content.decode()
    assert "Needs a person" in dashboard
    client.force_login(erin)
    assert f'id="attention-{stuck.pk}"' not in client.get(reverse("approval-queue")).content.decode()


def test_a_settled_request_leaves_the_count(alice, stuck):
    stuck.status = TeardownStatus.DONE
    stuck.save()
    assert needs_person(alice) == 0
