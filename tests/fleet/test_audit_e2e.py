"""The audit end to end: button → real Celery worker → real sshd → parsed numbers on the page."""

import os
import shutil

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.actions import do_confirm_host_key, do_request_probe
from fleet.models import Instance, InstanceProbe
from fleet.tasks import probe_running_instances
from tests import factories
from tests.personas import join
from tests.sshd import free_port
from tests.waiting import wait_until
from tests.worker_env import NODE_ROOT

pytestmark = pytest.mark.django_db(transaction=True)
TODAY = timezone.localdate().strftime("%Y%m%d")


def wait_for_probe(instance, count, timeout=60) -> InstanceProbe:
    wait_until(lambda: instance.probes.count() >= count, timeout, what=f"probe #{count} of {instance.name}")
    return instance.probes.first()


@pytest.fixture
def ssh_instance(sshd, bob):
    project = factories.project(name="Vision", slug="vision")
    join(project, bob)
    return factories.box(name=f"vision-audit-{TODAY}", project=project, **sshd.instance_fields(project, pinned=False))


def test_audit_through_worker_and_sshd_matches_the_machine(client, bob, sshd, ssh_instance, celery_worker_process):
    client.force_login(bob)
    client.post(reverse("instance-probe", args=[ssh_instance.pk]), {"kind": "light"})
    first = wait_for_probe(ssh_instance, 1)
    assert first.reachable and not first.ok and "awaits confirmation" in first.error
    ssh_instance.refresh_from_db()
    assert ssh_instance.seen_key_base64 == (sshd.dir / "host_key.pub").read_text().split()[1]
    page = client.get(ssh_instance.get_absolute_url()).content.decode()
    assert ssh_instance.seen_host_key.fingerprint in page and "Confirm and pin this key" in page

    client.post(
        reverse("instance-host-key", args=[ssh_instance.pk]), {"fingerprint": ssh_instance.seen_host_key.fingerprint}
    )
    client.post(reverse("instance-probe", args=[ssh_instance.pk]), {"kind": "audit"})
    audit = wait_for_probe(ssh_instance, 2)
    assert audit.ok, audit.error
    parsed = audit.parsed
    assert parsed["data_root"] == NODE_ROOT.replace("$HOME", sshd.home, 1)
    measured = os.statvfs(parsed["resolved_path"])
    assert parsed["disk"]["total"] == measured.f_blocks * measured.f_frsize
    assert abs(parsed["disk"]["free"] - measured.f_bavail * measured.f_frsize) < 256 * 1024**2
    assert parsed["inodes"]["total"] == measured.f_files
    assert abs(parsed["inodes"]["free"] - measured.f_favail) < 10_000
    assert parsed["cpu_count"] == os.cpu_count()
    assert parsed["disk_human"][0].startswith("Filesystem")
    if shutil.which("nvidia-smi") is None:
        assert parsed["gpus"] == []
        assert any("No GPU seen" in warning["message"] for warning in audit.warnings)

    page = client.get(ssh_instance.get_absolute_url()).content.decode()
    assert f"{parsed['inodes']['free']} free of {parsed['inodes']['total']}" in page
    assert parsed["disk"]["device"] in page


def test_unreachable_node_is_recorded_without_touching_state(bob, ssh_instance, celery_worker_process):
    Instance.objects.filter(pk=ssh_instance.pk).update(port=free_port())
    do_request_probe(ssh_instance.pk, "light", actor=bob)
    probe = wait_for_probe(ssh_instance, 1)
    assert not probe.reachable and "cannot reach" in probe.error
    ssh_instance.refresh_from_db()
    assert ssh_instance.state == "running"
    assert ssh_instance.events.filter(message__startswith="Node unreachable").exists()


def test_changed_host_key_is_a_failed_probe_not_a_connection(bob, sshd, ssh_instance, celery_worker_process):
    do_request_probe(ssh_instance.pk, "light", actor=bob)
    wait_for_probe(ssh_instance, 1)
    ssh_instance.refresh_from_db()
    # Pin a different key than the server's: the next probe must refuse.
    Instance.objects.filter(pk=ssh_instance.pk).update(
        seen_key_base64="AAAAC3NzaC1lZDI1NTE5AAAAIB7Kz8c6l1rW9vNd0cIh0HcdhdZ4m5lQeQzMc1a2b3c4"
    )
    ssh_instance.refresh_from_db()
    do_confirm_host_key(ssh_instance.pk, ssh_instance.seen_host_key.fingerprint, actor=bob)
    do_request_probe(ssh_instance.pk, "audit", actor=bob)
    probe = wait_for_probe(ssh_instance, 2)
    assert not probe.ok and "HostKeyMismatch" in probe.error and probe.raw == ""


def test_beat_task_light_probes_every_running_instance(sshd, ssh_instance, celery_worker_process):
    assert probe_running_instances.delay().get(timeout=30) == 1
    probe = wait_for_probe(ssh_instance, 1)
    assert probe.trigger == InstanceProbe.Trigger.SCHEDULE and probe.kind == "light"


def test_local_instance_audits_without_ssh_in_the_one_person_mode(admin_user, django_user_model, celery_worker_process):
    """The admin is the only account: the control host runs the audit as the worker's own user. A second
    account ends that mode at once: the next probe fails with what to set."""
    project = factories.project(name="Home", slug="home")
    instance = factories.box(name=f"home-desk-{TODAY}", project=project, profile_key="local")
    do_request_probe(instance.pk, "audit", actor=admin_user)
    probe = wait_for_probe(instance, 1)
    assert probe.ok, probe.error
    assert probe.parsed["python"]["executable"]
    django_user_model.objects.create_user("second", password="second-pass-1234")
    do_request_probe(instance.pk, "light", actor=admin_user)
    probe = wait_for_probe(instance, 2)
    assert not probe.ok and "REMOTEGPU_LOCAL_NODE_USER" in probe.error
