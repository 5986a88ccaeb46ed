"""vast.ai's adapter against vast.ai's published OpenAPI files (providers/vastai/schema.py), three ways: our
schema module agrees with the files' excerpt (tests/provider_specs/vastai.json, its source named there);
every request the adapter builds conforms to it; every field the adapter reads is one the files define.
Before: the search's filters sat under "q", the create sent client_id, the list was v0's one page, and the
balance was read from `credit`, none of which the files define."""

import json
from pathlib import Path

import pytest

from providers import ADAPTERS, schema
from providers.offers import Need, Offer
from providers.vastai import renting
from providers.vastai import schema as ours
from tests.providers.published import adapter_reads, disagreements

PUBLISHED = json.loads((Path(__file__).parents[1] / "provider_specs" / "vastai.json").read_text())
OPERATIONS = PUBLISHED["operations"]
# Ours → (the operation, the part of it), as each file writes it.
OURS_OF = {
    "SEARCH_OFFERS": (ours.SEARCH_OFFERS, "POST /api/v0/bundles/", "request"),
    "OFFERS": (ours.OFFERS, "POST /api/v0/bundles/", "200"),
    "CREATE_INSTANCE": (ours.CREATE_INSTANCE, "PUT /api/v0/asks/{id}/", "request"),
    "CREATED": (ours.CREATED, "PUT /api/v0/asks/{id}/", "200"),
    "LIST_INSTANCES": (ours.LIST_INSTANCES, "GET /api/v1/instances/", "200"),
    "SHOW_INSTANCE": (ours.SHOW_INSTANCE, "GET /api/v0/instances/{id}/", "200"),
    "MANAGE_INSTANCE": (ours.MANAGE_INSTANCE, "PUT /api/v0/instances/{id}/", "request"),
    "STATE_CHANGED": (ours.STATE_CHANGED, "PUT /api/v0/instances/{id}/", "200"),
    "SUCCESS": (ours.SUCCESS, "DELETE /api/v0/instances/{id}/", "200"),
    "ERROR": (ours.ERROR, "DELETE /api/v0/instances/{id}/", "404"),
    "ATTACH_SSH": (ours.ATTACH_SSH, "POST /api/v0/instances/{id}/ssh/", "request"),
    "USER": (ours.USER, "GET /api/v0/users/current/", "200"),
    "VOLUMES": (ours.VOLUMES, "GET /api/v0/volumes/", "200"),
}
# Where we knowingly say what the file does not, each named in providers/vastai/schema.py's docstring.
KNOWN = {
    "SEARCH_OFFERS": [
        "SEARCH_OFFERS.type: enum ['on-demand', 'bid', 'reserved']"
        " where the document has ['ondemand', 'bid', 'reserved']"
    ],
    # Observed, not in the file (../shared/reference/profiles/vastai.md VAST15): a destroyed instance reads null.
    "SHOW_INSTANCE": ["SHOW_INSTANCE.instances: type ['object', 'null'] where the document has ['object']"],
    # The offer rows are an open object in the file: their fields are those of its example answer (below).
    "OFFERS": [f"OFFERS.offers[].{key}: not a field the document defines" for key in ours.OFFER["properties"]],
}


@pytest.mark.parametrize("name", sorted(OURS_OF))
def test_our_schema_module_says_what_vasts_published_files_say(name):
    assert PUBLISHED["source"] == {
        "repository": "vast-ai/docs",
        "path": "api-reference/openapi/yaml",
        "commit": "c624622",
    }
    mine, operation, part = OURS_OF[name]
    assert disagreements(mine, OPERATIONS[operation][part], name) == KNOWN.get(name, [])


def test_the_offer_fields_we_read_are_in_the_files_example_answer_and_the_list_query_is_its_own():
    example = set(OPERATIONS["POST /api/v0/bundles/"]["200 example offer fields"])
    assert set(ours.OFFER["properties"]) <= example, set(ours.OFFER["properties"]) - example
    query = OPERATIONS["GET /api/v1/instances/"]["query"]
    assert set(ours.LIST_QUERY["properties"]) <= set(query) and query["limit"]["maximum"] == 25
    assert ours.LIST_QUERY["properties"]["limit"]["maximum"] == 25


NEED = Need(("RTX 4090",), 2, 24, 500, 1.0)
OFFER = Offer("vastai", "4242", "RTX 4090", 2, 24, 0.62)


def test_every_request_the_adapter_builds_is_one_the_files_define():
    api = ADAPTERS["vastai"].api
    body = renting.search_body(NEED)
    assert schema.problems(ours.SEARCH_OFFERS, body) == []
    assert body["allocated_storage"] == 500 and body["disk_space"] == {"gte": 500} and "q" not in body
    create = renting.create_call(OFFER, NEED, "p-train-r1-20261207", "pytorch/pytorch", "k", "ssh-ed25519 AAAA")
    assert (create.method, create.path) == ("PUT", "/api/v0/asks/4242/")
    assert schema.problems(ours.CREATE_INSTANCE, create.body) == [] and create.body["disk"] == 500
    assert schema.problems(ours.MANAGE_INSTANCE, api.endpoints["shutdown"].body) == []
    assert schema.problems(ours.LIST_QUERY, api.paging.first) == []
    assert api.endpoints["list"].path == "/api/v1/instances/"
    # What we sent before, the files do not define: the checker names it.
    assert schema.problems(ours.SEARCH_OFFERS, {"q": {"num_gpus": {"eq": 1}}, "type": "on-demand"}) == [
        "$: q is not a field the provider defines"
    ]
    assert schema.problems(ours.CREATE_INSTANCE, {"client_id": "me", "image": "i"}) == [
        "$: client_id is not a field the provider defines"
    ]


def test_every_field_the_adapter_reads_is_one_the_files_define():
    api = ADAPTERS["vastai"].api
    reads = adapter_reads(api) | {
        "balance": [api.balance_field],
        "offers": renting.READS,
        "create": [["success"], ["new_contract"]],
    }
    undefined = [
        (verb, path) for verb, paths in reads.items() for path in paths if not schema.defines(ours.ANSWERS[verb], path)
    ]
    assert undefined == []
    assert schema.defines(ours.USER, ["credit"]) is False  # what we read before: the check can fail
    # Every state word we read is the files' or the team's profile's; none is guessed.
    assert api.balance_field == ("balance",) and api.strip_strings is True


def test_an_offer_is_priced_for_the_disk_the_create_asks_and_its_stopped_disk_is_priced_too():
    """dph_total is the price with allocated_storage GB: asked at the run's 500 GB, the rate approved is the
    one billed; stopped, the disk bills at storage_cost $/GB/month."""
    answer = {
        "offers": [
            {
                "id": 4242,
                "gpu_name": "RTX_4090",
                "num_gpus": 2,
                "gpu_ram": 24564,
                "disk_space": 800.0,
                "direct_port_count": 12,
                "dph_total": 0.7386,
                "storage_cost": 0.15,
            }
        ]
    }
    (offer,) = renting.read_offers(answer, NEED)
    assert (offer.rate, offer.rate_stopped) == (0.7386, round(0.15 * 500 / 730, 4))
    # An offer without the disk asked or a direct port (a filter vast ignored) is not one.
    for broken in ({"disk_space": 100.0}, {"direct_port_count": 0}, {"storage_cost": "cheap"}):
        assert renting.read_offers({"offers": [{**answer["offers"][0], **broken}]}, NEED) == []
