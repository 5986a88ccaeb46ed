"""Paperspace's v1 API as its published OpenAPI document says (providers/paperspace/schema.py, which cites
it), standing in for it in tests: every list is paged ({hasMore, items, nextPage?}, ?after=nextPage), every
machine carries the fields the document requires, every error is {code, message}, and every answer is one
its response schema allows (the stub server checks them: tests/provider_stub.py)."""

from providers.paperspace import schema as published
from tests.provider_stubs.base import GONE, RUNNING, STOPPED, Refused, StubProvider, no_body

CREATED = "2026-12-01T09:00:00.000Z"


def machine(ident: str, state: str, **fields) -> dict:
    """A machine as v1 answers one: every required field, auto-shutdown off, no public IP unless given."""
    return {
        "id": ident,
        "name": fields.pop("name", f"ps-{ident}"),
        "state": state,
        "agentType": "LinuxHost",
        "autoShutdownEnabled": False,
        "autoShutdownForce": None,
        "autoShutdownTimeout": None,
        "autoSnapshotEnabled": False,
        "autoSnapshotFrequency": None,
        "autoSnapshotSaveCount": None,
        "cpus": 8,
        "dtCreated": CREATED,
        "dtDeleted": CREATED,
        "dtModified": CREATED,
        "machineType": "A4000",
        "networkId": None,
        "os": "Ubuntu 22.04",
        "privateIp": None,
        "publicIp": None,
        "publicIpType": "dynamic",
        "ram": 48 * 2**30,
        "region": "ny2",
        "reservation": None,
        "restorePointEnabled": False,
        "restorePointFrequency": None,
        "restorePointSnapshotId": None,
        "storageRate": 0.0,
        "storageTotal": 100 * 10**9,
        "storageUsed": 10 * 10**9,
        "updatesPending": False,
        "usageRate": 0.76,
        **fields,
    }


def public_ip(ip: str, **fields) -> dict:
    return {"ip": ip, "dtCreated": CREATED, "region": "ny2", **fields}


def snapshot(ident: str, name: str, machine_id: str = "ps-gone") -> dict:
    return {"id": ident, "name": name, "machineId": machine_id, "isAutoSnapshot": False}


def shared_drive(ident: str, name: str, password: str, size: int = 1000 * 10**9) -> dict:
    """A shared drive as v1 lists one: with its SMB username and password (which we must never keep)."""
    return {
        "id": ident,
        "name": name,
        "size": size,
        "dtCreated": CREATED,
        "mountPoint": f"\\\\10.0.0.2\\{name}",
        "networkId": "net-1",
        "password": password,
        "region": "ny2",
        "username": "drive-user",
    }


def error(code: int, word: str, message: str) -> Refused:
    return Refused(code, {"code": word, "message": message})


class Paperspace(StubProvider):
    """api.paperspace.com/v1, Bearer: PATCH /machines/{id}/stop, DELETE /machines/{id}, GET /machines/{id},
    GET /machines, /public-ips, /snapshots, /shared-drives (paged)."""

    name, auth, schemas = "paperspace", "bearer", published
    answer_of = {
        "list": "list",
        "status": "status",
        "stop": "shutdown",
        "destroy": "release",
        "ips": "list_public_ips",
        "snapshots": "list_snapshots",
        "shared_drives": "list_shared_drives",
    }
    routes = [
        ("GET", r"/v1/machines", "list"),
        ("GET", r"/v1/public-ips", "ips"),
        ("GET", r"/v1/snapshots", "snapshots"),
        ("GET", r"/v1/shared-drives", "shared_drives"),
        ("PATCH", r"/v1/machines/(?P<id>[\w.-]+)/stop", "stop"),
        ("DELETE", r"/v1/machines/(?P<id>[\w.-]+)", "destroy"),
        ("GET", r"/v1/machines/(?P<id>[\w.-]+)", "status"),
    ]

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        """Each machine; its auto-shutdown fields (ends[id], a dict) and public IP where the test set them."""
        endpoints, ends, names = endpoints or {}, ends or {}, names or {}
        return {
            "items": [
                machine(
                    i,
                    "ready" if state == RUNNING else "off",
                    **({"name": names[i]} if i in names else {}),
                    **({"publicIp": endpoints[i][0]} if i in endpoints else {}),
                    **(ends[i] if isinstance(ends.get(i), dict) else {}),
                )
                for i, state in boxes.items()
            ]
        }

    page_size = 20  # the stand-in's own page size: the document says only that a list is paged

    def page(self, stub, listing, query):
        """One page of items after the cursor (an item's id, or a static IP's address), with hasMore and
        nextPage as v1 writes them."""
        query = query or {}
        unknown = set(query) - set(published.LIST_QUERY)
        if unknown:
            raise error(400, "BAD_REQUEST", f"unknown query parameters: {sorted(unknown)}")

        def cursor(item):
            return str(item.get("id", item.get("ip")))

        items = sorted(listing["items"], key=cursor)
        if "after" in query:
            items = [item for item in items if cursor(item) > str(query["after"])]
        shown, more = items[: self.page_size], len(items) > self.page_size
        return {"items": shown, "hasMore": more, **({"nextPage": cursor(shown[-1])} if more else {})}

    def act(self, stub, verb, target, body):
        no_body(body)
        if stub.state_of(target) == GONE:
            raise error(404, published.NOT_FOUND, "Machine not found")
        if verb == "status":
            return 200, machine(target, "ready" if stub.state_of(target) == RUNNING else "off")
        stub.change(self.name, verb, target, body, STOPPED if verb == "stop" else GONE)
        event = {
            "id": f"evt-{target}",
            "name": "stop" if verb == "stop" else "deactivate",
            "state": "new",
            "machineId": target,
            "error": None,
            "dtCreated": CREATED,
            "dtStarted": CREATED,
            "dtFinished": CREATED,
        }
        return 200, {"data": machine(target, "stopping" if verb == "stop" else "off"), "event": event}
