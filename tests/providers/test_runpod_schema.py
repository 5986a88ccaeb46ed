"""RunPod's adapter against RunPod's published REST v2 document (providers/runpod/schema.py), three ways:
our schema module agrees with the document's excerpt (tests/provider_specs/runpod.json, its source named
there); every request the adapter builds conforms to it (v2 refuses a field it does not define); every
field the adapter reads is one it defines. Before: every call was REST v1's, retired on 2026-11-15."""

import json
from pathlib import Path

import pytest

from providers import ADAPTERS, schema
from providers.offers import Need, Offer
from providers.runpod import renting
from providers.runpod import schema as ours
from tests.providers.published import adapter_reads, disagreements

PUBLISHED = json.loads((Path(__file__).parents[1] / "provider_specs" / "runpod.json").read_text())
OURS_OF = {
    "Pod": ours.POD,
    "ListPodsResponse": ours.LIST_PODS,
    "CreatePodRequest": ours.CREATE_POD,
    "PodActionRequest": ours.POD_ACTION_REQUEST,
    "NetworkVolume": ours.NETWORK_VOLUME,
    "ListNetworkVolumesResponse": ours.LIST_NETWORK_VOLUMES,
    "CreateNetworkVolumeRequest": ours.CREATE_NETWORK_VOLUME,
    "GpuType": ours.GPU_TYPE,
    "ListGpuTypesResponse": ours.LIST_GPU_TYPES,
    "ErrorResponse": ours.ERROR,
}


@pytest.mark.parametrize("name", sorted(OURS_OF))
def test_our_schema_module_says_what_runpods_published_document_says(name):
    assert PUBLISHED["source"] == {
        "repository": "runpod/docs",
        "path": "api-reference-v2/openapi.json",
        "commit": "a900806",
        "version": "2.0.0",
        "servers": ["https://api.runpod.io"],
    }
    assert disagreements(OURS_OF[name], PUBLISHED["components"][name], name) == []


def test_the_checker_finds_a_field_an_enum_and_a_required_set_the_document_does_not_have():
    """So the comparison above can fail: v1's names and values against v2's document."""
    v1_pod = schema.open_object({"id": ours.STRING, "desiredStatus": ours.STRING, "costPerHr": ours.NUMBER}, ["id"])
    said = disagreements(v1_pod, PUBLISHED["components"]["Pod"], "Pod")
    assert "Pod.desiredStatus: not a field the document defines" in said and "Pod.costPerHr: not a field" in " ".join(
        said
    )
    assert any(line.startswith("Pod: required ['id']") for line in said)
    stock = {"type": "string", "enum": ["High", "Medium", "Low"]}  # GraphQL's stockStatus, without its None
    assert disagreements(stock, PUBLISHED["components"]["GpuType"]["properties"]["availability"], "availability")


NEED = Need(("RTX 4090",), 2, 24, 80, 1.0, region="EU-RO-1", volume="nv_abc")
OFFER = Offer("runpod", "NVIDIA GeForce RTX 4090", "RTX 4090", 2, 24, 0.88, "EU-RO-1")


def test_every_request_the_adapter_builds_is_one_v2_accepts():
    api = ADAPTERS["runpod"].api
    for need in (NEED, Need(("RTX 4090",), 1, 24, 40, 1.0)):
        create = renting.create_call(OFFER, need, "p-train-r1-20261207", "runpod/pytorch", "k", "ssh-ed25519 AAAA")
        assert (create.method, create.path) == ("POST", "/v2/pods")
        assert schema.problems(ours.CREATE_POD, create.body) == []
        assert schema.problems(ours.CATALOG_QUERY, renting.search_body(need)) == []
    volume = renting.volume_call("ckpt", 50, "EU-RO-1")
    assert (volume.path, schema.problems(ours.CREATE_NETWORK_VOLUME, volume.body)) == ("/v2/network-volumes", [])
    assert schema.problems(ours.POD_ACTION_REQUEST, api.endpoints["shutdown"].body) == []
    assert all(endpoint.path.startswith(("/v2/", "/graphql")) for endpoint in api.endpoints.values())
    # What v1 took, v2 refuses: the checker names each field.
    v1 = {"name": "n", "image": "i", "imageName": "i", "gpuTypeIds": ["x"], "cloudType": "SECURE"}
    assert schema.problems(ours.CREATE_POD, v1) == [
        "$: imageName is not a field the provider defines",
        "$: gpuTypeIds is not a field the provider defines",
        "$: cloudType is not a field the provider defines",
    ]


def test_every_field_the_adapter_reads_is_one_the_document_defines():
    api = ADAPTERS["runpod"].api
    reads = adapter_reads(api) | {"balance": [api.balance_field], "offers": renting.READS}
    undefined = [
        (verb, path) for verb, paths in reads.items() for path in paths if not schema.defines(ours.ANSWERS[verb], path)
    ]
    assert undefined == []
    assert schema.defines(ours.POD, ["desiredStatus"]) is False  # v1's field: the check can fail
    # Every state word we read is one of PodStatus's; the one we leave unknown is named.
    assert set(api.states) <= set(ours.POD_STATUS["enum"])
    assert set(ours.POD_STATUS["enum"]) - set(api.states) == {"ERROR"}
