"""The one interface every provider adapter implements (`providers/<name>/`): its documented HTTP API as
data (the calls, how the key is sent, where each answer keeps what we read), and, where the provider rents
by API, its renting functions. Pure: no HTTP here (providers/http.py sends; the fleet decides).

What an adapter answers, by the verbs the product uses:
    offers, create         Renting.search_body / read_offers / create_call / read_created / no_capacity
    list, read endpoint    ProviderApi.list_field, item_status, item_host, item_port, item_name
    release, shutdown      ProviderApi.endpoints["release"], ["shutdown"]; status: endpoints["status"]
    balance                ProviderApi.endpoints["balance"], balance_field
    resources              ProviderApi.resources (volumes, filesystems, static IPs, snapshots)
    timers                 ProviderApi.item_end or item_timer

Sources: ../shared/reference/profiles/{runpod,vastai,lambda,paperspace}.md (RP14, VAST15, LAM14).
A status answer is read from the provider's own field only; a value we do not know reads UNKNOWN,
never "stopped" (a box whose name contains "stopped" is still running).
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from providers.offers import Create, Need, Offer

RUNNING, STOPPED, GONE, UNKNOWN = "running", "stopped", "gone", "unknown"


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # "{id}" is the instance's provider id
    body: Any = None  # JSON template, "{id}" filled in; None sends no body
    base: str = ""  # a key of the adapter's bases when not its own (RunPod's GraphQL)


@dataclass(frozen=True)
class ResourceList:
    """A billable resource kind the provider lists beside its boxes (platforms/resources.py's kinds): where
    the list sits, each item's name and size, and the documented price that makes its $/h."""

    kind: str
    verb: str  # the endpoint's name in ProviderApi.endpoints
    list_field: tuple[str, ...]
    size_field: tuple[str, ...]  # empty: the list gives no size (its $/h is not told, unless flat or priced)
    bytes_per_unit: int  # 1 when the size is in GB already, 10**9 when it is in bytes
    per_gb_month: float  # the provider's documented price
    name_field: tuple[str, ...] = ("name",)
    id_field: tuple[str, ...] = ("id",)  # a static IP is named by its address
    flat_rate: float | None = None  # $/h whatever its size (a static IP), over per_gb_month
    rate_field: tuple[str, ...] = ()  # where the answer prices it itself ($/h), over per_gb_month


HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Paging:
    """How the provider pages a list: the query parameter that asks for the next page, and where an answer
    names it (absent, null or "" on the last page). Every page is read, at most max_pages of them: a list
    that does not end by then is a named failure, never an inventory cut short."""

    verbs: tuple[str, ...]  # the endpoints it pages (their names in ProviderApi.endpoints)
    param: str  # vast.ai: after_token; Paperspace: after
    next_field: tuple[str, ...]  # vast.ai: next_token; Paperspace: nextPage
    more_field: tuple[str, ...] = ()  # where the answer says another page follows (Paperspace: hasMore)
    first: dict = field(default_factory=dict)  # the first page's query (vast.ai: limit 25, its maximum)
    max_pages: int = 400


@dataclass(frozen=True)
class ProviderApi:
    auth: str  # "bearer": Authorization: Bearer KEY; "basic": HTTP basic, KEY as user, empty password
    endpoints: dict[str, Endpoint]
    status_field: tuple[str, ...]  # where the state word sits in the status answer
    states: dict[str, str] = field(default_factory=dict)  # the provider's word → RUNNING/STOPPED/GONE
    empty_means_gone: bool = False  # vast.ai answers {"instances": null} for a destroyed box (VAST15)
    # The provider's own documented "not found" in a 404's body; a 404 without it (a retired API version,
    # a wrong base) is not "gone". None: not yet read from the provider's document (any 404 is gone).
    not_found: Callable[[Any], bool] | None = None
    list_field: tuple[str, ...] = ()  # where the list sits in the "list" answer (every box under the key)
    item_status: tuple[str, ...] = ()  # where one listed box's state word sits
    item_host: tuple[str, ...] = ()  # where one listed box's public SSH address sits
    item_port: tuple[str | int, ...] = ()  # where its SSH port sits (keys, list indices; empty: 22)
    item_name: tuple[str, ...] = ()  # where a listed box's provider-side name sits (a rent finds its box by it)
    item_end: tuple[str, ...] = ()  # where a listed box's end sits (epoch seconds): its timer, read not typed
    # Or a timer the box's answer gives as (on?, last started at ISO date-time, hours after): Paperspace's
    # auto-shutdown (autoShutdownEnabled, reservation.dtStarted, autoShutdownTimeout).
    item_timer: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None
    item_rate: tuple[str, ...] = ()  # where a listed box's price sits ($/h): the burn the provider observes
    balance_field: tuple[str, ...] = ()  # where the account's spendable balance sits in the "balance" answer
    resources: tuple[ResourceList, ...] = ()  # what else bills under the key, listed by its own call
    paging: Paging | None = None  # None: each list is one answer (RunPod's pods, Lambda's instances)
    strip_strings: bool = False  # vast.ai's rows carry padded strings (its SDK strips every one)


# How a rented box is given the rent's SSH key, as the provider's documented API says.
KEY_IN_CREATE = "in_create"  # the create call carries it (RunPod: the pod's PUBLIC_KEY variable)
KEY_ATTACHED_AFTER = "attached_after"  # attached to the new box by its own call (vast.ai: POST /instances/{id}/ssh/)
KEY_NAMED_AT_LAUNCH = "named_at_launch"  # the launch names an account key, checked to be ours first (Lambda)


@dataclass(frozen=True)
class Renting:
    """A provider that searches offers and creates boxes by API. Every function is pure:

    search_body(need) -> dict | None       the offer search's body (None: a GET)
    read_offers(body, need) -> [Offer]     the offers in its answer; ValueError when it is not what the
                                           provider documents
    create_call(offer, need, name, image, ssh_key_name, public_key) -> Create
                                           the documented create call that rents this offer, named by the
                                           naming rule, with the rent's SSH key where the create takes it
    read_created(body) -> str | None       the new box's provider id, or None when the answer names none
    no_capacity(status, text) -> bool      the provider's documented "not now" (the offer was taken, no
                                           capacity): try the next candidate
    key_problem(body, name, public) -> str | None
                                           KEY_NAMED_AT_LAUNCH: why the account's key list (the
                                           "ssh_keys" call) would not let us in, or None
    attached(body) -> bool                 KEY_ATTACHED_AFTER: the "attach_ssh" answer says it did
    volumes: str                           what the create call attaches for the durable tier, named by
                                           the rent ("" = none here: such a rent does not ask it)
    volume_call(name, gb, region) -> Create
                                           the documented call that creates such a volume (a rent that asks
                                           for one of a size, where none of its name is listed)
    read_volume(body) -> str | None        the new volume's provider id in that call's answer
    volume_ref: str                        how the box's create names the volume: "id" or "name"
    volume_root: str                       where the volume is mounted on the box ({name}: its name): the
                                           box's durable mirror root
    """

    search_body: Callable[[Need], dict | None]
    read_offers: Callable[[Any, Need], list[Offer]]
    create_call: Callable[[Offer, Need, str, str, str, str], Create]
    read_created: Callable[[Any], str | None]
    no_capacity: Callable[[int, str], bool]
    box_key: str = KEY_IN_CREATE
    key_problem: Callable[[Any, str, str], str | None] | None = None
    attached: Callable[[Any], bool] | None = None
    volumes: str = ""
    volume_call: Callable[[str, int, str], Create] | None = None
    read_volume: Callable[[Any], str | None] | None = None
    volume_ref: str = "id"
    volume_root: str = ""
    name_max: int = 200  # the longest box name the create takes (Lambda: 64)

    def box_name(self, name: str) -> str:
        """The name the box is created and looked for under: the rent's, or, past the provider's limit, a
        stable shortening of it (its head and a digest: two rents never share one)."""
        if len(name) <= self.name_max:
            return name
        return f"{name[: self.name_max - 9]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"

    @classmethod
    def of(cls, module, **extra) -> "Renting":
        """A provider's renting module's five functions (providers/<name>/renting.py), and its key's way."""
        return cls(
            module.search_body, module.read_offers, module.create_call, module.read_created, module.no_capacity, **extra
        )


@dataclass(frozen=True)
class Adapter:
    name: str  # the platform profile's key (platforms/profiles/*.yaml)
    api: ProviderApi
    bases: dict[str, str]  # the documented API bases: the adapter's name, and any other base its endpoints name
    renting: Renting | None = None  # None: boxes are registered by hand, never rented here
    rent_rank: int = 0  # the order rents ask the providers in (lowest first)
