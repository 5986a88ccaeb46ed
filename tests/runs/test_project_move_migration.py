"""Project moved to the bottom `projects` app without losing a row or a grant: the tables keep their
names, and permissions held by users and groups follow the content type."""

import pytest

from tests.migrating import migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("migrated_copy")]

BEFORE = [("runs", "0012_membership_event"), ("profiles", "0008_remove_references")]
AFTER = [("runs", "0013_project_moves_to_projects"), ("projects", "0004_envelope_history")]  # before roles per project


@pytest.mark.parametrize("projects_type_exists", [False, True])
def test_rows_and_grants_survive_the_move(projects_type_exists):
    old = migrate(BEFORE)
    ContentType, Permission = old.get_model("contenttypes", "ContentType"), old.get_model("auth", "Permission")
    User, Group = old.get_model("auth", "User"), old.get_model("auth", "Group")
    ContentType.objects.filter(model__in=["project", "membershipevent"]).delete()  # as before the move
    runs_type = ContentType.objects.create(app_label="runs", model="project")
    approve = Permission.objects.create(content_type=runs_type, codename="approve_cost", name="May approve")
    operate = Permission.objects.create(content_type=runs_type, codename="operate", name="May operate")
    if projects_type_exists:  # post_migrate of a newer release ran before this migration (a partial upgrade)
        projects_type = ContentType.objects.create(app_label="projects", model="project")
        Permission.objects.create(content_type=projects_type, codename="approve_cost", name="May approve")
    erin = User.objects.create(username="erin")
    erin.user_permissions.add(approve)
    approvers = Group.objects.create(name="legacy-approvers")
    approvers.permissions.add(approve, operate)
    project = old.get_model("runs", "Project").objects.create(name="Vision", slug="vision")
    project.members.add(erin)
    new = migrate(AFTER)
    Permission, User = new.get_model("auth", "Permission"), new.get_model("auth", "User")
    held = {(p.content_type.app_label, p.codename) for p in User.objects.get(username="erin").user_permissions.all()}
    assert held == {("projects", "approve_cost")}
    group = new.get_model("auth", "Group").objects.get(name="legacy-approvers")
    assert {(p.content_type.app_label, p.codename) for p in group.permissions.all()} == {
        ("projects", "approve_cost"),
        ("projects", "operate"),
    }
    moved = new.get_model("projects", "Project").objects.get(slug="vision")
    assert list(moved.members.values_list("username", flat=True)) == ["erin"]
    assert not new.get_model("contenttypes", "ContentType").objects.filter(app_label="runs", model="project")
