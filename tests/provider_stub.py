"""Local stand-ins for the cloud providers' HTTP APIs on one loopback server, each provider's written from
its documentation (../shared/reference/profiles/{runpod,vastai,lambda,paperspace}.md), not from our
adapter, in its own module (tests/provider_stubs/<name>.py): each checks its own auth scheme, method, path
and request body, answers in its own shape, keeps each box's state, and can be told to fail (429, 5xx, a
timeout, a hang) — so a wrong endpoint, body, key or reading of an answer fails a test.

Every accepted state change is recorded in `calls`; a box the stub has not seen exists and runs.
"""

import base64
import json
import re
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

from tests.provider_stubs.base import BOOTING, GONE, RUNNING, Refused, no_body
from tests.provider_stubs.lambdalabs import Lambda
from tests.provider_stubs.paperspace import Paperspace
from tests.provider_stubs.runpod import RunPod
from tests.provider_stubs.vastai import VastAi

API_KEY = "stub-api-key-not-a-secret"
KEY_ENV = "STUB_PROVIDER_API_KEY"

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
        self.schema_violations: list[dict] = []  # answers a stand-in gave outside its provider's schema
        # Providers a test makes answer outside their published schema on purpose (a hostile or broken
        # answer our reading must refuse): their answers are not held to it.
        self.off_schema: set[str] = set()
        self.endless: set[str] = set()  # providers whose list pages name a next page for ever (a broken API)
        self.owner: dict[str, str] = {}  # target → the provider that has it (what "list" answers)
        self.lies: set[str] = set()  # targets whose release answers 200 and changes nothing
        self.linger: dict[str, int] = {}  # target → status reads that still show it after its release
        self.flicker: dict[str, int] = {}  # target → status reads that answer 404 though it still has it
        self.alert: set[str] = set()  # Lambda targets whose terminate leaves them in "alert"
        self.endpoints: dict[str, tuple] = {}  # target → (host, SSH port) its listing names
        self.ends: dict[str, object] = {}  # target → the end of its rental its listing names (vast.ai)
        self.balances: dict[str, object] = {}  # provider → the account's balance its user call answers
        self.volumes: dict[str, list] = {}  # provider → the volumes / filesystems it lists, as it answers them
        self.volume_creates: list[dict] = []  # every volume create call, in order
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
        path, _, query = path.partition("?")
        if query and body is None:  # a GET's search: its query string, read as the body it stands for
            body = {
                key: int(value) if value.isascii() and value.isdigit() else value for key, value in parse_qsl(query)
            }
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
        try:
            code, payload = self._act(provider, verb, target, body, headers)
        except Refused as refused:
            self._conforms(provider, verb, refused.code, refused.payload)
            raise
        self._conforms(provider, verb, code, payload)
        if verb != "status" and target in self.hold:  # done at the provider; the answer waits (a slow API)
            self.hold[target].wait(timeout=60)
        return code, payload, {}

    def _act(self, provider, verb, target, body, headers):
        """The provider's answer; the calls it records carry the request's Idempotency-Key."""
        if verb == "user":  # the account (vast.ai's show_user): its balance, what is left to spend
            no_body(body)
            with self.lock:
                return 200, {
                    "id": 4242,
                    "email": "team@example.com",
                    "balance": self.balances.get(provider.name, 100.0),
                }
        if verb == "create_volume":  # a network volume or filesystem, listed from then on
            with self.lock:
                item, answer = provider.create_volume(body, len(self.volumes.get(provider.name, [])) + 1)
                self.volumes.setdefault(provider.name, []).append(item)
                self.volume_creates.append({"provider": provider.name, "body": body})
            return 200, answer
        if verb == "volumes":  # volumes, filesystems: each provider wraps its list its own way
            no_body(body)
            with self.lock:
                items = list(self.volumes.get(provider.name, []))
            return 200, provider.volumes_answer(items)
        if verb in ("ips", "snapshots", "shared_drives"):  # Paperspace's other lists, paged as its machines
            with self.lock:
                items = list(self.volumes.get(f"paperspace-{verb}", []))
            return 200, provider.page(self, {"items": items}, body)
        if verb == "list":
            with self.lock:
                boxes = {i: s for i, s in self.states.items() if self.owner.get(i) == provider.name and s != GONE}
                self._boot(boxes)
                # A booting box has no public port mapped yet (vast.ai lists ports once the container runs).
                endpoints = {i: e for i, e in self.endpoints.items() if self.states.get(i) != BOOTING}
            return 200, provider.page(self, provider.listing(boxes, endpoints, dict(self.ends), dict(self.names)), body)
        if verb == "offers":
            with self.lock:
                offers = self.offers.get(provider.name)
            return provider.offers_answer(offers, body)
        if verb == "graphql":
            return provider.graphql(self, body)
        if verb == "create":
            return self._create(provider, target, body, headers)
        if verb == "ssh_keys":
            no_body(body)
            with self.lock:
                return 200, {"data": list(self.account_keys.get(provider.name, []))}
        if verb == "attach_ssh":
            return provider.attach(self, target, body)
        with self.lock:
            before = len(self.calls)
            self.owner.setdefault(target, provider.name)
            answer = provider.act(self, verb, target, body)
            for call in self.calls[before:]:
                call["idempotency_key"] = headers.get("Idempotency-Key")
        return answer

    def _conforms(self, provider, verb, code, payload) -> None:
        """A stand-in answers only what the provider's published schema allows: anything else is this
        stand-in's defect, answered as one (599) and kept for the test to see."""
        found = [] if provider.name in self.off_schema else provider.answer_problems(verb, code, payload)
        if found:
            with self.lock:
                self.schema_violations.append({"provider": provider.name, "verb": verb, "problems": found})
            raise Refused(599, {"error": f"the {provider.name} stand-in broke its published schema: {found[:3]}"})

    def _boot(self, boxes: dict) -> None:
        """With the lock held: a booting box is listed booting for its first reads, then running."""
        for target in [t for t, state in boxes.items() if state == BOOTING]:
            self.boot_reads[target] = self.boot_reads.get(target, 0) - 1
            if self.boot_reads[target] < 0:
                self.states[target] = boxes[target] = RUNNING

    def _create(self, provider, target, body, headers):
        """A provider's create, checked as documented; "no capacity" when told so; else a new box, booting,
        named as asked, with a real sshd when on_create makes one."""
        if not isinstance(body, dict):
            raise Refused(400, {"error": "a create takes a JSON body"})
        name = provider.check_create(target, body)
        with self.lock:
            full = provider.name in self.no_capacity or not provider.has_capacity(self, target)
        if full:
            provider.refuse_no_capacity(target)
        keys = provider.keys_given(self, body)
        endpoint = self.on_create(provider.name, name, keys) if self.on_create else None
        with self.lock:
            self.created_count += 1
            box = provider.new_id(self.created_count)
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
        return provider.created(box, name)

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
                self.schema_violations,
                self.off_schema,
                self.endless,
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
                self.volume_creates,
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
