"""How a provider's answers read, whatever the provider: the adapter's ProviderApi says where each
field sits; these functions dig it out and validate it (an answer is untrusted input). Pure: no HTTP.
"""

from datetime import datetime

from platforms.hosts import valid_host
from providers.interface import GONE, HOURS_PER_MONTH, RUNNING, UNKNOWN, ProviderApi, ResourceList
from wrapper.digits import ascii_int


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
    """RUNNING / STOPPED / GONE / UNKNOWN from one status answer; the provider's documented 404 means the
    box no longer exists (another 404 is a wrong base or a retired API answering: unknown)."""
    if http_status == 404:
        return GONE if api.not_found is None or api.not_found(body) else UNKNOWN
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


def dig(value, path):
    """What sits at path (dict keys, list indices) inside an answer, or None anywhere it does not."""
    for key in path:
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and len(value) > key else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return value


def put(body, path, value):
    """A copy of an answer with value at path (dict keys): the pages' items together in the first page."""
    if not path:
        return value
    base = dict(body) if isinstance(body, dict) else {}
    return {**base, path[0]: put(base.get(path[0]), path[1:], value)}


def read_inventory(api: ProviderApi, body) -> dict[str, str]:
    """{provider id: RUNNING/STOPPED/GONE/UNKNOWN} from one "list" answer; a malformed answer raises
    ValueError (an inventory we cannot read must never read as "nothing bills")."""
    items = dig(body, api.list_field)
    if not isinstance(items, list):
        raise ValueError("the provider's list answer is not a list where its documentation puts it")
    inventory = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str | int) or str(item["id"]) == "":
            raise ValueError("a listed resource has no id")
        word = dig(item, api.item_status)
        state = api.states.get(word, api.states.get(str(word).lower(), UNKNOWN)) if isinstance(word, str) else UNKNOWN
        inventory[str(item["id"])] = state
    return inventory


def _endpoint(api: ProviderApi, item: dict) -> tuple[str, int] | None:
    """(host, port) of one listed box, checked (the answer is untrusted input), or None."""
    host = dig(item, api.item_host)
    port = dig(item, api.item_port) if api.item_port else 22
    if isinstance(port, str):
        port = ascii_int(port, 65535)
    if not valid_host(host) or isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        return None
    return host, port


def read_endpoints(api: ProviderApi, body) -> dict[str, tuple[str, int]]:
    """{provider id: (host, SSH port)} of the listed boxes that name a valid one; nothing else."""
    if not api.item_host:
        return {}
    items = dig(body, api.list_field)
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
    items = dig(body, api.list_field) if api.item_name else None
    found = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str | int):
            name = dig(item, api.item_name)
            if isinstance(name, str) and 0 < len(name) <= 200:
                found[str(item["id"])] = name
    return found


# A plausible end: after 2020 and before 2100, in epoch seconds (anything else is not a date we act on).
END_RANGE = (1577836800, 4102444800)


def read_ends(api: ProviderApi, body) -> dict[str, float]:
    """{provider id: epoch seconds} of the listed boxes whose answer names when they stop; nothing else."""
    if not api.item_end and not api.item_timer:
        return {}
    items = dig(body, api.list_field)
    found = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str | int):
            end = dig(item, api.item_end) if api.item_end else _timer_end(api.item_timer, item)
            plausible = isinstance(end, int | float) and not isinstance(end, bool) and END_RANGE[0] < end < END_RANGE[1]
            if plausible:
                found[str(item["id"])] = float(end)
    return found


def _timer_end(timer, item: dict) -> float | None:
    """When an auto-shutdown timer stops the box: its last start plus its hours, when it is on."""
    on, started, hours = (dig(item, path) for path in timer)
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
    return _money(dig(body, api.balance_field)) if api.balance_field else None


def read_burn(api: ProviderApi, body) -> float | None:
    """Dollars per hour the provider prices what it lists as running under the key; None where it does not say."""
    if not api.item_rate:
        return None
    items = dig(body, api.list_field)
    total = 0.0
    for item in items if isinstance(items, list) else []:
        word = dig(item, api.item_status) if isinstance(item, dict) else None
        state = api.states.get(word, UNKNOWN) if isinstance(word, str) else UNKNOWN
        rate = _money(dig(item, api.item_rate)) if isinstance(item, dict) else None
        if state == RUNNING and rate is not None and rate > 0:
            total += rate
    return total


def read_resources(listing: ResourceList, body) -> dict[str, tuple[str, float | None]]:
    """{provider id: (name, $/h)} of one resource list answer ($/h None where its size is not given); a
    malformed answer raises ValueError (a list we cannot read must never read as "nothing bills")."""
    items = dig(body, listing.list_field)
    if not isinstance(items, list):
        raise ValueError(f"the {listing.kind} list is not a list where the documentation puts it")
    found = {}
    for item in items:
        ident = dig(item, listing.id_field) if isinstance(item, dict) else None
        if not isinstance(ident, str | int) or isinstance(ident, bool) or str(ident) == "" or len(str(ident)) > 100:
            raise ValueError(f"a listed {listing.kind} has no id")
        name = dig(item, listing.name_field)
        found[str(ident)] = (str(name)[:80] if isinstance(name, str) and name else str(ident), _rate(listing, item))
    return found


def _rate(listing: ResourceList, item: dict) -> float | None:
    if listing.flat_rate is not None:
        return listing.flat_rate
    if listing.rate_field:
        rate = _money(dig(item, listing.rate_field))
        return round(rate, 4) if rate is not None and rate >= 0 else None
    if not listing.size_field:
        return None  # the list gives no size to price (Paperspace's snapshots)
    size = dig(item, listing.size_field)
    if not (isinstance(size, int | float) and not isinstance(size, bool) and 0 <= size < 1e18):
        return None  # an unreadable size bills at a rate we cannot tell
    return round(float(size) / listing.bytes_per_unit * listing.per_gb_month / HOURS_PER_MONTH, 4)


def next_page(api: ProviderApi, body) -> str | None:
    """The token that asks for the page after this answer, or None on the last page (the provider's words:
    no token, or hasMore false where it says that too). A token that is not a short string is refused."""
    paging = api.paging
    if paging.more_field and dig(body, paging.more_field) is not True:
        return None
    token = dig(body, paging.next_field)
    if token is None or token == "":
        return None
    if not isinstance(token, str) or len(token) > 2000 or not token.isprintable():
        raise ValueError("the list answer names its next page with something that is not a page token")
    return token


def strip_strings(value):
    """Every string inside an answer without its padding (vast.ai pads some: its SDK strips them all)."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return [strip_strings(item) for item in value]
    if isinstance(value, dict):
        return {key: strip_strings(item) for key, item in value.items()}
    return value
