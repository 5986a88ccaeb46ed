"""Each provider's documented HTTP API as data: endpoints, how the key is sent, and how its status answer
reads. Pure: no HTTP here (calls.py sends the calls).

Sources: ../shared/reference/profiles/{runpod,vastai,lambda,paperspace}.md (RP14, VAST15, LAM14).
A status answer is read from the provider's own field only; a value we do not know reads UNKNOWN,
never "stopped" (a box whose name contains "stopped" is still running).
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from platforms.hosts import valid_host

RUNNING, STOPPED, GONE, UNKNOWN = "running", "stopped", "gone", "unknown"


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # "{id}" is the instance's provider id
    body: Any = None  # JSON template, "{id}" filled in; None sends no body
    base: str = ""  # a key of settings.PROVIDER_API_BASES when not the provider's own (RunPod's GraphQL)


@dataclass(frozen=True)
class ResourceList:
    """A billable resource kind the provider lists beside its boxes (platforms/resources.py's kinds): where
    the list sits, each item's name and size, and the documented price that makes its $/h."""

    kind: str
    verb: str  # the endpoint's name in ProviderApi.endpoints
    list_field: tuple[str, ...]
    size_field: tuple[str, ...]
    bytes_per_unit: int  # 1 when the size is in GB already, 10**9 when it is in bytes
    per_gb_month: float  # the provider's documented price
    name_field: tuple[str, ...] = ("name",)
    id_field: tuple[str, ...] = ("id",)  # a static IP is named by its address
    flat_rate: float | None = None  # $/h whatever its size (a static IP), over per_gb_month
    rate_field: tuple[str, ...] = ()  # where the answer prices it itself ($/h), over per_gb_month


HOURS_PER_MONTH = 730
RUNPOD_BALANCE = "query { myself { clientBalance currentSpendPerHr } }"


@dataclass(frozen=True)
class ProviderApi:
    auth: str  # "bearer": Authorization: Bearer KEY; "basic": HTTP basic, KEY as user, empty password
    endpoints: dict[str, Endpoint]
    status_field: tuple[str, ...]  # where the state word sits in the status answer
    states: dict[str, str] = field(default_factory=dict)  # the provider's word → RUNNING/STOPPED/GONE
    empty_means_gone: bool = False  # vast.ai answers {"instances": null} for a destroyed box (VAST15)
    list_field: tuple[str, ...] = ()  # where the list sits in the "list" answer (every box under the key)
    item_status: tuple[str, ...] = ()  # where one listed box's state word sits
    item_host: tuple[str, ...] = ()  # where one listed box's public SSH address sits
    item_port: tuple[str | int, ...] = ()  # where its SSH port sits (keys, list indices; empty: 22)
    item_name: tuple[str, ...] = ()  # where a listed box's provider-side name sits (a rent finds its box by it)
    item_end: tuple[str, ...] = ()  # where a listed box's end sits (epoch seconds): its timer, read not typed
    # Or a timer the box's answer gives as (on?, last started at ISO date-time, hours after): Paperspace's
    # auto-shutdown (autoShutdownEnabled, dtLastRun, autoShutdownTimeout).
    item_timer: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None
    item_rate: tuple[str, ...] = ()  # where a listed box's price sits ($/h): the burn the provider observes
    balance_field: tuple[str, ...] = ()  # where the account's spendable balance sits in the "balance" answer
    resources: tuple[ResourceList, ...] = ()  # what else bills under the key, listed by its own call


APIS = {
    # rest.runpod.io/v1: a 200 on DELETE is not proof; the pod is gone once the show answers 404 (RP14).
    "runpod": ProviderApi(
        auth="bearer",
        endpoints={
            "shutdown": Endpoint("POST", "/v1/pods/{id}/stop"),
            "release": Endpoint("DELETE", "/v1/pods/{id}"),
            "status": Endpoint("GET", "/v1/pods/{id}"),
            "list": Endpoint("GET", "/v1/pods"),
            "list_network_volumes": Endpoint("GET", "/v1/networkvolumes"),
            "offers": Endpoint("POST", "/graphql", base="runpod-graphql"),
            "balance": Endpoint("POST", "/graphql", {"query": RUNPOD_BALANCE}, base="runpod-graphql"),
        },
        # At $0 RunPod stops pods and then deletes their volumes: the balance is a clock (RP danger clocks).
        balance_field=("data", "myself", "clientBalance"),
        item_rate=("costPerHr",),
        # A network volume bills per GB every hour it exists, attached or not (RP: $0.07/GB/month).
        resources=(ResourceList("network_volume", "list_network_volumes", (), ("size",), 1, 0.07),),
        status_field=("desiredStatus",),
        list_field=(),
        item_status=("desiredStatus",),
        # Full SSH is direct TCP: the pod's public IP and the random external port mapped to 22, which
        # changes on every pod reset (docs.runpod.io expose-ports).
        item_host=("publicIp",),
        item_name=("name",),
        item_port=("portMappings", "22"),
        states={"RUNNING": RUNNING, "EXITED": STOPPED, "TERMINATED": GONE},
    ),
    # console.vast.ai, Bearer: show_instance's actual_status; destroy is eventually consistent (VAST15).
    "vastai": ProviderApi(
        auth="bearer",
        endpoints={
            "shutdown": Endpoint("PUT", "/api/v0/instances/{id}/", {"state": "stopped"}),
            "release": Endpoint("DELETE", "/api/v0/instances/{id}/"),
            "status": Endpoint("GET", "/api/v0/instances/{id}/"),
            "list": Endpoint("GET", "/api/v0/instances/"),
            "balance": Endpoint("GET", "/api/v0/users/current/"),
            "offers": Endpoint("POST", "/api/v0/bundles/"),
            "list_volumes": Endpoint("GET", "/api/v0/volumes/"),
            # Account keys reach only boxes created after them (VA §SSH): the rent's key is attached to its box.
            "attach_ssh": Endpoint("POST", "/api/v0/instances/{id}/ssh/"),
        },
        # A volume bills per GB after its instance is destroyed, until deleted; each is priced by its host:
        # the answer's storage_total_cost ($/h), where it gives one.
        resources=(
            ResourceList(
                "volume", "list_volumes", ("volumes",), ("disk_space",), 1, 0.0, rate_field=("storage_total_cost",)
            ),
        ),
        status_field=("instances", "actual_status"),
        # At $0 vast.ai schedules instances, volumes and data for deletion: the credit is a clock.
        balance_field=("credit",),
        item_rate=("dph_total",),
        list_field=("instances",),
        item_status=("actual_status",),
        item_host=("public_ipaddr",),
        item_name=("label",),
        item_port=("ports", "22/tcp", 0, "HostPort"),  # direct SSH: the host port mapped to 22 (VAST §3)
        # On-demand rentals stop when the host-set rental end date is reached (VAST, danger clocks).
        item_end=("end_date",),
        states={
            "running": RUNNING,
            "loading": RUNNING,
            "scheduling": RUNNING,
            "created": RUNNING,
            "exited": STOPPED,
            "stopped": STOPPED,
            "inactive": STOPPED,
            "offline": STOPPED,
            "destroyed": GONE,
        },
        empty_means_gone=True,
    ),
    # cloud.lambdalabs.com/api/v1, basic auth with the key as user: terminate is the only meter stop.
    "lambda": ProviderApi(
        auth="basic",
        endpoints={
            "release": Endpoint("POST", "/api/v1/instance-operations/terminate", {"instance_ids": ["{id}"]}),
            "status": Endpoint("GET", "/api/v1/instances/{id}"),
            "list": Endpoint("GET", "/api/v1/instances"),
            "list_file_systems": Endpoint("GET", "/api/v1/file-systems"),
            "offers": Endpoint("GET", "/api/v1/instance-types"),
            "ssh_keys": Endpoint("GET", "/api/v1/ssh-keys"),  # a launch names keys registered here
        },
        # A persistent filesystem bills until deleted, after every instance is terminated (LAM: $0.20/GB/month).
        resources=(ResourceList("persistent_fs", "list_file_systems", ("data",), ("bytes_used",), 10**9, 0.20),),
        status_field=("data", "status"),
        list_field=("data",),
        item_status=("status",),
        item_host=("ip",),  # SSH on port 22 (LAM §3); the IP is new on every launch
        item_name=("name",),
        states={
            "booting": RUNNING,
            "active": RUNNING,
            "unhealthy": RUNNING,
            "terminating": STOPPED,
            "terminated": GONE,
        },
    ),
    # api.paperspace.com/v1 (the legacy Gradient endpoints are gone since July 2024).
    "paperspace": ProviderApi(
        auth="bearer",
        endpoints={
            "shutdown": Endpoint("PATCH", "/v1/machines/{id}/stop"),
            "release": Endpoint("DELETE", "/v1/machines/{id}"),
            "status": Endpoint("GET", "/v1/machines/{id}"),
            "list": Endpoint("GET", "/v1/machines"),
            "list_public_ips": Endpoint("GET", "/v1/public-ips"),
            "list_snapshots": Endpoint("GET", "/v1/snapshots"),
        },
        # A static IP bills until released (capped at $3.00 a month: $0.0045/h), a snapshot per GB until
        # deleted ($0.29/GB/month), both after the machine is destroyed (PS §2, PS9).
        resources=(
            ResourceList("static_ip", "list_public_ips", ("items",), (), 1, 0.0, ("ip",), ("ip",), 0.0045),
            ResourceList("snapshot", "list_snapshots", ("items",), ("size",), 10**9, 0.29),
        ),
        status_field=("state",),
        list_field=("items",),
        item_status=("state",),
        item_name=("name",),
        item_host=("publicIp",),  # SSH on port 22; a dynamic IP is new on every start (PS6)
        item_timer=(("autoShutdownEnabled",), ("dtLastRun",), ("autoShutdownTimeout",)),
        states={
            "provisioning": RUNNING,
            "starting": RUNNING,
            "ready": RUNNING,
            "serviceready": RUNNING,
            "restarting": RUNNING,
            "upgrading": RUNNING,
            "stopping": STOPPED,
            "off": STOPPED,
        },
    ),
}


def fill(template, provider_id: str):
    """The template with every "{id}" replaced by the provider id (strings, lists and dicts)."""
    if isinstance(template, str):
        return template.replace("{id}", provider_id)
    if isinstance(template, list):
        return [fill(item, provider_id) for item in template]
    if isinstance(template, dict):
        return {key: fill(value, provider_id) for key, value in template.items()}
    return template


def read_state(api: ProviderApi, http_status: int, body) -> str:
    """RUNNING / STOPPED / GONE / UNKNOWN from one status answer; 404 means the box no longer exists."""
    if http_status == 404:
        return GONE
    value = body
    for key in api.status_field:
        if not isinstance(value, dict):
            return UNKNOWN
        value = value.get(key)
        if value is None:
            return GONE if api.empty_means_gone and key == api.status_field[0] else UNKNOWN
    if not isinstance(value, str):
        return UNKNOWN
    return api.states.get(value.strip(), api.states.get(value.strip().lower(), UNKNOWN))


def _dig(value, path):
    """What sits at path (dict keys, list indices) inside an answer, or None anywhere it does not."""
    for key in path:
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and len(value) > key else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return value


def read_inventory(api: ProviderApi, body) -> dict[str, str]:
    """{provider id: RUNNING/STOPPED/GONE/UNKNOWN} from one "list" answer; a malformed answer raises
    ValueError (an inventory we cannot read must never read as "nothing bills")."""
    items = _dig(body, api.list_field)
    if not isinstance(items, list):
        raise ValueError("the provider's list answer is not a list where its documentation puts it")
    inventory = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str | int) or str(item["id"]) == "":
            raise ValueError("a listed resource has no id")
        word = _dig(item, api.item_status)
        state = api.states.get(word, api.states.get(str(word).lower(), UNKNOWN)) if isinstance(word, str) else UNKNOWN
        inventory[str(item["id"])] = state
    return inventory


def _endpoint(api: ProviderApi, item: dict) -> tuple[str, int] | None:
    """(host, port) of one listed box, checked (the answer is untrusted input), or None."""
    host = _dig(item, api.item_host)
    port = _dig(item, api.item_port) if api.item_port else 22
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if not valid_host(host) or isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        return None
    return host, port


def read_endpoints(api: ProviderApi, body) -> dict[str, tuple[str, int]]:
    """{provider id: (host, SSH port)} of the listed boxes that name a valid one; nothing else."""
    if not api.item_host:
        return {}
    items = _dig(body, api.list_field)
    if not isinstance(items, list):
        return {}
    found = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), str | int):
            endpoint = _endpoint(api, item)
            if endpoint is not None:
                found[str(item["id"])] = endpoint
    return found


def read_names(api: ProviderApi, body) -> dict[str, str]:
    """{provider id: name} of the listed boxes that carry a name (untrusted: bounded, strings only)."""
    items = _dig(body, api.list_field) if api.item_name else None
    found = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str | int):
            name = _dig(item, api.item_name)
            if isinstance(name, str) and 0 < len(name) <= 200:
                found[str(item["id"])] = name
    return found


# A plausible end: after 2020 and before 2100, in epoch seconds (anything else is not a date we act on).
END_RANGE = (1577836800, 4102444800)


def read_ends(api: ProviderApi, body) -> dict[str, float]:
    """{provider id: epoch seconds} of the listed boxes whose answer names when they stop; nothing else."""
    if not api.item_end and not api.item_timer:
        return {}
    items = _dig(body, api.list_field)
    found = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str | int):
            end = _dig(item, api.item_end) if api.item_end else _timer_end(api.item_timer, item)
            plausible = isinstance(end, int | float) and not isinstance(end, bool) and END_RANGE[0] < end < END_RANGE[1]
            if plausible:
                found[str(item["id"])] = float(end)
    return found


def _timer_end(timer, item: dict) -> float | None:
    """When an auto-shutdown timer stops the box: its last start plus its hours, when it is on."""
    on, started, hours = (_dig(item, path) for path in timer)
    plausible_hours = isinstance(hours, int | float) and not isinstance(hours, bool) and 0 < hours <= 24 * 366
    if on is not True or not plausible_hours or not isinstance(started, str) or len(started) > 40:
        return None
    try:
        start = datetime.fromisoformat(started.replace("Z", "+00:00"))
    except ValueError:
        return None
    if start.tzinfo is None:
        return None  # a time without its zone is not one we act on
    return start.timestamp() + hours * 3600


def _money(value) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e9
    return float(value) if ok and value == value else None  # NaN is not money


def read_balance(api: ProviderApi, body) -> float | None:
    """The account's spendable balance in dollars from its "balance" answer; None when it is not a number."""
    return _money(_dig(body, api.balance_field)) if api.balance_field else None


def read_burn(api: ProviderApi, body) -> float | None:
    """Dollars per hour the provider prices what it lists as running under the key; None where it does not say."""
    if not api.item_rate:
        return None
    items = _dig(body, api.list_field)
    total = 0.0
    for item in items if isinstance(items, list) else []:
        word = _dig(item, api.item_status) if isinstance(item, dict) else None
        state = api.states.get(word, UNKNOWN) if isinstance(word, str) else UNKNOWN
        rate = _money(_dig(item, api.item_rate)) if isinstance(item, dict) else None
        if state == RUNNING and rate is not None and rate > 0:
            total += rate
    return total


def read_resources(listing: ResourceList, body) -> dict[str, tuple[str, float | None]]:
    """{provider id: (name, $/h)} of one resource list answer ($/h None where its size is not given); a
    malformed answer raises ValueError (a list we cannot read must never read as "nothing bills")."""
    items = _dig(body, listing.list_field)
    if not isinstance(items, list):
        raise ValueError(f"the {listing.kind} list is not a list where the documentation puts it")
    found = {}
    for item in items:
        ident = _dig(item, listing.id_field) if isinstance(item, dict) else None
        if not isinstance(ident, str | int) or isinstance(ident, bool) or str(ident) == "" or len(str(ident)) > 100:
            raise ValueError(f"a listed {listing.kind} has no id")
        name = _dig(item, listing.name_field)
        found[str(ident)] = (str(name)[:80] if isinstance(name, str) and name else str(ident), _rate(listing, item))
    return found


def _rate(listing: ResourceList, item: dict) -> float | None:
    if listing.flat_rate is not None:
        return listing.flat_rate
    if listing.rate_field:
        rate = _money(_dig(item, listing.rate_field))
        return round(rate, 4) if rate is not None and rate >= 0 else None
    size = _dig(item, listing.size_field)
    if not (isinstance(size, int | float) and not isinstance(size, bool) and 0 <= size < 1e18):
        return None  # an unreadable size bills at a rate we cannot tell
    return round(float(size) / listing.bytes_per_unit * listing.per_gb_month / HOURS_PER_MONTH, 4)
