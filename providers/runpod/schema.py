"""RunPod's REST API v2 as its published OpenAPI document says, the parts we send and read.

Source: runpod/docs @ a900806, `api-reference-v2/openapi.json` ("Runpod REST API" 2.0.0, server
https://api.runpod.io; REST v2 GA 2026-08-18), and `api-reference-v2/migrate-from-v1.mdx` ("REST API v1 is
deprecated and will be retired on November 15, 2026"). Checked 2026-12-07. Component names are the
document's (#/components/schemas/...). v2 refuses a field it does not define ("$: additional properties
'bogus' not allowed", ErrorResponse's example), so every request schema here is closed.

GraphQL (https://api.runpod.io/graphql) is kept for one thing v2 has no call for: the account's balance
(`myself { clientBalance }`, sdks/graphql/manage-pods.mdx; the runpod SDK 1.12.0 api/graphql.py). RunPod
retires GraphQL "in early 2027"; when it does, the balance is read from nothing and the danger clock says so
(fleet/provider_calls.account_balance: a ProviderError is "unknown", never "plenty").
"""

from providers.schema import closed, nullable, open_object

STRING, INTEGER, NUMBER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
AVAILABILITY = {"type": "string", "enum": ["NONE", "LOW", "MEDIUM", "HIGH"]}  # AvailabilityLevel
CLOUD = {"type": "string", "enum": ["SECURE", "COMMUNITY"]}  # Cloud
POD_STATUS = {  # PodStatus
    "type": "string",
    "enum": ["PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED"],
}
POD_ACTION = {"type": "string", "enum": ["start", "stop", "restart", "terminate"]}  # PodAction

# Mounts: persistent (the pod's own volume disk, size ≥ 10 GB) and network volumes by id.
PERSISTENT_MOUNT = closed({"size": {"type": "integer", "minimum": 10}, "path": STRING}, ["size", "path"])
NETWORK_MOUNT = closed({"volumeId": STRING, "path": STRING}, ["volumeId", "path"])
MOUNTS = closed({"persistent": PERSISTENT_MOUNT, "network": {"type": "array", "items": NETWORK_MOUNT, "maxItems": 1}})

# CreatePodRequest = ContainerConfig (BaseContainerConfig + registry) + its own fields; exactly one of gpu, cpu.
CREATE_POD = closed(
    {
        "args": STRING,
        "disk": {"type": "integer", "minimum": 1},  # container disk, GB (ephemeral, wiped on restart)
        "env": {"type": "object", "additionalProperties": STRING},
        "image": STRING,
        "ports": {"type": "array", "items": STRING},  # "port/protocol"
        "registry": nullable(STRING),
        "name": STRING,
        "cloud": CLOUD,  # default SECURE
        "cpu": closed({"id": STRING, "vcpuCount": {"type": "integer", "minimum": 2}}, ["id", "vcpuCount"]),
        "dataCenterIds": {"type": "array", "items": STRING},
        "globalNetworking": BOOLEAN,
        "gpu": closed(
            {
                "id": STRING,
                "count": {"type": "integer", "minimum": 1},
                "allowedCudaVersions": {"type": "array", "items": STRING},
                "minCudaVersion": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\Z"},  # ASCII digits (ours)
            },
            ["id"],
        ),
        "mounts": MOUNTS,
        "startJupyter": BOOLEAN,
        "startSsh": BOOLEAN,
        "templateId": STRING,
    },
    ["name"],  # the document requires name only (the migration guide says name and image)
)

SSH_ENDPOINT = open_object(
    {"host": STRING, "port": INTEGER, "username": STRING, "command": STRING}, ["host", "port", "username", "command"]
)
# Pod: what GET /v2/pods/{id}, the list's items, the create's 201 and the action's 200 answer.
POD = open_object(
    {
        "id": STRING,
        "name": STRING,
        "args": STRING,
        "image": STRING,
        "disk": INTEGER,
        "env": {"type": "object", "additionalProperties": STRING},
        "ports": {"type": "array", "items": STRING},
        "registry": nullable(STRING),
        "status": POD_STATUS,
        "actions": {"type": "array", "items": POD_ACTION},
        "mounts": MOUNTS,
        "gpu": open_object({"id": STRING, "count": INTEGER}, ["id"]),  # absent on a CPU pod
        "cloud": CLOUD,
        "dataCenterId": nullable(STRING),
        "cudaVersion": nullable(STRING),
        # PodSsh: direct is null unless 22/tcp is in ports and the running pod has a public port for it.
        "ssh": open_object({"proxy": nullable(SSH_ENDPOINT), "direct": nullable(SSH_ENDPOINT)}, ["proxy", "direct"]),
        "template": nullable(STRING),
        "cost": NUMBER,  # "Current cost in USD per hour (0.0 when EXITED or TERMINATED)"
        "locked": BOOLEAN,
        "globalNetworking": open_object({"enabled": BOOLEAN}, ["enabled"]),
        "runtime": {"type": ["object", "null"]},  # utilisation while it runs: not read
        "createdAt": STRING,
        "startedAt": nullable(STRING),
    },
    ["id", "name", "args", "image", "disk", "env", "ports", "registry", "status", "actions", "mounts", "cloud"]
    + ["dataCenterId", "cudaVersion", "ssh", "template", "cost", "locked", "globalNetworking", "runtime"]
    + ["createdAt", "startedAt"],
)
LIST_PODS = open_object({"pods": {"type": "array", "items": POD}}, ["pods"])  # ListPodsResponse
POD_ACTION_REQUEST = closed({"action": POD_ACTION}, ["action"])  # PodActionRequest

VOLUME_TYPE = {"type": "string", "enum": ["STANDARD", "HIGH_PERFORMANCE"]}  # VolumeType
SIZE = {"type": "integer", "minimum": 10, "maximum": 4096}
NETWORK_VOLUME = open_object(
    {"id": STRING, "name": STRING, "size": SIZE, "dataCenter": STRING, "type": VOLUME_TYPE},
    ["id", "name", "size", "dataCenter", "type"],
)
LIST_NETWORK_VOLUMES = open_object({"networkVolumes": {"type": "array", "items": NETWORK_VOLUME}}, ["networkVolumes"])
CREATE_NETWORK_VOLUME = closed(
    {"dataCenter": STRING, "name": STRING, "size": SIZE, "type": VOLUME_TYPE}, ["dataCenter", "name", "size"]
)

# GpuType (GET /v2/catalog/gpus): price is per GPU per hour, for each cloud ("the rate for a unit is the
# figure times gpu.count"); availability only with include=AVAILABILITY&product=POD.
GPU_TYPE = open_object(
    {
        "id": STRING,
        "name": STRING,
        "pool": nullable(STRING),
        "manufacturer": {"type": "string", "enum": ["NVIDIA", "AMD", "UNKNOWN"]},
        "memory": INTEGER,
        "secure": BOOLEAN,
        "community": BOOLEAN,
        "price": open_object({"secure": NUMBER, "community": NUMBER, "serverless": NUMBER}, ["secure", "community"]),
        "maxCount": open_object({"secure": INTEGER, "community": INTEGER}, ["secure", "community"]),
        "availability": AVAILABILITY,
        "dataCenters": {
            "type": "array",
            "items": open_object(
                {"id": STRING, "name": STRING, "availability": AVAILABILITY}, ["id", "name", "availability"]
            ),
        },
    },
    ["id", "name", "pool", "manufacturer", "memory", "secure", "community", "price", "maxCount"],
)
LIST_GPU_TYPES = open_object({"gpus": {"type": "array", "items": GPU_TYPE}}, ["gpus"])  # ListGpuTypesResponse
# The catalogue's query (components/parameters): include=AVAILABILITY requires product; count and cloud
# are "valid only with include=AVAILABILITY".
CATALOG_QUERY = closed(
    {
        "include": {"type": "string", "enum": ["AVAILABILITY"]},
        "product": {"type": "string", "enum": ["POD", "CLUSTER", "SERVERLESS"]},
        "count": {"type": "integer", "minimum": 1},
        "cloud": CLOUD,
    }
)

# ErrorResponse (RFC 9457 problem+json): every v2 error, a 404 among them.
ERROR = open_object({"title": STRING, "status": INTEGER, "detail": STRING}, ["title", "status", "detail"])

# The balance, on GraphQL until its retirement: {"data": {"myself": {"clientBalance": number}}}.
BALANCE = open_object(
    {"data": open_object({"myself": open_object({"clientBalance": NUMBER, "currentSpendPerHr": NUMBER})})}
)

# What each verb the adapter calls gets back (providers/runpod/api.py's endpoints).
ANSWERS = {
    "status": POD,
    "list": LIST_PODS,
    "shutdown": POD,
    "create": POD,
    "list_network_volumes": LIST_NETWORK_VOLUMES,
    "create_volume": NETWORK_VOLUME,
    "offers": LIST_GPU_TYPES,
    "balance": BALANCE,
    "error": ERROR,
}
