"""Lambda's Cloud API 1.10.0 as its published OpenAPI document says (providers/lambdalabs/schema.py, which
cites it), standing in for it in tests: every instance, instance type and filesystem carries the fields the
document requires, every error is {"error": {code, message}}, and every answer is one its response schema
allows (the stub server checks them: tests/provider_stub.py). One behaviour no API document describes is
kept and marked: a terminate that leaves the box billing (LAM3, docs.lambda.ai: "Alert"), which the API's
status enum can only say as `unhealthy`."""

import re

from providers.lambdalabs import schema as published
from tests.provider_stubs.base import BOOTING, GONE, RUNNING, STOPPED, Refused, StubProvider, no_body

NOT_CHECKED = {"available": True}
ACTIONS = {verb: NOT_CHECKED for verb in ("migrate", "rebuild", "restart", "cold_reboot", "terminate")}


def region(name: str) -> dict:
    return {"name": name, "description": f"Lambda region {name}"}


def kind(name: str, gpu_description: str, cents: int, gpus: int = 1) -> dict:
    """An InstanceType: its GPU, its price in cents an hour, its specs."""
    specs = {"gpus": gpus, "vcpus": 30 * gpus, "memory_gib": 200 * gpus, "storage_gib": 512 * gpus}
    return {
        "name": name,
        "description": f"{gpus}x {gpu_description}",
        "gpu_description": gpu_description,
        "price_cents_per_hour": cents,
        "specs": specs,
    }


def instance_type(name: str, gpu_description: str, cents: int, regions=(), gpus: int = 1) -> dict:
    """An InstanceTypesItem: the type, and the regions where it has capacity now (none: sold out)."""
    return {
        "instance_type": kind(name, gpu_description, cents, gpus),
        "regions_with_capacity_available": [region(name) for name in regions],
    }


def instance(ident: str, status: str, name: str = "", ip: str = "") -> dict:
    """An Instance as 1.10.0 answers one: every required field; its IP once it has one."""
    return {
        "id": ident,
        "status": status,
        **({"name": name} if name else {}),
        **({"ip": ip} if ip else {}),
        "ssh_key_names": ["rent-key"],
        "file_system_names": [],
        "region": region("us-east-1"),
        "instance_type": kind("gpu_1x_a100", "A100 (40 GB PCIe)", 129),
        "actions": ACTIONS,
    }


def filesystem(ident: str, name: str, where: str, bytes_used: int = 0) -> dict:
    """A Filesystem as the file-systems list answers one."""
    return {
        "id": ident,
        "name": name,
        "region": region(where),
        "bytes_used": bytes_used,
        "mount_point": f"/lambda/nfs/{name}",
        "created": "2026-12-01T09:00:00+00:00",
        "created_by": {"id": "u-1", "email": "team@example.com", "status": "active"},
        "is_in_use": False,
    }


def error(code: int, word: str, message: str) -> Refused:
    return Refused(code, {"error": {"code": word, "message": message}})


class Lambda(StubProvider):
    """cloud.lambda.ai/api/v1, basic auth (key as user): POST /instance-operations/terminate
    {"instance_ids": [...]}, GET /instances/{id} ({"data": {"status": ...}}); no stop."""

    name, auth, schemas = "lambda", "basic", published
    answer_of = {
        "volumes": "list_file_systems",
        "create_volume": "create_volume",
        "offers": "offers",
        "create": "create",
        "ssh_keys": "ssh_keys",
        "list": "list",
        "terminate": "release",
        "status": "status",
    }
    routes = [
        ("GET", r"/api/v1/file-systems", "volumes"),
        ("POST", r"/api/v1/filesystems", "create_volume"),
        ("GET", r"/api/v1/instance-types", "offers"),
        ("POST", r"/api/v1/instance-operations/launch", "create"),
        ("GET", r"/api/v1/ssh-keys", "ssh_keys"),
        ("GET", r"/api/v1/instances", "list"),
        ("POST", r"/api/v1/instance-operations/terminate", "terminate"),
        ("GET", r"/api/v1/instances/(?P<id>[\w.-]+)", "status"),
    ]

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        words = {RUNNING: "active", STOPPED: "terminating", BOOTING: "booting"}
        endpoints, names = endpoints or {}, names or {}
        return {
            "data": [
                instance(i, words[state], names.get(i, ""), endpoints[i][0] if i in endpoints else "")
                for i, state in boxes.items()
            ]
        }

    def act(self, stub, verb, target, body):
        if verb == "terminate":
            ids = body.get("instance_ids") if isinstance(body, dict) and set(body) == {"instance_ids"} else None
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
                raise error(400, "global/invalid-parameters", "instance_ids")
            for instance_id in ids:
                stub.change(self.name, verb, instance_id, body, GONE)
            return 200, {"data": {"terminated_instances": [instance(i, "terminating") for i in ids]}}
        no_body(body)
        if target in stub.alert:  # observed field behaviour (LAM3): the terminate did not finish; it bills
            return 200, {"data": instance(target, "unhealthy", "stopped-experiment")}
        if stub.state_of(target) == GONE:
            raise error(404, "global/object-does-not-exist", "Instance not found")
        return 200, {"data": instance(target, "active", "stopped-experiment")}

    def offers_answer(self, offers, body):
        """GET /instance-types: no body; types with no capacity list no region."""
        no_body(body)
        return 200, {"data": offers or {}}

    def create_volume(self, body, number: int) -> tuple[dict, object]:
        """POST /api/v1/filesystems {name (a letter first), region}: the filesystem, listed with its usage."""
        name, where = body.get("name"), body.get("region")
        if set(body) != {"name", "region"} or not re.fullmatch(r"[a-zA-Z]+[0-9a-zA-Z-]*", name or "") or not where:
            raise error(400, "global/invalid-parameters", "name, region")
        item = filesystem(f"fs-{number:04d}", name, where)
        return item, {"data": item}

    def check_create(self, target, body) -> str:
        # InstanceLaunchRequest (Lambda Cloud API 1.10.0): no quantity; name at most 64 characters.
        keys = {"region_name", "instance_type_name", "ssh_key_names", "name"}
        # file_system_names: optional, a list of one filesystem's name (documented at most one)
        named = body.get("file_system_names", [])
        filesystems = isinstance(named, list) and len(named) <= 1 and all(isinstance(n, str) and n for n in named)
        given = set(body) - {"file_system_names"}
        ok = given == keys and filesystems and isinstance(body["ssh_key_names"], list)
        if not ok or not body["name"] or len(body["name"]) > 64:
            raise error(400, "global/invalid-parameters", ", ".join(sorted(keys)))
        return body["name"]

    def refuse_no_capacity(self, target):
        # The document's ApiErrorInsufficientCapacity, a 400 of the launch.
        raise error(
            400, "instance-operations/launch/insufficient-capacity", "Not enough capacity to fulfill launch request."
        )

    def keys_given(self, stub, body) -> list[str]:
        """The account keys the launch names; an unknown name is refused as Lambda does."""
        with stub.lock:
            known = {k["name"]: k["public_key"] for k in stub.account_keys.get(self.name, [])}
        missing = [name for name in body["ssh_key_names"] if name not in known]
        if missing:
            raise error(400, "global/object-does-not-exist", f"SSH key {missing[0]} does not exist")
        return [known[name] for name in body["ssh_key_names"]]

    def new_id(self, count: int) -> str:
        return f"lmb{count:04d}"

    def created(self, box: str, name: str):
        return 200, {"data": {"instance_ids": [box]}}
