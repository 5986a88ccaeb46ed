"""Local stand-ins for the cloud providers' HTTP APIs, written from each provider's documentation
(../shared/reference/profiles/{runpod,vastai,lambda,paperspace}.md), not from our adapter: each
checks its own auth scheme, method, path and request body, answers in its own shape, keeps each
box's state, and can be told to fail (429, 5xx, a timeout, a hang) — so a wrong endpoint, body, key
or reading of an answer fails a test.

Every accepted state change is recorded in `calls`; a box the stub has not seen exists and runs.
"""

import base64
import json
import re
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY = "stub-api-key-not-a-secret"
KEY_ENV = "STUB_PROVIDER_API_KEY"

RUNNING, STOPPED, GONE, BOOTING = "running", "stopped", "gone", "booting"


class Refused(Exception):
    def __init__(self, code: int, payload: dict):
        super().__init__(code)
        self.code, self.payload = code, payload


def _no_body(body):
    if body is not None:
        raise Refused(400, {"error": "this endpoint takes no body"})


class RunPod:
    """rest.runpod.io/v1, Bearer: POST /pods/{id}/stop, DELETE /pods/{id}, GET /pods/{id} (404 once gone)."""

    name, auth = "runpod", "bearer"
    routes = [
        ("GET", r"/v1/networkvolumes", "volumes"),
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
        _no_body(body)
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


class VastAi:
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
        _no_body(body)
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


class Lambda:
    """cloud.lambdalabs.com/api/v1, basic auth (key as user): POST /instance-operations/terminate
    {"instance_ids": [...]}, GET /instances/{id} ({"data": {"status": ...}}); no stop."""

    name, auth = "lambda", "basic"
    routes = [
        ("GET", r"/api/v1/file-systems", "volumes"),
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
        _no_body(body)
        if target in stub.alert:  # a terminate that did not finish: Lambda shows the box in Alert
            return 200, {"data": {"id": target, "name": "stopped-experiment", "status": "alert"}}
        if stub.state_of(target) == GONE:
            raise Refused(404, {"error": {"code": "global/object-does-not-exist", "message": "Instance not found"}})
        return 200, {"data": {"id": target, "name": "stopped-experiment", "status": "active"}}


class Paperspace:
    """api.paperspace.com/v1, Bearer: PATCH /machines/{id}/stop, DELETE /machines/{id}, GET /machines/{id}."""

    name, auth = "paperspace", "bearer"
    routes = [
        ("GET", r"/v1/machines", "list"),
        ("GET", r"/v1/public-ips", "ips"),
        ("GET", r"/v1/snapshots", "snapshots"),
        ("PATCH", r"/v1/machines/(?P<id>[\w.-]+)/stop", "stop"),
        ("DELETE", r"/v1/machines/(?P<id>[\w.-]+)", "destroy"),
        ("GET", r"/v1/machines/(?P<id>[\w.-]+)", "status"),
    ]

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        """Each machine; its auto-shutdown fields (ends[id], a dict) and public IP where the test set them."""
        endpoints, ends = endpoints or {}, ends or {}
        return {
            "items": [
                {
                    "id": i,
                    "state": "ready" if state == RUNNING else "off",
                    **({"publicIp": endpoints[i][0]} if i in endpoints else {}),
                    **(ends[i] if isinstance(ends.get(i), dict) else {}),
                }
                for i, state in boxes.items()
            ]
        }

    def act(self, stub, verb, target, body):
        _no_body(body)
        if stub.state_of(target) == GONE:
            raise Refused(404, {"message": "Not found"})
        if verb == "status":
            return 200, {"id": target, "state": "ready" if stub.state_of(target) == RUNNING else "off"}
        stub.change(self.name, verb, target, body, STOPPED if verb == "stop" else GONE)
        return 200, {"id": target, "state": "stopping" if verb == "stop" else "off"}


PROVIDERS = (RunPod(), VastAi(), Lambda(), Paperspace())


class ProviderStub:
    """All four providers on one loopback port (each under its own paths), plus project webhooks."""

    def __init__(self):
        self.calls: list[dict] = []
        self.webhooks: list[dict] = []
        self.states: dict[str, str] = {}
        self.lagging: dict[str, int] = {}
        self.hold: dict[str, threading.Event] = {}  # target → a state change's answer waits until set
        self.faults: dict[str, deque] = defaultdict(deque)  # target → the next answers: 429, 503, "timeout"
        self.requests: list[dict] = []  # every request, accepted or not (method, path, provider)
        self.owner: dict[str, str] = {}  # target → the provider that has it (what "list" answers)
        self.lies: set[str] = set()  # targets whose release answers 200 and changes nothing
        self.linger: dict[str, int] = {}  # target → status reads that still show it after its release
        self.flicker: dict[str, int] = {}  # target → status reads that answer 404 though it still has it
        self.alert: set[str] = set()  # Lambda targets whose terminate leaves them in "alert"
        self.endpoints: dict[str, tuple] = {}  # target → (host, SSH port) its listing names
        self.ends: dict[str, object] = {}  # target → the end of its rental its listing names (vast.ai)
        self.balances: dict[str, object] = {}  # provider → the account's credit its user call answers
        self.volumes: dict[str, list] = {}  # provider → the volumes / filesystems it lists, as it answers them
        self.offers: dict[str, object] = {}  # provider → its offers as it answers them (vast.ai list, Lambda dict)
        self.no_capacity: set[str] = set()  # providers whose create answers their documented "no capacity"
        self.on_create = None  # (provider, name, keys) → (host, port) of the new box's sshd, or None
        self.on_attach = None  # ((host, port), public key): a key attached to a running box lets it in
        self.account_keys: dict[str, list] = {}  # provider → its account's SSH keys as it lists them (Lambda)
        self.box_keys: dict[str, list] = {}  # target → the public keys it was given (created with, attached)
        self.names: dict[str, str] = {}  # target → the name it was created with (listed)
        self.boot_reads: dict[str, int] = {}  # target → list reads it still shows booting
        self.boot_reads_default = 1
        self.created_count = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _answer(self):
                try:
                    code, payload, headers = stub.answer(self.command, self.path, self.headers, self._body())
                except Refused as refused:
                    code, payload, headers = refused.code, refused.payload, {}
                if code is None:  # a timeout: answer nothing until the client has given up
                    time.sleep(payload)
                    return
                self._send(code, payload, headers)

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                if not length:
                    return None
                if self.headers.get("Content-Type") != "application/json":
                    self.rfile.read(length)
                    return Refused(415, {"error": "Content-Type must be application/json"})
                try:
                    return json.loads(self.rfile.read(length))
                except ValueError:
                    return Refused(400, {"error": "body is not JSON"})

            def _send(self, code, payload, headers):
                data = json.dumps(payload).encode() if payload is not None else b""
                self.send_response(code)
                for name, value in headers.items():
                    self.send_header(name, value)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        return Handler

    def answer(self, method: str, path: str, headers, body):
        """(code, payload, headers); code None means hold the connection payload seconds (a timeout)."""
        if isinstance(body, Refused):  # an unreadable body is refused before anything else
            raise body
        if path.startswith("/hooks/"):  # a project's approval webhook
            with self.lock:
                self.webhooks.append({"path": path, "body": body})
            return 200, {"ok": True}, {}
        provider, verb, target = self._route(method, path, body)
        with self.lock:
            self.requests.append({"method": method, "path": path, "provider": provider.name, "verb": verb})
        if not self._authorised(provider, headers.get("Authorization") or ""):
            raise Refused(401, {"error": "unauthorized"})
        fault = self._next_fault(target)
        if fault == "timeout":  # never answers, and nothing happened
            return None, self.timeout_hold, {}
        if fault == "late":  # it happened, but the answer never arrives (LAM14)
            self._act(provider, verb, target, body, headers)
            return None, self.timeout_hold, {}
        if fault is not None:
            return fault, {"error": "rate limited" if fault == 429 else "upstream error"}, {"Retry-After": "0"}
        code, payload = self._act(provider, verb, target, body, headers)
        if verb != "status" and target in self.hold:  # done at the provider; the answer waits (a slow API)
            self.hold[target].wait(timeout=60)
        return code, payload, {}

    def _act(self, provider, verb, target, body, headers):
        """The provider's answer; the calls it records carry the request's Idempotency-Key."""
        if verb == "user":  # the account: its credit (what is left to spend) and more
            _no_body(body)
            with self.lock:
                return 200, {"id": 4242, "credit": self.balances.get(provider.name, 100.0), "balance": 0.0}
        if verb == "volumes":  # RunPod's network volumes (a bare list), Lambda's filesystems ({"data": [...]})
            _no_body(body)
            with self.lock:
                items = list(self.volumes.get(provider.name, []))
            wrapped = {"runpod": items, "vastai": {"volumes": items}}
            return 200, wrapped.get(provider.name, {"data": items})
        if verb in ("ips", "snapshots"):  # Paperspace's static IPs and snapshots ({"items": [...]})
            _no_body(body)
            with self.lock:
                return 200, {"items": list(self.volumes.get(f"paperspace-{verb}", []))}
        if verb == "list":
            _no_body(body)
            with self.lock:
                boxes = {i: s for i, s in self.states.items() if self.owner.get(i) == provider.name and s != GONE}
                self._boot(boxes)
                # A booting box has no public port mapped yet (vast.ai lists ports once the container runs).
                endpoints = {i: e for i, e in self.endpoints.items() if self.states.get(i) != BOOTING}
            return 200, provider.listing(boxes, endpoints, dict(self.ends), dict(self.names))
        if verb == "offers":
            return self._offers(provider, body)
        if verb == "graphql":
            return self._graphql(body)
        if verb == "create":
            return self._create(provider, target, body, headers)
        if verb == "ssh_keys":
            _no_body(body)
            with self.lock:
                return 200, {"data": list(self.account_keys.get(provider.name, []))}
        if verb == "attach_ssh":
            return self._attach(target, body)
        with self.lock:
            before = len(self.calls)
            self.owner.setdefault(target, provider.name)
            answer = provider.act(self, verb, target, body)
            for call in self.calls[before:]:
                call["idempotency_key"] = headers.get("Idempotency-Key")
        return answer

    def _boot(self, boxes: dict) -> None:
        """With the lock held: a booting box is listed booting for its first reads, then running."""
        for target in [t for t, state in boxes.items() if state == BOOTING]:
            self.boot_reads[target] = self.boot_reads.get(target, 0) - 1
            if self.boot_reads[target] < 0:
                self.states[target] = boxes[target] = RUNNING

    def _offers(self, provider, body):
        """vast.ai's POST /bundles/ (a query body; the GPU count filtered as its q says) or Lambda's GET
        /instance-types (no body; types with no capacity list no region)."""
        with self.lock:
            offers = self.offers.get(provider.name)
        if provider.name == "vastai":
            query = body.get("q") if isinstance(body, dict) else None
            if not isinstance(query, dict) or not isinstance(query.get("num_gpus"), dict):
                raise Refused(400, {"success": False, "error": "invalid_args", "msg": "q.num_gpus"})
            wanted = query["num_gpus"].get("eq")
            return 200, {"offers": [offer for offer in offers or [] if offer.get("num_gpus") == wanted]}
        _no_body(body)
        return 200, {"data": offers or {}}

    def _graphql(self, body):
        """RunPod's GraphQL: the account (myself) or the GPU catalogue (gpuTypes, priced for the count asked)."""
        query = body.get("query") if isinstance(body, dict) else None
        if not isinstance(query, str):
            return 400, {"errors": [{"message": "Must provide query string."}]}
        with self.lock:
            if "myself" in query:
                return 200, {"data": {"myself": {"clientBalance": self.balances.get("runpod", 100.0)}}}
            count = re.search(r"gpuCount: (\d+)", query)
            if "gpuTypes" not in query or count is None:
                return 200, {"errors": [{"message": "unknown query"}]}
            return 200, {"data": {"gpuTypes": list(self.offers.get("runpod") or [])}}

    def _create(self, provider, target, body, headers):
        """vast.ai's PUT /asks/{id}/ or Lambda's launch: checked as documented; "no capacity" when told
        so; else a new box, booting, named as asked, with a real sshd when on_create makes one."""
        name = _check_create(provider.name, target, body)
        with self.lock:
            full = provider.name in self.no_capacity or (provider.name == "vastai" and not self._has_ask(target))
        if full and provider.name == "runpod":
            said = "There are no longer any instances available with the requested specifications."
            raise Refused(500, {"error": said, "status": 500})
        if full and provider.name == "lambda":
            said = {"code": "instance-operations/launch/insufficient-capacity", "message": "Not enough capacity."}
            raise Refused(400, {"error": said})
        if full:
            raise Refused(400, {"success": False, "error": "no_such_ask", "msg": f"ask {target} is not available"})
        keys = self._keys_given(provider.name, body)
        endpoint = self.on_create(provider.name, name, keys) if self.on_create else None
        with self.lock:
            self.created_count += 1
            box = {"vastai": str(7000 + self.created_count), "lambda": f"lmb{self.created_count:04d}"}.get(
                provider.name, f"pod{self.created_count:04d}x"
            )
            self.owner[box], self.states[box], self.names[box] = provider.name, BOOTING, name
            self.box_keys[box] = list(keys)
            self.boot_reads[box] = self.boot_reads_default
            if endpoint is not None:
                self.endpoints[box] = endpoint
            self.calls.append(
                {
                    "provider": provider.name,
                    "verb": "create",
                    "target": box,
                    "body": body,
                    "idempotency_key": headers.get("Idempotency-Key"),
                }
            )
        if provider.name == "vastai":
            return 200, {"success": True, "new_contract": int(box)}
        if provider.name == "runpod":
            return 201, {"id": box, "name": name, "desiredStatus": "RUNNING", "costPerHr": 0.44}
        return 200, {"data": {"instance_ids": [box]}}

    def _keys_given(self, provider: str, body) -> list[str]:
        """The public keys a create gives its box: RunPod's PUBLIC_KEY, the Lambda account keys it names
        (an unknown name is refused as Lambda does); vast.ai's boxes get theirs attached after."""
        if provider == "runpod":
            key = (body.get("env") or {}).get("PUBLIC_KEY")
            return [key] if isinstance(key, str) else []
        if provider == "lambda":
            with self.lock:
                known = {k["name"]: k["public_key"] for k in self.account_keys.get("lambda", [])}
            missing = [name for name in body["ssh_key_names"] if name not in known]
            if missing:
                said = {"code": "global/object-does-not-exist", "message": f"SSH key {missing[0]} does not exist"}
                raise Refused(400, {"error": said})
            return [known[name] for name in body["ssh_key_names"]]
        return []

    def _attach(self, target, body):
        """vast.ai's POST /instances/{id}/ssh/: the key is added to the running box's authorized keys."""
        key = body.get("ssh_key") if isinstance(body, dict) else None
        if not isinstance(key, str) or not key.startswith(("ssh-", "ecdsa-")):
            raise Refused(400, {"success": False, "error": "invalid_args", "msg": "ssh_key"})
        with self.lock:
            if self.owner.get(target) != "vastai" or self.states.get(target) == GONE:
                return 404, {"success": False, "error": "no_such_instance"}
            self.box_keys.setdefault(target, []).append(key)
            endpoint = self.endpoints.get(target)
            self.calls.append({"provider": "vastai", "verb": "attach_ssh", "target": target, "body": body})
        if endpoint is not None and self.on_attach is not None:
            self.on_attach(endpoint, key)
        return 200, {"success": True, "msg": "SSH key attached successfully"}

    def _has_ask(self, ask_id) -> bool:
        return any(str(offer.get("id")) == ask_id for offer in self.offers.get("vastai") or [])

    def creates(self) -> list[dict]:
        with self.lock:
            return [c for c in self.calls if c["verb"] == "create"]

    timeout_hold = 3.0  # longer than the tests' PROVIDER_API_TIMEOUT

    def _route(self, method, path, body):
        allowed = []
        for provider in PROVIDERS:
            for route_method, pattern, verb in provider.routes:
                match = re.fullmatch(pattern, path)
                if match and route_method == method:
                    target = match.groupdict().get("id") or ",".join(_ids(body))
                    return provider, verb, target
                if match:
                    allowed.append(route_method)
        if allowed:
            raise Refused(405, {"error": f"{method} not allowed on {path}; allowed: {', '.join(allowed)}"})
        raise Refused(404, {"error": f"no route {method} {path}"})

    @staticmethod
    def _authorised(provider, header: str) -> bool:
        if provider.auth == "basic":
            return header == "Basic " + base64.b64encode(f"{API_KEY}:".encode()).decode()
        return header == f"Bearer {API_KEY}"

    def _next_fault(self, target):
        with self.lock:
            queue = self.faults.get(target)
            return queue.popleft() if queue else None

    def state_of(self, target: str) -> str:
        return self.states.get(target, RUNNING)

    def change(self, provider: str, verb: str, target: str, body, state: str) -> None:
        """Called with the lock held: one accepted state change (a lying provider accepts and keeps billing)."""
        self.calls.append({"provider": provider, "verb": verb, "target": target, "body": body})
        if target not in self.lies:
            self.states[target] = state

    def add(self, provider: str, target: str, state: str = RUNNING) -> None:
        """A box the provider has under the key (listed), whether or not the dashboard knows it."""
        with self.lock:
            self.owner[target], self.states[target] = provider, state

    def reset(self) -> None:
        """Forget every box, call and fault: the next test's boxes exist and run."""
        with self.lock:
            kept_all = (
                self.calls,
                self.requests,
                self.states,
                self.lagging,
                self.faults,
                self.hold,
                self.owner,
                self.lies,
                self.linger,
                self.flicker,
                self.alert,
                self.endpoints,
                self.names,
                self.boot_reads,
                self.no_capacity,
                self.offers,
                self.balances,
                self.volumes,
                self.account_keys,
                self.box_keys,
            )
            for kept in kept_all:
                kept.clear()
            self.on_create, self.on_attach, self.boot_reads_default = None, None, 1

    def fail_next(self, target: str, *answers) -> None:
        """The next requests about target answer these before the real answer: 429 or 5xx, "timeout"
        (no answer, nothing done) or "late" (done, but no answer)."""
        with self.lock:
            self.faults[target].extend(answers)

    def calls_for(self, target: str, verb: str | None = None) -> list[dict]:
        with self.lock:
            return [c for c in self.calls if c["target"] == target and (verb is None or c["verb"] == verb)]

    @property
    def env(self) -> dict[str, str]:
        bases = {f"{name}_API_BASE": self.url for name in ("RUNPOD", "VASTAI", "LAMBDA", "PAPERSPACE")}
        bases["RUNPOD_GRAPHQL_BASE"] = self.url
        return {**bases, KEY_ENV: API_KEY, "PROVIDER_API_RETRY_SECONDS": "0.05"}

    def close(self):
        self.server.shutdown()


def _check_create(provider: str, target: str, body) -> str:
    """The name a documented create body asks for; 400 in the provider's words when the body is wrong."""
    if not isinstance(body, dict):
        raise Refused(400, {"error": "a create takes a JSON body"})
    if provider == "vastai":
        ok = body.get("client_id") == "me" and isinstance(body.get("image"), str) and isinstance(body.get("label"), str)
        if not ok or not isinstance(body.get("disk"), int | float) or body.get("runtype") != "ssh_direct":
            raise Refused(400, {"success": False, "error": "invalid_args", "msg": "client_id, image, disk, label"})
        return body["label"]
    if provider == "runpod":
        keys = {"name", "imageName", "gpuTypeIds", "gpuCount", "containerDiskInGb", "cloudType", "ports"}
        ok = keys <= set(body) and isinstance(body["gpuTypeIds"], list) and body["gpuTypeIds"]
        if not ok or not isinstance(body["gpuCount"], int) or "22/tcp" not in body["ports"]:
            raise Refused(400, {"error": f"name, imageName, gpuTypeIds, gpuCount, ports: {sorted(keys)}"})
        return body["name"]
    keys = {"region_name", "instance_type_name", "ssh_key_names", "name", "quantity"}
    if set(body) != keys or body["quantity"] != 1 or not isinstance(body["ssh_key_names"], list) or not body["name"]:
        raise Refused(400, {"error": {"code": "global/invalid-parameters", "message": ", ".join(sorted(keys))}})
    return body["name"]


def _ids(body) -> list[str]:
    ids = body.get("instance_ids") if isinstance(body, dict) else None
    return [str(i) for i in ids] if isinstance(ids, list) else []


def api_credential(project):
    """The stub's API key, registered as a provider credential and granted to project."""
    from fleet.models import Credential, CredentialKind

    credential, _ = Credential.objects.get_or_create(
        name="stub-provider-key", defaults={"kind": CredentialKind.PROVIDER_KEY, "reference": f"env:{KEY_ENV}"}
    )
    credential.projects.add(project)
    return credential
