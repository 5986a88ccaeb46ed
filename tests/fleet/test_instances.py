"""The instance registry: naming rule, registered credentials, first-contact acknowledgement, states."""

import html

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from core.models import AuditEntry
from core.states import IllegalTransition
from fleet.actions import do_change_instance_state
from fleet.models import Credential, CredentialKind, Instance, InstanceEvent, PlatformAcknowledgement
from tests import factories

pytestmark = pytest.mark.django_db

TODAY = timezone.localdate().strftime("%Y%m%d")


@pytest.fixture
def project(alice, bob, carol):
    project = factories.project(alice, bob, carol, name="Vision", slug="vision")
    return project


@pytest.fixture
def runpod_key(project):
    return factories.credential(CredentialKind.SSH_KEY, "env:RUNPOD_SSH_KEY", project, name="runpod-ssh")


def form_data(project, **overrides):
    key = Credential.objects.filter(name="runpod-ssh").first()
    data = {
        "project": project.pk,
        "name": f"vision-vitb-{TODAY}",
        "profile_key": "runpod",
        "host": "203.0.113.7",
        "port": "22022",
        "user": "root",
        "credential": key.pk if key else "",
        "gpu_description": "1× A100 80GB",
        "rate_running": "1.89",
        "rate_stopped": "0.20",
        "acknowledge": "on",
    }
    data.update(overrides)
    return data


def post(client, data):
    return client.post(reverse("instance-create"), data)


def test_operator_registers_an_instance_and_acknowledges_the_platform(client, bob, project, runpod_key):
    client.force_login(bob)
    response = post(client, form_data(project))
    instance = Instance.objects.get()
    assert response.status_code == 302 and response["Location"] == instance.get_absolute_url()
    assert instance.credential == runpod_key
    ack = PlatformAcknowledgement.objects.get()
    assert (ack.project, ack.profile_key, ack.user) == (project, "runpod", bob)
    assert instance.events.filter(kind=InstanceEvent.Kind.CREATED).exists()


def test_first_box_of_a_platform_shows_danger_clocks_and_requires_acknowledgement(client, bob, project, runpod_key):
    client.force_login(bob)
    response = post(client, form_data(project, acknowledge=""))
    page = response.content.decode()
    assert response.status_code == 200
    assert "First RunPod box in this project" in page
    assert "A low balance deletes the pod." in page
    assert "LOST" in page  # the survival matrix is shown
    assert not Instance.objects.exists() and not PlatformAcknowledgement.objects.exists()


def test_second_box_of_the_platform_needs_no_new_acknowledgement(client, bob, project, runpod_key):
    client.force_login(bob)
    post(client, form_data(project))
    response = post(client, form_data(project, name=f"vision-eval-{TODAY}", acknowledge=""))
    assert response.status_code == 302
    assert Instance.objects.count() == 2 and PlatformAcknowledgement.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "field_error"),
    [
        ({"credential": "env:DATABASE_URL"}, "Select a valid choice"),
        ({"credential": "999999"}, "Select a valid choice"),
        ({"name": "my-box"}, f"Suggested: vision-my-box-{TODAY}"),
        ({"name": "vision-vitb-20261341"}, "is not a real date"),
        ({"port": "70000"}, "less than or equal to 65535"),
        ({"port": "0"}, "greater than or equal to 1"),
        ({"host": "-oProxyCommand=evil"}, "A host is a DNS name or an IP address"),
        ({"user": "root; rm -rf /"}, "A user name is"),
        ({"rate_running": "-1"}, "greater than or equal to 0"),
        ({"profile_key": "azure"}, "Select a valid choice"),
        ({"credential": ""}, "reached over SSH: this is required"),
        ({"mirror_tier": "tape"}, "RunPod&#x27;s storage tiers are: container disk, volume disk, network volume."),
    ],
)
def test_bad_input_gets_a_clear_error_and_saves_nothing(client, bob, project, runpod_key, overrides, field_error):
    client.force_login(bob)
    response = post(client, form_data(project, **overrides))
    assert response.status_code == 200
    assert field_error in response.content.decode()
    assert not Instance.objects.exists()
    assert not PlatformAcknowledgement.objects.exists()


def test_local_workstation_needs_no_ssh_fields(client, admin_user, project, local_node):
    client.force_login(admin_user)
    data = form_data(project, profile_key="local", host="", user="", credential="", port="22")
    assert post(client, data).status_code == 302
    assert Instance.objects.get().address == "this machine"


def test_an_operator_cannot_register_the_control_host_as_a_box(client, bob, project, local_node):
    """An operator once ran a command on the control host through a `local` box and made herself superuser."""
    client.force_login(bob)
    data = form_data(project, profile_key="local", host="", user="", credential="", port="22")
    response = post(client, data)
    assert response.status_code == 200 and "only an administrator may register it" in response.content.decode()
    assert not Instance.objects.exists()


def test_a_command_on_the_control_host_inherits_no_secret(monkeypatch):
    from node.transport import LocalTransport

    monkeypatch.setenv("DATABASE_URL", "postgres://canary-db-secret@h/db")
    monkeypatch.setenv("REMOTEGPU_OTHER_PROJECT_KEY", "canary-provider-secret")
    with LocalTransport() as transport:
        out = transport.run(["env"], timeout=10).stdout
        with transport.stream(["env"]) as handle:
            streamed = handle.read()
    assert "canary" not in out and "PATH=" in out
    assert b"canary" not in streamed


def test_user_defaults_to_the_platform_ssh_user(client, bob, project, runpod_key):
    client.force_login(bob)
    post(client, form_data(project, profile_key="lambda", user=""))
    assert Instance.objects.get().user == "ubuntu"


def test_a_member_without_the_role_cannot_register(client, carol, project):
    client.force_login(carol)
    assert post(client, form_data(project)).status_code == 403
    assert not Instance.objects.exists()


def make_instance(project, **fields):
    defaults = {"name": f"vision-box-{TODAY}", "project": project, "profile_key": "local"}
    return Instance.objects.create(**{**defaults, **fields})


def test_state_changes_are_recorded_in_history(bob, project):
    instance = make_instance(project)
    do_change_instance_state(instance.pk, "running", "booted from the console", actor=bob)
    do_change_instance_state(instance.pk, "stopped", actor=bob)
    messages = list(instance.events.filter(kind="state").values_list("message", flat=True))
    assert messages == ["State Running → Stopped", "State Unknown → Running: booted from the console"]


def test_released_is_terminal(bob, project):
    instance = make_instance(project, state="released")
    with pytest.raises(IllegalTransition):
        do_change_instance_state(instance.pk, "running", actor=bob)
    instance.refresh_from_db()
    assert instance.state == "released"


def test_state_form_rejects_an_illegal_move_with_a_message(client, bob, project, runpod_key):
    instance = make_instance(project, state="released")
    client.force_login(bob)
    response = client.post(reverse("instance-state", args=[instance.pk]), {"state": "running"}, follow=True)
    assert "cannot go from Released to Running" in response.content.decode()


def test_host_key_confirmation_requires_the_fingerprint_that_was_shown(bob, project):
    from fleet.actions import do_confirm_host_key

    instance = make_instance(project, profile_key="generic-ssh", seen_key_type="ssh-ed25519")
    with pytest.raises(ValidationError, match="No host key has been seen"):
        do_confirm_host_key(instance.pk, "SHA256:x", actor=bob)


def test_pages_render_for_every_platform(client, charlie):
    client.force_login(charlie)
    listing = client.get(reverse("platform-list")).content.decode()
    assert "vast.ai" in listing and "none on the box" in listing
    for key in ["autodl", "gpushare", "runpod", "vastai", "lambda", "paperspace", "generic-ssh", "local"]:
        page = client.get(reverse("platform-detail", args=[key])).content.decode()
        assert "Survival matrix" in page and "Danger clocks" in page
    assert client.get(reverse("platform-detail", args=["nope"])).status_code == 404


def test_runpod_page_says_a_stop_wipes_the_container_disk(client, charlie):
    client.force_login(charlie)
    page = client.get(reverse("platform-detail", args=["runpod"])).content.decode()
    assert "wipes the container disk" in page
    assert page.count('class="lost"') >= 1


def test_a_declared_tier_decides_which_consequence_a_copy_survives(client, bob, project, runpod_key):
    client.force_login(bob)
    post(client, form_data(project, data_tier="volume disk", mirror_tier="network volume"))
    box = Instance.objects.get()
    assert box.data_tier_info["name"] == "volume disk" and box.mirror_tier_info["name"] == "network volume"
    assert box.profile.loses(box.data_tier_info, "release") and not box.profile.loses(box.mirror_tier_info, "release")
    # Undeclared, /workspace is ambiguous on RunPod: the tier that survives least is assumed.
    box.data_tier = box.mirror_tier = ""
    assert box.data_tier_info["name"] == box.mirror_tier_info["name"] == "volume disk"


def test_a_generic_ssh_box_needs_its_power_off_command(client, bob, project, runpod_key):
    """No default power-off on a box that is a real machine."""
    client.force_login(bob)
    response = post(client, form_data(project, profile_key="generic-ssh", name=f"vision-lab-{TODAY}"))
    assert response.status_code == 200 and not Instance.objects.exists()
    assert "powers off the real machine" in html.unescape(response.content.decode())
    post(client, form_data(project, profile_key="generic-ssh", name=f"vision-lab-{TODAY}", shutdown_command="true"))
    assert Instance.objects.get().shutdown_command == "true"


def test_an_operator_edits_a_box_in_the_app_and_the_edit_is_audited(client, bob, carol, project, runpod_key):
    client.force_login(bob)
    post(client, form_data(project))
    instance = Instance.objects.get()
    Instance.objects.filter(pk=instance.pk).update(host_key_type="ssh-ed25519", host_key_base64="AAAA")
    page = client.get(f"/instances/{instance.pk}/").content.decode()
    assert 'id="edit-instance"' in page
    edit = {**form_data(project), "host": "203.0.113.8", "rate_running": "2.10", "shutdown_command": ""}
    for field in ("project", "name", "profile_key", "acknowledge"):
        edit.pop(field)
    response = client.post(f"/instances/{instance.pk}/edit/", edit)
    assert response.status_code == 302
    instance.refresh_from_db()
    assert instance.host == "203.0.113.8" and str(instance.rate_running) == "2.1000"
    assert instance.host_key_type == "" and instance.host_key_base64 == ""  # a new address: confirm again
    event = instance.events.filter(kind="note").latest("at")
    assert "host: 203.0.113.7 → 203.0.113.8" in event.message and event.actor == bob
    bad = client.post(f"/instances/{instance.pk}/edit/", {**edit, "port": "99999"})
    assert bad.status_code == 200 and Instance.objects.get(pk=instance.pk).port == 22022  # nothing half-written
    client.force_login(carol)  # a member without the operator role
    assert client.post(f"/instances/{instance.pk}/edit/", edit).status_code == 403


def test_an_operator_cannot_edit_the_control_host_box(client, bob, admin_user, project, local_node):
    """The local box runs commands on the control host: editing it is an admin's, and a refusal is a
    clear message, never a 500 (the form has no platform field to hang the error on)."""
    box = factories.box(name=f"vision-desk-{TODAY}", project=project, profile_key="local", state="running")
    client.force_login(bob)
    response = client.post(f"/instances/{box.pk}/edit/", {"rate_running": "9", "rate_stopped": "0", "port": "22"})
    assert response.status_code == 302 and Instance.objects.get(pk=box.pk).rate_running == 0
    assert "only an administrator edits it" in html.unescape(client.get(response["Location"]).content.decode())
    client.force_login(admin_user)
    assert client.get(f"/instances/{box.pk}/edit/").status_code == 200


def test_an_operator_overrides_a_boxs_hooks_and_the_change_is_audited(client, bob, project, runpod_key):
    client.force_login(bob)
    post(client, form_data(project))
    instance = Instance.objects.get()
    edit = {**form_data(project), "hooks": "interpreter: /workspace/venv/bin/python\nenv: {HF_HOME: null}\n"}
    for field in ("project", "name", "profile_key", "acknowledge"):
        edit.pop(field)
    assert client.post(f"/instances/{instance.pk}/edit/", edit).status_code == 302
    instance.refresh_from_db()
    assert instance.hooks == {"interpreter": "/workspace/venv/bin/python", "env": {"HF_HOME": None}}
    hooks = instance.effective_hooks
    assert hooks["interpreter"] == "/workspace/venv/bin/python" and "HF_HOME" not in hooks["env"]
    assert hooks["env"]["PIP_CACHE_DIR"] == "$CACHE/pip"  # the platform's others stay
    entry = AuditEntry.objects.filter(action="instance.edited").latest("at")
    assert "hooks" in entry.data["fields"] and entry.actor == bob
    page = client.get(f"/instances/{instance.pk}/edit/").content.decode()
    assert "interpreter: /workspace/venv/bin/python" in page  # shown back as YAML
    bad = client.post(f"/instances/{instance.pk}/edit/", {**edit, "hooks": "interpreter: python3"})
    assert bad.status_code == 200 and "interpreter: an absolute path" in bad.content.decode()
    assert Instance.objects.get(pk=instance.pk).hooks == instance.hooks  # nothing half-written
