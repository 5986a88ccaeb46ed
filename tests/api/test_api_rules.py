"""The API keeps the pages' rules and answers every refusal in JSON, at the lowest level that catches it
(no box, no worker). Found from outside with a schema-driven fuzzer: evidence deletion with a location
that is not a choice, with none, or with no run answered 500 (ValueError in delivery/checks.py,
AttributeError in delivery/evidence.py); shutdown and release requests stored junk locations; a sweep
cell with a character outside the BMP crashed the renderer; launch took any body, even `false`; an
unrouted POST under /api/ answered Django's HTML CSRF page; 404 bodies said "error": "error"; an
illegal state change was a 400 where 409 is the convention."""

import json

import pytest
from django.test import Client

from api.models import ApiToken
from delivery.models import TeardownRequest
from runs import sweeps
from runs.models import Run, RunState
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def box(alice, bob, carol):
    return factories.box(factories.project(alice, bob, carol))


@pytest.fixture
def client(bob) -> Client:
    _, token = ApiToken.objects.issue(bob, "test")
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def post(client, path, body):
    return client.post(path, data=body if isinstance(body, str) else json.dumps(body), content_type="application/json")


def refused(response, status: int) -> dict:
    assert response.status_code == status, response.content[:400]
    assert response["Content-Type"].startswith("application/json")
    return response.json()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"location": "attic"}, "location"),
        ({"location": "\x01node"}, "location"),
        ({"location": ""}, "non_field_errors"),
        ({"run": ""}, "non_field_errors"),
        ({"run": "not-a-run"}, "run"),
    ],
)
def test_an_evidence_deletion_the_page_would_refuse_is_a_400_naming_the_field(client, box, change, field):
    run = factories.run(box, state=RunState.EXPORTED)
    body = {"instance": box.name, "kind": "delete_evidence", "reason": "space", "run": run.run_id, "location": "node"}
    answer = refused(post(client, "/api/teardown/", {**body, **change}), 400)
    assert answer["error"] == "invalid" and field in answer["detail"], answer
    assert not TeardownRequest.objects.exists()


def test_a_shutdown_never_stores_a_junk_location(client, box):
    body = {"instance": box.name, "kind": "shutdown", "reason": "done", "location": "\x07\x1b[2J"}
    refused(post(client, "/api/teardown/", body), 400)
    assert not TeardownRequest.objects.exists()


def test_a_resource_deletion_names_a_resource_like_the_page(client, box):
    answer = refused(
        post(client, "/api/teardown/", {"instance": box.name, "kind": "delete_resource", "reason": "x"}), 400
    )
    assert "resource" in json.dumps(answer["detail"]).lower()


@pytest.mark.parametrize("body", ["false", "0", '"go"', '{"gpus": 8}', "[1]"])
def test_a_verb_that_takes_no_body_refuses_one_that_says_something(client, box, body):
    run = factories.run(box)
    for verb in ("launch", "stop", "retry", "verify"):
        answer = refused(post(client, f"/api/runs/{run.run_id}/{verb}/", body), 400)
        assert "takes no body" in json.dumps(answer)
    run.refresh_from_db()
    assert run.state == RunState.DRAFT


@pytest.mark.parametrize("verb", ["stop", "retry", "verify"])
def test_a_verb_the_state_refuses_is_a_409_conflict(client, box, verb):
    run = factories.run(box)
    answer = refused(post(client, f"/api/runs/{run.run_id}/{verb}/", {}), 409)
    assert answer["error"] == "conflict" and answer["detail"]
    assert Run.objects.get(pk=run.pk).state == RunState.DRAFT


def test_a_404_says_not_found(client):
    assert refused(client.get("/api/runs/no-such-run/"), 404)["error"] == "not_found"
    assert refused(client.get("/api/teardown/999999/"), 404)["error"] == "not_found"


def test_an_unrouted_post_by_a_browser_session_is_a_json_404_not_the_csrf_page(bob):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(bob)
    assert refused(browser.post("/api/no/such/endpoint/", {"x": "1"}), 404)["error"] == "not_found"
    # A real route without the CSRF token is refused in JSON too.
    assert refused(browser.post("/api/teardown/", {"x": "1"}), 403)["error"] == "forbidden"


@pytest.mark.parametrize("text", ['"\\ud800"', '{"name": "a\\udfffb"}', '{"\\udc00": 1}'])
def test_a_lone_surrogate_anywhere_in_a_body_is_a_400(client, box, text):
    refused(post(client, "/api/sweeps/", text), 400)
    refused(post(client, "/api/runs/", text), 400)


def test_sweep_cells_outside_the_bmp_are_whole_text_or_refused_never_halves():
    base = {"lr": 0.1, "tag": "a"}
    # What the API hands the sweep form: json.dumps escapes 😀 as a surrogate pair, which YAML reads as
    # two lone halves.
    cells = sweeps.parse_cells(json.dumps([{"tag": "😀𝔘"}]), base)
    assert cells == [{"tag": "😀𝔘"}]
    json.dumps(cells, ensure_ascii=False).encode()  # storable and renderable
    with pytest.raises(sweeps.SweepError, match="unknown config key"):
        sweeps.parse_cells(json.dumps([{"😀": 1}]), base)
    with pytest.raises(sweeps.SweepError, match="lone surrogate"):
        sweeps.parse_cells('[{"tag": "\\ud800"}]', base)
    with pytest.raises(sweeps.SweepError, match="lone surrogate"):
        sweeps.parse_overrides('{"tag": "\\udfff"}', base)
