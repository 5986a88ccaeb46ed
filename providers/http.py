"""The one HTTP exchange with a provider's documented API: bounded answers, the key sent as the adapter says,
429 and 5xx retried a bounded number of times with the provider's Retry-After. The settings are the
deployment's (timeouts, retries, and PROVIDER_API_BASES where it points a provider elsewhere, a stub in tests).
"""

import base64
import contextlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from django.conf import settings

from providers import ADAPTERS
from providers.reading import fill

MAX_ANSWER_BYTES = 1024**2  # a provider's answer is read bounded, like a box's


class ProviderError(Exception):
    pass


class ProviderRefused(ProviderError):
    """A 4xx other than 404/429: the provider refused the call, in its own words."""

    def __init__(self, provider: str, code: int, text: str):
        super().__init__(f"{provider} answered {code}: {text[:300]}")
        self.code, self.text = code, text[:2000]


class ProviderUnreachable(ProviderError):
    """The provider could not be asked (no connection, 5xx or 429 past the retries, no answer in time): an
    outage says nothing of the request, so a rent asks again later rather than asking for a change."""


class ProviderTimeout(ProviderUnreachable):
    """The provider did not answer in time: the call may or may not have landed."""


def send(
    api, provider: str, verb: str, provider_id: str, key: str, idempotency_key: str, body=None
) -> tuple[int, object]:
    """One documented call by its name in the API table, "{id}" filled in; body, when given, is sent
    instead of the table's template (a search, a key to attach)."""
    endpoint = api.endpoints[verb]
    if body is None and endpoint.body is not None:
        body = fill(endpoint.body, provider_id)
    path = fill(endpoint.path, provider_id)
    if endpoint.method == "GET" and body is not None:  # a GET's search is its query string
        path, body = f"{path}?{urllib.parse.urlencode(body)}", None
    return exchange(api, provider, endpoint.method, path, body, key, idempotency_key, endpoint.base)


def exchange(
    api, provider: str, method: str, path: str, body, key: str, idempotency_key: str, base: str = ""
) -> tuple[int, object]:
    """One HTTP exchange: (status, JSON body); 404, 429 and 5xx are answers, other 4xx raise with the
    provider's words (a renting caller reads them: ProviderRefused), and a non-JSON body raises."""
    url = _base(provider, base or provider).rstrip("/") + path
    if not url.startswith(("https://", "http://")):
        raise ProviderError(f"the {provider} API base is not an http(s) URL")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (checked above)
    if api.auth == "basic":
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{key}:".encode()).decode())
    else:
        request.add_header("Authorization", f"Bearer {key}")
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if idempotency_key:
        request.add_header("Idempotency-Key", idempotency_key)
    try:
        with urllib.request.urlopen(request, timeout=settings.PROVIDER_API_TIMEOUT) as response:  # noqa: S310
            return response.status, _json(provider, response.read(MAX_ANSWER_BYTES))
    except urllib.error.HTTPError as exc:
        text = exc.read(MAX_ANSWER_BYTES).decode(errors="replace")
        if exc.code == 404:
            return exc.code, _said(text)  # its body is the provider's word on what is not found
        if exc.code == 429 or exc.code >= 500:
            return exc.code, {"error": text[:300], "retry_after": exc.headers.get("Retry-After")}
        raise ProviderRefused(provider, exc.code, text) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
            raise ProviderTimeout(f"{provider} did not answer within {settings.PROVIDER_API_TIMEOUT} s") from None
        raise ProviderUnreachable(f"{provider} API unreachable: {reason}") from None


def _said(text: str):
    """A 404's body as the provider wrote it (a JSON object), or its text where it is not one."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"error": text[:300]}


def _json(provider: str, raw: bytes):
    text = raw.decode(errors="replace")
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        raise ProviderError(f"{provider} answered something that is not JSON: {text[:120]!r}") from None


def _retry_wait(answer, attempt: int) -> float:
    """Retry-After when the provider gives seconds (capped), else a doubling backoff."""
    hint = answer.get("retry_after") if isinstance(answer, dict) else None
    base = settings.PROVIDER_API_RETRY_SECONDS * 2**attempt
    with contextlib.suppress(ValueError):  # an HTTP date or garbage: the backoff stands
        base = float(hint) if hint is not None else base
    return min(max(base, 0.0), settings.PROVIDER_API_RETRY_MAX_SECONDS)


def with_retries(provider: str, call) -> dict:
    for attempt in range(settings.PROVIDER_API_RETRIES + 1):
        status, body = call()
        if status != 429 and status < 500:
            return {"http_status": status, "body": body}
        if attempt < settings.PROVIDER_API_RETRIES:
            time.sleep(_retry_wait(body, attempt))
    said = body.get("error") if isinstance(body, dict) else body
    raise ProviderUnreachable(f"{provider} answered {status} {settings.PROVIDER_API_RETRIES + 1} times: {said}")


def _base(provider: str, name: str) -> str:
    """The deployment's base for this API where it names one, else the adapter's documented one."""
    return settings.PROVIDER_API_BASES.get(name) or ADAPTERS[provider].bases[name]
