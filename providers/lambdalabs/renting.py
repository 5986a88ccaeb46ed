"""Lambda's renting (../shared/reference/profiles/lambda.md §1): GET /instance-types with
regions_with_capacity_available, POST /instance-operations/launch; "insufficient capacity" is the real
failure. Pure: the calls are sent by fleet/renting.py."""

import re

from providers.offers import Create, Need, Offer, count_in, number_in


def search_body(need: Need) -> None:
    return None  # a GET with no body


# GET /api/v1/instance-types; the memory is in the GPU description ("A100 (40 GB SXM4)").
def read_offers(body, need: Need) -> list[Offer]:
    types = body.get("data") if isinstance(body, dict) else None
    if not isinstance(types, dict):
        raise ValueError("the instance-types answer has no data object")
    offers = []
    for name, entry in sorted(types.items()):
        kind = entry.get("instance_type") if isinstance(entry, dict) else None
        regions = entry.get("regions_with_capacity_available") if isinstance(entry, dict) else None
        if not isinstance(kind, dict) or not isinstance(regions, list):
            continue
        description = kind.get("gpu_description")
        specs = kind.get("specs") if isinstance(kind.get("specs"), dict) else {}
        count, cents = count_in(specs.get("gpus")), number_in(kind.get("price_cents_per_hour"))
        memory = re.search(r"([0-9]+)\s*GB", description) if isinstance(description, str) else None
        names = [r["name"] for r in regions if isinstance(r, dict) and isinstance(r.get("name"), str)]
        if None in (count, cents, memory):
            continue  # unreadable: not an offer
        gpu = description.split("(")[0].strip()
        # One offer per region with capacity (none where it has none): a rent that names a region gets it.
        for region in names[:32]:
            offers.append(Offer("lambda", name, gpu, count, float(memory.group(1)), cents / 100, region[:40]))
    return offers


def create_call(offer: Offer, need: Need, name: str, image: str, ssh_key_name: str, public_key: str) -> Create:
    body = {
        "region_name": offer.region,
        "instance_type_name": offer.offer_id,
        "ssh_key_names": [ssh_key_name],
        "name": name,
    }
    if need.volume:  # a persistent filesystem of the launch's region, mounted at /lambda/nfs/<name>
        body["file_system_names"] = [need.volume]
    return Create("POST", "/api/v1/instance-operations/launch", body)


# POST /api/v1/filesystems (listed at /api/v1/file-systems): a filesystem of a region, growing as it is
# written (no size asked); attached to a launch by its name.
def volume_call(name: str, gb: int, region: str) -> Create:
    return Create("POST", "/api/v1/filesystems", {"name": name, "region": region})


NAME_MAX = 64  # InstanceLaunchRequest.name: maxLength 64


def read_volume(body) -> str | None:
    data = body.get("data") if isinstance(body, dict) else None
    ident = data.get("id") if isinstance(data, dict) else None
    return ident if isinstance(ident, str) and 0 < len(ident) <= 100 else None


def read_created(body) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("data"), dict):
        ids = body["data"].get("instance_ids")
        if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], str) and ids[0]:
            return ids[0]
    return None


def no_capacity(status: int, text: str) -> bool:
    return status in (400, 409, 503) and "insufficient-capacity" in text
