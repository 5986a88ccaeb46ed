"""Live run page: one group per run id. Later issues push state, events and progress here."""

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs.live import run_group

UNAUTHENTICATED = 4401


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED)
            return
        self.group = run_group(self.scope["url_route"]["kwargs"]["run_id"])
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_update(self, event):
        await self.send_json(event["payload"])
