"""Lambda's API as its documentation says (../shared/reference/profiles/lambda.md), standing in for it in tests."""

import re

from tests.provider_stubs.base import BOOTING, GONE, RUNNING, STOPPED, Refused, StubProvider, no_body


class Lambda(StubProvider):
    """cloud.lambdalabs.com/api/v1, basic auth (key as user): POST /instance-operations/terminate
    {"instance_ids": [...]}, GET /instances/{id} ({"data": {"status": ...}}); no stop."""

    name, auth = "lambda", "basic"
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
                {
                    "id": i,
                    "status": words[state],
                    **({"ip": endpoints[i][0]} if i in endpoints else {}),
                    **({"name": names[i]} if i in names else {}),
                }
                for i, state in boxes.items()
            ]
        }

    def act(self, stub, verb, target, body):
        if verb == "terminate":
            ids = body.get("instance_ids") if isinstance(body, dict) and set(body) == {"instance_ids"} else None
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
                raise Refused(400, {"error": {"code": "global/invalid-parameters", "message": "instance_ids"}})
            for instance_id in ids:
                stub.change(self.name, verb, instance_id, body, GONE)
            return 200, {"data": {"terminated_instances": [{"id": i, "status": "terminating"} for i in ids]}}
        no_body(body)
        if target in stub.alert:  # a terminate that did not finish: Lambda shows the box in Alert
            return 200, {"data": {"id": target, "name": "stopped-experiment", "status": "alert"}}
        if stub.state_of(target) == GONE:
            raise Refused(404, {"error": {"code": "global/object-does-not-exist", "message": "Instance not found"}})
        return 200, {"data": {"id": target, "name": "stopped-experiment", "status": "active"}}

    def offers_answer(self, offers, body):
        """GET /instance-types: no body; types with no capacity list no region."""
        no_body(body)
        return 200, {"data": offers or {}}

    def create_volume(self, body, number: int) -> tuple[dict, object]:
        """POST /api/v1/filesystems {name (a letter first), region}: the filesystem, listed with its usage."""
        name, region = body.get("name"), body.get("region")
        if set(body) != {"name", "region"} or not re.fullmatch(r"[a-zA-Z]+[0-9a-zA-Z-]*", name or "") or not region:
            raise Refused(400, {"error": {"code": "global/invalid-parameters", "message": "name, region"}})
        item = {"id": f"fs-{number:04d}", "name": name, "region": {"name": region}, "bytes_used": 0}
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
            raise Refused(400, {"error": {"code": "global/invalid-parameters", "message": ", ".join(sorted(keys))}})
        return body["name"]

    def refuse_no_capacity(self, target):
        said = {"code": "instance-operations/launch/insufficient-capacity", "message": "Not enough capacity."}
        raise Refused(400, {"error": said})

    def keys_given(self, stub, body) -> list[str]:
        """The account keys the launch names; an unknown name is refused as Lambda does."""
        with stub.lock:
            known = {k["name"]: k["public_key"] for k in stub.account_keys.get(self.name, [])}
        missing = [name for name in body["ssh_key_names"] if name not in known]
        if missing:
            said = {"code": "global/object-does-not-exist", "message": f"SSH key {missing[0]} does not exist"}
            raise Refused(400, {"error": said})
        return [known[name] for name in body["ssh_key_names"]]

    def new_id(self, count: int) -> str:
        return f"lmb{count:04d}"

    def created(self, box: str, name: str):
        return 200, {"data": {"instance_ids": [box]}}
