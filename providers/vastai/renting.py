"""vast.ai's renting (../shared/reference/profiles/vastai.md §1): the offer search, then a create onto the
offer (PUT /asks/{id}/). Pure: the calls are sent by fleet/renting.py."""

from providers.interface import HOURS_PER_MONTH
from providers.offers import Create, Need, Offer, count_in, number_in

# POST /api/v0/bundles/ (providers/vastai/schema.py: SEARCH_OFFERS): the filters at the top level, as the
# document and vast's SDK put them; gpu_ram is MB per GPU, dph_total the whole box's $/h priced for
# allocated_storage GB of disk: asked at the run's disk, the price approved is the one billed. The model and
# the price are filtered here, not in the query: its names are exact ("A100 SXM4"), and an offer over the
# max still tells the person what the max would have to be.
SEARCH_LIMIT = 64
READS = (
    [["offers"]]
    + [["offers", 0, name] for name in ("id", "gpu_name", "num_gpus", "gpu_ram", "disk_space", "direct_port_count")]
    + [["offers", 0, "dph_total"], ["offers", 0, "storage_cost"]]
)


def search_body(need: Need) -> dict:
    return {
        "num_gpus": {"eq": need.gpu_count},
        "gpu_ram": {"gte": need.gpu_memory_gb * 1000},
        "disk_space": {"gte": need.disk_gb},
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "verified": {"eq": True},
        "external": {"eq": False},
        "direct_port_count": {"gte": 1},  # direct SSH: bulk transfer needs it (VAST §3)
        "order": [["dph_total", "asc"]],
        "type": "on-demand",
        "limit": SEARCH_LIMIT,
        "allocated_storage": need.disk_gb,  # dph_total is the price with this much disk: the run's
    }


def read_offers(body, need: Need) -> list[Offer]:
    items = body.get("offers") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ValueError("the offer search answer has no list of offers")
    return [offer for offer in (_offer(item, need) for item in items if isinstance(item, dict)) if offer]


def _offer(item: dict, need: Need) -> Offer | None:
    """One offer, or None where a field we price or filter on is unreadable, or it does not have what the
    search asked (its disk, a direct port): an answer is untrusted, and a filter vast ignored is not ours."""
    offer_id, name = item.get("id"), item.get("gpu_name")
    count, ram, rate = count_in(item.get("num_gpus")), number_in(item.get("gpu_ram")), number_in(item.get("dph_total"))
    disk, storage = number_in(item.get("disk_space")), number_in(item.get("storage_cost"), high=1000.0)
    ports = item.get("direct_port_count")
    readable = isinstance(offer_id, int) and not isinstance(offer_id, bool) and isinstance(name, str)
    if not readable or None in (count, ram, rate, disk, storage) or not isinstance(ports, int) or ports < 1:
        return None
    if disk < need.disk_gb:
        return None
    # Stopped, vast bills the disk alone (storage_cost: $/GB/month, for the disk the create asks).
    stopped = round(storage * need.disk_gb / HOURS_PER_MONTH, 4)
    gpu = name.replace("_", " ")
    return Offer("vastai", str(offer_id), gpu, count, round(ram / 1024, 1), rate, rate_stopped=stopped)


def create_call(offer: Offer, need: Need, name: str, image: str, ssh_key_name: str, public_key: str) -> Create:
    """PUT /asks/{id}/ (CREATE_INSTANCE) with the disk the offer was priced for; the SDK's client_id is not
    one of the document's fields and is not sent."""
    body = {"image": image, "disk": need.disk_gb, "label": name, "runtype": "ssh_direct", "cancel_unavail": True}
    return Create("PUT", f"/api/v0/asks/{offer.offer_id}/", body)


def read_created(body) -> str | None:
    if isinstance(body, dict) and body.get("success") is True:
        contract = body.get("new_contract")
        return str(contract) if isinstance(contract, int) and not isinstance(contract, bool) else None
    return None


def no_capacity(status: int, text: str) -> bool:
    return status in (400, 404, 410) and ("no_such_ask" in text or "not available" in text)


def attached(body) -> bool:
    """The answer to an attach (POST /instances/{id}/ssh/; account keys reach only boxes created after
    them): success said, nothing else taken as it."""
    return isinstance(body, dict) and body.get("success") is True
