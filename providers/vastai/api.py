"""vast.ai's HTTP API as its published OpenAPI files say (providers/vastai/schema.py cites them: vast-ai/docs
@ c624622, checked 2026-12-07), and ../shared/reference/profiles/vastai.md for what no file says. Pure."""

from providers.interface import GONE, RUNNING, STOPPED, Endpoint, Paging, ProviderApi, ResourceList


def not_found(body) -> bool:
    """vast.ai's own "no such instance" (manage/destroy 404: {"success": false, "error": "no_such_instance"})."""
    return isinstance(body, dict) and body.get("error") == "no_such_instance"


# console.vast.ai, Bearer: show_instance's actual_status; destroy is eventually consistent (VAST15).
API = ProviderApi(
    auth="bearer",
    endpoints={
        "shutdown": Endpoint("PUT", "/api/v0/instances/{id}/", {"state": "stopped"}),
        "release": Endpoint("DELETE", "/api/v0/instances/{id}/"),
        "status": Endpoint("GET", "/api/v0/instances/{id}/"),
        # v1's list (the SDK's since 2026-06: the v0 list is "deprecated"): keyset pages of at most 25.
        "list": Endpoint("GET", "/api/v1/instances/"),
        "balance": Endpoint("GET", "/api/v0/users/current/"),
        "offers": Endpoint("POST", "/api/v0/bundles/"),
        "list_volumes": Endpoint("GET", "/api/v0/volumes/"),
        # Account keys reach only boxes created after them (VA §SSH): the rent's key is attached to its box.
        "attach_ssh": Endpoint("POST", "/api/v0/instances/{id}/ssh/"),
    },
    # A volume bills per GB after its instance is destroyed, until deleted; each is priced by its host:
    # the answer's storage_total_cost ($/h), where it gives one. show_volumes' Volume has no name: named by its id.
    resources=(
        ResourceList(
            "volume", "list_volumes", ("volumes",), ("disk_space",), 1, 0.0, ("id",), rate_field=("storage_total_cost",)
        ),
    ),
    paging=Paging(("list",), "after_token", ("next_token",), first={"limit": 25}),
    strip_strings=True,
    not_found=not_found,
    status_field=("instances", "actual_status"),
    # At $0 vast.ai schedules instances, volumes and data for deletion: the balance is a clock (show_user's
    # documented field is `balance`, "The current balance of the user"; `credit` is not one of its fields).
    balance_field=("balance",),
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
)
