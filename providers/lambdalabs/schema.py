"""Lambda's Cloud API as its published OpenAPI document says, the parts we send and read.

Source: Lambda Cloud API 1.10.0 (the official https://cloud.lambda.ai/api/v1/openapi.json; a kept copy:
api-evangelist/lambda-labs @ 911506f, `openapi/_original/lambda-labs-openapi.json`), servers
https://cloud.lambda.ai/ and https://cloud.lambdalabs.com/ ("Secondary production server (deprecated)").
Checked 2026-12-07. Every answer is closed (`additionalProperties: false` around `data`); the requests are
objects we write closed, with the document's own limits (names of 64, filesystem names of 60 and its pattern).
"""

from providers.schema import closed, open_object

STRING, INTEGER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
STATUS = {  # InstanceStatus
    "type": "string",
    "enum": ["booting", "active", "unhealthy", "terminated", "terminating", "preempted"],
}

LAUNCH = closed(  # InstanceLaunchRequest
    {
        "region_name": STRING,
        "instance_type_name": STRING,
        "ssh_key_names": {"type": "array", "items": STRING},
        "file_system_names": {"type": "array", "items": STRING},
        "name": {"type": "string", "maxLength": 64},
    },
    ["region_name", "instance_type_name", "ssh_key_names"],
)
LAUNCHED = open_object(
    {"data": open_object({"instance_ids": {"type": "array", "items": STRING}}, ["instance_ids"])}, ["data"]
)
TERMINATE = closed({"instance_ids": {"type": "array", "items": STRING}}, ["instance_ids"])

INSTANCE = open_object(  # Instance: what status, list and terminate read
    {"id": STRING, "status": STATUS, "ip": STRING, "name": STRING, "hostname": STRING},
    ["id", "status", "ssh_key_names", "file_system_names", "region", "instance_type", "actions"],
)
SHOW_INSTANCE = open_object({"data": INSTANCE}, ["data"])
LIST_INSTANCES = open_object({"data": {"type": "array", "items": INSTANCE}}, ["data"])
TERMINATED = open_object(
    {"data": open_object({"terminated_instances": {"type": "array", "items": INSTANCE}}, ["terminated_instances"])},
    ["data"],
)

SPECS = open_object({"gpus": INTEGER}, ["vcpus", "memory_gib", "storage_gib", "gpus"])
INSTANCE_TYPE = open_object(
    {"gpu_description": STRING, "price_cents_per_hour": INTEGER, "specs": SPECS},
    ["name", "description", "gpu_description", "price_cents_per_hour", "specs"],
)
REGION = open_object({"name": STRING}, ["name", "description"])
INSTANCE_TYPES = open_object(  # data: {type name: InstanceTypesItem}
    {
        "data": {
            "type": "object",
            "additionalProperties": open_object(
                {"instance_type": INSTANCE_TYPE, "regions_with_capacity_available": {"type": "array", "items": REGION}},
                ["instance_type", "regions_with_capacity_available"],
            ),
        }
    },
    ["data"],
)

FILESYSTEM = open_object(  # Filesystem
    {"id": STRING, "name": STRING, "bytes_used": INTEGER},
    ["id", "name", "mount_point", "created", "created_by", "is_in_use", "region"],
)
FILESYSTEMS = open_object({"data": {"type": "array", "items": FILESYSTEM}}, ["data"])
CREATE_FILESYSTEM = closed(
    {"name": {"type": "string", "maxLength": 60, "pattern": r"^[a-zA-Z]+[0-9a-zA-Z-]*\Z"}, "region": STRING},
    ["name", "region"],
)
CREATED_FILESYSTEM = open_object({"data": FILESYSTEM}, ["data"])
SSH_KEY = open_object({"id": STRING, "name": STRING, "public_key": STRING}, ["id", "name", "public_key"])
SSH_KEYS = open_object({"data": {"type": "array", "items": SSH_KEY}}, ["data"])

ERROR = closed(  # the 404 of GET /instances/{id}: {"error": {"code": "global/object-does-not-exist", ...}}
    {"error": open_object({"code": STRING, "message": STRING, "suggestion": STRING}, ["code", "message"])}, ["error"]
)

# What each verb the adapter calls gets back (providers/lambdalabs/api.py's endpoints).
ANSWERS = {
    "status": SHOW_INSTANCE,
    "list": LIST_INSTANCES,
    "release": TERMINATED,
    "offers": INSTANCE_TYPES,
    "create": LAUNCHED,
    "list_file_systems": FILESYSTEMS,
    "create_volume": CREATED_FILESYSTEM,
    "ssh_keys": SSH_KEYS,
    "error": ERROR,
}
