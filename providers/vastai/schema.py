"""vast.ai's API as its published OpenAPI files say, the parts we send and read.

Source: vast-ai/docs @ c624622, `api-reference/openapi/yaml/`: search_offers.yaml (POST /api/v0/bundles/),
create_instance.yaml (PUT /api/v0/asks/{id}/), show_instances.yaml (GET /api/v1/instances/: "keyset
pagination (max 25 per page)"), show_instance.yaml, manage_instance.yaml, destroy_instance.yaml,
attach_ssh.yaml, show_user.yaml, show_volumes.yaml (each "Vast.ai ... API" 1.0.0, server
https://console.vast.ai). Checked 2026-12-07 against the vastai SDK 1.9.1 (PyPI), which sends the search's
filters at the top level with `allocated_storage`, pages v1's instances by `next_token`/`after_token` 25 at a
time, and strips every string of an instance row.

Where the document and its own example or SDK differ, we follow what vast's own client sends and say so: the
search's `type` enum reads `ondemand` while its example and the SDK send `on-demand`; the SDK's create sends
`client_id: "me"`, which the document does not define (not sent). The offer rows are an open object in the
document (`additionalProperties: true`); the fields we read are those of its example answer.
"""

from providers.schema import closed, nullable, open_object

STRING, INTEGER, NUMBER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
FILTER = {"type": "object"}  # {"eq"|"neq"|"gt"|"lt"|"gte"|"lte"|"in"|"notin": value}

# POST /api/v0/bundles/: the filters at the top level. dph_total is priced for allocated_storage GB of disk
# ("Storage allocation size in GB for the instance ... Default is 8GB"; the SDK's default is 5 GiB).
SEARCH_OFFERS = closed(
    {
        "limit": INTEGER,
        "type": {"type": "string", "enum": ["on-demand", "bid", "reserved"]},  # the document's enum: "ondemand"
        "verified": FILTER,
        "rentable": FILTER,
        "rented": FILTER,
        "external": FILTER,
        "num_gpus": FILTER,
        "gpu_ram": FILTER,
        "disk_space": FILTER,
        "direct_port_count": FILTER,
        "order": {"type": "array", "items": {"type": "array", "items": STRING}},
        "allocated_storage": NUMBER,
    }
)
# One offer, as the example answer writes it: gpu_ram MB per GPU, disk_space GB free, storage_cost $/GB/month,
# dph_total the whole box's $/h with allocated_storage GB of its disk.
OFFER = open_object(
    {
        "id": INTEGER,
        "ask_contract_id": INTEGER,
        "gpu_name": STRING,
        "num_gpus": INTEGER,
        "gpu_ram": NUMBER,
        "disk_space": NUMBER,
        "direct_port_count": INTEGER,
        "dph_total": NUMBER,
        "storage_cost": NUMBER,
        "geolocation": STRING,
    }
)
OFFERS = open_object({"offers": {"type": "array", "items": OFFER}})

VOLUME_INFO = closed({"create_new": BOOLEAN, "volume_id": INTEGER, "size": INTEGER, "mount_path": STRING})
RUNTYPE = ["ssh", "jupyter", "args", "ssh_proxy", "ssh_direct", "jupyter_proxy", "jupyter_direct"]
CREATE_INSTANCE = closed(
    {
        "image": STRING,
        "template_hash_id": STRING,
        "label": STRING,
        "disk": NUMBER,  # GB of local disk, fixed for the instance's life
        "runtype": {"type": "string", "enum": RUNTYPE},
        "target_state": {"type": "string", "enum": ["running", "stopped"]},
        "price": {"type": "number", "minimum": 0.001, "maximum": 128.0},
        "env": STRING,
        "onstart": STRING,
        "cancel_unavail": BOOLEAN,
        "volume_info": VOLUME_INFO,
    },
    ["image"],
)
CREATED = open_object({"success": BOOLEAN, "new_contract": INTEGER})

# Instance (show_instance's component): what the status call reads. The same fields head each row of v1's
# list, whose ports are the Docker map ({"22/tcp": [{"HostIp", "HostPort"}]}, "only present on running
# instances"); show_instance's component types ports as a list of integers instead: not read there.
FIELDS = {
    "id": INTEGER,
    "actual_status": nullable(STRING),
    "intended_status": STRING,
    "label": nullable(STRING),
    "public_ipaddr": STRING,
    "end_date": NUMBER,
    "dph_total": NUMBER,
    "disk_space": NUMBER,
    "storage_cost": NUMBER,
    "storage_total_cost": NUMBER,
    "status_msg": nullable(STRING),
}
INSTANCE = open_object(FIELDS)
PORT_MAP = {"type": "array", "items": open_object({"HostIp": STRING, "HostPort": STRING})}
ROW = open_object({**FIELDS, "ports": nullable({"type": "object", "additionalProperties": PORT_MAP})})
# null once destroyed: observed (../shared/reference/profiles/vastai.md VAST15), not in the file.
SHOW_INSTANCE = open_object({"instances": nullable(INSTANCE)})
LIST_QUERY = closed({"limit": {"type": "integer", "maximum": 25}, "after_token": STRING})
LIST_INSTANCES = open_object(
    {
        "success": BOOLEAN,
        "instances_found": INTEGER,
        "total_instances": INTEGER,
        "next_token": nullable(STRING),
        "instances": {"type": "array", "items": ROW},
    }
)
MANAGE_INSTANCE = closed({"state": {"type": "string", "enum": ["stopped", "running"]}, "label": STRING})
STATE_CHANGED = open_object({"success": BOOLEAN})  # SimpleBooleanSuccessResponse
SUCCESS = open_object({"success": BOOLEAN, "msg": STRING})  # destroy's and attach's
ATTACH_SSH = closed({"ssh_key": STRING})
USER = open_object({"id": INTEGER, "email": STRING, "balance": NUMBER})  # "The current balance of the user."
VOLUME = open_object({"id": INTEGER, "disk_space": NUMBER, "storage_total_cost": NUMBER, "status": STRING})
VOLUMES = open_object({"volumes": {"type": "array", "items": VOLUME}})
ERROR = open_object({"success": BOOLEAN, "error": STRING, "msg": STRING})  # e.g. "no_such_instance"

# What each verb the adapter calls gets back (providers/vastai/api.py's endpoints).
ANSWERS = {
    "status": SHOW_INSTANCE,
    "list": LIST_INSTANCES,
    "shutdown": STATE_CHANGED,
    "release": SUCCESS,
    "balance": USER,
    "offers": OFFERS,
    "create": CREATED,
    "list_volumes": VOLUMES,
    "attach_ssh": SUCCESS,
    "error": ERROR,
}
# What each verb sends.
REQUESTS = {"offers": SEARCH_OFFERS, "create": CREATE_INSTANCE, "shutdown": MANAGE_INSTANCE, "attach_ssh": ATTACH_SSH}
