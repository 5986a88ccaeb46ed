"""Bad input never 500s. NUL bytes once gave 500s on PostgreSQL across the pages, and the
API answered an HTML 500. Two passes: every page in the URL conf with hostile query strings, and
Schemathesis over the OpenAPI schema, both in the test command."""

import re
from urllib.parse import quote

import pytest
import schemathesis
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import checks

from api.models import ApiToken
from tests import factories

pytestmark = pytest.mark.django_db

# Every query parameter a page or the API reads, and values that broke or could break one.
KEYS = [
    "q",
    "project",
    "instance",
    "platform",
    "state",
    "custody",
    "since",
    "until",
    "after",
    "before",
    "cursor",
    "page",
    "a",
    "b",
    "run",
    "runs",
    "kind",
    "status",
    "format",
    "sort",
    "order",
    "limit",
    "actor",
    "action",
    "export",
    "next",
    "verified",
]
HOSTILE = [
    "%00",
    "a%00b",
    "%FF%FE",
    "%ED%A0%80",
    "%",
    "%zz",
    "a" * 4000,
    quote("'; DROP TABLE runs_run; --"),
    quote("<script>alert(1)</script>"),
    "-1",
    "99999999999999999999999",
    "1e309",
    "NaN",
    quote("../../etc/passwd"),
    "%0D%0AX-Injected:%20yes",
    quote("2026-13-45"),
    quote("ünïcødé"),
    "",
]


def _walk(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def page_paths(ids: dict) -> list[str]:
    """Every GET-able route of ours (the admin and sign-out aside), with real ids filled in."""
    paths = []
    for route in _walk(get_resolver().url_patterns):
        if route.startswith(("admin/", "logout/")) or "(?P<format>" in route or "<drf_format_suffix" in route:
            continue
        route = route.replace("^", "").replace("$", "").replace("\\.", ".")
        route = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: "{" + m.group(1) + "}", route)
        route = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "{" + m.group(1) + "}", route)
        if ".*" in route:
            route = route.replace(".*", "no-such-endpoint")
        paths.append("/" + route.format(**ids))
    return sorted(set(paths))


@pytest.fixture
def ids(make_run, project):
    run = make_run()
    ids = {"pk": run.instance.pk, "slug": project.slug, "run_id": run.run_id, "key": "runpod"}
    # A password reset link that is no longer valid; a batch of requests nobody filed.
    return {**ids, "uidb64": "MQ", "token": "not-a-token", "batch": "00000000-0000-4000-8000-000000000000"}


def hostile_queries():
    """Every key with NUL / invalid UTF-8 / a lone surrogate, then every hostile value on every key in turn."""
    queries = ["&".join(f"{key}={value}" for key in KEYS) for value in ("%00", "%FF%FE", "%ED%A0%80")]
    for turn in range(0, len(HOSTILE), 3):
        queries.append("&".join(f"{key}={HOSTILE[(i + turn) % len(HOSTILE)]}" for i, key in enumerate(KEYS)))
    return queries


@pytest.mark.parametrize("query", hostile_queries())
def test_every_page_survives_hostile_query_strings(client, admin_user, carol, ids, query):
    paths = page_paths(ids)
    assert len(paths) > 40, paths  # the walk found the whole URL conf
    for user in (admin_user, carol):  # sees everything; a member without a role
        client.force_login(user)
        for path in paths:
            response = client.get(f"{path}?{query}")  # an uncaught exception fails here, with its traceback
            # /health.json answers 503 while no worker reports (none runs here): that is its answer, not a fault.
            allowed = 503 if path == "/health.json" else 499
            assert response.status_code <= allowed, (user.username, path, response.status_code)
            if path.startswith("/api/") and not path.startswith("/api/docs/") and response.status_code != 302:
                assert response["Content-Type"].startswith(("application/json", "application/vnd.oai")), path


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_queries_on_random_pages_never_500(client, bob, ids, data):
    client.force_login(bob)
    path = data.draw(st.sampled_from(page_paths(ids)))
    pairs = data.draw(
        st.lists(
            st.tuples(st.sampled_from(KEYS) | st.text(max_size=8), st.sampled_from(HOSTILE) | st.text(max_size=40)),
            max_size=4,
        )
    )
    query = "&".join(f"{quote(key)}={value if value in HOSTILE else quote(value)}" for key, value in pairs)
    response = client.get(f"{path}?{query}")
    assert response.status_code <= (503 if path == "/health.json" else 499), (path, query, response.status_code)


# ---------------------------------------------------------------- the API, from its own schema


def _schema():
    raw = SchemaGenerator().get_schema(request=None, public=True)
    raw.setdefault("servers", [{"url": "/"}])
    return schemathesis.openapi.from_dict(raw)


schema = _schema()
CONFORMANCE = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


@pytest.fixture
def token(live_server, bob, project):
    factories.box(name=f"{project.slug}-pod-20261130", project=project, profile_key="runpod")
    _, value = ApiToken.objects.issue(bob, "fuzz")
    return value


@pytest.mark.django_db(transaction=True)
@schema.parametrize()
# The generated phase only: Schemathesis's coverage phase adds hundreds of explicit cases (a minute more).
@settings(
    max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), phases=[Phase.generate]
)
def test_the_api_answers_every_generated_request_as_its_schema_says(case, token, live_server):
    """No 5xx, JSON, and every answer conforms to the schema: its status documented for the operation
    (errors included), its body the documented shape (a generated client breaks on anything else)."""
    response = case.call(base_url=live_server.url, headers={"Authorization": f"Token {token}"})
    assert response.status_code < 500, (case.method, case.formatted_path, response.status_code, response.text[:300])
    if response.status_code != 204:
        content_type = {k.lower(): v for k, v in response.headers.items()}["content-type"][0]
        assert content_type.startswith("application/json"), (case.formatted_path, content_type)
    case.validate_response(response, checks=CONFORMANCE)
