"""What an offer means, read from the providers' documented answers (pure): the GPU words, the fit, the
cheapest under the max, and answers that must not read as offers or as a created box."""

import dataclasses
import sys

import pytest

from providers import ADAPTERS, RENTABLE, discover, renting_of
from providers.interface import KEY_ATTACHED_AFTER, KEY_NAMED_AT_LAUNCH
from providers.lambdalabs import renting as lambdalabs
from providers.lambdalabs.keys import lambda_key_problem, same_key
from providers.offers import Need, Offer, choose, fits, known_gpu, model_matches
from providers.runpod import renting as runpod
from providers.vastai import renting as vastai
from providers.vastai.renting import attached
from rentals.asking import expected_cost, read_candidates, read_image, read_models, spend_note
from rentals.models import Rental

NEED_ONE = Need(("A100",), 1, 0, 50, 5.0)  # what a search asked for, where the reader needs it


def create_call(offer: Offer, *rest):
    return renting_of(offer.provider).create_call(offer, *rest)


def read_created(provider: str, body):
    return renting_of(provider).read_created(body)


def no_capacity(provider: str, status: int, body) -> bool:
    return renting_of(provider).no_capacity(status, str(body)[:2000].lower())


def test_gpu_names_compare_by_words_in_order():
    assert known_gpu("nvidia a100") == "A100" and known_gpu("rtx-4090") == "RTX 4090"
    assert known_gpu("A1OO") is None and known_gpu("4090 RTX") is None
    assert model_matches("A100", "A100 SXM4") and model_matches("RTX 4090", "NVIDIA GeForce RTX 4090")
    assert not model_matches("L40", "L40S") and not model_matches("A100", "A10")


def test_the_cheapest_fitting_offer_under_the_max_is_chosen_and_the_cheapest_over_it_is_named():
    need = Need(("A100", "H100"), 1, 40, 50, 2.0)
    offers = [
        Offer("vastai", "1", "A100 SXM4", 1, 80, 1.9),
        Offer("vastai", "2", "A100 PCIE", 1, 40, 1.2),
        Offer("vastai", "3", "A100 PCIE", 1, 24, 0.5),  # too little memory
        Offer("vastai", "4", "A100 PCIE", 2, 40, 1.0),  # two GPUs
        Offer("vastai", "5", "H100 SXM", 1, 80, 2.5),  # over the max
        Offer("vastai", "6", "RTX 4090", 1, 24, 0.3),  # another model
    ]
    assert [fits(need, offer) for offer in offers] == [True, True, False, False, True, False]
    under, over = choose(need, offers)
    assert under.offer_id == "2" and over.offer_id == "5"
    assert choose(Need(("H100",), 1, 0, 50, 1.0), offers) == (None, offers[4])


def test_vast_offers_read_only_what_is_there():
    row = {"disk_space": 500.0, "direct_port_count": 4, "storage_cost": 0.1}
    body = {
        "offers": [
            {"id": 11, "gpu_name": "RTX_4090", "num_gpus": 1, "gpu_ram": 24564, "dph_total": 0.41, **row},
            {"id": "12", "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 24564, "dph_total": 0.4, **row},  # id
            {"id": 13, "gpu_name": "RTX 4090", "num_gpus": True, "gpu_ram": 24564, "dph_total": 0.4, **row},
            {"id": 14, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 24564, "dph_total": float("nan"), **row},
            {"id": 15, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 24564, "dph_total": -1, **row},
            {"id": 16, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 24564, "dph_total": 0.3},  # no disk said
            "not an offer",
        ]
    }
    offers = vastai.read_offers(body, NEED_ONE)
    assert [(o.offer_id, o.gpu_name, o.gpu_memory_gb, o.rate) for o in offers] == [("11", "RTX 4090", 24.0, 0.41)]
    with pytest.raises(ValueError):
        vastai.read_offers({"offers": None}, NEED_ONE)


def test_lambda_offers_are_types_with_capacity_somewhere():
    body = {
        "data": {
            "gpu_1x_a100": {
                "instance_type": {
                    "gpu_description": "A100 (40 GB PCIe)",
                    "price_cents_per_hour": 129,
                    "specs": {"gpus": 1},
                },
                "regions_with_capacity_available": [{"name": "us-east-1", "description": "Virginia"}],
            },
            "gpu_1x_h100": {
                "instance_type": {"gpu_description": "H100 (80 GB SXM5)", "price_cents_per_hour": 329, "specs": {}},
                "regions_with_capacity_available": [{"name": "us-west-1"}],
            },
            "gpu_8x_a100": {
                "instance_type": {
                    "gpu_description": "A100 (80 GB SXM4)",
                    "price_cents_per_hour": 1432,
                    "specs": {"gpus": 8},
                },
                "regions_with_capacity_available": [],
            },
        }
    }
    offers = lambdalabs.read_offers(body, NEED_ONE)
    assert offers == [Offer("lambda", "gpu_1x_a100", "A100", 1, 40.0, 1.29, "us-east-1")]
    with pytest.raises(ValueError):
        lambdalabs.read_offers({"data": []}, NEED_ONE)


def test_lambda_offers_each_region_with_capacity_and_a_rent_may_name_one():
    """Lambda took the first region with capacity: a rent whose durable filesystem is in us-west-1 got
    us-east-1. Each region is its own offer now, and a rent that names a region gets only that one."""
    a100 = {"gpu_description": "A100 (40 GB PCIe)", "price_cents_per_hour": 129, "specs": {"gpus": 1}}
    regions = [{"name": "us-east-1"}, {"name": "us-west-1"}]
    body = {"data": {"gpu_1x_a100": {"instance_type": a100, "regions_with_capacity_available": regions}}}
    offers = lambdalabs.read_offers(body, NEED_ONE)
    assert [offer.region for offer in offers] == ["us-east-1", "us-west-1"]
    west = dataclasses.replace(NEED_ONE, region="US-WEST-1")
    assert choose(west, offers)[0].region == "us-west-1"
    assert choose(dataclasses.replace(NEED_ONE, region="eu-central-1"), offers) == (None, None)
    assert (
        lambdalabs.create_call(choose(west, offers)[0], west, "n", "img", "k", "pub").body["region_name"] == "us-west-1"
    )


def test_create_calls_are_the_documented_ones_named_by_the_rule():
    need = Need(("A100",), 1, 0, 80, 2.0)
    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk"
    vast = create_call(Offer("vastai", "11", "A100", 1, 40, 1.0), need, "p-train-r1-20261202", "img", "key", pub)
    assert (vast.method, vast.path) == ("PUT", "/api/v0/asks/11/")
    assert vast.body["label"] == "p-train-r1-20261202" and vast.body["disk"] == 80
    assert pub not in str(vast.body)  # attached to the box once made (its Renting.box_key)
    lam = create_call(Offer("lambda", "gpu_1x_a100", "A100", 1, 40, 1.29, "us-east-1"), need, "n", "img", "key", pub)
    assert lam.body == {
        "region_name": "us-east-1",
        "instance_type_name": "gpu_1x_a100",
        "ssh_key_names": ["key"],
        "name": "n",
    }  # InstanceLaunchRequest 1.10.0 has no quantity
    pod = create_call(Offer("runpod", "NVIDIA A100 80GB PCIe", "A100", 1, 80, 1.6), need, "n", "img", "key", pub)
    assert pod.body["env"] == {"PUBLIC_KEY": pub} and pod.body["ports"] == ["22/tcp"]


def test_a_provider_s_keys_are_read_as_keys_and_a_hostile_answer_is_no_match():
    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk"
    ours = {"data": [{"id": "1", "name": "k", "public_key": pub + " someone@laptop"}]}
    assert lambda_key_problem(ours, "k", pub) is None  # a comment is not the key
    assert "no SSH key named k" in lambda_key_problem({"data": []}, "k", pub)
    other = {"data": [{"id": "1", "name": "k", "public_key": "ssh-ed25519 AAAAother"}]}
    assert "another key" in lambda_key_problem(other, "k", pub)
    for hostile in (None, [], {"data": "x"}, {"data": [{"name": "k", "public_key": 7}]}, {"data": [{"name": "k"}]}):
        assert lambda_key_problem(hostile, "k", pub) is not None
    assert not same_key("", "") and not same_key("ssh-ed25519", "ssh-ed25519")
    assert attached({"success": True}) and not attached({"success": "true"}) and not attached([True])


def test_created_ids_and_no_capacity_are_read_from_the_providers_words():
    assert read_created("vastai", {"success": True, "new_contract": 7001}) == "7001"
    assert read_created("vastai", {"success": False, "new_contract": 7001}) is None
    assert read_created("vastai", {"success": True, "new_contract": "7001; rm -rf /"}) is None
    assert read_created("lambda", {"data": {"instance_ids": ["abc"]}}) == "abc"
    assert read_created("lambda", {"data": {"instance_ids": ["a", "b"]}}) is None  # we asked for one
    assert no_capacity("lambda", 400, '{"error": {"code": "instance-operations/launch/insufficient-capacity"}}')
    assert not no_capacity("lambda", 400, '{"error": {"code": "global/invalid-parameters"}}')
    assert no_capacity("vastai", 400, '{"success": false, "error": "no_such_ask"}')


def test_a_request_is_refused_before_anything_is_asked():
    assert read_models("a100, nvidia H100, A100") == ["A100", "H100"]
    with pytest.raises(ValueError, match="not a GPU model we know"):
        read_models("A100, Z9000")
    with pytest.raises(ValueError, match="No provider API key for lambda"):
        read_candidates("vastai, lambda", {"vastai": 1})
    with pytest.raises(ValueError, match="cannot be rented here"):
        read_candidates("paperspace", {"paperspace": 1})
    assert read_candidates("Lambda; vastai", {"vastai": 1, "lambda": 2}) == ["lambda", "vastai"]


def test_the_expected_cost_is_the_most_it_can_cost_and_the_spend_rules_are_said():
    from decimal import Decimal

    cost = expected_cost(Decimal("1.5"), 90)
    assert cost == Decimal("2.25")
    assert spend_note(cost, Decimal("2"), Decimal("10")) == "above the per-run threshold of $2"
    assert spend_note(cost, None, Decimal("1.00")) == "above the $1.00 left in the envelope"
    assert spend_note(cost, Decimal("5"), None) == "within the project's envelope and threshold"
    assert spend_note(cost, None, None) == "no envelope set"


def gpu_type(ident, name, memory, price, availability, **fields):
    """A GpuType as GET /v2/catalog/gpus?include=AVAILABILITY&product=POD lists one (providers/runpod/schema.py)."""
    item = {"id": ident, "name": name, "pool": None, "manufacturer": "NVIDIA", "memory": memory, "secure": True}
    item |= {"community": True, "price": {"secure": price, "community": round(price * 0.7, 2)}}
    item |= {"maxCount": {"secure": 8, "community": 8}, "availability": availability}
    return item | fields


def test_runpod_offers_are_secure_cloud_gpu_types_in_stock_priced_for_the_count():
    """Before: `lowestPrice` across both clouds, and `stockStatus: "None"` (a documented value) read as in
    stock. Now the catalogue is asked in the cloud we create in, and NONE is not now."""
    assert runpod.search_body(Need(("A100",), 2, 0, 50, 5.0)) == {
        "include": "AVAILABILITY",
        "product": "POD",
        "count": 2,
        "cloud": "SECURE",
    }
    body = {
        "gpus": [
            gpu_type("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.19, "HIGH"),
            gpu_type("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, "NONE"),  # out of stock: documented
            gpu_type("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 1.49, "LOW", maxCount={"secure": 1, "community": 8}),
            gpu_type("NVIDIA A100 40GB", "A100 40", 40, 0.99, "MEDIUM", secure=False),  # community only
        ]
    }
    assert runpod.read_offers(body, Need(("A100",), 2, 0, 50, 5.0)) == [
        Offer("runpod", "NVIDIA A100 80GB PCIe", "A100 PCIe", 2, 80.0, 2.3868)  # 2 × 1.19 + 50 GB at $0.10/month
    ]
    centres = [{"id": "EU-RO-1", "name": "Romania", "availability": "NONE"}]
    in_region = gpu_type("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.19, "HIGH", dataCenters=centres)
    assert runpod.read_offers({"gpus": [in_region]}, Need(("A100",), 1, 0, 50, 5.0, region="EU-RO-1")) == []
    with pytest.raises(ValueError):
        runpod.read_offers({"title": "Unauthorized", "status": 401, "detail": "bad key"}, NEED_ONE)
    assert read_created("runpod", {"id": "pod_abc123"}) == "pod_abc123"  # v2's ids
    assert read_created("runpod", {"id": "../etc"}) is None
    assert read_created("runpod", {"id": "pod\n"}) is None
    assert no_capacity("runpod", 500, "There are no longer any instances available with the requested specs")


def test_every_rentable_provider_has_its_adapter_and_nothing_else_does():
    assert RENTABLE == ("vastai", "lambda", "runpod")  # the order a rent asks in, from the adapters' ranks
    assert set(ADAPTERS) == {"vastai", "lambda", "runpod", "paperspace"}
    for name in RENTABLE:
        renting = ADAPTERS[name].renting
        assert all(callable(value) for value in dataclasses.astuple(renting) if not isinstance(value, str | int | None))
    assert ADAPTERS["vastai"].renting.box_key == KEY_ATTACHED_AFTER and ADAPTERS["vastai"].renting.attached
    assert ADAPTERS["lambda"].renting.box_key == KEY_NAMED_AT_LAUNCH and ADAPTERS["lambda"].renting.key_problem
    with pytest.raises(ValueError, match="cannot be rented here"):
        create_call(Offer("paperspace", "x", "A100", 1, 40, 1.0), NEED_ONE, "n", "img", "key", "pub")
    with pytest.raises(ValueError, match="cannot be rented here"):
        renting_of("nosuch")


def test_adding_a_provider_is_one_folder(tmp_path, monkeypatch):
    """A package with one folder holding an ADAPTER is found by the same walk that finds ours."""
    folder = tmp_path / "moreproviders" / "acme"
    folder.mkdir(parents=True)
    (folder.parent / "__init__.py").write_text("")
    (folder / "__init__.py").write_text(
        "from providers.interface import Adapter, ProviderApi\n"
        "ADAPTER = Adapter(name='acme', api=ProviderApi(auth='bearer', endpoints={}, status_field=('state',)),"
        " bases={'acme': 'https://api.acme.test'})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover([str(folder.parent)], "moreproviders")
    assert list(found) == ["acme"] and found["acme"].renting is None
    monkeypatch.delitem(sys.modules, "moreproviders.acme")


def test_a_rent_takes_an_image_by_digest_and_says_when_it_is_only_a_tag():
    pinned = "pytorch/pytorch@sha256:" + "ab" * 32
    assert read_image(f"  {pinned} ") == pinned and Rental(image=pinned).image_digest == "sha256:" + "ab" * 32
    assert Rental(image="pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime").image_digest == ""
    for bad in ("x; rm -rf /", "-oProxyCommand=x", "Pytorch/Torch", "a//b", pinned + "@sha256:" + "0" * 64):
        with pytest.raises(ValueError, match="An image is"):
            read_image(bad)


def test_a_volume_is_attached_where_the_create_call_takes_one_and_refused_elsewhere():
    offer = Offer("runpod", "NVIDIA GeForce RTX 4090", "RTX 4090", 1, 24.0, 0.44)
    need = dataclasses.replace(NEED_ONE, volume="vol-7x9")
    body = runpod.create_call(offer, need, "n", "img", "k", "ssh-ed25519 AAAA").body
    assert body["mounts"] == {"network": [{"volumeId": "vol-7x9", "path": "/workspace"}]}
    assert "mounts" not in runpod.create_call(offer, NEED_ONE, "n", "img", "k", "pub").body
    from rentals.asking import read_volume

    assert read_volume(" vol-7x9 ", ["runpod"]) == "vol-7x9" and read_volume("", ["vastai", "runpod"]) == ""
    with pytest.raises(ValueError, match="vastai cannot attach a volume"):
        read_volume("vol-7x9", ["vastai"])
    with pytest.raises(ValueError, match="one provider"):
        read_volume("vol-7x9", ["runpod", "lambda"])
    with pytest.raises(ValueError, match="its id or name"):
        read_volume("vol 7; rm", ["runpod"])
