"""Lambda's documented HTTP API as data (../shared/reference/profiles/lambda.md). Pure."""

from providers.interface import GONE, RUNNING, STOPPED, Endpoint, ProviderApi, ResourceList


def not_found(body) -> bool:
    """Lambda's own "not found" (Lambda Cloud API 1.10.0: error code global/object-does-not-exist)."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") == "global/object-does-not-exist"


# cloud.lambda.ai/api/v1 (1.10.0: cloud.lambdalabs.com is the "Secondary production server (deprecated)"),
# basic auth with the key as user: terminate is the only meter stop.
API = ProviderApi(
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
        "preempted": STOPPED,  # ended by Lambda: no compute bills; its release is still asked and proven
    },
    not_found=not_found,
)
