"""vast.ai's renting (../shared/reference/profiles/vastai.md §1): the offer search, then a create onto the
offer (PUT /asks/{id}/). Pure: the calls are sent by fleet/renting.py."""

from providers.offers import Create, Need, Offer, count_in, number_in


# POST /api/v0/bundles/ with a query; gpu_ram is MB per GPU, dph_total the whole box's $/h. The model and
# the price are filtered here, not in the query: its names are exact ("A100 SXM4"), and an offer over the
# max still tells the person what the max would have to be.
def search_body(need: Need) -> dict:
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


def read_offers(body, need: Need) -> list[Offer]:
    items = body.get("offers") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ValueError("the offer search answer has no list of offers")
    offers = []
    for item in items:
        if not isinstance(item, dict):
            continue
        offer_id, name = item.get("id"), item.get("gpu_name")
        count, ram, rate = (
            count_in(item.get("num_gpus")),
            number_in(item.get("gpu_ram")),
            number_in(item.get("dph_total")),
        )
        if isinstance(offer_id, int) and isinstance(name, str) and None not in (count, ram, rate):
            offers.append(Offer("vastai", str(offer_id), name.replace("_", " "), count, round(ram / 1024, 1), rate))
    return offers


def create_call(offer: Offer, need: Need, name: str, image: str, ssh_key_name: str, public_key: str) -> Create:
    body = {"client_id": "me", "image": image, "disk": need.disk_gb, "label": name, "runtype": "ssh_direct"}
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
