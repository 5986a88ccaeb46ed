"""Lambda's adapter against Lambda's published Cloud API 1.10.0 (providers/lambdalabs/schema.py), three ways:
our schema module agrees with the document's excerpt (tests/provider_specs/lambda.json, its source named
there); every request the adapter builds conforms to it; every field the adapter reads is one it defines.
Before: `quantity` was sent (1.10.0 has none), names could pass 64 characters, the base was the deprecated one."""

import json
from pathlib import Path

import pytest

from providers import ADAPTERS, schema
from providers.lambdalabs import renting
from providers.lambdalabs import schema as ours
from providers.offers import Need, Offer
from tests.providers.published import adapter_reads, disagreements

PUBLISHED = json.loads((Path(__file__).parents[1] / "provider_specs" / "lambda.json").read_text())
OPERATIONS = PUBLISHED["operations"]
OURS_OF = {
    "LAUNCH": (ours.LAUNCH, "POST /api/v1/instance-operations/launch", "request"),
    "LAUNCHED": (ours.LAUNCHED, "POST /api/v1/instance-operations/launch", "200"),
    "TERMINATE": (ours.TERMINATE, "POST /api/v1/instance-operations/terminate", "request"),
    "TERMINATED": (ours.TERMINATED, "POST /api/v1/instance-operations/terminate", "200"),
    "SHOW_INSTANCE": (ours.SHOW_INSTANCE, "GET /api/v1/instances/{id}", "200"),
    "LIST_INSTANCES": (ours.LIST_INSTANCES, "GET /api/v1/instances", "200"),
    "INSTANCE_TYPES": (ours.INSTANCE_TYPES, "GET /api/v1/instance-types", "200"),
    "FILESYSTEMS": (ours.FILESYSTEMS, "GET /api/v1/file-systems", "200"),
    "CREATE_FILESYSTEM": (ours.CREATE_FILESYSTEM, "POST /api/v1/filesystems", "request"),
    "CREATED_FILESYSTEM": (ours.CREATED_FILESYSTEM, "POST /api/v1/filesystems", "200"),
    "SSH_KEYS": (ours.SSH_KEYS, "GET /api/v1/ssh-keys", "200"),
    "ERROR": (ours.ERROR, "GET /api/v1/instances/{id}", "404"),
}


@pytest.mark.parametrize("name", sorted(OURS_OF))
def test_our_schema_module_says_what_lambdas_published_document_says(name):
    assert PUBLISHED["source"]["version"] == "1.10.0" and PUBLISHED["source"]["commit"] == "911506f"
    assert PUBLISHED["source"]["servers"][0] == "https://cloud.lambda.ai/"
    mine, operation, part = OURS_OF[name]
    assert disagreements(mine, OPERATIONS[operation][part], name) == []


def test_every_request_the_adapter_builds_is_one_the_document_defines():
    api = ADAPTERS["lambda"].api
    offer = Offer("lambda", "gpu_1x_a100", "A100", 1, 40, 1.29, "us-east-1")
    for need in (Need(("A100",), 1, 40, 100, 2.0), Need(("A100",), 1, 40, 100, 2.0, volume="ckpt-fs")):
        create = renting.create_call(offer, need, "p-train-r1-20261207", "", "rent-key", "ssh-ed25519 AAAA")
        assert schema.problems(ours.LAUNCH, create.body) == []
    assert schema.problems(ours.TERMINATE, json.loads(json.dumps(api.endpoints["release"].body))) == []
    assert schema.problems(ours.CREATE_FILESYSTEM, renting.volume_call("ckpt-fs", 100, "us-east-1").body) == []
    assert ADAPTERS["lambda"].bases["lambda"].startswith("https://cloud.lambda.ai")
    # What 1.9 took and 1.10.0 does not: the checker names it.
    said = schema.problems(ours.LAUNCH, {**create.body, "quantity": 1, "name": "x" * 65})
    assert said == ["$.name: 65 characters, over its 64", "$: quantity is not a field the provider defines"]


def test_every_field_the_adapter_reads_is_one_the_document_defines():
    api = ADAPTERS["lambda"].api
    kind = ["data", "gpu_1x_a100"]
    reads = adapter_reads(api) | {
        "offers": [[*kind, "instance_type", key] for key in ("gpu_description", "price_cents_per_hour")]
        + [[*kind, "instance_type", "specs", "gpus"], [*kind, "regions_with_capacity_available", 0, "name"]],
        "create": [["data", "instance_ids"]],
        "create_volume": [["data", "id"]],
        "ssh_keys": [["data", 0, key] for key in ("id", "name", "public_key")],
    }
    undefined = [
        (verb, path) for verb, paths in reads.items() for path in paths if not schema.defines(ours.ANSWERS[verb], path)
    ]
    assert undefined == []
    assert schema.defines(ours.INSTANCE, ["quantity"]) is False  # the check can fail
    assert set(api.states) == set(ours.STATUS["enum"])  # every documented status is read, none guessed
