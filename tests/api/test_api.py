"""The automation API: tokens, membership, the human-only approval, and bad input → 4xx JSON."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from api.models import ApiToken
from delivery.models import TeardownRequest
from delivery.tasks import prove_teardown
from runs.models import Run
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def instance(box_row):
    """Forms and answers: the box is a row these tests never reach (no sshd)."""
    return box_row


def api(user) -> tuple[Client, str]:
    _, token = ApiToken.objects.issue(user, "test")
    return Client(HTTP_AUTHORIZATION=f"Token {token}"), token


def post(client, path, body, **extra):
    return client.post(path, data=json.dumps(body), content_type="application/json", **extra)


@pytest.fixture
def pod(project):
    return factories.box(name=f"{project.slug}-pod-20261129", project=project, profile_key="runpod")


def test_tokens_are_stored_hashed_and_revocable(bob):
    row, token = ApiToken.objects.issue(bob, "ci")
    assert token not in (row.key_sha256, row.prefix) and token.startswith(row.prefix)
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/projects/").status_code == 200
    row.revoked = True
    row.save()
    response = client.get("/api/projects/")
    assert response.status_code == 401 and response.json()["error"] == "authentication_failed"
    assert Client().get("/api/runs/").status_code == 401  # no redirect to a login page


def test_an_api_approval_is_refused_even_for_an_approver(alice, bob, pod):
    created = post(api(bob)[0], "/api/teardown/", {"instance": pod.name, "kind": "release", "reason": "finished"})
    assert created.status_code == 201 and (created.json()["level"], created.json()["status"]) == ("L3", "checking")
    request_id = created.json()["id"]
    assert prove_teardown(request_id) == "pending"  # what the enqueued task does: the box's proofs, then judged
    for user in (alice, bob):
        response = post(api(user)[0], f"/api/teardown/{request_id}/approve/", {})
        assert response.status_code == 403 and "Approval stays human" in response.json()["detail"]
    assert TeardownRequest.objects.get(pk=request_id).status == "pending"
    # A shutdown needs the box to say it is idle; an unreachable box is a clear refusal, not a 500.
    filed = post(api(bob)[0], "/api/teardown/", {"instance": pod.name, "kind": "shutdown", "reason": "night"})
    assert filed.status_code == 201 and prove_teardown(filed.json()["id"]) == "refused"
    shown = api(bob)[0].get(f"/api/teardown/{filed.json()['id']}/").json()
    assert shown["status"] == "refused" and "could not confirm the box is idle" in shown["failure"]


def test_outsiders_see_nothing_through_the_api(charlie, bob, project, make_run):
    run = make_run()
    outsider, _ = api(charlie)
    assert outsider.get("/api/runs/").json()["results"] == []
    assert outsider.get(f"/api/runs/{run.run_id}/").status_code == 404
    assert outsider.get("/api/projects/").json() == []
    member, _ = api(bob)
    assert [r["run_id"] for r in member.get("/api/runs/").json()["results"]] == [run.run_id]
    assert member.get(f"/api/runs/{run.run_id}/events/").json()["state"] == "draft"


GOOD = {"project": "PROJECT", "instance": "INSTANCE", "source_kind": "local_dir", "source_path": "/x"}
BAD_RUN_BODIES = [
    [],
    "text",
    {"project": 5},
    {**GOOD, "project": "nope", "command": ["t"], "config_path": "c"},
    {**GOOD, "command": "not a list", "config_path": "c"},
    {**GOOD, "command": ["t"], "config_path": "../../etc/passwd"},
    {**GOOD, "source_kind": "weird", "command": ["t"], "config_path": "c", "gpus": [-1]},
]


@pytest.mark.parametrize("body", BAD_RUN_BODIES)
def test_bad_run_input_is_a_4xx_json_error(bob, project, instance, body):
    client, _ = api(bob)
    if isinstance(body, dict):
        names = {"PROJECT": project.slug, "INSTANCE": instance.name}
        body = {k: names.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    response = post(client, "/api/runs/", body)
    assert 400 <= response.status_code < 500, response.content
    assert response["Content-Type"] == "application/json" and "error" in response.json()


SAME_RULES = [
    ("config_path", {"config_path": "../secrets.yaml"}, {"config_path": "../secrets.yaml"}),
    ("data_paths", {"data_paths": ["relative/data"]}, {"data_paths_text": "relative/data"}),
    ("environment", {"environment": "-c import os"}, {"environment": "-c import os"}),
    ("gpus", {"gpus": [1, 1]}, {"gpus_text": "1,1"}),
    ("manifest_path", {"manifest_path": "/data/../x"}, {"manifest_path": "/data/../x"}),
    ("command", {"command": ["python3", "a\nb"]}, {"command_line": "python3 'a\nb'"}),
    ("secrets", {"secrets": ["no-such-secret"]}, {"secrets_text": "no-such-secret"}),
    ("secrets", {"secrets": ["a;b"]}, {"secrets_text": "a;b"}),
    ("trainer_files", {"trainer_files": {"metrics": "../log.csv"}}, {"trainer_files_text": "metrics: ../log.csv"}),
    ("trainer_files", {"trainer_files": "log_pattern: (unclosed"}, {"trainer_files_text": "log_pattern: (unclosed"}),
]


def run_bodies(project, instance, source) -> tuple[dict, dict]:
    """A valid new run, as the API takes it and as the form posts it."""
    api_body = {
        "project": project.slug,
        "instance": instance.name,
        "source_kind": "local_dir",
        "source_path": str(source),
        "command": ["python3", "train.py"],
        "config_path": "config.yaml",
    }
    form_body = {
        "project": project.pk,
        "instance": instance.pk,
        "source_kind": "local_dir",
        "source_path": str(source),
        "command_line": "python3 train.py",
        "config_path": "config.yaml",
        "expected_minutes": 5,
        "checkpoint_mib": 1,
        "scratch_mib": 0,
        "checkpoints_retained": 2,
        "expected_files": 10,
    }
    return api_body, form_body


@pytest.mark.parametrize(("field", "api_body", "form_body"), SAME_RULES)
def test_the_api_and_the_form_refuse_with_the_same_rule_and_words(
    client, bob, project, instance, source, field, api_body, form_body
):
    """One set of validators (runs/validation.py): the API no longer turns its JSON back into form text."""
    base_api, base_form = run_bodies(project, instance, source)
    api_client, _ = api(bob)
    answer = post(api_client, "/api/runs/", {**base_api, **api_body})
    assert answer.status_code == 400, answer.content
    api_words = " ".join(str(message) for message in answer.json()["detail"][field])
    client.force_login(bob)
    page = client.post(reverse("run-create"), {**base_form, **form_body})
    form_field = next(iter(form_body))
    form_words = " ".join(page.context["form"].errors[form_field])
    assert api_words == form_words and api_words
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/api/runs/no-such-run/", None),
        ("get", "/api/runs/no-such-run/events/", None),
        ("get", "/api/runs/RUN/events/?after=abc", None),
        ("post", "/api/runs/no-such-run/launch/", {}),
        ("get", "/api/custody/999999/", None),
        ("get", "/api/teardown/999999/", None),
        ("post", "/api/teardown/", {"instance": "nope", "kind": "release", "reason": "x"}),
        ("post", "/api/teardown/", {"instance": "INSTANCE", "kind": "explode", "reason": "x"}),
        ("post", "/api/teardown/", {"instance": "INSTANCE", "kind": "release"}),
        ("post", "/api/teardown/999999/approve/", {}),
        ("get", "/api/no/such/endpoint/", None),
        ("post", "/api/runs/", "OVERSIZED"),
        ("get", "/api/runs/?cursor=not-a-cursor", None),
    ],
)
def test_every_endpoint_answers_bad_input_with_4xx_json(bob, project, instance, make_run, method, path, body):
    run = make_run()
    client, _ = api(bob)
    path = path.replace("RUN", run.run_id)
    if body == "OVERSIZED":
        response = client.post(path, data="[" + "1," * 300_000 + "1]", content_type="application/json")
    elif method == "post":
        body = {k: instance.name if v == "INSTANCE" else v for k, v in body.items()}
        response = post(client, path, body)
    else:
        response = client.get(path)
    assert 400 <= response.status_code < 500, (path, response.status_code, response.content[:300])
    assert "error" in response.json()


def test_the_schema_is_published(bob):
    client, _ = api(bob)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    text = schema.content.decode()
    assert "/api/runs/{run_id}/launch/" in text and "/api/teardown/" in text
    assert "/api/runs/{run_id}/stop/" in text and "/api/sweeps/" in text
    assert "tokenAuth" in text and "Authorization: Token <token>" in text  # the docs say how to authenticate


def test_the_schema_and_the_docs_need_sign_in(client, bob):
    anonymous = client.get("/api/schema/")
    assert anonymous.status_code in (401, 403) and "detail" in anonymous.json()
    assert client.get("/api/docs/").status_code == 302  # to the sign-in page
    client.force_login(bob)
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"vendor/redoc/redoc.standalone.js" in docs.content
    assert b"cdn" not in docs.content.lower() and b"<script>" not in docs.content  # self-hosted, no inline script


def test_operators_only_create(carol, project):
    client, _ = api(carol)  # a member without the operator role
    response = post(client, "/api/runs/", {"project": project.slug})
    assert response.status_code == 403 and "operator role" in response.json()["detail"]
