"""Where a project's webhook may point: a public https endpoint, never the control host's own network.

An operator sets the URL and the worker POSTs to it, so an unchecked URL is a blind request from
inside our network (SSRF). Checked when saved, and again at send time against the addresses the
name resolves to then (a name may be re-pointed after it was saved); the POST goes to the address
that was checked, so a second lookup cannot swap it.
"""

import http.client
import ipaddress
import json
import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings


class WebhookRefused(ValueError):
    """A destination outside what the deployment allows; the message says why, never the payload."""


NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are an IPv4 address


def _embedded(ip) -> list:
    """ip and every IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64): each must be public."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return [ip]
    inner = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
    if ip in NAT64:
        inner.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return [ip, *(address for address in inner if address is not None)]


def _address_problem(address: str) -> str | None:
    """An allow-list: only globally routable unicast addresses (a deny-list let 100.64.0.0/10, a cloud
    metadata address, and fec0::/10 through)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return None
    for candidate in _embedded(ip):
        site_local = getattr(candidate, "is_site_local", False)  # fec0::/10: is_global is True in Python 3.11
        if candidate.is_loopback:
            return f"{candidate} is a loopback address"
        if not candidate.is_global or candidate.is_multicast or site_local:
            return f"{candidate} is not a globally routable unicast address (loopback, link-local or private)"
    return None


def url_problem(url: str) -> str | None:
    """What is wrong with url as a webhook destination before any lookup, or None."""
    parts = urlsplit(url)
    allowed = ("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme not in allowed:
        return "A webhook must be an https:// URL."
    if not parts.hostname or parts.username or parts.password:
        return "A webhook names a host and carries no user name or password."
    try:
        parts.port  # noqa: B018 (raises on a port out of range)
    except ValueError:
        return "The webhook's port is not a number from 1 to 65535."
    host = parts.hostname.rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return None if settings.WEBHOOK_ALLOW_PRIVATE else "A webhook may not point at this host (localhost)."
    try:
        problem = _address_problem(host)
    except ValueError:
        return None  # a name: checked against what it resolves to at send time
    return f"A webhook may not point there: {problem}." if problem else None


def checked_address(url: str) -> str:
    """The one address url's host resolves to that may be reached; WebhookRefused otherwise."""
    problem = url_problem(url)
    if problem:
        raise WebhookRefused(problem)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise WebhookRefused(f"the webhook's host does not resolve: {exc.strerror or exc}") from None
    addresses = sorted({info[4][0] for info in infos})
    for address in addresses:
        problem = _address_problem(address)
        if problem:  # any bad answer refuses: a name with one private address is pointed inside
            raise WebhookRefused(f"the webhook's host resolves to {problem}")
    return addresses[0]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host, address, **kwargs):
        super().__init__(host, **kwargs)
        self.address = address

    def connect(self):
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, address, **kwargs):
        super().__init__(host, context=ssl.create_default_context(), **kwargs)
        self.address = address

    def connect(self):
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post_json(url: str, payload: dict, timeout: float = 10) -> int:
    """POST payload to url at the address that was checked; the HTTP status."""
    address = checked_address(url)
    parts = urlsplit(url)
    connection_class = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    connection = connection_class(parts.hostname, address, port=parts.port, timeout=timeout)
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    try:
        connection.request("POST", target, json.dumps(payload).encode(), {"Content-Type": "application/json"})
        return connection.getresponse().status
    finally:
        connection.close()
