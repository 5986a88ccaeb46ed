"""The health panel checks every real service and names the one that is down."""

import pytest
from celery import Celery
from django.urls import reverse

from remotegpu_site import health

pytestmark = pytest.mark.django_db(transaction=True)


def test_all_green_with_a_worker_running(client, alice, celery_worker_process):
    client.force_login(alice)
    body = client.get(reverse("health")).json()
    assert body["ok"] is True, body
    assert [check["name"] for check in body["checks"]] == ["Database", "Redis", "Channel layer", "Celery workers"]
    page = client.get("/").content.decode()
    assert page.count('class="ok"') == 4


def test_redis_down_is_named(client, alice, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    client.force_login(alice)
    response = client.get(reverse("health"))
    assert response.status_code == 503
    checks = {check["name"]: check for check in response.json()["checks"]}
    assert checks["Redis"]["ok"] is False
    assert "ConnectionError" in checks["Redis"]["detail"]
    assert checks["Database"]["ok"] is True


def test_channel_layer_down_is_named(settings):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}
    }
    checks = {check.name: check for check in health.system_health()}
    assert checks["Channel layer"].ok is False
    assert checks["Database"].ok is True


def test_no_worker_is_named(settings):
    # A real Redis database on which no worker listens.
    lonely = Celery("lonely", broker=settings.REDIS_URL.rsplit("/", 1)[0] + "/14")
    ok, detail = health.check_workers(lonely)
    assert ok is False
    assert "no Celery worker answered a ping" in detail
