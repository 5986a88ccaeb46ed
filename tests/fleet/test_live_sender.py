"""Live messages (fleet/live.send) on the real Redis channel layer: sent in order, and carried by
one event loop per process. Each send used to start a thread and an event loop, and the layer keeps
its Redis connections per loop, so every message opened a new Redis connection."""

import asyncio
import threading
import time

import redis
from channels.layers import get_channel_layer
from django.conf import settings

from fleet.live import SEND_TIMEOUT, send
from tests.runs.test_redis_restart import PrivateRedis

MESSAGES = 80  # under the layer's per-channel capacity (100), so none is dropped while unread


async def joined(group: str) -> str:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    return channel


async def received(channel: str, count: int) -> list[int]:
    layer = get_channel_layer()
    return [(await asyncio.wait_for(layer.receive(channel), 10))["payload"]["n"] for _ in range(count)]


def connections_so_far() -> int:
    return redis.Redis.from_url(settings.REDIS_URL).info("stats")["total_connections_received"]


def test_messages_from_threads_arrive_in_order_over_the_connections_already_open():
    group = f"sender-test-{threading.get_ident()}"
    channel = asyncio.run(joined(group))
    send(group, {"n": -1})  # the first message opens the process's connection
    before = connections_so_far()

    def send_from(start: int) -> None:
        for n in range(start, MESSAGES, 2):
            send(group, {"n": n})

    senders = [threading.Thread(target=send_from, args=(start,)) for start in (0, 1)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    opened = connections_so_far() - before
    got = asyncio.run(received(channel, MESSAGES + 1))
    assert got[0] == -1 and sorted(got[1:]) == list(range(MESSAGES))
    for start in (0, 1):  # each thread's messages in the order it sent them
        assert [n for n in got[1:] if n % 2 == start] == list(range(start, MESSAGES, 2))
    # Two threads, one loop: the layer's pool serves them (a connection or two); before, one per message.
    assert opened < MESSAGES // 4, opened


def test_after_a_redis_restart_the_kept_connection_is_replaced_and_messages_flow_again(settings):
    """The sender keeps its connections; a restarted Redis breaks them. A message may be lost to the
    outage (best effort: the page re-reads the database), none waits past SEND_TIMEOUT, and the
    next ones arrive."""
    private = PrivateRedis().start()
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": private.url, "socket_connect_timeout": 2}]},
        }
    }
    try:
        group = "sender-restart"
        channel = asyncio.run(joined(group))
        send(group, {"n": 0})
        assert asyncio.run(received(channel, 1)) == [0]
        private.stop()
        started = time.monotonic()
        send(group, {"n": 1})  # Redis is down: logged and dropped, not raised, not waited on for long
        assert time.monotonic() - started < SEND_TIMEOUT + 1
        private.start()
        channel = asyncio.run(joined(group))  # a restarted Redis remembers no group
        for n in range(2, 6):
            started = time.monotonic()
            send(group, {"n": n})
            assert time.monotonic() - started < SEND_TIMEOUT + 1
        assert asyncio.run(received(channel, 1))[0] in (2, 3)  # at most the first after the restart is lost
    finally:
        private.stop()
