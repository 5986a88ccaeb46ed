"""Projects: operators create them, others may not; bad input gets a form error and saves nothing."""

import pytest
from django.urls import reverse

from runs.models import Project

pytestmark = pytest.mark.django_db


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


def test_user_without_role_cannot_create_a_project(client, charlie):
    client.force_login(charlie)
    assert client.get(reverse("project-create")).status_code == 403
    response = client.post(reverse("project-create"), {"name": "X", "slug": "x"})
    assert response.status_code == 403
    assert not Project.objects.exists()


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
    assert not Project.objects.exists()


def test_duplicate_slug_is_refused(client, bob):
    Project.objects.create(name="Vision", slug="vision")
    client.force_login(bob)
    response = client.post(reverse("project-create"), {"name": "Vision again", "slug": "vision"})
    assert response.status_code == 200
    assert "Project with this Slug already exists" in response.content.decode()
    assert Project.objects.count() == 1


def test_unknown_project_is_404_not_500(client, charlie):
    client.force_login(charlie)
    assert client.get("/projects/nope/").status_code == 404
