"""A project webhook to 127.0.0.1 was once accepted and the worker POSTed to it (blind SSRF). Every
webhook is a notification channel now (the approval webhook became one): refused when added, and
checked again at send time."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core.exceptions import ValidationError

from notifications.actions import do_add_channel
from notifications.models import Channel
from notifications.webhooks import WebhookRefused, checked_address, post_json
from projects.models import Project

REFUSED = [
    ("http://127.0.0.1:8000/hook", "https://"),
    ("https://127.0.0.1/hook", "loopback"),
    ("https://[::1]/hook", "loopback"),
    ("https://[::ffff:127.0.0.1]/hook", "loopback"),
    ("https://10.1.2.3/hook", "private"),
    ("https://192.168.0.10/hook", "private"),
    ("https://169.254.169.254/latest/meta-data", "link-local"),
    ("https://0.0.0.0/hook", "private"),
    ("https://localhost/hook", "localhost"),
    ("https://api.localhost/hook", "localhost"),
    ("https://user:secret@hooks.example.org/x", "no user name or password"),
    ("ftp://hooks.example.org/x", "https://"),
    # A deny-list let these through; only globally routable unicast addresses pass.
    ("https://100.64.0.1/hook", "globally routable"),
    ("https://100.100.100.200/latest/meta-data", "globally routable"),  # a cloud's metadata address
    ("https://[fec0::1]/hook", "globally routable"),
    ("https://[64:ff9b::a00:1]/hook", "10.0.0.1"),  # NAT64 of a private address
    ("https://[2002:a00:1::1]/hook", "10.0.0.1"),  # 6to4 of a private address
    ("https://[ff0e::1]/hook", "globally routable"),
    ("https://224.0.0.1/hook", "globally routable"),
    ("https://198.18.0.1/hook", "globally routable"),
]


def add_webhook(url):
    project, _ = Project.objects.get_or_create(name="Vision", slug="vision")
    return do_add_channel(project, "Approval webhook", "webhook", url, ["teardown.requested"], actor=None)


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "reason"), REFUSED)
def test_a_webhook_into_our_own_network_is_refused_when_added(url, reason):
    with pytest.raises(ValidationError) as refused:
        add_webhook(url)
    assert reason in " ".join(refused.value.messages) and not Channel.objects.exists()


@pytest.mark.parametrize(("url", "reason"), REFUSED[:8] + REFUSED[12:])
def test_sending_refuses_the_same_addresses_after_the_lookup(url, reason):
    """At send time the host is resolved again and every address it gives is checked the same way."""
    with pytest.raises(WebhookRefused, match=reason if reason != "https://" else "https"):
        checked_address(url)


@pytest.mark.django_db
def test_a_public_https_webhook_is_accepted():
    channel = add_webhook("https://hooks.example.org/remotegpu?team=vision")
    assert channel.url == "https://hooks.example.org/remotegpu?team=vision"


class Recorder(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers["Content-Length"])
        Recorder.received.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def listener():
    Recorder.received = []
    server = HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def test_the_worker_never_posts_to_loopback_by_default(listener):
    with pytest.raises(WebhookRefused, match="https://"):
        post_json(listener, {"request": 1})
    with pytest.raises(WebhookRefused, match="loopback"):
        post_json(listener.replace("http://", "https://"), {"request": 1})
    assert Recorder.received == []


def test_a_deployment_that_allows_private_destinations_gets_its_post(listener, settings):
    settings.WEBHOOK_ALLOW_HTTP = settings.WEBHOOK_ALLOW_PRIVATE = True
    assert post_json(listener, {"event": "teardown.requested", "request": 7}) == 204
    assert Recorder.received == [{"event": "teardown.requested", "request": 7}]


def test_a_name_is_checked_against_what_it_resolves_to_at_send_time():
    # This machine's own name resolves to one of its own addresses: private or loopback, never public.
    name = socket.gethostname()
    addresses = {info[4][0] for info in socket.getaddrinfo(name, 443, type=socket.SOCK_STREAM)}
    assert addresses, "the machine's own name does not resolve"
    with pytest.raises(WebhookRefused, match="resolves to"):
        checked_address(f"https://{name}/hook")


def test_a_name_that_does_not_resolve_is_refused_at_send_time():
    with pytest.raises(WebhookRefused, match="does not resolve"):
        checked_address("https://no-such-host.invalid/hook")
