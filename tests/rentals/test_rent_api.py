"""A rent over the pages and the API: asked by an operator with the form's rules, refused with a clear 4xx
and nothing written, decided only by another approver on the page (never through the API)."""

import json

import pytest
from django.test import Client

from api.models import ApiToken
from core.models import AuditEntry
from notifications.models import Notification
from rentals.models import Rental, RentalState
from tests import factories
from tests.personas import join
from tests.provider_stub import api_credential

pytestmark = pytest.mark.django_db


def api(user) -> Client:
    _, token = ApiToken.objects.issue(user, "test")
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def body(project, **fields) -> dict:
    ssh = factories.ssh_key(project, "/keys/id_ed25519")
    key = api_credential(project)
    return {
        "project": project.slug,
        "purpose": "finetune",
        "gpu_models": ["A100", "H100"],
        "gpu_memory_gb": 40,
        "max_rate": "2.5",
        "candidates": ["lambda", "vastai"],
        "api_keys": {"lambda": key.name, "vastai": key.name},
        "ssh_key": ssh.name,
        "expected_minutes": 120,
        "acknowledge": True,
        **fields,
    }


def post(client, data):
    return client.post("/api/rentals/", data=json.dumps(data), content_type="application/json")


def test_an_operator_asks_over_the_api_and_an_approver_is_told(project, alice, bob, carol):
    answer = post(api(bob), body(project))
    assert answer.status_code == 201, answer.content
    made = answer.json()
    assert made["state"] == "requested" and made["expected_cost"] == "5.00" and made["requester"] == "bob"
    assert made["name"].startswith(f"{project.slug}-finetune-r{made['id']}-")
    assert AuditEntry.objects.filter(action="rent.asked", project=project).count() == 1
    told = Notification.objects.get(event="rent.approval")
    assert told.data["awaits_approval"] is True and told.data["asked_by"] == bob.pk

    # Approving stays a person's act on the page; the API says so (and only after it found the rent).
    assert api(alice).post(f"/api/rentals/{made['id']}/approve/").status_code == 403
    assert api(alice).post("/api/rentals/999999/approve/").status_code == 404
    listed = api(carol).get("/api/rentals/").json()
    assert [r["id"] for r in listed["results"]] == [made["id"]]


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"gpu_models": ["Z9000"]}, "gpu_models", "not a GPU model we know"),
        ({"candidates": ["vastai", "paperspace"]}, "candidates", "cannot be rented here"),
        ({"api_keys": {"vastai": "nosuch"}}, "candidates", "No provider API key for lambda"),
        ({"max_rate": "-1"}, "max_rate", ""),
        ({"ssh_key": "someone-elses"}, "ssh_credential", ""),
        ({"acknowledge": False}, "acknowledge", "read first"),
        ({"run": "nosuch-run"}, "run", "no such run"),
        ({"ssh_user": "-oProxyCommand=touch /tmp/x"}, "ssh_user", "A user name is"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field_and_writes_nothing(project, bob, fields, field, said):
    answer = post(api(bob), body(project, **fields))
    assert answer.status_code == 400, answer.content
    assert field in json.dumps(answer.json()) and said in json.dumps(answer.json())
    assert Rental.objects.count() == 0 and not AuditEntry.objects.filter(action="rent.asked").exists()


def test_a_looker_is_refused_and_an_outsider_does_not_see_the_project(project, carol, dave):
    assert post(api(carol), body(project)).status_code == 403
    assert post(api(dave), body(project)).status_code == 404
    assert Rental.objects.count() == 0


def test_the_pages_ask_and_decide_with_the_same_rules(client, project, alice, bob, erin):
    join(project, erin)
    client.force_login(bob)
    page = client.get(f"/rentals/new/?project={project.slug}")
    assert page.status_code == 200 and b"Candidate providers" in page.content
    data = body(project)
    form = {
        "purpose": "finetune",
        "gpu_models": "A100",
        "gpu_count": 1,
        "gpu_memory_gb": 40,
        "disk_gb": 80,
        "max_rate": "2.5",
        "candidates": "vastai",
        "ssh_credential": project.credentials.get(name=data["ssh_key"]).pk,
        "image": "img",
        "expected_minutes": 60,
        "key_vastai": project.credentials.get(name=data["api_keys"]["vastai"]).pk,
        "acknowledge": "on",
    }
    bad = client.post(f"/rentals/new/?project={project.slug}", {**form, "gpu_models": "A1OO"})
    assert bad.status_code == 200 and "not a GPU model we know" in bad.content.decode()
    asked = client.post(f"/rentals/new/?project={project.slug}", form)
    rental = Rental.objects.get()
    assert asked.status_code == 302 and asked["Location"] == f"/rentals/{rental.pk}/"
    assert rental.name in client.get("/").content.decode()  # the dashboard's rents in flight
    mine = client.get(f"/rentals/{rental.pk}/").content.decode()
    assert "another approver decides" in mine and "approve-rental" not in mine
    client.post(f"/rentals/{rental.pk}/decide/", {"decision": "approve"})
    assert Rental.objects.get().state == RentalState.REQUESTED  # the requester cannot

    client.force_login(alice)
    queue = client.get("/approvals/").content.decode()
    assert f"approve-rent-{rental.pk}" in queue and "$2.50" in queue
    client.post(f"/rentals/{rental.pk}/decide/", {"decision": "reject", "comment": "too much"})
    rental.refresh_from_db()
    assert rental.state == RentalState.REJECTED and rental.approver == alice and rental.comment == "too much"
    assert AuditEntry.objects.filter(action="rent.rejected", actor=alice).exists()
