"""RunPod's renting (../shared/reference/profiles/runpod.md §1): the GPU catalogue with its on-demand price
and stock is GraphQL's gpuTypes; the pod is created by REST POST /v1/pods. Pure: the calls are sent by
fleet/renting.py."""

from providers.offers import Create, Need, Offer, number_in


# GraphQL gpuTypes, each with its lowest on-demand price per GPU for the count asked and its stock (no
# stock: no capacity now). memoryInGb is per GPU.
def search_body(need: Need) -> dict:
    fields = "id displayName memoryInGb"
    price = f"lowestPrice(input: {{gpuCount: {int(need.gpu_count)}}}) {{ uninterruptablePrice stockStatus }}"
    return {"query": f"query {{ gpuTypes {{ {fields} {price} }} }}"}


def read_offers(body, need: Need) -> list[Offer]:
    data = body.get("data") if isinstance(body, dict) else None
    types = data.get("gpuTypes") if isinstance(data, dict) else None
    if not isinstance(types, list):
        raise ValueError("the gpuTypes answer has no list of GPU types")
    offers = []
    for item in types:
        if not isinstance(item, dict):
            continue
        lowest = item.get("lowestPrice") if isinstance(item.get("lowestPrice"), dict) else {}
        price, memory = number_in(lowest.get("uninterruptablePrice")), number_in(item.get("memoryInGb"))
        type_id, name, stock = item.get("id"), item.get("displayName"), lowest.get("stockStatus")
        if isinstance(type_id, str) and isinstance(name, str) and stock and None not in (price, memory) and price > 0:
            count = need.gpu_count
            # The catalogue is global: the create pins the data centre a rent names (dataCenterIds).
            offers.append(Offer("runpod", type_id, name, count, memory, round(price * count, 4), need.region))
    return offers


def create_call(offer: Offer, need: Need, name: str, image: str, ssh_key_name: str, public_key: str) -> Create:
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
    if need.volume:  # attached at creation only (RP7): the pod lands in the volume's data centre
        body.update(networkVolumeId=need.volume, volumeMountPath="/workspace")
    if need.region:
        body["dataCenterIds"] = [need.region]
    return Create("POST", "/v1/pods", body)


# POST /v1/networkvolumes: a volume of a data centre, 1-4,000 GB; the pod is then created onto it.
def volume_call(name: str, gb: int, region: str) -> Create:
    return Create("POST", "/v1/networkvolumes", {"name": name, "size": gb, "dataCenterId": region})


def read_volume(body) -> str | None:
    ident = body.get("id") if isinstance(body, dict) else None
    return ident if isinstance(ident, str) and 0 < len(ident) <= 100 and ident.isalnum() else None


def read_created(body) -> str | None:
    if isinstance(body, dict):
        pod = body.get("id")
        return pod if isinstance(pod, str) and 0 < len(pod) <= 100 and pod.isalnum() else None
    return None


# "There are no longer any instances available with the requested specifications"
def no_capacity(status: int, text: str) -> bool:
    return status in (400, 409, 500, 503) and "instances available" in text
