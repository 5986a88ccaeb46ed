"""Production headers: CSP without inline script, HSTS, secure cookies; pages carry no inline script."""

import re
import subprocess
import sys

import pytest
from django.conf import settings

from tests.conftest import REPO, subprocess_env

pytestmark = pytest.mark.django_db


def test_debug_is_off_by_default():
    """pytest-django forces DEBUG off in this process: ask a fresh one, with no DEBUG in its environment."""
    code = "from django.conf import settings; print(settings.DEBUG)"
    env = {key: value for key, value in subprocess_env().items() if key != "DEBUG"}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert settings.DEBUG is False


def test_csp_forbids_inline_script(client, alice):
    client.force_login(alice)
    policy = client.get("/")["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]+)", policy).group(1)
    assert script_src.strip() == "'self'"
    assert "unsafe-inline" not in policy


@pytest.mark.parametrize("path", ["/", "/projects/new/", "/login/"])
def test_pages_have_no_inline_script(client, alice, path):
    if path != "/login/":
        client.force_login(alice)
    html = client.get(path).content.decode()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag, f"inline script on {path}: {tag}"
    assert not re.search(r"\son[a-z]+=", html), f"inline event handler on {path}"


def test_https_response_carries_hsts(client, alice):
    client.force_login(alice)
    response = client.get("/login/", secure=True)
    assert "max-age=31536000" in response["Strict-Transport-Security"]


def test_cookies_are_secure_and_http_only_when_not_debug(client, alice):
    response = client.post("/login/", {"username": "alice", "password": "alice-pass-1234"}, secure=True)
    session_cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert session_cookie["secure"] is True
    assert session_cookie["httponly"] is True
    assert settings.CSRF_COOKIE_SECURE is True
