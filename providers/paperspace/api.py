"""Paperspace's documented HTTP API as data (../shared/reference/profiles/paperspace.md), its shapes as the v1
OpenAPI says (providers/paperspace/schema.py: Paperspace/cli @ c7bdd42 `api/openapi.ts`, generated from
https://api.paperspace.com/v1/openapi.json; checked 2026-12-07). Pure."""

from providers.interface import RUNNING, STOPPED, Endpoint, Paging, ProviderApi, ResourceList
from providers.paperspace.schema import NOT_FOUND


def not_found(body) -> bool:
    """Paperspace's own "no such machine": a 404 whose error names NOT_FOUND (a wrong base answers 404 too)."""
    return isinstance(body, dict) and body.get("code") == NOT_FOUND


# api.paperspace.com/v1 (the legacy Gradient endpoints are gone since July 2024).
API = ProviderApi(
    auth="bearer",
    endpoints={
        "shutdown": Endpoint("PATCH", "/v1/machines/{id}/stop"),
        "release": Endpoint("DELETE", "/v1/machines/{id}"),
        "status": Endpoint("GET", "/v1/machines/{id}"),
        "list": Endpoint("GET", "/v1/machines"),
        "list_public_ips": Endpoint("GET", "/v1/public-ips"),
        "list_snapshots": Endpoint("GET", "/v1/snapshots"),
        "list_shared_drives": Endpoint("GET", "/v1/shared-drives"),
    },
    not_found=not_found,
    # A static IP bills until released (capped at $3.00 a month: $0.0045/h), a snapshot per GB until
    # deleted ($0.29/GB/month), both after the machine is destroyed (PS §2, PS9); a shared drive bills its
    # storage until deleted. v1 lists a snapshot without its size and prices no shared drive: both are
    # listed at a rate their answer does not tell (never $0), not at one we would guess.
    resources=(
        ResourceList("static_ip", "list_public_ips", ("items",), (), 1, 0.0, ("ip",), ("ip",), 0.0045),
        ResourceList("snapshot", "list_snapshots", ("items",), (), 10**9, 0.29),
        ResourceList("shared_drive", "list_shared_drives", ("items",), (), 1, 0.0),
    ),
    # Every v1 list: {hasMore, nextPage, items}, the next page asked with ?after=nextPage.
    paging=Paging(
        ("list", "list_public_ips", "list_snapshots", "list_shared_drives"),
        "after",
        ("nextPage",),
        more_field=("hasMore",),
    ),
    status_field=("state",),
    list_field=("items",),
    item_status=("state",),
    item_name=("name",),
    item_host=("publicIp",),  # SSH on port 22; a dynamic IP is new on every start (PS6)
    # The auto-shutdown: on, and its hours (autoShutdownTimeout, "in hours"), from the machine's current run,
    # its reservation's dtStarted (the spec has no dtLastRun, which this read before: the clock never showed).
    item_timer=(("autoShutdownEnabled",), ("reservation", "dtStarted"), ("autoShutdownTimeout",)),
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
)
