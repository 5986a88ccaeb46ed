"""Live pages over Channels. Every group join is authorized per object; the DB stays the truth."""

import contextlib
import time
from importlib import import_module

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from redis.exceptions import RedisError

from fleet.live import instance_group, user_group
from fleet.models import Instance
from projects.models import Project
from runs.live import project_group, run_group
from runs.models import Run

UNAUTHENTICATED = 4401
FORBIDDEN = 4403
TRY_AGAIN_LATER = 1013  # the channel layer (Redis) is down: the page keeps its data and retries


class _GroupConsumer(AsyncJsonWebsocketConsumer):
    """Authorized at connect, and again before sending once LIVE_REAUTH_SECONDS have passed: a user
    removed from the project, or signed out, stops hearing an already open socket."""

    group = None
    checked_at = 0.0

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED)
            return
        group = await self.authorized_group(user, self.scope["url_route"]["kwargs"])
        if group is None:
            await self.close(code=FORBIDDEN)
            return
        try:
            await self.channel_layer.group_add(group, self.channel_name)
            await self.channel_layer.group_add(user_group(user.pk), self.channel_name)
        except (OSError, RedisError, TimeoutError):
            await self.close(code=TRY_AGAIN_LATER)  # never an HTTP 500 while Redis is away
            return
        self.group, self.checked_at = group, time.monotonic()
        await self.accept()

    async def disconnect(self, code):
        if self.group:
            with contextlib.suppress(OSError, RedisError, TimeoutError):
                await self.channel_layer.group_discard(self.group, self.channel_name)
                await self.channel_layer.group_discard(user_group(self.scope["user"].pk), self.channel_name)

    async def access_reduced(self, event):
        """The person lost some access (a removal committed): re-check now, not at the next window."""
        if not await self.still_allowed(now=True):
            await self.close(code=FORBIDDEN)

    async def live_update(self, event):
        if not await self.still_allowed():
            await self.close(code=FORBIDDEN)
            return
        await self.send_json(event["payload"])

    async def still_allowed(self, now: bool = False) -> bool:
        if not now and time.monotonic() - self.checked_at < settings.LIVE_REAUTH_SECONDS:
            return True
        allowed = (
            await self.session_alive()
            and await self.authorized_group(self.scope["user"], self.scope["url_route"]["kwargs"]) == self.group
        )
        self.checked_at = time.monotonic()
        return allowed

    @database_sync_to_async
    def session_alive(self) -> bool:
        """The session this socket was opened with still exists and still belongs to its user."""
        key = getattr(self.scope.get("session"), "session_key", None)
        if not key:
            return False
        data = import_module(settings.SESSION_ENGINE).SessionStore(key).load()
        return str(data.get("_auth_user_id")) == str(self.scope["user"].pk)


class RunConsumer(_GroupConsumer):
    """ws/runs/<run-id>/: state, events, log lines, curve rows and heartbeat of one run."""

    @database_sync_to_async
    def authorized_group(self, user, kwargs):
        run_id = kwargs["run_id"]
        return run_group(run_id) if Run.objects.visible_to(user).filter(run_id=run_id).exists() else None


class ProjectConsumer(_GroupConsumer):
    """ws/projects/<slug>/: state and health of the project's runs."""

    @database_sync_to_async
    def authorized_group(self, user, kwargs):
        slug = kwargs["slug"]
        return project_group(slug) if Project.objects.visible_to(user).filter(slug=slug).exists() else None


class InstanceConsumer(_GroupConsumer):
    """ws/instances/<pk>/: "changed" when a probe, audit, state or edit of the box lands."""

    @database_sync_to_async
    def authorized_group(self, user, kwargs):
        pk = int(kwargs["pk"])
        return instance_group(pk) if Instance.objects.visible_to(user).filter(pk=pk).exists() else None
