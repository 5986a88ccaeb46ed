"""vast.ai's API as its documentation says (../shared/reference/profiles/vastai.md), standing in for it in tests."""

from tests.provider_stubs.base import BOOTING, GONE, RUNNING, STOPPED, Refused, StubProvider, no_body


class VastAi(StubProvider):
    """console.vast.ai/api/v0, Bearer: PUT /instances/{id}/ {"state": "stopped"|"running"}, DELETE, GET
    (show_instance: {"instances": {...actual_status...}}; a destroyed box reads exited once, then null)."""

    name, auth = "vastai", "bearer"
    routes = [
        ("GET", r"/api/v0/users/current/", "user"),
        ("POST", r"/api/v0/bundles/", "offers"),
        ("GET", r"/api/v0/volumes/", "volumes"),
        ("PUT", r"/api/v0/asks/(?P<id>\d+)/", "create"),
        ("POST", r"/api/v0/instances/(?P<id>\d+)/ssh/", "attach_ssh"),
        ("GET", r"/api/v0/instances/", "list"),
        ("PUT", r"/api/v0/instances/(?P<id>[\w.-]+)/", "state"),
        ("DELETE", r"/api/v0/instances/(?P<id>[\w.-]+)/", "destroy"),
        ("GET", r"/api/v0/instances/(?P<id>[\w.-]+)/", "status"),
    ]

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        words, endpoints = {RUNNING: "running", STOPPED: "exited", BOOTING: "loading"}, endpoints or {}
        ports = {i: {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(port)}]} for i, (_, port) in endpoints.items()}  # noqa: S104 (what vast.ai answers)
        return {
            "instances": [
                {
                    "id": i,
                    "actual_status": words[state],
                    "dph_total": 0.3,
                    **({"public_ipaddr": endpoints[i][0], "ports": ports[i]} if i in endpoints else {}),
                    **({"end_date": (ends or {})[i]} if i in (ends or {}) else {}),  # the rental's end, epoch s
                    **({"label": names[i]} if i in (names or {}) else {}),
                }
                for i, state in boxes.items()
            ]
        }

    def act(self, stub, verb, target, body):
        if verb == "state":
            if not isinstance(body, dict) or set(body) != {"state"} or body["state"] not in ("stopped", "running"):
                raise Refused(400, {"success": False, "error": "invalid_args", "msg": "state: stopped|running"})
            stub.change(self.name, "stop" if body["state"] == "stopped" else "start", target, body, STOPPED)
            return 200, {"success": True}
        no_body(body)
        if verb == "destroy":
            stub.change(self.name, verb, target, body, GONE)
            stub.lagging[target] = 1  # eventually consistent: one more read shows the old box (VAST15)
            return 200, {"success": True}
        state = stub.state_of(target)
        if state == GONE and stub.lagging.get(target):
            stub.lagging[target] -= 1
            return 200, {"instances": {"id": target, "actual_status": "exited", "intended_status": "stopped"}}
        if state == GONE:
            return 200, {"instances": None}
        actual = "running" if state == RUNNING else "exited"
        return 200, {"instances": {"id": target, "actual_status": actual, "status_msg": "success, stopped? no"}}

    def volumes_answer(self, items: list) -> object:
        return {"volumes": items}

    def offers_answer(self, offers, body):
        """POST /bundles/: a query body; the GPU count filtered as its q says."""
        query = body.get("q") if isinstance(body, dict) else None
        if not isinstance(query, dict) or not isinstance(query.get("num_gpus"), dict):
            raise Refused(400, {"success": False, "error": "invalid_args", "msg": "q.num_gpus"})
        wanted = query["num_gpus"].get("eq")
        return 200, {"offers": [offer for offer in offers or [] if offer.get("num_gpus") == wanted]}

    def check_create(self, target, body) -> str:
        ok = body.get("client_id") == "me" and isinstance(body.get("image"), str) and isinstance(body.get("label"), str)
        if not ok or not isinstance(body.get("disk"), int | float) or body.get("runtype") != "ssh_direct":
            raise Refused(400, {"success": False, "error": "invalid_args", "msg": "client_id, image, disk, label"})
        return body["label"]

    def has_capacity(self, stub, target) -> bool:
        return any(str(offer.get("id")) == target for offer in stub.offers.get("vastai") or [])

    def refuse_no_capacity(self, target):
        raise Refused(400, {"success": False, "error": "no_such_ask", "msg": f"ask {target} is not available"})

    def new_id(self, count: int) -> str:
        return str(7000 + count)

    def created(self, box: str, name: str):
        return 200, {"success": True, "new_contract": int(box)}

    def attach(self, stub, target, body):
        """POST /instances/{id}/ssh/: the key is added to the running box's authorized keys."""
        key = body.get("ssh_key") if isinstance(body, dict) else None
        if not isinstance(key, str) or not key.startswith(("ssh-", "ecdsa-")):
            raise Refused(400, {"success": False, "error": "invalid_args", "msg": "ssh_key"})
        with stub.lock:
            if stub.owner.get(target) != self.name or stub.states.get(target) == GONE:
                return 404, {"success": False, "error": "no_such_instance"}
            stub.box_keys.setdefault(target, []).append(key)
            endpoint = stub.endpoints.get(target)
            stub.calls.append({"provider": self.name, "verb": "attach_ssh", "target": target, "body": body})
        if endpoint is not None and stub.on_attach is not None:
            stub.on_attach(endpoint, key)
        return 200, {"success": True, "msg": "SSH key attached successfully"}
