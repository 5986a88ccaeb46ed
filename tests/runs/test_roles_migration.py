"""Global roles become roles per project: every member of the old groups holds that role
in every project they are a member of, and in no other; the groups go; the way back restores them."""

import pytest

from tests.migrating import migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("migrated_copy")]

BEFORE = [("projects", "0004_envelope_history")]
AFTER = [("projects", "0005_roles_per_project")]


def test_global_roles_move_onto_every_membership_and_back():
    old = migrate(BEFORE)
    Permission, Group = old.get_model("auth", "Permission"), old.get_model("auth", "Group")
    User, Project = old.get_model("auth", "User"), old.get_model("projects", "Project")
    grant = {p.codename: p for p in Permission.objects.filter(content_type__app_label="projects")}
    operators, _ = Group.objects.get_or_create(name="operators")  # the way back (at set-up) made it
    operators.permissions.add(grant["operate"], grant["add_project"], grant["change_project"])
    approvers, _ = Group.objects.get_or_create(name="approvers")
    approvers.permissions.add(grant["approve_cost"])
    olga, paul, quinn, rita = (User.objects.create(username=name) for name in ("olga", "paul", "quinn", "rita"))
    olga.groups.add(operators)
    paul.groups.add(approvers)
    quinn.user_permissions.add(grant["approve_cost"])  # granted directly, not through a group
    vision = Project.objects.create(name="Vision", slug="vision")
    audio = Project.objects.create(name="Audio", slug="audio")
    Project.objects.create(name="Empty", slug="empty")
    vision.members.add(olga, paul, rita)
    audio.members.add(paul, quinn)

    new = migrate(AFTER)
    Membership = new.get_model("projects", "Membership")
    held = {
        (m.project.slug, m.user.username): (m.operator, m.approver)
        for m in Membership.objects.select_related("project", "user")
    }
    assert held == {
        ("vision", "olga"): (True, False),
        ("vision", "paul"): (False, True),
        ("vision", "rita"): (False, False),
        ("audio", "paul"): (False, True),
        ("audio", "quinn"): (False, True),
    }
    assert not new.get_model("auth", "Group").objects.filter(name__in=["operators", "approvers"]).exists()
    assert not new.get_model("auth", "User").objects.get(username="quinn").user_permissions.exists()

    back = migrate(BEFORE)
    groups = back.get_model("auth", "Group").objects
    assert set(groups.get(name="operators").user_set.values_list("username", flat=True)) == {"olga"}
    assert set(groups.get(name="approvers").user_set.values_list("username", flat=True)) == {"paul", "quinn"}
    assert set(
        back.get_model("projects", "Project").objects.get(slug="audio").members.values_list("username", flat=True)
    ) == {"paul", "quinn"}
