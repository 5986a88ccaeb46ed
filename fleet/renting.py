"""Renting at a provider: search its offers, create onto one, and find a box by the name it was created
with. The calls go through provider_calls.call_verb or, for a create, providers.http.exchange (bounded
answers, bounded 429/5xx retries); what they mean is the provider's adapter's (its Renting). A create
that may have landed is never sent twice blind: the caller looks for the name first.
"""

from dataclasses import dataclass

from fleet.provider_calls import call_verb, key_of, list_boxes, list_other_resources
from providers import APIS, RENTABLE, renting_of
from providers.http import ProviderError, ProviderRefused, exchange
from providers.interface import KEY_ATTACHED_AFTER, KEY_NAMED_AT_LAUNCH
from providers.offers import Need, Offer


def find_offers(profile_key: str, credential, need: Need) -> list[Offer]:
    """What the provider offers now under the key (every GPU it lists; offers.choose picks). ProviderError
    when it cannot be asked or answers something unreadable."""
    if profile_key not in RENTABLE:
        raise ProviderError(f"{profile_key} cannot be rented here (no documented offer search and create)")
    renting = renting_of(profile_key)
    answer = call_verb(profile_key, credential, "offers", body=renting.search_body(need))
    if answer["http_status"] != 200:
        raise ProviderError(f"{profile_key} answered {answer['http_status']} to the offer search")
    try:
        return renting.read_offers(answer["body"], need)
    except ValueError as exc:
        raise ProviderError(f"{profile_key}: {exc}") from None


@dataclass(frozen=True)
class Created:
    provider_id: str | None  # None: no capacity (the answer says why)
    answer: str


@dataclass(frozen=True)
class BoxKey:
    name: str  # the SSH key credential's name (Lambda's launch names a key registered under it)
    public: str  # its public half (each adapter's Renting.box_key: how its provider is given it)


def key_problem(profile_key: str, credential, key: BoxKey) -> str | None:
    """Why the box a create would make here could not be reached with the rent's key, asked before
    anything is created (Lambda: the key it names must be ours), or None. ProviderError when unreadable."""
    renting = renting_of(profile_key)
    if renting.box_key != KEY_NAMED_AT_LAUNCH:
        return None
    answer = call_verb(profile_key, credential, "ssh_keys")
    if answer["http_status"] != 200:
        raise ProviderError(f"{profile_key} answered {answer['http_status']} to the list of SSH keys")
    return renting.key_problem(answer["body"], key.name, key.public)


def attach_key(profile_key: str, credential, provider_id: str, key: BoxKey) -> None:
    """Give a created box the rent's key where the create could not (vast.ai); ProviderError when the
    provider does not say it did. Repeating it is harmless: the box holds the key once either way."""
    renting = renting_of(profile_key)
    if renting.box_key != KEY_ATTACHED_AFTER:
        return
    answer = call_verb(profile_key, credential, "attach_ssh", provider_id, {"ssh_key": key.public})
    if answer["http_status"] != 200 or not renting.attached(answer["body"]):
        raise ProviderError(f"{profile_key} did not attach the SSH key to {provider_id}: {str(answer['body'])[:200]}")


def create_box(offer: Offer, credential, need: Need, name: str, image: str, key: BoxKey, idem: str) -> Created:
    """One create call onto the offer. Created(id) when the provider names the new box; Created(None)
    when it says there is no capacity (the next candidate is tried); ProviderError otherwise: the call
    may have landed, so the caller looks for the name before anything else."""
    api, key_value, renting = APIS[offer.provider], key_of(credential), renting_of(offer.provider)
    call = renting.create_call(offer, need, renting.box_name(name), image, key.name, key.public)
    try:
        status, body = exchange(api, offer.provider, call.method, call.path, call.body, key_value, idem)
    except ProviderRefused as exc:
        if renting.no_capacity(exc.code, exc.text[:2000].lower()):
            return Created(None, exc.text[:300])
        raise
    if renting.no_capacity(status, str(body)[:2000].lower()):
        return Created(None, str(body)[:300])
    provider_id = renting.read_created(body) if status in (200, 201, 202) else None
    if provider_id is None:
        raise ProviderError(f"{offer.provider} answered {status} to the create, naming no box: {str(body)[:200]}")
    return Created(provider_id, str(body)[:300])


def find_volume(profile_key: str, credential, named: str) -> dict | None:
    """{id, name, kind, rate} of the one listed volume or filesystem whose id or name is `named`, or None;
    ProviderError when the list cannot be read or two carry the name (a person picks, by its id)."""
    listed = list_other_resources(profile_key, credential)
    found = [
        {"id": ident, "name": name, "kind": kind, "rate": rate}
        for kind, items in listed.items()
        for ident, (name, rate) in items.items()
    ]
    by_id = [volume for volume in found if volume["id"] == named]
    by_name = by_id or [volume for volume in found if volume["name"] == named]
    if len(by_name) > 1:
        raise ProviderError(f"{profile_key} lists {len(by_name)} volumes named {named}: name one by its id")
    return by_name[0] if by_name else None


def create_volume(profile_key: str, credential, name: str, gb: int, region: str, idem: str) -> str:
    """The volume's provider id, created by its documented call; ProviderError otherwise (the call may
    have landed: the caller looks for the name before sending it again)."""
    api, renting = APIS[profile_key], renting_of(profile_key)
    call = renting.volume_call(name, gb, region)
    status, body = exchange(api, profile_key, call.method, call.path, call.body, key_of(credential), idem)
    ident = renting.read_volume(body) if status in (200, 201, 202) else None
    if ident is None:
        raise ProviderError(f"{profile_key} answered {status} to the volume create, naming none: {str(body)[:200]}")
    return ident


def find_by_name(profile_key: str, credential, name: str) -> str | None:
    """The provider id of the one listed box with this name, or None; ProviderError when unreadable or
    when two carry it (a person must look: which one to keep is not ours to guess)."""
    listing, renting = list_boxes(profile_key, credential), renting_of(profile_key)
    found = [box for box, box_name in listing.names.items() if box_name in (name, renting.box_name(name))]
    if len(found) > 1:
        raise ProviderError(f"{profile_key} lists {len(found)} boxes named {name}: {', '.join(sorted(found))}")
    return found[0] if found else None
