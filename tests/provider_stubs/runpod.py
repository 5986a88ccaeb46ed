"""RunPod's REST v2 as its published OpenAPI document says (providers/runpod/schema.py, which cites it),
standing in for it in tests: every request body is checked against the document's request schema (v2
refuses a field it does not define) and every answer is one its response schema allows (the stub server
checks them: tests/provider_stub.py). The balance stays on GraphQL, v2 having no call for it."""

from providers import schema
from providers.runpod import schema as published
from tests.provider_stubs.base import BOOTING, GONE, RUNNING, STOPPED, Refused, StubProvider, no_body


def problem(status: int, title: str, detail: str, errors=None) -> Refused:
    """An RFC 9457 problem, as v2 answers every error (ErrorResponse)."""
    return Refused(
        status, {"title": title, "status": status, "detail": detail, **({"errors": errors} if errors else {})}
    )


def checked(request_schema: dict, body) -> dict:
    found = schema.problems(request_schema, body if body is not None else {})
    if found:
        raise problem(422, "Unprocessable Entity", "the request does not match the schema", found[:10])
    return body


class RunPod(StubProvider):
    """api.runpod.io/v2, Bearer: POST /v2/pods/{id}/action {"action": "stop"}, DELETE /v2/pods/{id}, GET
    /v2/pods/{id} (RunPod's problem+json 404 once gone), GET /v2/pods ({"pods": [...]}), the catalogue."""

    name, auth, schemas = "runpod", "bearer", published
    answer_of = {
        "status": "status",
        "list": "list",
        "action": "shutdown",
        "create": "create",
        "volumes": "list_network_volumes",
        "create_volume": "create_volume",
        "offers": "offers",
        "graphql": "balance",
    }
    no_content = ("terminate",)  # DELETE /v2/pods/{id}
    routes = [
        ("GET", r"/v2/network-volumes", "volumes"),
        ("POST", r"/v2/network-volumes", "create_volume"),
        ("GET", r"/v2/catalog/gpus", "offers"),
        ("POST", r"/graphql", "graphql"),
        ("POST", r"/v2/pods", "create"),
        ("GET", r"/v2/pods", "list"),
        ("POST", r"/v2/pods/(?P<id>[\w.-]+)/action", "action"),
        ("DELETE", r"/v2/pods/(?P<id>[\w.-]+)", "terminate"),
        ("GET", r"/v2/pods/(?P<id>[\w.-]+)", "status"),
    ]
    words = {RUNNING: "RUNNING", STOPPED: "EXITED", BOOTING: "PROVISIONING", GONE: "TERMINATED"}

    def pod(self, ident: str, state: str, name: str = "", endpoint=None) -> dict:
        """A Pod as v2 answers one: ssh.direct only once running with 22/tcp mapped; cost 0 once exited."""
        direct = {"host": endpoint[0], "port": endpoint[1], "username": "root", "command": ""} if endpoint else None
        return {
            "id": ident,
            "name": name or f"{ident}-stopped-name",
            "args": "",
            "image": "runpod/pytorch",
            "disk": 40,
            "env": {},
            "ports": ["22/tcp"],
            "registry": None,
            "status": self.words[state],
            "actions": ["stop", "terminate"] if state == RUNNING else ["start", "terminate"],
            "mounts": {},
            "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1},
            "cloud": "SECURE",
            "dataCenterId": "EU-RO-1",
            "cudaVersion": "12.4",
            "ssh": {"proxy": None, "direct": direct if state == RUNNING else None},
            "template": None,
            "cost": 0.44 if state in (RUNNING, BOOTING) else 0.0,
            "locked": False,
            "globalNetworking": {"enabled": False},
            "runtime": None,
            "createdAt": "2026-12-07T00:00:00Z",
            "startedAt": None,
        }

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        endpoints, names = endpoints or {}, names or {}
        return {"pods": [self.pod(i, state, names.get(i, ""), endpoints.get(i)) for i, state in boxes.items()]}

    def act(self, stub, verb, target, body):
        if verb == "action":
            action = checked(published.POD_ACTION_REQUEST, body)["action"]
            if action != "stop":
                raise problem(400, "Bad Request", f"this stand-in acts only on stop, not {action}")
        else:
            no_body(body)
        if verb == "status" and stub.state_of(target) != GONE and stub.flicker.get(target):
            stub.flicker[target] -= 1  # observed field behaviour (RP14): one "not found" for a pod it still bills
            raise problem(404, "Not Found", "pod not found")
        if verb == "status" and stub.state_of(target) == GONE and stub.linger.get(target):
            stub.linger[target] -= 1  # observed field behaviour (RP14): the terminated pod still reads running
            return 200, self.pod(target, RUNNING)
        if stub.state_of(target) == GONE:
            raise problem(404, "Not Found", "pod not found")
        if verb == "status":
            return 200, self.pod(target, stub.state_of(target))
        stub.change(
            self.name, "stop" if verb == "action" else verb, target, body, STOPPED if verb == "action" else GONE
        )
        return (200, self.pod(target, STOPPED)) if verb == "action" else (204, None)

    def create_volume(self, body, number: int) -> tuple[dict, object]:
        """POST /v2/network-volumes {name, size (10-4,096 GB), dataCenter}: the volume as it is listed."""
        checked(published.CREATE_NETWORK_VOLUME, body)
        item = {"id": f"nv_{number:04d}x", "name": body["name"], "size": body["size"], "dataCenter": body["dataCenter"]}
        item["type"] = body.get("type", "STANDARD")
        return item, item

    def volumes_answer(self, items: list) -> object:
        return {"networkVolumes": items}

    def offers_answer(self, offers, body):
        """GET /v2/catalog/gpus: the GPU types as listed; availability only when asked for it with a product."""
        query = checked(published.CATALOG_QUERY, body or {})
        if ("include" in query) != ("product" in query):
            raise problem(400, "Bad Request", "include=AVAILABILITY and product are given together")
        return 200, {"gpus": [dict(item) for item in offers or []]}

    def graphql(self, stub, body):
        """GraphQL, kept for the account's balance (myself) until its retirement."""
        query = body.get("query") if isinstance(body, dict) else None
        if not isinstance(query, str) or "myself" not in query:
            return 200, {"errors": [{"message": "this stand-in answers only myself"}]}
        with stub.lock:
            return 200, {"data": {"myself": {"clientBalance": stub.balances.get("runpod", 100.0)}}}

    def check_create(self, target, body) -> str:
        checked(published.CREATE_POD, body)
        if "gpu" not in body or "22/tcp" not in body.get("ports", []):
            raise problem(400, "Bad Request", "a pod with a GPU and 22/tcp")
        return body["name"]

    def refuse_no_capacity(self, target):
        # Observed field behaviour (RunPod v1, ../shared/reference/profiles/runpod.md), in v2's problem form.
        said = "There are no longer any instances available with the requested specifications."
        raise problem(500, "Internal Server Error", said)

    def keys_given(self, stub, body) -> list[str]:
        key = (body.get("env") or {}).get("PUBLIC_KEY")  # the pod's PUBLIC_KEY, written to authorized_keys
        return [key] if isinstance(key, str) else []

    def new_id(self, count: int) -> str:
        return f"pod_{count:04d}x"  # v2's ids: pod_abc123

    def created(self, box: str, name: str):
        return 201, self.pod(box, BOOTING, name)
