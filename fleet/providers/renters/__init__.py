"""One adapter a rentable provider, each a module with the same five functions (the interface below);
adding a provider is one module here and its name in RENTERS. Pure: no HTTP (renting.py sends the calls).

    search_body(need) -> dict | None       the offer search's body (None: a GET)
    read_offers(body, need) -> [Offer]     the offers in its answer; ValueError when it is not what the
                                           provider documents
    create_call(offer, need, name, image, ssh_key_name, public_key) -> Create
                                           the documented create call that rents this offer, named by the
                                           naming rule, with the rent's SSH key where the create takes it
                                           (box_keys.py says where the others get it)
    read_created(body) -> str | None       the new box's provider id, or None when the answer names none
    no_capacity(status, text) -> bool      the provider's documented "not now" (the offer was taken, no
                                           capacity): try the next candidate
"""

from types import ModuleType

from fleet.providers.offers import Create, Need, Offer
from fleet.providers.renters import lambdalabs, runpod, vastai

RENTERS: dict[str, ModuleType] = {"vastai": vastai, "lambda": lambdalabs, "runpod": runpod}
RENTABLE = tuple(RENTERS)  # the platforms whose documented API searches offers and creates, in this order


def renter(provider: str) -> ModuleType:
    try:
        return RENTERS[provider]
    except KeyError:
        raise ValueError(f"{provider} cannot be rented here") from None


def search_body(provider: str, need: Need) -> dict | None:
    return renter(provider).search_body(need) if provider in RENTERS else None


def read_offers(provider: str, body, need: Need) -> list[Offer]:
    return renter(provider).read_offers(body, need)


def create_call(offer: Offer, need: Need, name: str, image: str, ssh_key_name: str, public_key: str) -> Create:
    return renter(offer.provider).create_call(offer, need, name, image, ssh_key_name, public_key)


def read_created(provider: str, body) -> str | None:
    return renter(provider).read_created(body) if provider in RENTERS else None


def no_capacity(provider: str, status: int, body) -> bool:
    return renter(provider).no_capacity(status, str(body)[:2000].lower()) if provider in RENTERS else False
