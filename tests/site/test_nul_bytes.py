"""A NUL byte anywhere in a request is a clear 400, never a 500 (PostgreSQL refuses NUL in text)."""

import pytest
from django.urls import reverse

from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db

PAGES = [
    "/runs/?q=%00",
    "/runs/?project=%00",
    "/instances/?project=%00",
    "/audit/?instance=%00",
    "/runs/compare/?run=a%00&run=b",
    "/approvals/?x%00=1",
]


@pytest.mark.parametrize("url", PAGES)
def test_a_nul_in_a_query_is_a_400_page(client, alice, url):
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 400
    assert "NUL byte" in response.content.decode()


def test_a_nul_in_a_form_is_a_400(client, alice):

    project = factories.project(name="Nul", slug="nul")
    join(project, alice)
    client.force_login(alice)
    response = client.post(reverse("project-add-member", args=["nul"]), {"username": "bob\x00"})
    assert response.status_code == 400
    assert project.members.count() == 1


def test_the_api_answers_json_not_html(client, alice):
    client.force_login(alice)
    response = client.get("/api/runs/?q=%00")
    assert response.status_code == 400
    assert response.json() == {"error": "invalid", "detail": "A NUL byte is not allowed in a request."}
    response = client.post("/api/projects/", data='{"name": "x\\u0000"}', content_type="application/json")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
