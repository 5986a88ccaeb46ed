"""Paperspace's v1 API as its published OpenAPI document says, the parts we send and read.

Source: Paperspace/cli @ c7bdd42 (the official `pspace` CLI), `api/openapi.ts`, which its
`.scripts/generate-api.ts` generates from https://api.paperspace.com/v1/openapi.json with openapi-typescript;
the operations machines-list, machines-get, machines-stop, machines-delete, publicIps-list, snapshots-list,
sharedDrives-list and the shared `error` response. Checked 2026-12-07. Every list is paged
(`{hasMore, items, nextPage?}`, the next page asked with `?after=nextPage`). The generated types say nothing
of extra fields: the answers are read as open objects, and nothing we send has a body.

What the document does not give, and we do not guess: a snapshot's size (its item has id, name, machineId,
isAutoSnapshot only), a shared drive's price, the unit of a machine's `storageRate` and `usageRate` (plain
numbers). A shared drive's answer carries its `password`: read never, kept nowhere.
"""

from providers.schema import nullable, open_object

STRING, NUMBER, BOOLEAN = {"type": "string"}, {"type": "number"}, {"type": "boolean"}
DATE = {"type": "string", "format": "date-time"}
STATE = {  # the machine's state enum
    "type": "string",
    "enum": ["off", "starting", "stopping", "restarting", "serviceready", "ready", "upgrading", "provisioning"],
}
RESERVATION = nullable(open_object({"dtStarted": DATE}, ["dtFinished", "dtStarted", "id", "isActive", "name"]))

# A machine (machines-get's answer; machines-list's item; the data of machines-stop and machines-delete).
MACHINE = open_object(
    {
        "id": STRING,
        "name": STRING,
        "state": STATE,
        "publicIp": nullable(STRING),
        "autoShutdownEnabled": BOOLEAN,
        "autoShutdownTimeout": nullable(NUMBER),  # "The shutdown timeout of the machine in hours."
        "reservation": RESERVATION,  # the current run: its dtStarted starts the auto-shutdown clock
    },
    [
        "agentType",
        "autoShutdownEnabled",
        "autoShutdownForce",
        "autoShutdownTimeout",
        "autoSnapshotEnabled",
        "autoSnapshotFrequency",
        "autoSnapshotSaveCount",
        "cpus",
        "dtCreated",
        "dtDeleted",
        "dtModified",
        "id",
        "machineType",
        "name",
        "networkId",
        "os",
        "privateIp",
        "publicIp",
        "publicIpType",
        "ram",
        "region",
        "reservation",
        "restorePointEnabled",
        "restorePointFrequency",
        "restorePointSnapshotId",
        "state",
        "storageRate",
        "storageTotal",
        "storageUsed",
        "updatesPending",
        "usageRate",
    ],
)
EVENT = open_object(  # the machine event a stop or delete starts
    {"state": {"type": "string", "enum": ["new", "in progress", "done", "error", "cancelled"]}},
    ["dtCreated", "dtFinished", "dtStarted", "error", "id", "machineId", "name", "state"],
)
MACHINE_EVENT = open_object({"data": MACHINE, "event": EVENT}, ["data", "event"])


def page_of(item: dict) -> dict:
    """A v1 list's page: its items, whether more follow, and the cursor of the next (absent on the last)."""
    return open_object(
        {"hasMore": BOOLEAN, "items": {"type": "array", "items": item}, "nextPage": STRING}, ["hasMore", "items"]
    )


LIST_MACHINES = page_of(MACHINE)
PUBLIC_IP = open_object({"ip": STRING, "assignedMachineId": STRING}, ["dtCreated", "ip", "region"])
SNAPSHOT = open_object({"id": STRING, "name": STRING}, ["id", "isAutoSnapshot", "machineId", "name"])
SHARED_DRIVE = open_object(
    {"id": STRING, "name": STRING, "size": NUMBER},  # size: "The size of the shared drive." (int64, no unit)
    ["dtCreated", "id", "mountPoint", "name", "networkId", "password", "region", "size", "username"],
)
LIST_PUBLIC_IPS, LIST_SNAPSHOTS, LIST_SHARED_DRIVES = page_of(PUBLIC_IP), page_of(SNAPSHOT), page_of(SHARED_DRIVE)
# The query every list takes (the cursor, and how many a page holds).
LIST_QUERY = {"after": STRING, "limit": NUMBER}
ERROR = open_object({"code": STRING, "message": STRING}, ["code", "message"])  # components.responses.error
NOT_FOUND = "NOT_FOUND"  # the error code a 404 carries (the CLI's api/client.ts: 404 → NOT_FOUND)

# What each verb the adapter calls gets back (providers/paperspace/api.py's endpoints).
ANSWERS = {
    "status": MACHINE,
    "list": LIST_MACHINES,
    "shutdown": MACHINE_EVENT,
    "release": MACHINE_EVENT,
    "list_public_ips": LIST_PUBLIC_IPS,
    "list_snapshots": LIST_SNAPSHOTS,
    "list_shared_drives": LIST_SHARED_DRIVES,
    "error": ERROR,
}
