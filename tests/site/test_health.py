"""The health panel names the part that is down; a worker measures it, pages only read the record."""

import time

import pytest
from celery import Celery, current_app
from django.urls import reverse

from core import health
from tests.waiting import wait_until
from tests.worker_env import LONELY_REDIS_DB

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_record():
    client = health._client()
    client.delete(health.RECORD_KEY)
    yield
    client.delete(health.RECORD_KEY)
    client.close()


def test_all_green_once_a_worker_measured_it(client, alice, celery_worker_process):
    from runs.tasks import record_health

    client.force_login(alice)
    record_health.delay()  # what beat does every HEALTH_INTERVAL seconds
    body = wait_until(lambda: (answer := client.get(reverse("health")).json())["ok"] and answer, 30, 0.3)
    assert body["ok"] is True, body
    assert [check["name"] for check in body["checks"]] == ["Database", "Redis", "Channel layer", "Celery workers"]
    assert "measured" in body["checks"][2]["detail"] and "round-trip" in body["checks"][2]["detail"]
    page = client.get("/").content.decode()
    assert page.count('class="ok"') == 4


def test_no_measurement_names_the_missing_worker_and_answers_at_once(client, alice):
    client.force_login(alice)
    started = time.monotonic()
    response = client.get(reverse("health"))
    assert time.monotonic() - started < 1.0  # nothing waited on a ping
    assert response.status_code == 503
    checks = {check["name"]: check for check in response.json()["checks"]}
    assert checks["Database"]["ok"] and checks["Redis"]["ok"]
    assert "no worker has measured health" in checks["Celery workers"]["detail"]


def test_a_stack_in_its_first_seconds_says_starting_not_down(client, alice, monkeypatch, settings):
    """runstack says when it started its worker and beat: until they could have measured, the first screen
    says STARTING (a fresh stack's first screen said DOWN and "is a Celery worker running?")."""
    settings.HEALTH_STALE_SECONDS = 30
    monkeypatch.setenv(health.STARTED_ENV, f"{time.time() - 3:.0f}")
    client.force_login(alice)
    checks = {check["name"]: check for check in client.get(reverse("health")).json()["checks"]}
    assert checks["Celery workers"]["starting"] is True and checks["Celery workers"]["ok"] is False
    assert checks["Celery workers"]["detail"].startswith("starting: the stack's worker and beat started")
    page = client.get("/").content.decode()
    assert page.count('class="starting"') == 2 and "STARTING" in page and "DOWN" not in page
    monkeypatch.setenv(health.STARTED_ENV, f"{time.time() - 31:.0f}")  # past the time they had: a missing worker
    checks = {check["name"]: check for check in client.get(reverse("health")).json()["checks"]}
    assert not checks["Celery workers"]["starting"] and "is a Celery worker" in checks["Celery workers"]["detail"]


def test_a_stale_measurement_is_not_trusted(client, alice, settings):
    health.measure_and_record()
    settings.HEALTH_STALE_SECONDS = 0
    time.sleep(0.01)
    checks = {check.name: check for check in health.system_health()}
    assert checks["Channel layer"].ok is False and "since" in checks["Channel layer"].detail


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
    checks = {check.name: check for check in health.measure()}
    assert checks["Channel layer"].ok is False
    assert checks["Database"].ok is True


def test_no_worker_is_named(settings):
    # A real Redis database on which no worker listens (test workers take 15 downwards, a dev stack 0).
    # Not the current app: every later .delay() in this process must still reach our broker.
    lonely = Celery("lonely", broker=settings.REDIS_URL.rsplit("/", 1)[0] + f"/{LONELY_REDIS_DB}", set_as_current=False)
    assert current_app.main == "remotegpu"
    ok, detail = health.check_workers(lonely)
    assert ok is False
    assert "no Celery worker answered a ping" in detail
