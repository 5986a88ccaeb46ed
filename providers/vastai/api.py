"""vast.ai's documented HTTP API as data (../shared/reference/profiles/vastai.md). Pure."""

from providers.interface import GONE, RUNNING, STOPPED, Endpoint, ProviderApi, ResourceList

# console.vast.ai, Bearer: show_instance's actual_status; destroy is eventually consistent (VAST15).
API = ProviderApi(
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
)
