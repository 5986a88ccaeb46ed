"""Each answer the outside found undocumented, checked against the published schema with Schemathesis's
own validator: a generated client broke on them. Launch/stop/retry/verify answer 202 (documented 200);
`events`, `log`, `custody` and `verify` were documented as a Run; nullable fields (a teardown's run and
approver, a dataset's source box, a rent's approver) were required strings; no error status was
documented anywhere (a 409, a 404's body)."""

import pytest
import requests
import schemathesis
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from api.models import ApiToken
from datasets.models import Dataset, DatasetSource, DatasetState
from delivery.models import TeardownKind
from runs.models import RunState
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def schema():
    return schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))


@pytest.fixture
def world(alice, bob, live_server):
    project = factories.project(alice, bob)
    box = factories.box(project, "runpod")
    _, token = ApiToken.objects.issue(bob, "conformance")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    return {"project": project, "box": box, "bob": bob, "session": session, "url": live_server.url}


def conforms(schema, world, method: str, template: str, path: str, status: int, **body):
    response = world["session"].request(method, world["url"] + path, **({"json": body} if body else {}))
    assert response.status_code == status, (path, response.status_code, response.text[:300])
    schema[template][method.upper()].validate_response(response)  # raises on an undocumented status or shape
    return response.json()


def test_nullable_fields_are_documented_as_nullable(schema, world):
    request = factories.teardown_request(
        world["box"], world["bob"], TeardownKind.SHUTDOWN, reason="pause", level="L2", expires_at=timezone.now()
    )
    answer = conforms(schema, world, "get", "/api/teardown/{id}/", f"/api/teardown/{request.pk}/", 200)
    assert answer["run"] is None and answer["approver"] is None
    dataset = Dataset.objects.create(
        project=world["project"],
        name="imagenet-mini",
        source_kind=DatasetSource.CONTROL,
        source_path="/data/x",
        state=DatasetState.READY,
    )
    answer = conforms(schema, world, "get", "/api/datasets/{id}/", f"/api/datasets/{dataset.pk}/", 200)
    assert answer["source_instance"] is None


def test_run_verbs_and_reads_answer_what_the_schema_says(schema, world):
    run = factories.run(world["box"], source_kind="local_dir")
    run_id = run.run_id
    conforms(schema, world, "get", "/api/runs/{run_id}/events/", f"/api/runs/{run_id}/events/", 200)
    conforms(schema, world, "get", "/api/runs/{run_id}/log/", f"/api/runs/{run_id}/log/", 200)
    conforms(schema, world, "get", "/api/runs/{run_id}/custody/", f"/api/runs/{run_id}/custody/", 404)
    conforms(schema, world, "post", "/api/runs/{run_id}/stop/", f"/api/runs/{run_id}/stop/", 409)
    conforms(schema, world, "post", "/api/runs/{run_id}/verify/", f"/api/runs/{run_id}/verify/", 409)
    type(run).objects.filter(pk=run.pk).update(state=RunState.EXPORTED)
    conforms(schema, world, "post", "/api/runs/{run_id}/verify/", f"/api/runs/{run_id}/verify/", 202)
    conforms(schema, world, "get", "/api/runs/", "/api/runs/?state=exported&custody=none&since=2026-01-01", 200)


def test_the_history_filters_of_the_run_list_are_documented(schema):
    names = {parameter.name for parameter in schema["/api/runs/"]["GET"].query}
    assert {"project", "instance", "platform", "state", "custody", "since", "until", "q", "cursor"} <= names


def test_verbs_that_take_nothing_document_no_body_and_creates_document_what_they_answer(schema):
    for verb in ("launch", "stop", "retry", "verify"):
        raw = schema[f"/api/runs/{{run_id}}/{verb}/"]["POST"].definition.raw
        assert "requestBody" not in raw and "202" in raw["responses"] and "200" not in raw["responses"], verb
    created = schema["/api/teardown/"]["POST"].definition.raw["responses"]["201"]
    assert created["content"]["application/json"]["schema"]["$ref"].endswith("/Teardown")
