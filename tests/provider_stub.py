"""A small local HTTP server speaking the documented teardown endpoints of RunPod, vast.ai, Lambda
and Paperspace, recording every call: the one external side effect tests cannot reach for real."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY = "stub-api-key-not-a-secret"
KEY_ENV = "STUB_PROVIDER_API_KEY"

# (method, path pattern) → (provider, verb)
ROUTES = [
    ("POST", r"/v1/pods/(?P<id>[^/]+)/stop", "runpod", "stop"),
    ("DELETE", r"/v1/pods/(?P<id>[^/]+)", "runpod", "terminate"),
    ("GET", r"/v1/pods/(?P<id>[^/]+)", "runpod", "status"),
    ("PUT", r"/api/v0/instances/(?P<id>[^/]+)/", "vastai", "stop"),
    ("DELETE", r"/api/v0/instances/(?P<id>[^/]+)/", "vastai", "destroy"),
    ("GET", r"/api/v0/instances/(?P<id>[^/]+)/", "vastai", "status"),
    ("POST", r"/api/v1/instance-operations/terminate", "lambda", "terminate"),
    ("GET", r"/api/v1/instances/(?P<id>[^/]+)", "lambda", "status"),
    ("PATCH", r"/v1/machines/(?P<id>[^/]+)/stop", "paperspace", "stop"),
    ("DELETE", r"/v1/machines/(?P<id>[^/]+)", "paperspace", "destroy"),
    ("GET", r"/v1/machines/(?P<id>[^/]+)", "paperspace", "status"),
]


class ProviderStub:
    def __init__(self):
        self.calls: list[dict] = []
        self.webhooks: list[dict] = []
        self.states: dict[str, str] = {}
        self.hold: dict[str, threading.Event] = {}  # target → answer only once set (a slow provider)
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null") if length else None
                if self.path.startswith("/hooks/"):  # a project's approval webhook
                    with stub.lock:
                        stub.webhooks.append({"path": self.path, "body": body})
                    return self._send(200, {"ok": True})
                if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                    return self._send(401, {"error": "unauthorized"})
                for method, pattern, provider, verb in ROUTES:
                    match = re.fullmatch(pattern, self.path)
                    if method == self.command and match:
                        target = match.groupdict().get("id") or ",".join((body or {}).get("instance_ids", []))
                        answer = stub.record(provider, verb, target, body, self.headers)
                        if verb != "status" and target in stub.hold:
                            stub.hold[target].wait(timeout=60)
                        return self._send(200, answer)
                return self._send(404, {"error": f"no route {self.command} {self.path}"})

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def record(self, provider, verb, target, body, headers) -> dict:
        with self.lock:
            if verb != "status":
                self.calls.append(
                    {"provider": provider, "verb": verb, "target": target, "body": body,
                     "idempotency_key": headers.get("Idempotency-Key")}
                )  # fmt: skip
                self.states[target] = "EXITED" if verb == "stop" else "TERMINATED"
            return {"id": target, "desiredStatus": self.states.get(target, "RUNNING")}

    def calls_for(self, target: str, verb: str | None = None) -> list[dict]:
        with self.lock:
            return [c for c in self.calls if c["target"] == target and (verb is None or c["verb"] == verb)]

    @property
    def env(self) -> dict[str, str]:
        bases = {f"{name}_API_BASE": self.url for name in ("RUNPOD", "VASTAI", "LAMBDA", "PAPERSPACE")}
        return {**bases, KEY_ENV: API_KEY}

    def close(self):
        self.server.shutdown()


def api_credential(project):
    """The stub's API key, registered as a provider credential and granted to project."""
    from profiles.models import Credential, CredentialKind

    credential, _ = Credential.objects.get_or_create(
        name="stub-provider-key", defaults={"kind": CredentialKind.PROVIDER_KEY, "reference": f"env:{KEY_ENV}"}
    )
    credential.projects.add(project)
    return credential
