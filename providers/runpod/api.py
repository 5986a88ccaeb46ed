"""RunPod's documented HTTP API as data: REST v2 (providers/runpod/schema.py cites the document). Pure."""

from providers.interface import GONE, RUNNING, STOPPED, Endpoint, ProviderApi, ResourceList

BALANCE_QUERY = "query { myself { clientBalance currentSpendPerHr } }"


def not_found(body) -> bool:
    """RunPod's own "not found": v2's problem+json with status 404 (ErrorResponse). A 404 without it is a
    wrong base or a retired API version answering, not a pod that is gone."""
    return isinstance(body, dict) and body.get("status") == 404 and isinstance(body.get("detail"), str)


# api.runpod.io/v2: a 200 on DELETE is not proof; the pod is gone once the show answers RunPod's 404 (RP14).
API = ProviderApi(
    auth="bearer",
    endpoints={
        "shutdown": Endpoint("POST", "/v2/pods/{id}/action", {"action": "stop"}),
        "release": Endpoint("DELETE", "/v2/pods/{id}"),
        "status": Endpoint("GET", "/v2/pods/{id}"),
        "list": Endpoint("GET", "/v2/pods"),  # not paged (ListPodsResponse: every pod)
        "list_network_volumes": Endpoint("GET", "/v2/network-volumes"),
        "offers": Endpoint("GET", "/v2/catalog/gpus"),
        # No v2 call tells the balance: GraphQL's myself until GraphQL's retirement (schema.py).
        "balance": Endpoint("POST", "/graphql", {"query": BALANCE_QUERY}, base="runpod-graphql"),
    },
    # At $0 RunPod stops pods and then deletes their volumes: the balance is a clock (RP danger clocks).
    balance_field=("data", "myself", "clientBalance"),
    item_rate=("cost",),  # "Current cost in USD per hour (0.0 when EXITED or TERMINATED)"
    # A network volume bills per GB every hour it exists, attached or not (RP: $0.07/GB/month).
    resources=(ResourceList("network_volume", "list_network_volumes", ("networkVolumes",), ("size",), 1, 0.07),),
    status_field=("status",),
    list_field=("pods",),
    item_status=("status",),
    # Full SSH is direct TCP: PodSsh.direct, the pod's public address and the port mapped to 22/tcp (null
    # while it provisions or is stopped; the port changes on every pod reset).
    item_host=("ssh", "direct", "host"),
    item_name=("name",),
    item_port=("ssh", "direct", "port"),
    states={
        "PROVISIONING": RUNNING,  # allocated: it bills
        "STARTING": RUNNING,
        "RUNNING": RUNNING,
        "EXITED": STOPPED,
        "TERMINATED": GONE,
    },  # ERROR ("an unrecoverable error state") reads as unknown: a person looks at the console
    not_found=not_found,
)
