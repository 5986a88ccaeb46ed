"""Cache cleanup is requested through an action: audited when queued, enqueued only once it commits."""

import pytest
from django.urls import reverse

from core.enqueue import send
from core.models import AuditEntry
from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(bob, carol):
    project = factories.project(name="Vision", slug="vision")
    join(project, bob, carol)
    return factories.box(name="vision-box-20261130", project=project, profile_key="runpod")


def test_an_operator_queues_a_cleanup_that_is_audited_and_enqueued_on_commit(
    client, bob, box, django_capture_on_commit_callbacks
):
    client.force_login(bob)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("instance-cache-cleanup", args=[box.pk]), follow=True)
    assert "Cache cleanup queued" in response.content.decode()
    entry = AuditEntry.objects.get(action="cache_cleanup")
    assert (entry.actor, entry.instance, entry.message) == (bob, box, f"Cache cleanup of {box.name} queued")
    # The task is sent only if the audit row commits (beside it, the box page's live "changed").
    enqueued = [c for c in callbacks if getattr(c, "func", None) is send]
    assert len(enqueued) == 1 and enqueued[0].args == ("delivery.tasks.clean_caches", box.pk)
    assert len(callbacks) == 2


def test_a_member_without_the_role_cannot_queue_one(client, carol, box):
    client.force_login(carol)
    assert client.post(reverse("instance-cache-cleanup", args=[box.pk])).status_code == 403
    assert not AuditEntry.objects.exists()
