"""RunPod's API as its documentation says (../shared/reference/profiles/runpod.md), standing in for it in tests."""

import re

from tests.provider_stubs.base import BOOTING, GONE, RUNNING, STOPPED, Refused, StubProvider, no_body


class RunPod(StubProvider):
    """rest.runpod.io/v1, Bearer: POST /pods/{id}/stop, DELETE /pods/{id}, GET /pods/{id} (404 once gone)."""

    name, auth = "runpod", "bearer"
    routes = [
        ("GET", r"/v1/networkvolumes", "volumes"),
        ("POST", r"/v1/networkvolumes", "create_volume"),
        ("POST", r"/graphql", "graphql"),
        ("POST", r"/v1/pods", "create"),
        ("GET", r"/v1/pods", "list"),
        ("POST", r"/v1/pods/(?P<id>[\w.-]+)/stop", "stop"),
        ("DELETE", r"/v1/pods/(?P<id>[\w.-]+)", "terminate"),
        ("GET", r"/v1/pods/(?P<id>[\w.-]+)", "status"),
    ]
    words = {RUNNING: "RUNNING", STOPPED: "EXITED", BOOTING: "RUNNING"}  # desiredStatus is RUNNING at once

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        endpoints, names = endpoints or {}, names or {}
        return [
            {
                "id": i,
                "desiredStatus": self.words[state],
                "costPerHr": 0.44,
                **({"name": names[i]} if i in names else {}),
                **({"publicIp": endpoints[i][0], "portMappings": {"22": endpoints[i][1]}} if i in endpoints else {}),
            }
            for i, state in boxes.items()
        ]

    def act(self, stub, verb, target, body):
        no_body(body)
        if verb == "status" and stub.state_of(target) != GONE and stub.flicker.get(target):
            stub.flicker[target] -= 1  # one "not found" for a pod it still has and bills
            raise Refused(404, {"error": "pod not found", "status": 404})
        if verb == "status" and stub.state_of(target) == GONE and stub.linger.get(target):
            stub.linger[target] -= 1  # eventually consistent: the terminated pod still reads as running
            return 200, {"id": target, "desiredStatus": "RUNNING"}
        if stub.state_of(target) == GONE:
            raise Refused(404, {"error": "pod not found", "status": 404})
        if verb == "status":
            return 200, {
                "id": target,
                "name": f"{target}-stopped-name",
                "desiredStatus": self.words[stub.state_of(target)],
            }
        stub.change(self.name, verb, target, body, STOPPED if verb == "stop" else GONE)
        return (200, {"id": target, "desiredStatus": "EXITED"}) if verb == "stop" else (204, None)

    def create_volume(self, body, number: int) -> tuple[dict, object]:
        """POST /v1/networkvolumes {name, size (1-4,000 GB), dataCenterId}: the volume as it is listed."""
        size, centre = body.get("size"), body.get("dataCenterId")
        if not body.get("name") or not isinstance(size, int) or not 1 <= size <= 4000 or not centre:
            raise Refused(400, {"error": "name, size (1-4000), dataCenterId are required"})
        item = {"id": f"nv{number:04d}x", "name": body["name"], "size": size, "dataCenterId": centre}
        return item, item

    def volumes_answer(self, items: list) -> object:
        return items  # network volumes: a bare list

    def graphql(self, stub, body):
        """GraphQL: the account (myself) or the GPU catalogue (gpuTypes, priced for the count asked)."""
        query = body.get("query") if isinstance(body, dict) else None
        if not isinstance(query, str):
            return 400, {"errors": [{"message": "Must provide query string."}]}
        with stub.lock:
            if "myself" in query:
                return 200, {"data": {"myself": {"clientBalance": stub.balances.get("runpod", 100.0)}}}
            count = re.search(r"gpuCount: (\d+)", query)
            if "gpuTypes" not in query or count is None:
                return 200, {"errors": [{"message": "unknown query"}]}
            return 200, {"data": {"gpuTypes": list(stub.offers.get("runpod") or [])}}

    def check_create(self, target, body) -> str:
        keys = {"name", "imageName", "gpuTypeIds", "gpuCount", "containerDiskInGb", "cloudType", "ports"}
        ok = keys <= set(body) and isinstance(body["gpuTypeIds"], list) and body["gpuTypeIds"]
        if not ok or not isinstance(body["gpuCount"], int) or "22/tcp" not in body["ports"]:
            raise Refused(400, {"error": f"name, imageName, gpuTypeIds, gpuCount, ports: {sorted(keys)}"})
        return body["name"]

    def refuse_no_capacity(self, target):
        said = "There are no longer any instances available with the requested specifications."
        raise Refused(500, {"error": said, "status": 500})

    def keys_given(self, stub, body) -> list[str]:
        key = (body.get("env") or {}).get("PUBLIC_KEY")  # the pod's PUBLIC_KEY, written to authorized_keys
        return [key] if isinstance(key, str) else []

    def new_id(self, count: int) -> str:
        return f"pod{count:04d}x"

    def created(self, box: str, name: str):
        return 201, {"id": box, "name": name, "desiredStatus": "RUNNING", "costPerHr": 0.44}
