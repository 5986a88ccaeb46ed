"""System health: database, Redis, channel layer and Celery workers, checked in parallel.

Each check returns (ok, detail); the panel names the part that is down and why.
"""

import asyncio
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


def check_database() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        # Checked from a worker thread: leave no connection open behind it.
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
        from remotegpu_site.celery import app
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


def system_health() -> list[Check]:
    with ThreadPoolExecutor(max_workers=len(CHECKS)) as pool:
        futures = [pool.submit(_run, name, func) for name, func in CHECKS.items()]
        return [future.result() for future in futures]
