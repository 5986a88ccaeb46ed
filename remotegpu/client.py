"""A small JSON client for the RemoteGPU API (stdlib only, so it runs anywhere Python does)."""

import json
import urllib.error
import urllib.request


class ApiError(Exception):
    pass


class Client:
    def __init__(self, base_url: str, token: str, timeout: float = 30):
        if not base_url.startswith(("http://", "https://")):
            raise ApiError(f"REMOTEGPU_URL must be an http(s) URL, not {base_url!r}")
        if not token:
            raise ApiError("set REMOTEGPU_TOKEN (make one on the dashboard's API tokens page)")
        self.site = base_url.rstrip("/")  # pages (a run's URL) live here, the API under /api
        self.base = self.site + "/api"
        self.token, self.timeout = token, timeout

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)  # noqa: S310 (checked above)
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read())
            except ValueError:
                answer = {"detail": exc.reason}
            raise ApiError(f"{method} {path}: {exc.code} {answer.get('detail', answer)}") from None
        except urllib.error.URLError as exc:
            raise ApiError(f"cannot reach {self.base}: {exc.reason}") from None
