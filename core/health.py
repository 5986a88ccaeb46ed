"""System health: database, Redis, channel layer and Celery workers.

Each check returns (ok, detail); the panel names the part that is down and why. Pages never wait on
infrastructure: a worker measures every check on a beat schedule (`measure_and_record`) and stores
the result in Redis with its time; a page reads that record (one bounded GET) plus its own database,
and says how old the measurement is. No measurement for a while means no worker or no beat.
"""

import asyncio
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    starting: bool = False  # not measured yet because the stack's own worker and beat are still starting


def check_database(close: bool = True) -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        if close:  # checked from a pool thread: leave no connection open behind it
            connection.close()
    return True, f"{connection.vendor} answered"


def check_redis() -> tuple[bool, str]:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    finally:
        client.close()
    return True, "PING answered"


def check_channel_layer() -> tuple[bool, str]:
    layer = get_channel_layer()

    async def roundtrip() -> bool:
        channel = await layer.new_channel(prefix="health")
        token = uuid.uuid4().hex
        await layer.send(channel, {"type": "health.ping", "token": token})
        message = await asyncio.wait_for(layer.receive(channel), timeout=2)
        return message.get("token") == token

    if not async_to_sync(roundtrip)():
        return False, "message came back changed"
    return True, "send/receive round-trip"


def check_workers(app=None) -> tuple[bool, str]:
    if app is None:
        from celery import current_app as app  # the site's app: remotegpu_site sets it up at start

    replies = app.control.ping(timeout=settings.HEALTH_PING_TIMEOUT)
    if not replies:
        return False, f"no Celery worker answered a ping within {settings.HEALTH_PING_TIMEOUT:g}s"
    names = sorted(name for reply in replies for name in reply)
    return True, f"{len(names)} worker(s): {', '.join(names)}"


CHECKS = {
    "Database": check_database,
    "Redis": check_redis,
    "Channel layer": check_channel_layer,
    "Celery workers": check_workers,
}


def _run(name: str, func) -> Check:
    try:
        ok, detail = func()
    except Exception as exc:
        ok, detail = False, f"{type(exc).__name__}: {str(exc)[:160]}"
    return Check(name, ok, detail)


def measure() -> list[Check]:
    """Every check, in parallel (a worker's job: the Celery ping alone may take HEALTH_PING_TIMEOUT)."""
    with ThreadPoolExecutor(max_workers=len(CHECKS)) as pool:
        futures = [pool.submit(_run, name, func) for name, func in CHECKS.items()]
        return [future.result() for future in futures]


RECORD_KEY = "remotegpu:health"


# Set by `manage.py runstack` for the processes it starts: when they were started (epoch seconds).
STARTED_ENV = "REMOTEGPU_STACK_STARTED_AT"


def _client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)


def measure_and_record() -> list[Check]:
    checks = measure()
    record = {"at": time.time(), "checks": [check.__dict__ for check in checks]}
    client = _client()
    try:
        client.set(RECORD_KEY, json.dumps(record), ex=int(settings.HEALTH_STALE_SECONDS * 10))
    finally:
        client.close()
    return checks


def system_health() -> list[Check]:
    """For pages: the database (asked directly, cheaply), then the last recorded measurement."""
    checks = [_run("Database", lambda: check_database(close=False))]  # the request's own connection
    client = _client()
    try:
        raw = client.get(RECORD_KEY)
    except redis.RedisError as exc:
        detail = f"{type(exc).__name__}: {str(exc)[:160]}"
        return (
            checks
            + [Check("Redis", False, detail)]
            + [Check(name, False, "unknown while Redis is down") for name in ("Channel layer", "Celery workers")]
        )
    finally:
        client.close()
    if raw is None:
        return checks + [Check("Redis", True, "answered")] + (_starting() or _stale("never"))
    record = json.loads(raw)
    age = max(0.0, time.time() - record["at"])
    if age > settings.HEALTH_STALE_SECONDS:
        return checks + [Check("Redis", True, "answered")] + _stale(f"{age:.0f} s ago")
    measured = {item["name"]: Check(**item) for item in record["checks"]}
    note = f" (measured {age:.0f} s ago)"
    return checks + [
        Check(name, measured[name].ok, measured[name].detail + note)
        for name in ("Redis", "Channel layer", "Celery workers")
        if name in measured
    ]


def _starting() -> list[Check]:
    """The first seconds of a stack that `runstack` started (it says when): its worker and beat have not
    had time to measure, which is not a missing worker (a fresh stack's first screen said DOWN)."""
    started = float(os.environ.get(STARTED_ENV) or 0)
    age = time.time() - started
    if not started or age > settings.HEALTH_STALE_SECONDS:
        return []
    within = settings.HEALTH_STALE_SECONDS
    why = f"starting: the stack's worker and beat started {age:.0f} s ago and report within {within:.0f} s"
    return [Check("Channel layer", False, why, starting=True), Check("Celery workers", False, why, starting=True)]


def _stale(when: str) -> list[Check]:
    why = f"no worker has measured health since {when}: is a Celery worker (and beat) running?"
    return [Check("Channel layer", False, why), Check("Celery workers", False, why)]
