"""Paperspace's adapter against Paperspace's published v1 document (providers/paperspace/schema.py), three
ways: our schema module agrees with the excerpt its official CLI's generated types give
(tests/provider_specs/paperspace.json, its source named there); every request the adapter sends conforms;
every field the adapter reads is one the document defines. Before: the clock was read from `dtLastRun` and a
snapshot's size from `size`, neither of which v1 defines, any 404 read as gone, and shared drives unlisted."""

import json
from pathlib import Path

import pytest

from providers import ADAPTERS, schema
from providers.paperspace import schema as ours
from providers.reading import read_state
from tests.provider_specs import typescript
from tests.providers.published import adapter_reads, disagreements

PUBLISHED = json.loads((Path(__file__).parents[1] / "provider_specs" / "paperspace.json").read_text())
OPERATIONS = PUBLISHED["operations"]
OURS_OF = {
    "MACHINE": (ours.MACHINE, "GET /machines/{id}", "200"),
    "LIST_MACHINES": (ours.LIST_MACHINES, "GET /machines", "200"),
    "STOPPED": (ours.MACHINE_EVENT, "PATCH /machines/{id}/stop", "200"),
    "DELETED": (ours.MACHINE_EVENT, "DELETE /machines/{id}", "200"),
    "LIST_PUBLIC_IPS": (ours.LIST_PUBLIC_IPS, "GET /public-ips", "200"),
    "LIST_SNAPSHOTS": (ours.LIST_SNAPSHOTS, "GET /snapshots", "200"),
    "LIST_SHARED_DRIVES": (ours.LIST_SHARED_DRIVES, "GET /shared-drives", "200"),
}


@pytest.mark.parametrize("name", sorted(OURS_OF))
def test_our_schema_module_says_what_paperspaces_published_document_says(name):
    assert PUBLISHED["source"]["repository"] == "Paperspace/cli" and PUBLISHED["source"]["commit"] == "c7bdd42"
    mine, operation, part = OURS_OF[name]
    assert disagreements(mine, OPERATIONS[operation][part], name) == []


def test_every_list_takes_the_cursor_and_the_error_is_the_documents():
    for operation in ("GET /machines", "GET /public-ips", "GET /snapshots", "GET /shared-drives"):
        query = OPERATIONS[operation]["query"]
        assert [disagreements(kind, query[key], key) for key, kind in ours.LIST_QUERY.items()] == [[], []]
        assert OPERATIONS[operation]["default"] == {"$ref": "#/components/responses/error"}
    assert disagreements(ours.ERROR, PUBLISHED["components"]["responses/error"], "ERROR") == []


def test_every_request_the_adapter_sends_is_one_the_document_defines():
    api = ADAPTERS["paperspace"].api
    documented = {f"{call.split(' ', 1)[0]} /v1{call.split(' ', 1)[1]}" for call in OPERATIONS}
    assert {f"{e.method} {e.path}" for e in api.endpoints.values()} == documented
    assert all(endpoint.body is None for endpoint in api.endpoints.values())  # no call here takes a body
    lists = {verb for verb, endpoint in api.endpoints.items() if endpoint.method == "GET" and "{" not in endpoint.path}
    assert set(api.paging.verbs) == lists
    assert api.paging.param in ours.LIST_QUERY


def test_every_field_the_adapter_reads_is_one_the_document_defines():
    api = ADAPTERS["paperspace"].api
    reads = adapter_reads(api)
    reads["list"] += [["items", 0, *field] for field in api.item_timer]
    undefined = [
        (verb, path) for verb, paths in reads.items() for path in paths if not schema.defines(ours.ANSWERS[verb], path)
    ]
    assert undefined == []
    assert schema.defines(ours.MACHINE, ["dtLastRun"]) is False  # what it read before: the check can fail
    assert schema.defines(ours.SNAPSHOT, ["size"]) is False
    assert set(api.states) == set(ours.STATE["enum"])  # every documented state is read, none guessed
    assert {listing.kind for listing in api.resources} == {"static_ip", "snapshot", "shared_drive"}


def test_only_paperspaces_own_not_found_reads_gone():
    api = ADAPTERS["paperspace"].api
    assert read_state(api, 404, {"code": "NOT_FOUND", "message": "Machine not found"}) == "gone"
    assert read_state(api, 404, {"message": "Cannot GET /v2/machines/ps-1"}) == "unknown"  # a wrong base
    assert read_state(api, 404, None) == "unknown"


def test_the_typescript_reader_reads_what_the_generator_writes_and_refuses_the_rest():
    kind = typescript.read(
        '{ readonly a: string; b?: number | null; c: readonly ("x" | "y")[]; /** @enum {x} */ d: Date;'
        ' e: Record<string, never>; f: components["responses"]["error"]; }'
    )
    assert kind == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": ["number", "null"]},
            "c": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
            "d": {"type": "string", "format": "date-time"},
            "e": {"type": "object"},
            "f": {"$ref": "#/components/responses/error"},
        },
        "required": ["a", "c", "d", "e", "f"],
    }
    with pytest.raises(ValueError, match="does not know"):
        typescript.read("{ a: Map<string, number>; }")
