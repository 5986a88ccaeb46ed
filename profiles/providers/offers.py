"""Renting, as data: what a run needs, what a provider offers, which offer fits, and the documented create
call for it. Pure: no HTTP here (renting.py sends the calls).

Sources: ../shared/reference/profiles/vastai.md §1 (offer search, then create onto the offer: PUT
/asks/{id}/), lambda.md §1 (GET /instance-types with regions_with_capacity_available, POST
/instance-operations/launch; "insufficient capacity" is the real failure), runpod.md §1 (the GPU catalogue
with its on-demand price and stock is GraphQL's gpuTypes; the pod is created by REST POST /v1/pods).
An offer is untrusted input: a field we cannot read makes the offer unusable, never a default.
"""

import math
import re
from dataclasses import dataclass, field

# The GPU models a request may name (tokens as people write them). Anything else is refused before a
# provider is asked: "A1OO" must not match nothing quietly, or everything.
KNOWN_GPUS = (
    "B200",
    "H200",
    "H100",
    "GH200",
    "A100",
    "A800",
    "H800",
    "L40S",
    "L40",
    "L4",
    "A40",
    "A10",
    "A6000",
    "A5000",
    "A4000",
    "RTX 6000 ADA",
    "RTX 5090",
    "RTX 4090",
    "RTX 4080",
    "RTX 3090",
    "RTX 3080",
    "V100",
    "T4",
)

RENTABLE = ("vastai", "lambda", "runpod")  # the platforms whose documented API searches offers and creates


def tokens(name: str) -> tuple[str, ...]:
    """A GPU name as comparable words: "NVIDIA GeForce RTX 4090" → ("RTX", "4090"); "A100-SXM4" → ("A100", "SXM4")."""
    words = re.findall(r"[A-Za-z0-9]+", name.upper())
    return tuple(word for word in words if word not in ("NVIDIA", "GEFORCE", "TESLA"))


def known_gpu(name: str) -> str | None:
    """The catalogue's spelling of a requested model, or None when it names no GPU we know."""
    wanted = tokens(name)
    for known in KNOWN_GPUS:
        if tokens(known) == wanted:
            return known
    return None


@dataclass(frozen=True)
class Need:
    gpu_models: tuple[str, ...]  # any of these (catalogue spellings)
    gpu_count: int
    gpu_memory_gb: int  # at least, per GPU
    disk_gb: int
    max_rate: float  # $/h for the whole box


@dataclass(frozen=True)
class Offer:
    provider: str
    offer_id: str  # vast.ai's ask id; Lambda's instance type name
    gpu_name: str
    gpu_count: int
    gpu_memory_gb: float
    rate: float  # $/h for the whole box
    region: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    def describe(self) -> str:
        where = f" in {self.region}" if self.region else ""
        return f"{self.gpu_count}× {self.gpu_name} ({self.gpu_memory_gb:g} GB) at ${self.rate:.4f}/h{where}"


def model_matches(model: str, gpu_name: str) -> bool:
    """The requested model's words in order at the start of the offer's GPU words ("A100" fits "A100 SXM4",
    "RTX 4090" fits "RTX 4090 D", "L40" does not fit "L40S")."""
    want, have = tokens(model), tokens(gpu_name)
    return len(have) >= len(want) and have[: len(want)] == want


def fits(need: Need, offer: Offer) -> bool:
    return (
        any(model_matches(model, offer.gpu_name) for model in need.gpu_models)
        and offer.gpu_count == need.gpu_count
        and offer.gpu_memory_gb + 0.5 >= need.gpu_memory_gb  # a "24 GB" card reports 23.99
    )


def choose(need: Need, offers: list[Offer]) -> tuple[Offer | None, Offer | None]:
    """(the cheapest fitting offer at or under the max rate, the cheapest fitting offer over it)."""
    fitting = sorted((offer for offer in offers if fits(need, offer)), key=lambda offer: (offer.rate, offer.offer_id))
    under = [offer for offer in fitting if offer.rate <= need.max_rate]
    over = [offer for offer in fitting if offer.rate > need.max_rate]
    return (under[0] if under else None), (over[0] if over else None)


def _number(value, low=0.0, high=1e9) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and low <= value <= high else None


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 64 else None


# vast.ai: POST /api/v0/bundles/ with a query; gpu_ram is MB per GPU, dph_total the whole box's $/h. The
# model and the price are filtered here, not in the query: its names are exact ("A100 SXM4"), and an offer
# over the max still tells the person what the max would have to be.
def vast_query(need: Need) -> dict:
    return {
        "q": {
            "num_gpus": {"eq": need.gpu_count},
            "gpu_ram": {"gte": need.gpu_memory_gb * 1000},
            "disk_space": {"gte": need.disk_gb},
            "rentable": {"eq": True},
            "verified": {"eq": True},
            "direct_port_count": {"gte": 1},  # direct SSH: bulk transfer needs it (VAST §3)
        },
        "order": [["dph_total", "asc"]],
        "type": "on-demand",
    }


def read_vast_offers(body) -> list[Offer]:
    items = body.get("offers") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ValueError("the offer search answer has no list of offers")
    offers = []
    for item in items:
        if not isinstance(item, dict):
            continue
        offer_id, name = item.get("id"), item.get("gpu_name")
        count, ram, rate = _count(item.get("num_gpus")), _number(item.get("gpu_ram")), _number(item.get("dph_total"))
        if isinstance(offer_id, int) and isinstance(name, str) and None not in (count, ram, rate):
            offers.append(Offer("vastai", str(offer_id), name.replace("_", " "), count, round(ram / 1024, 1), rate))
    return offers


# Lambda: GET /api/v1/instance-types; the memory is in the GPU description ("A100 (40 GB SXM4)").
def read_lambda_offers(body) -> list[Offer]:
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
        count, cents = _count(specs.get("gpus")), _number(kind.get("price_cents_per_hour"))
        memory = re.search(r"(\d+)\s*GB", description) if isinstance(description, str) else None
        region = next((r["name"] for r in regions if isinstance(r, dict) and isinstance(r.get("name"), str)), "")
        if None in (count, cents, memory) or not region:
            continue  # no capacity anywhere, or unreadable: not an offer
        gpu = description.split("(")[0].strip()
        offers.append(Offer("lambda", name, gpu, count, float(memory.group(1)), cents / 100, region))
    return offers


# RunPod: GraphQL gpuTypes, each with its lowest on-demand price per GPU for the count asked and its stock
# (no stock: no capacity now). memoryInGb is per GPU.
def runpod_query(need: Need) -> dict:
    fields = "id displayName memoryInGb"
    price = f"lowestPrice(input: {{gpuCount: {int(need.gpu_count)}}}) {{ uninterruptablePrice stockStatus }}"
    return {"query": f"query {{ gpuTypes {{ {fields} {price} }} }}"}


def read_runpod_offers(body, gpu_count: int) -> list[Offer]:
    data = body.get("data") if isinstance(body, dict) else None
    types = data.get("gpuTypes") if isinstance(data, dict) else None
    if not isinstance(types, list):
        raise ValueError("the gpuTypes answer has no list of GPU types")
    offers = []
    for item in types:
        if not isinstance(item, dict):
            continue
        lowest = item.get("lowestPrice") if isinstance(item.get("lowestPrice"), dict) else {}
        price, memory = _number(lowest.get("uninterruptablePrice")), _number(item.get("memoryInGb"))
        type_id, name, stock = item.get("id"), item.get("displayName"), lowest.get("stockStatus")
        if isinstance(type_id, str) and isinstance(name, str) and stock and None not in (price, memory) and price > 0:
            offers.append(Offer("runpod", type_id, name, gpu_count, memory, round(price * gpu_count, 4)))
    return offers


def search_body(provider: str, need: Need) -> dict | None:
    """The body of the provider's offer search (Lambda's is a GET with none)."""
    queries = {"vastai": vast_query, "runpod": runpod_query}
    return queries[provider](need) if provider in queries else None


def read_offers(provider: str, body, need: Need) -> list[Offer]:
    """The offers in the provider's search answer; ValueError when it is not what its documentation says."""
    if provider == "runpod":
        return read_runpod_offers(body, need.gpu_count)
    return read_vast_offers(body) if provider == "vastai" else read_lambda_offers(body)


@dataclass(frozen=True)
class Create:
    method: str
    path: str
    body: dict


def create_call(offer: Offer, need: Need, name: str, image: str, ssh_key_name: str, public_key: str) -> Create:
    """The documented create call that rents this offer, named by the naming rule, with the rent's SSH
    key where the create takes it (box_keys.py says where the others get it)."""
    if offer.provider == "vastai":
        body = {"client_id": "me", "image": image, "disk": need.disk_gb, "label": name, "runtype": "ssh_direct"}
        return Create("PUT", f"/api/v0/asks/{offer.offer_id}/", body)
    if offer.provider == "lambda":
        body = {
            "region_name": offer.region,
            "instance_type_name": offer.offer_id,
            "ssh_key_names": [ssh_key_name],
            "name": name,
            "quantity": 1,
        }
        return Create("POST", "/api/v1/instance-operations/launch", body)
    if offer.provider == "runpod":
        body = {
            "name": name,
            "imageName": image,
            "gpuTypeIds": [offer.offer_id],
            "gpuCount": offer.gpu_count,
            "containerDiskInGb": need.disk_gb,
            "cloudType": "SECURE",
            "ports": ["22/tcp"],  # full SSH over a public IP and a mapped port (RP §3)
            "supportPublicIp": True,
            "env": {"PUBLIC_KEY": public_key},
        }
        return Create("POST", "/v1/pods", body)
    raise ValueError(f"{offer.provider} cannot be rented here")


def read_created(provider: str, body) -> str | None:
    """The new box's provider id from the create answer, or None when the answer names none."""
    if provider == "vastai" and isinstance(body, dict) and body.get("success") is True:
        contract = body.get("new_contract")
        return str(contract) if isinstance(contract, int) and not isinstance(contract, bool) else None
    if provider == "lambda" and isinstance(body, dict) and isinstance(body.get("data"), dict):
        ids = body["data"].get("instance_ids")
        if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], str) and ids[0]:
            return ids[0]
    if provider == "runpod" and isinstance(body, dict):
        pod = body.get("id")
        return pod if isinstance(pod, str) and 0 < len(pod) <= 100 and pod.isalnum() else None
    return None


def no_capacity(provider: str, status: int, body) -> bool:
    """The provider's documented "not now" (the offer was taken, no capacity): try the next candidate."""
    text = str(body)[:2000].lower()
    if provider == "lambda":
        return status in (400, 409, 503) and "insufficient-capacity" in text
    if provider == "vastai":
        return status in (400, 404, 410) and ("no_such_ask" in text or "not available" in text)
    if provider == "runpod":  # "There are no longer any instances available with the requested specifications"
        return status in (400, 409, 500, 503) and "instances available" in text
    return False
