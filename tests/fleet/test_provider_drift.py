"""Reconciliation with the providers, against stubs that list what they have and can lie:
an orphan, a release that answered 200 and kept billing, a box stopped here that runs there."""

from decimal import Decimal

import pytest
from django.core import mail

from delivery.actions.attention import do_resolve_attention
from delivery.actions.decisions import do_approve_teardown
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownStatus
from delivery.tasks import execute_teardown
from fleet.drift import compare, do_reconcile_providers
from fleet.models import DriftKind, Instance, ProviderDrift
from providers import APIS
from providers.interface import GONE, RUNNING, STOPPED
from providers.reading import read_inventory
from tests import factories
from tests.fleet.test_credential_registry import CANARY, every_column_as_text
from tests.personas import join
from tests.provider_stub import api_credential
from tests.provider_stubs import lambdalabs, paperspace
from tests.waiting import deliver_notifications


def test_compare_names_each_kind_of_drift():
    known = [
        Instance(name="a", provider_id="p-run", state="running"),
        Instance(name="b", provider_id="p-rel", state="released"),
        Instance(name="c", provider_id="p-stop", state="stopped"),
        Instance(name="d", provider_id="p-gone", state="released"),
    ]
    inventory = {"p-run": RUNNING, "p-rel": STOPPED, "p-stop": RUNNING, "p-gone": GONE, "p-new": RUNNING}
    kinds = {(seen.provider_id, seen.kind) for seen in compare("runpod", inventory, known)}
    assert kinds == {
        ("p-new", DriftKind.ORPHAN),
        ("p-rel", DriftKind.STILL_BILLING),
        ("p-stop", DriftKind.RUNNING_NOT_STOPPED),
    }


@pytest.mark.parametrize(
    ("provider", "body"),
    [("lambda", {"data": None}), ("runpod", [{"id": "p"}]), ("paperspace", {"items": [{"state": "ready"}]})],
)
def test_an_unreadable_inventory_is_an_error_never_an_empty_one(provider, body):
    with pytest.raises(ValueError):
        read_inventory(APIS[provider], body)


pytestmark_db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pod(project, provider_api, no_worker):
    provider_api.add("runpod", "pod-known")
    return factories.box(project, "runpod", api=True, provider_id="pod-known", state="running")


@pytestmark_db
def test_an_orphan_is_flagged_once_notified_and_resolved_when_gone(client, bob, charlie, pod, provider_api):
    provider_api.add("runpod", "pod-orphan")
    first = do_reconcile_providers()
    assert first["failed"] == [] and len(first["new"]) == 1
    drift = ProviderDrift.objects.get()
    assert (drift.kind, drift.provider_id, drift.instance) == (DriftKind.ORPHAN, "pod-orphan", None)
    assert deliver_notifications() == ["sent"]
    members = sorted(pod.project.members.exclude(email="").values_list("email", flat=True))
    assert sorted(m.to[0] for m in mail.outbox if "pod-orphan" in m.body) == members and members
    assert do_reconcile_providers()["new"] == []  # seen again: no second notification
    assert deliver_notifications() == []

    client.force_login(bob)
    assert 'id="provider-drift"' in client.get("/").content.decode()
    client.force_login(charlie)
    assert 'id="provider-drift"' not in client.get("/").content.decode()

    provider_api.states["pod-orphan"] = GONE
    do_reconcile_providers()
    drift.refresh_from_db()
    assert drift.resolved_at is not None


@pytestmark_db
def test_a_release_that_answered_200_and_kept_billing_is_drift(alice, bob, erin, pod, provider_api, settings):
    """Released means gone: a 200 whose pod the provider keeps reporting needs a person and
    the box stays in spend; a person who settles it as done anyway leaves drift that says so."""
    settings.TEARDOWN_OFFLINE_WAIT, settings.TEARDOWN_GONE_POLL_SECONDS = 1, 0.2
    join(pod.project, erin)
    provider_api.lies.add("pod-known")
    request = do_request_teardown(pod.pk, "release", "finished", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    assert execute_teardown(request.pk) == "needs a person"
    request.refresh_from_db()
    pod.refresh_from_db()
    assert request.status == TeardownStatus.NEEDS_ATTENTION and pod.state == "running"  # still billing
    assert "still reports the box (running)" in request.failure
    do_resolve_attention(request.pk, True, "the console said released", actor=erin)
    pod.refresh_from_db()
    assert pod.state == "released"

    assert len(do_reconcile_providers()["new"]) == 1
    drift = ProviderDrift.objects.get()
    assert drift.kind == DriftKind.STILL_BILLING and drift.instance == pod
    assert "is released here; runpod still lists it (running)" in drift.detail
    deliver_notifications()
    assert any("still at the provider" in message.subject.lower() for message in mail.outbox)


@pytestmark_db
def test_a_provider_that_cannot_list_resolves_nothing(bob, pod, provider_api, settings):
    provider_api.add("runpod", "pod-orphan")
    do_reconcile_providers()
    provider_api.fail_next("", *[503] * (settings.PROVIDER_API_RETRIES + 1))
    assert do_reconcile_providers()["failed"] == ["runpod"]
    assert ProviderDrift.objects.get().resolved_at is None  # not knowing is not "gone"


@pytestmark_db
def test_the_providers_answer_is_the_boxes_observed_state(bob, pod, provider_api):
    """A box in Unknown that the provider says runs bills at the running rate from then;
    one it says is stopped is stopped (never released: that takes a person or a teardown)."""
    Instance.objects.filter(pk=pod.pk).update(state="unknown")
    do_reconcile_providers()
    pod.refresh_from_db()
    assert pod.state == "running"
    event = pod.events.filter(kind="state").latest("at")
    assert "runpod says running" in event.message and event.data["observed"] == "runpod says running"
    provider_api.states["pod-known"] = STOPPED
    do_reconcile_providers()
    pod.refresh_from_db()
    assert pod.state == "stopped" and ProviderDrift.objects.count() == 0
    provider_api.states["pod-known"] = GONE
    do_reconcile_providers()
    pod.refresh_from_db()
    assert pod.state == "stopped"


@pytestmark_db
def test_under_a_shared_key_a_project_sees_only_its_own_boxes_and_unowned_resources(
    client, alice, bob, dave, pod, provider_api
):
    """B's dashboard showed the names and states of A's boxes under a shared provider key.
    A drift row names only resources no project owns, or the viewer's own; its notice goes the same way."""
    from notifications.models import Notification

    other = factories.project(name="Audio", slug=f"a{pod.project.slug}")
    join(other, dave)
    api_credential(other)  # the same provider key, granted to both
    Instance.objects.filter(pk=pod.pk).update(state="stopped")  # here stopped; the provider says it runs
    provider_api.add("runpod", "pod-orphan")
    do_reconcile_providers()
    assert set(ProviderDrift.objects.values_list("kind", flat=True)) == {
        DriftKind.ORPHAN,
        DriftKind.RUNNING_NOT_STOPPED,
    }
    client.force_login(dave)
    page = client.get("/").content.decode()
    assert "pod-orphan" in page and pod.name not in page  # the unowned resource, not the other's box
    client.force_login(bob)
    page = client.get("/").content.decode()
    assert "pod-orphan" in page and pod.name in page
    told = Notification.objects.filter(event="drift.found")
    assert set(told.filter(text__contains=pod.name).values_list("project", flat=True)) == {pod.project_id}
    assert set(told.filter(text__contains="pod-orphan").values_list("project", flat=True)) == {pod.project_id, other.pk}


@pytestmark_db
def test_a_pods_ssh_endpoint_is_read_from_the_provider_after_a_reset(pod, provider_api):
    """RunPod's SSH port changes on every pod reset. The reconciliation re-reads the
    endpoint and the box follows it, without a person editing it; its pinned host key stays pinned (a
    different key there is still refused until a person confirms it)."""
    Instance.objects.filter(pk=pod.pk).update(
        host="203.0.113.7", port=22022, user="root", host_key_type="ssh-ed25519", host_key_base64="AAAApinned"
    )
    provider_api.endpoints["pod-known"] = ("203.0.113.7", 22022)
    do_reconcile_providers()
    pod.refresh_from_db()
    assert (pod.host, pod.port) == ("203.0.113.7", 22022) and not pod.events.filter(data__has_key="endpoint").exists()
    provider_api.endpoints["pod-known"] = ("203.0.113.7", 41871)  # reset: a new external port
    do_reconcile_providers()
    pod.refresh_from_db()
    assert (pod.host, pod.port) == ("203.0.113.7", 41871) and pod.host_key_base64 == "AAAApinned"
    assert "SSH endpoint moved: root@203.0.113.7:22022 → root@203.0.113.7:41871" in pod.events.first().message


@pytestmark_db
@pytest.mark.parametrize("endpoint", [("$(touch /tmp/x)", 22), ("203.0.113.8", 99999), ("a b", 22), ("", 22)])
def test_a_hostile_endpoint_from_the_provider_is_ignored(pod, provider_api, endpoint):
    Instance.objects.filter(pk=pod.pk).update(host="203.0.113.7", port=22022)
    provider_api.endpoints["pod-known"] = endpoint
    do_reconcile_providers()
    pod.refresh_from_db()
    assert (pod.host, pod.port) == ("203.0.113.7", 22022)


@pytestmark_db
def test_a_vastai_rental_end_is_the_box_timer_read_not_typed_and_it_alarms(project, provider_api):
    """vast.ai stops an on-demand rental at its end date: the reconciliation reads it from the listing
    and the box's timer becomes it, over what a person typed; the timer then alarms on that clock.
    An end that is not a plausible date (a string, a boolean, a millisecond stamp) is ignored."""
    from datetime import timedelta

    from django.utils import timezone

    from fleet.alarms import do_raise_clock_alarms
    from fleet.models import ClockAlarm

    provider_api.add("vastai", "7101")
    box = factories.box(project, "vastai", api=True, provider_id="7101", state="running")
    provider_api.off_schema.add("vastai")  # on purpose: ends that are not epoch seconds
    typed = timezone.now() + timedelta(days=30)
    Instance.objects.filter(pk=box.pk).update(stops_at=typed)
    for lie in ("2026-12-03", True, (timezone.now() + timedelta(hours=20)).timestamp() * 1000):
        provider_api.ends["7101"] = lie
        do_reconcile_providers()
        box.refresh_from_db()
        assert box.stops_at == typed, lie
    end = (timezone.now() + timedelta(hours=20)).replace(microsecond=0)
    provider_api.ends["7101"] = end.timestamp()
    do_reconcile_providers()
    box.refresh_from_db()
    assert box.stops_at == end
    assert "vastai says this box stops at" in box.events.first().message
    do_reconcile_providers()  # said again: nothing changes, nothing is repeated
    assert box.events.filter(message__contains="says this box stops at").count() == 1
    do_raise_clock_alarms()
    alarm = ClockAlarm.objects.get(instance=box)
    assert alarm.clock == "timer" and alarm.threshold_hours == 24 and alarm.fires_at == end


@pytestmark_db
def test_a_falling_vastai_balance_alarms_at_each_threshold_once_and_again_after_a_top_up(
    client, bob, project, provider_api
):
    """The account's balance under the key (show_user's `balance`), against the burn vast.ai prices what runs
    under it (the listing's dph_total): hours to zero, told at 72/24/6 h and at zero to every project granted the key,
    once each; a top-up starts again. A balance that is not a number is not a reading."""
    from fleet.models import ProviderBalance
    from notifications.models import Event, Notification

    provider_api.add("vastai", "7102")  # listed running at $0.30/h
    box = factories.box(project, "vastai", api=True, provider_id="7102", state="running")

    def told(credit):
        provider_api.balances["vastai"] = credit
        before = Notification.objects.filter(event=Event.CLOCK).count()
        do_reconcile_providers()
        return Notification.objects.filter(event=Event.CLOCK).count() - before

    assert told(100.0) == 0  # 333 h to zero
    row = ProviderBalance.objects.get(profile_key="vastai")
    assert row.burn == Decimal("0.3") and round(row.hours_left) == 333
    assert [told(credit) for credit in (20.0, 19.0, 6.0, 1.5, 1.2, 0.0, -0.5)] == [1, 0, 1, 1, 0, 1, 0]
    assert ProviderBalance.objects.get(profile_key="vastai").alarmed == [72, 24, 6, 0]
    last = Notification.objects.filter(event=Event.CLOCK).latest("pk")
    assert "balance $0.00 at $0.30/h" in last.text and "it is gone" in last.text and last.project == project
    provider_api.off_schema.add("vastai")  # on purpose: a balance that is not a number
    assert told("plenty") == 0  # not a reading: nothing changes
    assert ProviderBalance.objects.get(profile_key="vastai").balance == Decimal("-0.50")
    assert [told(credit) for credit in (50.0, 20.0)] == [0, 1]  # topped up, then falling again: 72 h again
    client.force_login(bob)
    page = client.get(box.get_absolute_url()).content.decode()
    assert "Account balance under its key: $20.00 at $0.30/h" in page and "about 67 h to zero" in page


@pytestmark_db
def test_orphan_volumes_and_filesystems_are_drift_with_their_rate_and_count_in_the_spend(project, provider_api):
    """A RunPod network volume nobody registered, and a Lambda filesystem left after its every instance
    was terminated: each is drift with its $/h (the documented per-GB price), notified once, counted in
    the one project's spend from when it was first seen; registered as a resource, it is no longer drift."""
    from datetime import timedelta

    from notifications.models import Event, Notification
    from runs.spend import envelope_of

    project.budget = Decimal("1000")
    project.save()
    provider_api.add("runpod", "pod-live")
    factories.box(project, "runpod", api=True, provider_id="pod-live", state="running")
    lambda_box = factories.box(project, "lambda", api=True, provider_id="lam-gone", state="released")
    provider_api.volumes["runpod"] = [
        {"id": "nv-1", "name": "datasets", "size": 100, "dataCenter": "EU-RO-1", "type": "STANDARD"}
    ]
    provider_api.volumes["lambda"] = [lambdalabs.filesystem("fs-9", "ckpts", "us-east-1", bytes_used=50 * 10**9)]
    do_reconcile_providers()
    drift = {row.provider_id: row for row in ProviderDrift.objects.filter(kind=DriftKind.ORPHAN_RESOURCE)}
    assert set(drift) == {"nv-1", "fs-9"}
    assert drift["nv-1"].rate == Decimal("0.0096") and drift["fs-9"].rate == Decimal("0.0137")
    assert drift["nv-1"].project == project and "network volume datasets" in drift["nv-1"].detail
    assert "after every instance is terminated" in drift["fs-9"].detail
    assert Notification.objects.filter(project=project, event=Event.DRIFT).count() == 2
    do_reconcile_providers()  # seen again: one open row each, told once
    assert ProviderDrift.objects.filter(kind=DriftKind.ORPHAN_RESOURCE, resolved_at__isnull=True).count() == 2
    assert Notification.objects.filter(project=project, event=Event.DRIFT).count() == 2
    day_later = drift["nv-1"].first_seen + timedelta(hours=24)
    envelope = envelope_of(project, now=day_later)
    assert envelope.burn >= Decimal("0.0233") and envelope.spent >= Decimal("0.55")  # 24 h of both
    factories.resource(instance=lambda_box, kind="persistent_fs", name="ckpts", provider_id="fs-9", rate="0.0137")
    do_reconcile_providers()
    assert set(
        ProviderDrift.objects.filter(kind=DriftKind.ORPHAN_RESOURCE, resolved_at__isnull=True).values_list(
            "provider_id", flat=True
        )
    ) == {"nv-1"}
    provider_api.off_schema.add("runpod")  # on purpose: a broken answer
    provider_api.volumes["runpod"] = [{"name": "no id"}]  # an answer we cannot read is no inventory
    provider_api.states["pod-live"] = STOPPED
    do_reconcile_providers()
    assert ProviderDrift.objects.get(provider_id="nv-1").resolved_at is None
    assert Instance.objects.get(provider_id="pod-live").state == "stopped"  # the boxes are still reconciled


@pytestmark_db
def test_paperspace_static_ips_snapshots_and_shared_drives_left_after_a_destroy_are_drift(project, provider_api):
    """A static IP bills its flat $0.0045/h after the machine is destroyed; a snapshot and a shared drive bill
    too, but v1 lists a snapshot without its size and prices no shared drive: drift at a rate the page says
    it cannot tell (never $0 said; before, a snapshot's `size`, which v1 does not define, was read). The
    shared drive's password, in the same answer, is kept nowhere."""
    factories.box(project, "paperspace", api=True, provider_id="ps-gone", state="released")
    provider_api.volumes["paperspace-ips"] = [paperspace.public_ip("198.51.100.7")]
    provider_api.volumes["paperspace-snapshots"] = [paperspace.snapshot("snap-1", "before-destroy")]
    provider_api.volumes["paperspace-shared_drives"] = [paperspace.shared_drive("sd-1", "team-data", CANARY)]
    do_reconcile_providers()
    drift = {row.provider_id: row for row in ProviderDrift.objects.filter(kind=DriftKind.ORPHAN_RESOURCE)}
    assert set(drift) == {"198.51.100.7", "snap-1", "sd-1"}
    assert drift["198.51.100.7"].rate == Decimal("0.0045") and "static IP" in drift["198.51.100.7"].detail
    assert "snapshot before-destroy" in drift["snap-1"].detail and drift["snap-1"].rate == 0
    assert "shared drive team-data" in drift["sd-1"].detail and drift["sd-1"].rate == 0
    assert all("at a rate its answer does not tell" in drift[key].detail for key in ("snap-1", "sd-1"))
    assert CANARY not in every_column_as_text()
    provider_api.off_schema.add("paperspace")  # on purpose: an address the answer does not give
    provider_api.volumes["paperspace-ips"] = [{"assignedMachineId": None}]  # no address: unreadable, not "none"
    do_reconcile_providers()
    assert ProviderDrift.objects.get(provider_id="198.51.100.7").resolved_at is None


@pytestmark_db
def test_a_paperspace_auto_shutdown_is_the_box_timer_read_from_its_last_start(project, provider_api):
    """Paperspace stops a machine autoShutdownTimeout hours after its current run started (its reservation's
    dtStarted; before, the clock was read from dtLastRun, which the v1 spec does not define: it never showed) when
    autoShutdownEnabled: the timer is read from the listing. Off, a time without its zone, hours that are
    not a number: nothing is read, and the typed timer stands."""
    from datetime import UTC, datetime, timedelta

    provider_api.add("paperspace", "ps-timer")
    box = factories.box(project, "paperspace", api=True, provider_id="ps-timer", state="running")
    started = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)

    def clock(enabled, at, hours) -> dict:
        reservation = {"id": "res-1", "name": "run", "isActive": True, "dtStarted": at, "dtFinished": at}
        return {"autoShutdownEnabled": enabled, "reservation": reservation, "autoShutdownTimeout": hours}

    for lie in (
        clock(False, started.isoformat(), 6),
        clock(True, started.strftime("%Y-%m-%dT%H:%M:%S"), 6),
        clock(True, started.isoformat(), "6"),  # off its schema, on purpose (below too)
        clock("yes", started.isoformat(), 6),
    ):
        if not isinstance(lie["autoShutdownTimeout"], int) or not isinstance(lie["autoShutdownEnabled"], bool):
            provider_api.off_schema.add("paperspace")
        provider_api.ends["ps-timer"] = lie
        do_reconcile_providers()
        box.refresh_from_db()
        assert box.stops_at is None, lie
    provider_api.off_schema.discard("paperspace")
    provider_api.ends["ps-timer"] = clock(True, started.isoformat().replace("+00:00", "Z"), 6)
    provider_api.endpoints["ps-timer"] = ("198.51.100.20", 22)
    do_reconcile_providers()
    box.refresh_from_db()
    assert box.stops_at == started + timedelta(hours=6)
    assert (box.host, box.port) == ("198.51.100.20", 22)  # where it answers SSH now, from the same listing
    assert "paperspace says this box stops at" in box.events.filter(message__contains="stops at").first().message


@pytestmark_db
def test_a_vastai_volume_left_after_its_instance_is_drift_at_its_hosts_price(project, provider_api):
    factories.box(project, "vastai", api=True, provider_id="7103", state="released")
    provider_api.off_schema.add("vastai")  # on purpose: a price that is not a number
    provider_api.volumes["vastai"] = [
        {"id": 881, "disk_space": 200, "storage_total_cost": 0.0278, "status": "unattached"},
        {"id": 882, "disk_space": 50, "storage_total_cost": "free"},  # a price we cannot read
    ]
    do_reconcile_providers()
    drift = {row.provider_id: row for row in ProviderDrift.objects.filter(kind=DriftKind.ORPHAN_RESOURCE)}
    assert drift["881"].rate == Decimal("0.0278") and "volume 881" in drift["881"].detail
    assert "at a rate its answer does not tell" in drift["882"].detail
