"""vast.ai's API as its published OpenAPI files say (providers/vastai/schema.py, which cites them), standing in
for it in tests: requests are checked against the files' request schemas and every answer is one their
response schemas allow (the stub server checks them). One behaviour no file describes is kept and marked:
a destroyed instance reads "exited" once more before null (observed, ../shared/reference/profiles/vastai.md
VAST15: destroy is eventually consistent)."""

from providers import schema
from providers.vastai import schema as published
from tests.provider_stubs.base import BOOTING, GONE, RUNNING, STOPPED, Refused, StubProvider, no_body

PAGE_MOST = 25  # show_instances: "keyset pagination (max 25 per page)"


def checked(request_schema: dict, body) -> dict:
    found = schema.problems(request_schema, body if body is not None else {})
    if found:
        raise Refused(400, {"success": False, "error": "invalid_args", "msg": "; ".join(found[:5])})
    return body if body is not None else {}


class VastAi(StubProvider):
    """console.vast.ai, Bearer: PUT /api/v0/instances/{id}/ {"state": "stopped"|"running"}, DELETE, GET
    (show_instance: {"instances": {...actual_status...}}, null once destroyed), GET /api/v1/instances/ in
    keyset pages of at most 25, POST /api/v0/bundles/ with its filters at the top level."""

    name, auth, schemas = "vastai", "bearer", published
    answer_of = {
        "user": "balance",
        "offers": "offers",
        "volumes": "list_volumes",
        "create": "create",
        "attach_ssh": "attach_ssh",
        "list": "list",
        "state": "shutdown",
        "destroy": "release",
        "status": "status",
    }
    routes = [
        ("GET", r"/api/v0/users/current/", "user"),
        ("POST", r"/api/v0/bundles/", "offers"),
        ("GET", r"/api/v0/volumes/", "volumes"),
        ("PUT", r"/api/v0/asks/(?P<id>\d+)/", "create"),
        ("POST", r"/api/v0/instances/(?P<id>\d+)/ssh/", "attach_ssh"),
        ("GET", r"/api/v1/instances/", "list"),
        ("PUT", r"/api/v0/instances/(?P<id>\d+)/", "state"),
        ("DELETE", r"/api/v0/instances/(?P<id>\d+)/", "destroy"),
        ("GET", r"/api/v0/instances/(?P<id>\d+)/", "status"),
    ]

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        words, endpoints = {RUNNING: "running", STOPPED: "exited", BOOTING: "loading"}, endpoints or {}
        ports = {i: {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(port)}]} for i, (_, port) in endpoints.items()}  # noqa: S104 (what vast.ai answers)
        return {
            "success": True,
            "instances": [
                {
                    "id": int(i),
                    "actual_status": words[state],
                    "dph_total": 0.3,
                    **({"public_ipaddr": endpoints[i][0], "ports": ports[i]} if i in endpoints else {}),
                    **({"end_date": (ends or {})[i]} if i in (ends or {}) else {}),  # the rental's end, epoch s
                    **({"label": names[i]} if i in (names or {}) else {}),
                }
                for i, state in boxes.items()
            ],
        }

    def page(self, stub, listing, query):
        """One keyset page: at most 25 rows after the token's id, in id order; next_token null on the last."""
        query = checked(published.LIST_QUERY, query)
        rows = sorted(listing["instances"], key=lambda row: row["id"])
        after = query.get("after_token")
        if after is not None:
            if not (after.startswith("k") and after[1:].isdigit()):
                raise Refused(400, {"success": False, "error": "invalid_args", "msg": "after_token"})
            rows = [row for row in rows if row["id"] > int(after[1:])]
        size = min(query.get("limit", PAGE_MOST), PAGE_MOST)
        shown, more = rows[:size], len(rows) > size
        total = len(listing["instances"])
        token = f"k{shown[-1]['id']}" if more else None
        if self.name in stub.endless:  # a broken API: every page names one more
            token = f"k{int((after or 'k0')[1:]) + 1}"
        return {**listing, "instances": shown, "next_token": token, "instances_found": total, "total_instances": total}

    def act(self, stub, verb, target, body):
        if verb == "state":
            body = checked(published.MANAGE_INSTANCE, body)
            if "state" not in body:
                raise Refused(400, {"success": False, "error": "invalid_args", "msg": "state: stopped|running"})
            stub.change(self.name, "stop" if body["state"] == "stopped" else "start", target, body, STOPPED)
            return 200, {"success": True}
        no_body(body)
        if verb == "destroy":
            stub.change(self.name, verb, target, body, GONE)
            stub.lagging[target] = 1  # observed (VAST15): one more read shows the old box
            return 200, {"success": True, "msg": "destroying instance"}
        state = stub.state_of(target)
        if state == GONE and stub.lagging.get(target):
            stub.lagging[target] -= 1
            return 200, {"instances": {"id": int(target), "actual_status": "exited", "intended_status": "stopped"}}
        if state == GONE:
            return 200, {"instances": None}
        actual = "running" if state == RUNNING else "exited"
        return 200, {"instances": {"id": int(target), "actual_status": actual, "status_msg": "success, stopped? no"}}

    def volumes_answer(self, items: list) -> object:
        return {"volumes": items}

    def offers_answer(self, offers, body):
        """POST /bundles/: the filters at the top level; the GPU count, disk and direct ports filtered as asked,
        and dph_total priced for allocated_storage GB (8 when not asked) at each offer's storage_cost."""
        query = checked(published.SEARCH_OFFERS, body)
        count, disk = (query.get("num_gpus") or {}).get("eq"), (query.get("disk_space") or {}).get("gte", 0)
        storage = query.get("allocated_storage", 8)
        found = [
            {**offer, "dph_total": round(offer["dph_total"] + offer["storage_cost"] * (storage - 8) / 730, 6)}
            if "storage_cost" in offer and isinstance(offer.get("dph_total"), int | float)
            else offer
            for offer in offers or []
            if offer.get("num_gpus") == count and offer.get("disk_space", 0) >= disk
        ]
        return 200, {"offers": found[: query.get("limit", 64)]}

    def check_create(self, target, body) -> str:
        body = checked(published.CREATE_INSTANCE, body)
        if not isinstance(body.get("label"), str) or body.get("runtype") != "ssh_direct" or "disk" not in body:
            raise Refused(400, {"success": False, "error": "invalid_args", "msg": "image, disk, label, runtype"})
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
        key = checked(published.ATTACH_SSH, body).get("ssh_key")
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


def offer(ident: int, gpu: str, ram_mb: int, dph_at_8_gb: float, **fields) -> dict:
    """One offer row as the search answers it, priced at the default 8 GB of disk (the stand-in reprices it
    for the allocated_storage asked): 1,000 GB free, eight direct ports, disk at $0.15/GB/month."""
    row = {"id": ident, "gpu_name": gpu, "num_gpus": 1, "gpu_ram": ram_mb, "dph_total": dph_at_8_gb}
    return {**row, "disk_space": 1000.0, "direct_port_count": 8, "storage_cost": 0.15, **fields}
