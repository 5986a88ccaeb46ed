"""RunPod: GPU types rented by API (REST v2: the catalogue and the pods); the pod carries the key."""

from providers.interface import KEY_IN_CREATE, Adapter, Renting
from providers.runpod import api, renting

ADAPTER = Adapter(
    name="runpod",
    api=api.API,
    bases={"runpod": "https://api.runpod.io", "runpod-graphql": "https://api.runpod.io"},
    renting=Renting.of(
        renting,
        box_key=KEY_IN_CREATE,
        volumes="a network volume",
        volume_call=renting.volume_call,
        read_volume=renting.read_volume,
        volume_ref="id",
        volume_root="/workspace",
    ),
    rent_rank=2,
)
