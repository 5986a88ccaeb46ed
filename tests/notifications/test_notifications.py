"""Notifications a team uses: per-project channels (a webhook, apprise's json target),
per-user e-mail opt-in, run / teardown / clock events, delivered once per target, retried, never
carrying a secret. The receiver is the local stub server; apprise really posts to it."""

import threading
import uuid

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from core.models import AuditEntry
from notifications.actions import do_add_channel, do_deliver_notification, do_notify, do_set_preference
from notifications.models import Channel, Event, Notification, NotifyVariable
from runs.actions.lifecycle import do_finish_smoke
from runs.models import Run, RunState
from tests import factories
from tests.personas import join
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "xoxb-SECRET-TOKEN-4242"


@pytest.fixture
def team(alice, bob, carol, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = settings.WEBHOOK_ALLOW_HTTP = True
    slug = f"ntf{uuid.uuid4().hex[:8]}"
    project = factories.project(name=slug, slug=slug)
    join(project, alice, bob, carol)
    carol.email = ""
    carol.save()
    return project


@pytest.fixture
def chat(team, provider_stub, monkeypatch):
    """An apprise channel whose URL (holding a token, as a chat URL does) lives in the environment."""
    monkeypatch.setenv("REMOTEGPU_NOTIFY_CHAT", f"json://{provider_stub.url[7:]}/hooks/chat-{team.slug}/{TOKEN}")
    variable, _ = NotifyVariable.objects.get_or_create(variable="REMOTEGPU_NOTIFY_CHAT")
    variable.projects.add(team)  # as an administrator grants it on the Chat variables page
    return do_add_channel(team, "chat", Channel.Kind.APPRISE, "REMOTEGPU_NOTIFY_CHAT", [], actor=None)


def hooks(stub, marker):
    return [hook for hook in stub.webhooks if marker in hook["path"]]


def deliver_all(project) -> list[str]:
    """The worker's code path, in this process (its mail backend is the test outbox)."""
    return [do_deliver_notification(n.pk) for n in Notification.objects.filter(project=project, state="pending")]


def smoke_run(project) -> Run:
    box = factories.box(name=f"{project.slug}-box", project=project, profile_key="generic-ssh")
    return factories.run(
        project=project,
        instance=box,
        run_id=f"{project.slug}-r1",
        state=RunState.SMOKE,
        source_path="/x",
        command=["python3"],
    )


def test_a_failed_run_reaches_webhook_apprise_and_the_members_who_opted_in(
    team, chat, provider_stub, alice, bob, carol, no_worker
):
    do_add_channel(
        team, "ops", Channel.Kind.WEBHOOK, f"{provider_stub.url}/hooks/ops-{team.slug}", [Event.RUN_FAILED], actor=bob
    )
    do_set_preference(team, alice, [Event.RUN_FAILED], actor=alice)  # bob never chose: defaults only
    run = smoke_run(team)
    do_finish_smoke(run.pk, 1, f"Traceback: KeyError while reading HF_TOKEN={TOKEN}")

    assert deliver_all(team) == ["sent"]
    (webhook,) = hooks(provider_stub, f"ops-{team.slug}")
    assert webhook["body"]["event"] == "run.failed" and webhook["body"]["failure_class"] == "failed_smoke"
    assert webhook["body"]["run"] == run.run_id and run.get_absolute_url() in webhook["body"]["url"]
    (chat_message,) = hooks(provider_stub, f"chat-{team.slug}")
    assert "Failed smoke" in chat_message["body"]["title"] and run.run_id in chat_message["body"]["message"]
    assert [message.to for message in mail.outbox] == [[alice.email]]
    notification = Notification.objects.get(project=team)
    everything = f"{notification.text} {notification.subject} {notification.data} {notification.results}"
    everything += str(webhook) + str(chat_message["body"]) + mail.outbox[0].body
    assert TOKEN not in everything  # neither the smoke's output nor the chat URL's token


def test_a_danger_clock_reaches_members_by_default_and_an_opt_out_holds(team, alice, bob, no_worker):
    do_set_preference(team, alice, [], actor=alice)
    do_notify(team.pk, Event.CLOCK, "box: within 24 h", "/hy-tmp is wiped")
    deliver_all(team)
    assert [message.to for message in mail.outbox] == [[bob.email]]


def test_a_target_that_fails_is_retried_alone_and_gives_up_after_the_limit(
    team, chat, provider_stub, settings, no_worker
):
    settings.NOTIFY_MAX_ATTEMPTS = 3
    do_add_channel(team, "dead", Channel.Kind.WEBHOOK, "http://127.0.0.1:9/closed", [], actor=None)
    notification = do_notify(team.pk, Event.DRIFT, "drift", "an orphan pod")
    states = [do_deliver_notification(notification.pk) for _ in range(3)]
    assert states == ["pending", "pending", "failed"]
    assert len(hooks(provider_stub, f"chat-{team.slug}")) == 1  # the target that took it is not sent twice
    notification.refresh_from_db()
    assert notification.attempts == 3 and notification.results["webhook:dead"].startswith("failed: not reached")
    assert notification.results["apprise:chat"] == "sent"
    assert do_deliver_notification(notification.pk) is None  # failed is final


def test_two_workers_delivering_at_once_send_once(team, chat, provider_stub, no_worker):
    notification = do_notify(team.pk, Event.DRIFT, "drift", "an orphan pod")
    barrier, outcomes, errors = threading.Barrier(4), [], []

    def deliver():
        from django.db import connection

        try:
            barrier.wait()
            outcomes.append(do_deliver_notification(notification.pk))
        except Exception as exc:  # every thread's outcome is checked
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [] and sorted(outcomes, key=str) == [None, None, None, "sent"]
    assert len(hooks(provider_stub, f"chat-{team.slug}")) == 1


@pytest.mark.parametrize(
    ("kind", "target", "problem"),
    [
        (Channel.Kind.APPRISE, "DATABASE_URL", "starting with REMOTEGPU_NOTIFY_"),
        (Channel.Kind.APPRISE, "REMOTEGPU_NOTIFY_$(id)", "letters, digits"),
        (Channel.Kind.WEBHOOK, "ftp://example.org/x", "https://"),
        (Channel.Kind.WEBHOOK, "", "needs its URL"),
    ],
)
def test_a_channel_never_names_an_arbitrary_secret_or_a_bad_url(team, kind, target, problem, settings):
    settings.WEBHOOK_ALLOW_HTTP = False
    with pytest.raises(ValidationError, match=problem.replace("$", r"\$").replace("(", r"\(")):
        do_add_channel(team, "x", kind, target, [], actor=None)
    assert not Channel.objects.filter(project=team).exists()


def test_the_settings_page_shows_the_variable_never_its_value(client, team, chat, bob, charlie):
    do_add_channel(team, "hook", Channel.Kind.WEBHOOK, f"https://hooks.example.org/services/{TOKEN}", [], actor=bob)
    client.force_login(bob)
    page = client.get(f"/projects/{team.slug}/notifications/").content.decode()
    assert "REMOTEGPU_NOTIFY_CHAT" in page and "https://hooks.example.org/…" in page and TOKEN not in page
    response = client.post(
        f"/projects/{team.slug}/notifications/channels/",
        {"name": "leak", "kind": "apprise", "target": "DJANGO_SECRET_KEY"},
        follow=True,
    )
    assert response.status_code == 200 and "starting with REMOTEGPU_NOTIFY_" in response.content.decode()
    response = client.post(f"/projects/{team.slug}/notifications/mine/", {"events": ["run.finished", "nope"]})
    assert response.status_code == 302
    client.force_login(charlie)  # not a member: the page does not exist for them
    assert client.get(f"/projects/{team.slug}/notifications/").status_code == 404


def test_the_worker_delivers_after_commit(team, provider_stub, celery_worker_process):
    do_add_channel(team, "ops", Channel.Kind.WEBHOOK, f"{provider_stub.url}/hooks/w-{team.slug}", [], actor=None)
    notification = do_notify(team.pk, Event.TEARDOWN_DONE, "box released", "box: release done")
    (hook,) = wait_until(lambda: hooks(provider_stub, f"w-{team.slug}"), what="the webhook")
    assert hook["body"]["event"] == "teardown.done"
    wait_until(lambda: Notification.objects.get(pk=notification.pk).state == "sent", what="the outbox row sent")


def test_a_notification_a_dead_worker_held_is_delivered_again(team, chat, provider_stub, no_worker, settings):
    """Every state has a way out: a claim older than NOTIFY_CLAIM_SECONDS belonged to a worker that
    died mid-delivery; beat finds it, and the next delivery sends it (once)."""
    from datetime import timedelta

    from django.utils import timezone

    from notifications.actions import undelivered

    settings.NOTIFY_CLAIM_SECONDS = 60
    notification = do_notify(team.pk, Event.DRIFT, "drift", "an orphan pod")
    Notification.objects.filter(pk=notification.pk).update(
        state="sending", claimed_at=timezone.now() - timedelta(seconds=30), attempts=1
    )
    assert notification.pk not in undelivered().values_list("pk", flat=True)  # still its worker's
    assert do_deliver_notification(notification.pk) is None
    Notification.objects.filter(pk=notification.pk).update(claimed_at=timezone.now() - timedelta(seconds=120))
    assert notification.pk in undelivered().values_list("pk", flat=True)
    assert do_deliver_notification(notification.pk) == "sent"
    assert len(hooks(provider_stub, f"chat-{team.slug}")) == 1
    assert Notification.objects.get(pk=notification.pk).attempts == 2


def test_a_project_never_posts_through_another_projects_chat_variable(
    client, team, chat, provider_stub, admin_user, dave, monkeypatch
):
    """An operator of B named A's REMOTEGPU_NOTIFY_ variable and posted into A's chat.
    Chat variables are registered and granted per project: naming one not granted is refused when the
    channel is added, and a grant revoked later stops the next message."""
    other = factories.project(name="Other", slug=f"o{team.slug}")
    join(other, dave)
    with pytest.raises(ValidationError, match="not a notification variable granted to this project"):
        do_add_channel(other, "theirs", Channel.Kind.APPRISE, "REMOTEGPU_NOTIFY_CHAT", [], actor=dave)
    client.force_login(dave)
    response = client.post(
        f"/projects/{other.slug}/notifications/channels/",
        {"name": "theirs", "kind": "apprise", "target": "REMOTEGPU_NOTIFY_CHAT"},
        follow=True,
    )
    assert "not a notification variable granted" in response.content.decode()
    assert not Channel.objects.filter(project=other).exists()
    assert client.get("/notifications/variables/").status_code == 403  # an operator registers nothing

    # The admin revokes the grant on the page: the channel that already exists stops sending.
    client.force_login(admin_user)
    variable = NotifyVariable.objects.get(variable="REMOTEGPU_NOTIFY_CHAT")
    response = client.post(f"/notifications/variables/{variable.pk}/", {"variable": variable.variable, "note": ""})
    assert response.status_code == 302 and not variable.projects.exists()
    entry = AuditEntry.objects.filter(action="variable.changed", data__variable=variable.variable).first()
    assert "revoked from" in entry.message and entry.message.startswith("REMOTEGPU_NOTIFY_CHAT: ")
    do_notify(team.pk, Event.DRIFT, "drift", "a box bills")
    deliver_all(team)
    notification = Notification.objects.filter(project=team).latest("created")
    assert "not a notification variable granted" in notification.results["apprise:chat"]
    assert not hooks(provider_stub, f"chat-{team.slug}")


def test_only_variables_with_the_prefix_are_registered(client, admin_user, team):
    client.force_login(admin_user)
    response = client.post("/notifications/variables/new/", {"variable": "DATABASE_URL", "projects": [team.pk]})
    assert response.status_code == 200 and "starting with REMOTEGPU_NOTIFY_" in response.content.decode()
    assert not NotifyVariable.objects.filter(variable="DATABASE_URL").exists()
    response = client.post("/notifications/variables/new/", {"variable": "REMOTEGPU_NOTIFY_OPS", "projects": [team.pk]})
    assert (
        response.status_code == 302
        and NotifyVariable.objects.get(variable="REMOTEGPU_NOTIFY_OPS").projects.count() == 1
    )
