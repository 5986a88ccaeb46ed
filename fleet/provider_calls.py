"""The fleet's calls to its providers, chosen by the profile's `teardown.<verb>.via`, under the key of a
credential granted to the box's project (read from the worker's environment at use).

ssh: a power-off command over SSH (generic boxes). api: the provider's documented HTTP API, as its
adapter (providers/<name>/) describes it. console: no API; the dashboard shows the exact console steps
and the operator attests them.
"""

import shlex
from dataclasses import dataclass, field

from django.conf import settings

from fleet.credentials import api_key_of, provider_key
from fleet.node_client import transport_for
from node.transport import CredentialError, TransportError
from providers import APIS
from providers.http import ProviderError, send, with_retries
from providers.interface import GONE, RUNNING, STOPPED, UNKNOWN
from providers.reading import (
    dig,
    next_page,
    put,
    read_balance,
    read_burn,
    read_endpoints,
    read_ends,
    read_inventory,
    read_names,
    read_resources,
    read_state,
    strip_strings,
)

# A consequence a provider carries out: its profile's teardown section has one entry per kind, and the
# kinds are custody's TeardownKind values ("shutdown", "release"), compared as strings down here.
SHUTDOWN = "shutdown"


class NeedsAttestation(Exception):
    """A console-only consequence: a person does it in the provider's console, then attests."""

    def __init__(self, steps: list[str]):
        super().__init__("console steps")
        self.steps = steps


def api_call(instance, verb: str, idempotency_key: str = "") -> dict:
    """{"http_status", "body"} of one documented call; 429 and 5xx are retried a bounded number of times."""
    provider = instance.profile_key
    api = APIS[provider]
    try:
        key = provider_key(instance)
    except CredentialError as exc:
        raise ProviderError(str(exc)) from None
    if not instance.provider_id:
        raise ProviderError("the instance has no provider id")
    return with_retries(provider, lambda: send(api, provider, verb, instance.provider_id, key, idempotency_key))


def call_verb(profile_key: str, credential, verb: str, provider_id: str = "", body=None) -> dict:
    """{"http_status", "body"} of one documented call under a credential's key, by its name in the API
    table; 429 and 5xx are retried a bounded number of times."""
    api, key = APIS[profile_key], key_of(credential)
    return with_retries(profile_key, lambda: send(api, profile_key, verb, provider_id, key, "", body))


def listed(profile_key: str, credential, verb: str, list_field: tuple[str, ...]) -> dict:
    """One list call's answer read to its end: every page the provider pages it in, their items together
    under list_field in the first page's answer. ProviderError on a non-200 page, a page token seen before,
    or a list that has not ended after the adapter's bound of pages (never a list cut short)."""
    api = APIS[profile_key]
    paging = api.paging if api.paging and verb in api.paging.verbs else None
    query, seen, items, first = dict(paging.first) if paging else None, set(), [], None
    for _ in range(paging.max_pages if paging else 1):
        answer = call_verb(profile_key, credential, verb, body=query)
        if answer["http_status"] != 200:
            raise ProviderError(f"{profile_key} answered {answer['http_status']} to the {verb} call")
        body = strip_strings(answer["body"]) if api.strip_strings else answer["body"]
        first = body if first is None else first
        page = dig(body, list_field)
        if not isinstance(page, list):
            return body  # read_* name the malformed answer
        items += page
        try:
            token = next_page(api, body) if paging else None
        except ValueError as exc:
            raise ProviderError(f"{profile_key}: {exc}") from None
        if token is None:
            return put(first, list_field, items)
        if token in seen:
            raise ProviderError(f"{profile_key} named a page of its {verb} list twice: it does not end")
        seen.add(token)
        query = {**paging.first, paging.param: token}
    raise ProviderError(
        f"{profile_key}'s {verb} call did not end after {paging.max_pages} pages ({len(items)} items): check the"
        " console; nothing is read from a list cut short"
    )


def list_resources(profile_key: str, credential) -> dict[str, str]:
    """Every box the provider lists under a credential's key: {provider id: state}. ProviderError when
    it cannot be asked or answers something unreadable (never an empty inventory by mistake)."""
    return list_boxes(profile_key, credential).inventory


def key_of(credential) -> str:
    """The credential's API key, read from the worker's environment; ProviderError where it cannot be."""
    try:
        return api_key_of(credential)
    except CredentialError as exc:
        raise ProviderError(str(exc)) from None


def account_balance(profile_key: str, credential) -> float | None:
    """The spendable balance under a credential's key where the provider's API tells it; None where it
    has no such call. ProviderError when it cannot be asked or answers no number."""
    api = APIS[profile_key]
    if "balance" not in api.endpoints:
        return None
    answer = call_verb(profile_key, credential, "balance")
    balance = read_balance(api, answer["body"]) if answer["http_status"] == 200 else None
    if balance is None:
        raise ProviderError(f"{profile_key} answered {answer['http_status']} with no balance to the account call")
    return balance


@dataclass(frozen=True)
class Listing:
    """What one "list" call says: each box's state, its SSH endpoint and end where named, and the burn
    ($/h) the provider prices what runs under the key (None where it does not say)."""

    inventory: dict[str, str]
    endpoints: dict[str, tuple[str, int]]
    ends: dict[str, float]
    burn: float | None
    names: dict[str, str] = field(default_factory=dict)  # the provider-side name of each listed box


def list_boxes(profile_key: str, credential) -> Listing:
    """Every box the provider lists under the key, as a Listing; ProviderError when unreadable."""
    api = APIS[profile_key]
    body = listed(profile_key, credential, "list", api.list_field)
    try:
        inventory = read_inventory(api, body)
    except ValueError as exc:
        raise ProviderError(f"{profile_key}: {exc}") from None
    return Listing(
        inventory, read_endpoints(api, body), read_ends(api, body), read_burn(api, body), read_names(api, body)
    )


def list_other_resources(profile_key: str, credential) -> dict[str, dict[str, tuple[str, float | None]]]:
    """{resource kind: {provider id: (name, $/h)}} of what else bills under the key (volumes,
    filesystems); ProviderError when a list cannot be asked or read."""
    api = APIS[profile_key]
    if not api.resources:
        return {}
    found = {}
    for listing in api.resources:
        body = listed(profile_key, credential, listing.verb, listing.list_field)
        try:
            found[listing.kind] = read_resources(listing, body)
        except ValueError as exc:
            raise ProviderError(f"{profile_key}: {exc}") from None
    return found


def provider_state(instance) -> str:
    """RUNNING / STOPPED / GONE as the provider's status endpoint says; UNKNOWN when it cannot say."""
    api = APIS.get(instance.profile_key)
    if api is None or "status" not in api.endpoints:
        return UNKNOWN
    try:
        answer = api_call(instance, "status")
    except ProviderError:
        return UNKNOWN
    return read_state(api, answer["http_status"], answer["body"])


def provider_says_stopped(instance) -> bool | None:
    """True when stopped or gone, False when running; None when the provider cannot say."""
    state = provider_state(instance)
    return None if state == UNKNOWN else state in (STOPPED, GONE)


def provider_status(instance) -> dict:
    """What the provider says about the box now, for a person settling an interrupted execution."""
    api = APIS.get(instance.profile_key)
    if api is None or "status" not in api.endpoints:
        return {"status": "no status API: check the console"}
    try:
        answer = api_call(instance, "status")
    except ProviderError as exc:
        return {"status": f"could not ask: {exc}"}
    words = {RUNNING: "still running", STOPPED: "stopped", GONE: "gone", UNKNOWN: "unknown: check the console"}
    return {"status": words[read_state(api, answer["http_status"], answer["body"])], "answer": answer["body"]}


def _api_consequence(instance, kind: str, idempotency_key: str) -> dict:
    """The provider call; a call that timed out or kept failing may still have landed (LAM14), so the
    status is asked before calling it failed: a box already stopped (or gone, for a release) is done."""
    try:
        answer = api_call(instance, kind, idempotency_key)
    except ProviderError as exc:
        state = provider_state(instance)
        if state == GONE or (state == STOPPED and kind == SHUTDOWN):
            return {"http_status": None, "body": {}, "note": f"{exc}; the provider then said {state}"}
        raise ProviderError(f"{exc} (the provider then said {state}: not done, retry)") from None
    if answer["http_status"] == 404:
        raise ProviderError(f"{instance.profile_key} does not know {instance.provider_id} (404): check the console")
    return answer


def console_steps(instance, kind: str) -> list[str]:
    profile = instance.profile
    verb = profile.data["teardown"]["shutdown" if kind == SHUTDOWN else "release"]["verb"]
    target = instance.provider_id or instance.name
    where = f"Open the {profile.name} console" if profile.kind != "ssh" else "Wherever this machine is managed"
    return [
        f"{where} and find instance {target} ({instance.address}).",
        f"Choose “{verb}” for that exact instance only.",
        f"Wait until the console shows it {'stopped' if kind == SHUTDOWN else 'gone'}, then attest here.",
    ]


def resource_console_steps(resource) -> list[str]:
    """Resource deletion is console-attested on every platform (no adapter deletes storage here)."""
    platform = resource.instance.profile.name
    named = f"{resource.facts.label} {resource.name}" + (
        f" (id {resource.provider_id})" if resource.provider_id else ""
    )
    return [
        f"Open the {platform} console and find the {named}.",
        f"Choose to {resource.facts.delete_verb}, for that one only.",
        "Wait until the console no longer lists it, then attest here.",
    ]


def _via(instance, kind: str) -> str:
    return instance.profile.data["teardown"]["shutdown" if kind == SHUTDOWN else "release"]["via"]


def by_api(instance, kind: str) -> bool:
    """This consequence is a call to the provider's API (so the provider can be asked whether it happened)."""
    return _via(instance, kind) == "api" and kind in getattr(APIS.get(instance.profile_key), "endpoints", {})


def execute(instance, kind: str, idempotency_key: str) -> dict:
    """Run one consequence at the provider; raises ProviderError or NeedsAttestation."""
    via = _via(instance, kind)
    if by_api(instance, kind):
        return _api_consequence(instance, kind, idempotency_key)
    if via == "ssh":
        if not instance.shutdown_command:  # never a default: on an SSH box it powers off a real machine
            raise ProviderError(f"{instance.name} has no shutdown command: set one on its page (Edit)")
        argv = shlex.split(instance.shutdown_command)
        try:
            with transport_for(instance) as transport:
                result = transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT)
        except TransportError as exc:
            raise ProviderError(f"power-off over SSH failed: {exc}") from None
        if result.exit_code != 0:
            raise ProviderError(f"power-off exited {result.exit_code}: {result.stderr.strip()[-300:]}")
        return {"command": shlex.join(argv), "exit_code": 0}
    if via == "none":
        raise ProviderError(f"{instance.profile.name} has no {kind} (for example Lambda has no stop: terminate)")
    raise NeedsAttestation(console_steps(instance, kind))
