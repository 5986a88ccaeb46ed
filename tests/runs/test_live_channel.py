"""The run-page WebSocket on the real Redis channel layer: members hear other processes; strangers are refused."""

import asyncio
import json
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection
from django.test import Client

from projects.models import Project
from remotegpu_site.asgi import application
from tests import factories
from tests.conftest import REPO, subprocess_env
from tests.personas import join

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture(autouse=True)
def runs(db, alice):
    """The runs the sockets subscribe to: a group join is authorized per object (alice is a member)."""

    project = factories.project(alice, name="Vision", slug="vision")
    instance = factories.box(project, "local", name="vision-desk-20261129")
    for run_id in ("vision-r1", "vision-r2", "other-run"):
        factories.run(
            run_id=run_id,
            project=project,
            instance=instance,
            source_kind="node_path",
            source_path="/srv/x",
            command=["true"],
            config_path="c.yaml",
        )


def session_cookie(user) -> bytes:
    client = Client()
    try:
        client.force_login(user)
    finally:
        connection.close()  # this runs in an executor thread; leave no connection behind
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


# Another process that pushes what it is sent, one line each, and says "pushed" when its push returned:
# one for the module (a Django start per push cost a second of CPU each).
PUSHER = (
    "import json, sys, django\n"
    "django.setup()\n"
    "from runs.live import push_run_update\n"
    "for line in sys.stdin:\n"
    "    run_id, payload = json.loads(line)\n"
    "    push_run_update(run_id, payload)\n"
    "    print('pushed', flush=True)\n"
)


@pytest.fixture(scope="module")
def pusher():
    process = subprocess.Popen(
        [sys.executable, "-c", PUSHER], cwd=REPO, env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    yield process
    process.stdin.close()
    process.wait(timeout=30)


async def push_from_another_process(pusher, run_id: str, payload: dict) -> None:
    def push():
        pusher.stdin.write(json.dumps([run_id, payload]).encode() + b"\n")
        pusher.stdin.flush()
        assert pusher.stdout.readline() == b"pushed\n", "the pushing process ended"

    await asyncio.wait_for(asyncio.to_thread(push), timeout=60)


async def test_signed_in_client_receives_update_sent_by_another_process(alice, pusher):
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[(b"cookie", cookie), ORIGIN])
    connected, _ = await communicator.connect()
    assert connected
    payload = {"state": "running", "note": json.dumps({"step": 3})}
    await push_from_another_process(pusher, "vision-r1", payload)
    assert await communicator.receive_json_from(timeout=20) == {**payload, "run_id": "vision-r1"}
    await communicator.disconnect()


async def test_client_in_another_run_group_hears_nothing(alice, pusher):
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, "/ws/runs/other-run/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    await push_from_another_process(pusher, "vision-r2", {"state": "exited"})
    assert await communicator.receive_nothing(timeout=1)
    await communicator.disconnect()


async def test_anonymous_client_is_refused():
    communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[ORIGIN])
    connected, code = await communicator.connect()
    assert not connected
    assert code == 4401
    await communicator.disconnect()  # the consumer ends here, not in a cancellation at teardown


async def test_foreign_origin_is_refused(alice):
    cookie = await sync_to_async(session_cookie)(alice)
    headers = [(b"cookie", cookie), (b"origin", b"http://evil.example")]
    communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=headers)
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


async def test_a_user_outside_the_project_cannot_join_its_run(charlie):
    cookie = await sync_to_async(session_cookie)(charlie)
    communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[(b"cookie", cookie), ORIGIN])
    connected, code = await communicator.connect()
    assert not connected and code == 4403
    await communicator.disconnect()


async def test_unknown_run_is_refused(alice):
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, "/ws/runs/no-such-run/", headers=[(b"cookie", cookie), ORIGIN])
    connected, code = await communicator.connect()
    assert not connected and code == 4403
    await communicator.disconnect()


async def test_project_group_hears_run_events(alice):
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, "/ws/projects/vision/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    code = "import django; django.setup(); from runs.live import push_run_update; "
    code += "push_run_update('vision-r1', {'type': 'event', 'message': 'hello'}, 'vision')"
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=REPO, env=subprocess_env())
    assert await asyncio.wait_for(process.wait(), timeout=60) == 0
    message = await communicator.receive_json_from(timeout=20)
    assert message == {"type": "event", "message": "hello", "run_id": "vision-r1"}
    await communicator.disconnect()


def test_the_layers_read_timeout_outlasts_its_blocking_receive():
    """redis-py's 5 s read timeout once cut the channel layer's 5 s blocking receive (BZPOPMIN): an
    idle page reconnected every few seconds. The read timeout must outlast the receive it waits on,
    with room for a loaded Redis to answer."""
    from channels_redis.core import RedisChannelLayer

    for host in settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]:
        assert host["socket_timeout"] >= 2 * RedisChannelLayer.brpop_timeout, host


@pytest.mark.e2e  # sixteen seconds of a socket left idle: time that must pass, so the full suite only
async def test_an_idle_page_keeps_its_socket(alice, pusher):
    """The same cut, seen from a page: idle for three of the layer's blocking receives, then an update
    still arrives on the same socket."""
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    assert await communicator.receive_nothing(timeout=16, interval=1)
    await push_from_another_process(pusher, "vision-r1", {"state": "running"})
    assert await communicator.receive_json_from(timeout=20) == {"state": "running", "run_id": "vision-r1"}
    await communicator.disconnect()


async def test_a_page_connecting_while_redis_is_down_is_told_to_retry_not_given_a_500(alice, settings):
    from channels.layers import channel_layers

    cookie = await sync_to_async(session_cookie)(alice)
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}
    }
    channel_layers.backends.clear()  # the layer is built from the settings on first use
    try:
        communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[(b"cookie", cookie), ORIGIN])
        connected, code = await communicator.connect(timeout=10)
        assert not connected and code == 1013
    finally:
        channel_layers.backends.clear()


@pytest.mark.parametrize("how", ["removed from the project", "signed out"])
async def test_an_open_socket_stops_when_access_ends(alice, settings, how, pusher):
    """Sockets were authorised only at connect: a removed or signed-out user kept hearing log lines."""
    from django.contrib.sessions.models import Session

    from projects.models import Project

    settings.LIVE_REAUTH_SECONDS = 0
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    await push_from_another_process(pusher, "vision-r1", {"line": "before"})
    assert await communicator.receive_json_from(timeout=20) == {"line": "before", "run_id": "vision-r1"}
    if how == "signed out":
        await sync_to_async(lambda: Session.objects.all().delete())()
    else:
        await sync_to_async(lambda: Project.objects.get(slug="vision").members.remove(alice))()
    await push_from_another_process(pusher, "vision-r1", {"line": "after"})
    output = await communicator.receive_output(timeout=20)
    assert output == {"type": "websocket.close", "code": 4403}


async def test_a_box_page_hears_its_box_change_and_an_outsider_cannot_join(alice, charlie):
    """The box page follows a change made in another process (a worker's probe, a state)."""
    from fleet.models import Instance
    from tests.conftest import database_url

    pk = await sync_to_async(lambda: Instance.objects.get(name="vision-desk-20261129").pk)()
    url = await sync_to_async(database_url)()
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, f"/ws/instances/{pk}/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    code = "import django; django.setup(); from fleet.actions import do_change_instance_state; "
    code += f"do_change_instance_state({pk}, 'running', 'seen in the console', actor=None)"
    env = subprocess_env(DATABASE_URL=url)
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=REPO, env=env)
    assert await asyncio.wait_for(process.wait(), timeout=60) == 0
    assert await communicator.receive_json_from(timeout=20) == {"type": "changed", "instance": pk}
    await communicator.disconnect()

    outsider = await sync_to_async(session_cookie)(charlie)
    refused = WebsocketCommunicator(application, f"/ws/instances/{pk}/", headers=[(b"cookie", outsider), ORIGIN])
    connected, code = await refused.connect()
    assert not connected and code == 4403
    await refused.disconnect()


async def test_a_removal_closes_the_members_sockets_when_it_commits(alice, bob, settings):
    """The re-check window (LIVE_REAUTH_SECONDS) let a message through right after a removal.
    A removal now closes the person's open sockets on commit, with the window as long as an hour."""
    from projects.membership import do_remove_member

    settings.LIVE_REAUTH_SECONDS = 3600
    cookie = await sync_to_async(session_cookie)(alice)
    run_page = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[(b"cookie", cookie), ORIGIN])
    project_page = WebsocketCommunicator(application, "/ws/projects/vision/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await run_page.connect())[0] and (await project_page.connect())[0]
    await sync_to_async(lambda: do_remove_member(Project.objects.get(slug="vision").pk, "alice", actor=bob))()
    assert await run_page.receive_output(timeout=10) == {"type": "websocket.close", "code": 4403}
    assert await project_page.receive_output(timeout=10) == {"type": "websocket.close", "code": 4403}


async def test_a_removal_from_another_project_leaves_the_members_sockets_open(alice, bob, settings, pusher):
    from projects.membership import do_remove_member

    settings.LIVE_REAUTH_SECONDS = 3600
    other = await sync_to_async(lambda: factories.project(name="Other", slug="other"))()
    await sync_to_async(lambda: join(other, alice))()
    cookie = await sync_to_async(session_cookie)(alice)
    communicator = WebsocketCommunicator(application, "/ws/runs/vision-r1/", headers=[(b"cookie", cookie), ORIGIN])
    assert (await communicator.connect())[0]
    await sync_to_async(lambda: do_remove_member(other.pk, "alice", actor=bob))()
    await push_from_another_process(pusher, "vision-r1", {"line": "still here"})
    assert await communicator.receive_json_from(timeout=20) == {"line": "still here", "run_id": "vision-r1"}
    await communicator.disconnect()
