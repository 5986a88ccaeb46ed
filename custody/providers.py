"""Provider adapters behind one interface, chosen by the profile's `teardown.<verb>.via`.

ssh: a power-off command over SSH (generic boxes). api: the provider's documented HTTP API with
the key of a credential granted to the instance's project, read from the worker's environment at
use. console: no API; the dashboard shows the exact console steps and the operator attests them.
"""

import json
import shlex
import urllib.error
import urllib.request

from django.conf import settings

from custody.models import TeardownKind
from profiles.credentials import provider_key
from profiles.nodes import transport_for
from profiles.transport import CredentialError, TransportError

DEFAULT_POWEROFF = "sudo -n shutdown -h now"


class ProviderError(Exception):
    pass


class NeedsAttestation(Exception):
    """A console-only consequence: a person does it in the provider's console, then attests."""

    def __init__(self, steps: list[str]):
        super().__init__("console steps")
        self.steps = steps


# Each provider's documented endpoints: (method, path template, JSON body or None).
ENDPOINTS = {
    "runpod": {
        "shutdown": ("POST", "/v1/pods/{id}/stop", None),
        "release": ("DELETE", "/v1/pods/{id}", None),
        "status": ("GET", "/v1/pods/{id}", None),
    },
    "vastai": {
        "shutdown": ("PUT", "/api/v0/instances/{id}/", {"state": "stopped"}),
        "release": ("DELETE", "/api/v0/instances/{id}/", None),
        "status": ("GET", "/api/v0/instances/{id}/", None),
    },
    "lambda": {
        "release": ("POST", "/api/v1/instance-operations/terminate", {"instance_ids": ["{id}"]}),
        "status": ("GET", "/api/v1/instances/{id}", None),
    },
    "paperspace": {
        "shutdown": ("PATCH", "/v1/machines/{id}/stop", None),
        "release": ("DELETE", "/v1/machines/{id}", None),
        "status": ("GET", "/v1/machines/{id}", None),
    },
}
STOPPED_WORDS = {"exited", "stopped", "off", "terminated", "terminating", "inactive", "stopping"}


def _fill(template, provider_id: str):
    if isinstance(template, str):
        return template.replace("{id}", provider_id)
    if isinstance(template, list):
        return [_fill(item, provider_id) for item in template]
    if isinstance(template, dict):
        return {key: _fill(value, provider_id) for key, value in template.items()}
    return template


def api_call(instance, verb: str, idempotency_key: str = "") -> dict:
    provider = instance.profile_key
    method, path, body = ENDPOINTS[provider][verb]
    try:
        key = provider_key(instance)
    except CredentialError as exc:
        raise ProviderError(str(exc)) from None
    if not instance.provider_id:
        raise ProviderError("the instance has no provider id")
    url = settings.PROVIDER_API_BASES[provider].rstrip("/") + _fill(path, instance.provider_id)
    data = json.dumps(_fill(body, instance.provider_id)).encode() if body is not None else None
    if not url.startswith(("https://", "http://")):
        raise ProviderError(f"the {provider} API base is not an http(s) URL")
    request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (checked above)
    request.add_header("Authorization", f"Bearer {key}")
    request.add_header("Content-Type", "application/json")
    if idempotency_key:
        request.add_header("Idempotency-Key", idempotency_key)
    try:
        with urllib.request.urlopen(request, timeout=settings.PROVIDER_API_TIMEOUT) as response:  # noqa: S310
            text = response.read().decode(errors="replace")
            return {"http_status": response.status, "body": json.loads(text) if text.strip() else {}}
    except urllib.error.HTTPError as exc:
        raise ProviderError(f"{provider} answered {exc.code}: {exc.read().decode(errors='replace')[:300]}") from None
    except (urllib.error.URLError, TimeoutError, ValueError) as exc:
        raise ProviderError(f"{provider} API unreachable: {exc}") from None


def provider_says_stopped(instance) -> bool | None:
    """True/False when the provider's status endpoint answers; None when there is none."""
    if instance.profile_key not in ENDPOINTS or "status" not in ENDPOINTS[instance.profile_key]:
        return None
    try:
        answer = api_call(instance, "status")["body"]
    except ProviderError:
        return None
    text = json.dumps(answer).lower()
    return any(f'"{word}"' in text for word in STOPPED_WORDS)


def provider_status(instance) -> dict:
    """What the provider says about the box now, for a person settling an interrupted execution."""
    if instance.profile_key not in ENDPOINTS or "status" not in ENDPOINTS[instance.profile_key]:
        return {"status": "no status API: check the console"}
    try:
        body = api_call(instance, "status")["body"]
    except ProviderError as exc:
        return {"status": f"could not ask: {exc}"}
    text = json.dumps(body).lower()
    stopped = any(f'"{word}"' in text for word in STOPPED_WORDS)
    return {"status": "stopped or gone" if stopped else "still running", "answer": body}


def console_steps(instance, kind: str) -> list[str]:
    profile = instance.profile
    verb = profile.data["billing"]["meter_stop_verb"] if kind == TeardownKind.SHUTDOWN else "release / destroy"
    target = instance.provider_id or instance.name
    return [
        f"Open the {profile.name} console and find instance {target} ({instance.address}).",
        f"Choose {verb} for that exact instance only.",
        "Wait until the console shows it stopped / released, then attest here.",
    ]


def execute(instance, kind: str, idempotency_key: str) -> dict:
    """Run one consequence at the provider; raises ProviderError or NeedsAttestation."""
    via = instance.profile.data["teardown"]["shutdown" if kind == TeardownKind.SHUTDOWN else "release"]["via"]
    if via == "api" and kind in ENDPOINTS.get(instance.profile_key, {}):
        return api_call(instance, kind, idempotency_key)
    if via == "ssh":
        argv = shlex.split(instance.shutdown_command or DEFAULT_POWEROFF)
        try:
            with transport_for(instance) as transport:
                result = transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT)
        except TransportError as exc:
            raise ProviderError(f"power-off over SSH failed: {exc}") from None
        if result.exit_code != 0:
            raise ProviderError(f"power-off exited {result.exit_code}: {result.stderr.strip()[-300:]}")
        return {"command": shlex.join(argv), "exit_code": 0}
    if via == "none":
        raise ProviderError(f"{instance.profile.name} has no {kind} (for example Lambda has no stop: terminate)")
    raise NeedsAttestation(console_steps(instance, kind))
