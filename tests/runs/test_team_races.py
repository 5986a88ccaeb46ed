"""Two admins changing one person's roles at once, on PostgreSQL: both changes are decided one after
the other (the person's row is locked), neither is lost to the other's stale read, and the audit log
replayed from the start gives exactly the roles the database holds."""

import pytest
from django.contrib.auth import get_user_model

from core.models import AuditEntry
from projects.models import Membership
from projects.team import do_set_roles
from tests import factories
from tests.racing import at_once

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_role_changes_are_serialised_and_the_log_replays_to_the_state(admin_user, bob):
    other_admin = get_user_model().objects.create_superuser("root2", "root2@example.org", "root2-pass-1234")
    vision, audio = factories.project(bob), factories.project(bob)
    Membership.objects.filter(user=bob).update(operator=False, approver=False)

    for _ in range(5):  # a few rounds: the threads meet in another order each time
        before = set(AuditEntry.objects.values_list("pk", flat=True))
        outcomes = at_once(
            lambda: do_set_roles(bob.pk, False, {vision.pk: {"operator"}, audio.pk: {"approver"}}, actor=admin_user),
            lambda: do_set_roles(bob.pk, False, {vision.pk: {"approver"}, audio.pk: set()}, actor=other_admin),
        )
        assert len(outcomes) == 2 and all(isinstance(outcome, list) for outcome in outcomes), outcomes
        held = {m.project_id: m.roles() for m in Membership.objects.filter(user=bob)}
        assert held in (
            {vision.pk: {"operator"}, audio.pk: {"approver"}},
            {vision.pk: {"approver"}, audio.pk: set()},
        )  # one whole change or the other, never a mix of the two
        new = AuditEntry.objects.exclude(pk__in=before).filter(subject=bob).order_by("pk")
        assert new.exists()

    replayed = {vision.pk: set(), audio.pk: set()}
    for entry in AuditEntry.objects.filter(subject=bob, action__startswith="role.").order_by("pk"):
        roles = replayed[entry.project_id]
        (roles.add if entry.action == "role.granted" else roles.discard)(entry.data["role"])
    assert replayed == {m.project_id: m.roles() for m in Membership.objects.filter(user=bob)}
