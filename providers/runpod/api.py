"""RunPod's documented HTTP API as data (../shared/reference/profiles/runpod.md). Pure."""

from providers.interface import GONE, RUNNING, STOPPED, Endpoint, ProviderApi, ResourceList

BALANCE_QUERY = "query { myself { clientBalance currentSpendPerHr } }"

# rest.runpod.io/v1: a 200 on DELETE is not proof; the pod is gone once the show answers 404 (RP14).
API = ProviderApi(
    auth="bearer",
    endpoints={
        "shutdown": Endpoint("POST", "/v1/pods/{id}/stop"),
        "release": Endpoint("DELETE", "/v1/pods/{id}"),
        "status": Endpoint("GET", "/v1/pods/{id}"),
        "list": Endpoint("GET", "/v1/pods"),
        "list_network_volumes": Endpoint("GET", "/v1/networkvolumes"),
        "offers": Endpoint("POST", "/graphql", base="runpod-graphql"),
        "balance": Endpoint("POST", "/graphql", {"query": BALANCE_QUERY}, base="runpod-graphql"),
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
)
