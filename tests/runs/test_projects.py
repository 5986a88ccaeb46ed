"""Projects: operators create them, others may not; bad input gets a form error and saves nothing."""

import pytest
from django.urls import reverse

from core.models import AuditEntry
from projects.models import Project
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(bob):
    """bob operates in a project already: an operator of some project (or an admin) starts another."""
    factories.project(bob, name="Lab", slug="lab")
    return bob


def test_operator_creates_a_project_and_sees_it_on_the_dashboard(client, bob):
    client.force_login(bob)
    response = client.post(
        reverse("project-create"), {"name": "Vision", "slug": "vision", "description": "ViT ablations"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/projects/vision/"
    page = client.get("/").content.decode()
    assert "Vision" in page
    assert client.get("/projects/vision/").status_code == 200
    # Its creator is its operator, not its approver: approvers are an admin's to grant.
    bob = type(bob).objects.get(pk=bob.pk)
    vision = Project.objects.get(slug="vision")
    assert bob.has_perm("projects.operate", vision) and not bob.has_perm("projects.approve_cost", vision)
    assert AuditEntry.objects.get(project=vision, action="role.granted").data == {"role": "operator"}


def test_user_without_role_cannot_create_a_project(client, charlie):
    factories.project(charlie, name="Lab", slug="lab")  # a member with no role anywhere
    client.force_login(charlie)
    assert client.get(reverse("project-create")).status_code == 403
    response = client.post(reverse("project-create"), {"name": "X", "slug": "x"})
    assert response.status_code == 403
    assert not Project.objects.filter(slug="x").exists()


def test_dashboard_hides_new_project_button_from_user_without_role(client, charlie):
    client.force_login(charlie)
    assert "New project" not in client.get("/").content.decode()


@pytest.mark.parametrize(
    ("slug", "error"),
    [
        ("Vision_2", "lowercase letters, digits and hyphens"),
        ("has space", "Enter a valid “slug”"),
        ("", "This field is required"),
    ],
)
def test_bad_slug_gets_a_form_error_and_saves_nothing(client, bob, slug, error):
    client.force_login(bob)
    response = client.post(reverse("project-create"), {"name": "Vision", "slug": slug})
    assert response.status_code == 200
    assert error in response.content.decode()
    assert list(Project.objects.values_list("slug", flat=True)) == ["lab"]


def test_duplicate_slug_is_refused(client, bob):
    factories.project(name="Vision", slug="vision")
    client.force_login(bob)
    response = client.post(reverse("project-create"), {"name": "Vision again", "slug": "vision"})
    assert response.status_code == 200
    assert "Project with this Slug already exists" in response.content.decode()
    assert Project.objects.filter(name__startswith="Vision").count() == 1


def test_unknown_project_is_404_not_500(client, charlie):
    client.force_login(charlie)
    assert client.get("/projects/nope/").status_code == 404


def test_membership_changes_are_audited_actions(client, bob, alice, charlie):
    """Adding a member once changed access with no action and no record of who did it."""
    client.force_login(bob)
    client.post(reverse("project-create"), {"name": "Vision", "slug": "vision"})
    project = Project.objects.get(slug="vision")
    client.post(reverse("project-add-member", args=["vision"]), {"username": "charlie"})
    client.post(reverse("project-add-member", args=["vision"]), {"username": "charlie"})  # no second event
    response = client.post(reverse("project-add-member", args=["vision"]), {"username": "nobody"}, follow=True)
    assert "No active user named “nobody”" in response.content.decode()
    client.post(reverse("project-remove-member", args=["vision"]), {"username": "charlie"})
    members = AuditEntry.objects.filter(project=project, action__startswith="member.").order_by("at", "id")
    history = list(members.values_list("subject__username", "action", "actor__username"))
    assert history == [
        ("bob", "member.added", "bob"),
        ("charlie", "member.added", "bob"),
        ("charlie", "member.removed", "bob"),
    ]
    assert set(project.members.values_list("username", flat=True)) == {"bob"}
    page = client.get("/projects/vision/").content.decode()
    assert "bob · charlie removed from vision" in " ".join(page.split())


def test_a_member_without_the_role_cannot_change_membership(client, bob, carol):
    project = factories.project(bob, carol, name="Vision", slug="vision")
    client.force_login(carol)
    assert client.post(reverse("project-remove-member", args=["vision"]), {"username": "bob"}).status_code == 403
    assert client.post(reverse("project-add-member", args=["vision"]), {"username": "carol"}).status_code == 403
    assert set(project.members.values_list("username", flat=True)) == {"bob", "carol"}
    assert not AuditEntry.objects.filter(action__startswith="member.").exists()


def test_membership_history_is_append_only(bob):
    project = factories.project(name="Vision", slug="vision")
    from projects.membership import do_add_member

    event = do_add_member(project.pk, "bob", actor=bob)
    with pytest.raises(ValueError, match="append-only"):
        event.save()
