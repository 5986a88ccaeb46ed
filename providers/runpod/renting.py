"""RunPod's renting on REST v2 (providers/runpod/schema.py): the GPU catalogue with its Secure Cloud price
and stock for the count asked (GET /v2/catalog/gpus), the pod created by POST /v2/pods in Secure Cloud, the
cloud it was priced in. Pure: the calls are sent by fleet/renting.py."""

import re

from providers.interface import HOURS_PER_MONTH
from providers.offers import Create, Need, Offer, number_in

CLOUD = "SECURE"  # asked, priced and created in one cloud: the price approved is the one billed
# runpod/docs @ a900806 pods/pricing.mdx: container disk $0.10/GB/month running, "Not charged" stopped
# ("Temporary; erased when Pod stops"); a volume disk would bill $0.20/GB/month stopped (none is asked).
CONTAINER_DISK_PER_GB_MONTH = 0.10
IN_STOCK = {"LOW", "MEDIUM", "HIGH"}  # AvailabilityLevel; NONE is documented: not now
IDENT = re.compile(r"[A-Za-z0-9_-]{1,100}\Z")  # v2 ids: pod_abc123
# What read_offers reads of a catalogue answer (each checked to be a field the document defines).
READS = (
    [["gpus", 0, key] for key in ("id", "name", "memory", "secure", "availability")]
    + [["gpus", 0, "price", "secure"], ["gpus", 0, "maxCount", "secure"]]
    + [["gpus", 0, "dataCenters", 0, key] for key in ("id", "availability")]
)


def search_body(need: Need) -> dict:
    """The catalogue's query: availability and the lowest price for the count, in the cloud we create in."""
    return {"include": "AVAILABILITY", "product": "POD", "count": int(need.gpu_count), "cloud": CLOUD}


def _in_stock(item: dict, region: str) -> bool:
    """Stock for pods in Secure Cloud, where the rent names a data centre there."""
    if region:
        centres = item.get("dataCenters") if isinstance(item.get("dataCenters"), list) else []
        return any(isinstance(c, dict) and c.get("id") == region and c.get("availability") in IN_STOCK for c in centres)
    return item.get("availability") in IN_STOCK


def read_offers(body, need: Need) -> list[Offer]:
    types = body.get("gpus") if isinstance(body, dict) else None
    if not isinstance(types, list):
        raise ValueError("the GPU catalogue answer has no list of GPU types")
    offers = [_offer(item, need) for item in types if isinstance(item, dict) and item.get("secure") is True]
    return [offer for offer in offers if offer is not None]


def _offer(item: dict, need: Need) -> Offer | None:
    """One GPU type as an offer in Secure Cloud for the count asked, or None where it cannot be had now."""
    prices = item.get("price") if isinstance(item.get("price"), dict) else {}
    price, memory = number_in(prices.get("secure")), number_in(item.get("memory"))
    type_id, name = item.get("id"), item.get("name")
    most = item["maxCount"].get("secure") if isinstance(item.get("maxCount"), dict) else None
    fits = isinstance(most, int) and not isinstance(most, bool) and most >= need.gpu_count
    readable = isinstance(type_id, str) and isinstance(name, str) and None not in (price, memory) and price > 0
    if not (readable and fits and _in_stock(item, need.region)):
        return None
    # "the rate for a unit is the figure times gpu.count", and the container disk the create asks beside it
    rate = price * need.gpu_count + need.disk_gb * CONTAINER_DISK_PER_GB_MONTH / HOURS_PER_MONTH
    return Offer("runpod", type_id, name, need.gpu_count, memory, round(rate, 4), need.region)


def create_call(offer: Offer, need: Need, name: str, image: str, ssh_key_name: str, public_key: str) -> Create:
    body = {
        "name": name,
        "image": image,
        "cloud": CLOUD,
        "gpu": {"id": offer.offer_id, "count": offer.gpu_count},
        "disk": need.disk_gb,  # the container disk; no persistent mount: nothing bills while stopped
        "ports": ["22/tcp"],  # full SSH over a public address and a mapped port (PodSsh.direct)
        "env": {"PUBLIC_KEY": public_key},
    }
    if need.volume:  # attached at creation only (RP7): the pod lands in the volume's data centre
        body["mounts"] = {"network": [{"volumeId": need.volume, "path": "/workspace"}]}
    if need.region:
        body["dataCenterIds"] = [need.region]
    return Create("POST", "/v2/pods", body)


# POST /v2/network-volumes: a volume of a data centre, 10-4,096 GB; the pod is then created onto it.
def volume_call(name: str, gb: int, region: str) -> Create:
    return Create("POST", "/v2/network-volumes", {"name": name, "size": gb, "dataCenter": region})


def read_created(body) -> str | None:
    """The new pod's (or network volume's) id: both answers carry it as "id"."""
    ident = body.get("id") if isinstance(body, dict) else None
    return ident if isinstance(ident, str) and IDENT.match(ident) else None


read_volume = read_created


# Observed field behaviour, not in the v2 document (its 4xx/5xx are ErrorResponse with free text): RunPod
# answers a create with no capacity "There are no longer any instances available with the requested
# specifications" (seen on v1, ../shared/reference/profiles/runpod.md; kept for v2 until a v2 answer is seen).
def no_capacity(status: int, text: str) -> bool:
    return status in (400, 409, 500, 503) and "instances available" in text
