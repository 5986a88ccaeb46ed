"""vast.ai: offers searched and rented by API; the rent's key is attached to the new box."""

from providers.interface import KEY_ATTACHED_AFTER, Adapter, Renting
from providers.vastai import api, renting

ADAPTER = Adapter(
    name="vastai",
    api=api.API,
    bases={"vastai": "https://console.vast.ai"},
    renting=Renting.of(renting, box_key=KEY_ATTACHED_AFTER, attached=renting.attached),
    rent_rank=0,
)
