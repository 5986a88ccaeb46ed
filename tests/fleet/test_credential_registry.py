"""`credential_ref=env:NAME` once read any worker secret, and any key path on the worker
could be borrowed. Now administrators register credentials and grant them to projects; an instance
picks one of its project's; the grant is checked at every use; values never surface anywhere."""

import json
import logging

import pytest
from django.apps import apps
from django.core import serializers
from django.urls import reverse

from core.models import AuditEntry
from fleet import provider_calls as calls
from fleet.credentials import provider_key, ssh_auth
from fleet.models import Credential, CredentialKind, Instance
from fleet.probe import run_probe
from node.transport import CredentialError
from tests import factories

pytestmark = pytest.mark.django_db

CANARY = "canary-4b1d7e-never-shown"
PASTED_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----"
)


@pytest.fixture
def vision(alice, bob):
    project = factories.project(alice, bob, name="Vision", slug="vision")
    return project


@pytest.fixture
def audio(alice):
    project = factories.project(alice, name="Audio", slug="audio")
    return project


def registered(name, reference, *projects, kind=CredentialKind.SSH_KEY):
    credential = Credential.objects.create(name=name, kind=kind, reference=reference)
    credential.projects.set(projects)
    return credential


def credential_form(**overrides):
    return {"name": "lab-key", "kind": CredentialKind.SSH_KEY, "reference": "env:LAB_SSH_KEY", "note": "", **overrides}


# ---------------------------------------------------------------- only administrators register


def test_an_operator_cannot_see_or_register_credentials(client, bob, vision):
    client.force_login(bob)
    for url in (reverse("credential-list"), reverse("credential-create")):
        assert client.get(url).status_code == 403
    assert client.post(reverse("credential-create"), credential_form(projects=[vision.pk])).status_code == 403
    assert not Credential.objects.exists()


def test_an_administrator_registers_a_credential_and_grants_it(client, admin_user, vision):
    client.force_login(admin_user)
    response = client.post(reverse("credential-create"), credential_form(projects=[vision.pk]))
    assert response.status_code == 302
    credential = Credential.objects.get()
    assert (credential.reference, list(credential.projects.all())) == ("env:LAB_SSH_KEY", [vision])
    event = AuditEntry.objects.get(action="credential.changed")
    assert event.actor == admin_user and event.message == "lab-key: Registered; granted to vision"
    assert event.credential == credential
    page = client.get(reverse("credential-list")).content.decode()
    assert "lab-key" in page and "env:LAB_SSH_KEY" in page


def test_revoking_and_moving_a_credential_is_recorded_without_its_location(client, admin_user, vision, audio):
    client.force_login(admin_user)
    credential = registered("lab-key", "env:LAB_SSH_KEY", vision)
    data = credential_form(reference="/srv/keys/lab", projects=[audio.pk])
    assert client.post(reverse("credential-edit", args=[credential.pk]), data).status_code == 302
    event = AuditEntry.objects.get(credential=credential)
    assert event.message == "lab-key: Changed; granted to audio; revoked from vision; location changed"
    assert "/srv/keys/lab" not in json.dumps(event.data) + event.message


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"reference": PASTED_KEY}, "This looks like key material"),
        ({"reference": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkey user@host"}, "This looks like key material"),
        ({"reference": "my key"}, "Use env:NAME"),
        ({"reference": "env:DATABASE_URL"}, "one of RemoteGPU&#x27;s own settings"),
        ({"reference": "env:SECRET_KEY"}, "one of RemoteGPU&#x27;s own settings"),
        ({"reference": "env:REMOTEGPU_VAR_DIR"}, "one of RemoteGPU&#x27;s own settings"),
        ({"kind": CredentialKind.PROVIDER_KEY, "reference": "/srv/keys/api"}, "read from an environment variable"),
        ({"name": "has spaces"}, "Enter a valid"),
        ({"kind": CredentialKind.RUN_SECRET, "reference": "/srv/keys/wandb"}, "A run secret is read from"),
        ({"kind": CredentialKind.RUN_SECRET, "export_as": "REMOTEGPU_RUN_ID"}, "not REMOTEGPU_*"),
        ({"kind": CredentialKind.RUN_SECRET, "export_as": "WANDB KEY"}, "An environment variable name"),
        ({"export_as": "WANDB_API_KEY"}, "Only a run secret is exported"),
    ],
)
def test_bad_registrations_get_a_clear_error_and_save_nothing(client, admin_user, vision, overrides, error):
    client.force_login(admin_user)
    response = client.post(reverse("credential-create"), credential_form(projects=[vision.pk], **overrides))
    page = response.content.decode()
    assert response.status_code == 200 and error in page
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in page  # pasted key material is not echoed
    assert not Credential.objects.exists() and not AuditEntry.objects.exists()


# ---------------------------------------------------------------- operators pick their project's


def instance_form(project, credential, **overrides):
    return {
        "project": project.pk,
        "name": f"{project.slug}-box-20261130",
        "profile_key": "generic-ssh",
        "host": "203.0.113.7",
        "port": "22",
        "user": "ops",
        "credential": credential.pk if credential else "",
        "rate_running": "1",
        "rate_stopped": "0",
        "acknowledge": "on",
        **overrides,
    }


def test_the_instance_form_offers_only_names_of_the_users_projects_credentials(client, bob, vision, audio):
    registered("vision-key", "/srv/keys/vision-secret-path", vision)
    registered("audio-key", "env:AUDIO_SSH_KEY", audio)
    client.force_login(bob)
    page = client.get(reverse("instance-create")).content.decode()
    assert "vision-key" in page and "audio-key" not in page
    assert "/srv/keys/vision-secret-path" not in page  # where it lives is for administrators


def test_an_operator_cannot_use_another_projects_credential(client, alice, vision, audio):
    audio_key = registered("audio-key", "env:AUDIO_SSH_KEY", audio)
    client.force_login(alice)  # a member of both: the key is offered, but not for this project
    response = client.post(reverse("instance-create"), instance_form(vision, audio_key))
    assert response.status_code == 200
    assert "audio-key is not granted to Vision" in response.content.decode()
    assert not Instance.objects.exists()


def test_an_outsider_cannot_pick_a_credential_by_id(client, bob, vision, audio):
    audio_key = registered("audio-key", "env:AUDIO_SSH_KEY", audio)
    client.force_login(bob)  # not in audio
    response = client.post(reverse("instance-create"), instance_form(vision, audio_key))
    assert "Select a valid choice" in response.content.decode() and not Instance.objects.exists()


def test_a_revoked_grant_stops_the_next_use_not_only_the_next_save(vision, sshd):
    key = registered("sshd-key", sshd.credential_ref, vision)
    box = factories.box(
        name="vision-box-20261130", project=vision, **{**sshd.instance_fields(vision), "credential_id": key.pk}
    )
    assert ssh_auth(box) == {"key_filename": sshd.credential_ref}
    key.projects.clear()
    with pytest.raises(CredentialError, match="no longer granted"):
        ssh_auth(box)
    outcome = run_probe(Instance.objects.get(pk=box.pk), "light")
    assert not outcome.ok and "no longer granted" in outcome.error


def test_a_provider_key_is_used_only_while_granted(vision, monkeypatch):
    monkeypatch.setenv("VISION_RUNPOD_KEY", CANARY)
    key = registered("runpod-api", "env:VISION_RUNPOD_KEY", vision, kind=CredentialKind.PROVIDER_KEY)
    box = factories.box(
        name="vision-pod-20261130", project=vision, profile_key="runpod", provider_id="p1", api_credential=key
    )
    assert provider_key(box) == CANARY
    key.projects.clear()
    with pytest.raises(calls.ProviderError, match="no longer granted") as error:
        calls.api_call(box, "release")
    assert CANARY not in str(error.value)


# ---------------------------------------------------------------- canaries: values never surface


def every_column_as_text() -> str:
    """Every row of every table of ours, serialised: a secret in any column shows up here."""
    theirs = ("django.", "rest_framework.", "channels.", "drf_spectacular.")
    ours = [m for m in apps.get_models() if m._meta.app_label == "auth" or not m.__module__.startswith(theirs)]
    return "".join(serializers.serialize("json", model.objects.all()) for model in ours)


def test_canary_secrets_never_appear_in_a_page_an_answer_a_log_or_a_column(
    client, admin_user, bob, vision, sshd, provider_api, monkeypatch, caplog
):
    """Secrets seeded with a canary: a provider key, and a worker secret a credential was pointed at."""
    monkeypatch.setenv("VISION_RUNPOD_KEY", CANARY)
    monkeypatch.setenv("VISION_MISCONFIGURED", f"postgres://user:{CANARY}@db/x")
    ssh_key = registered("vision-ssh", "env:VISION_MISCONFIGURED", vision)
    api_key = registered("vision-api", "env:VISION_RUNPOD_KEY", vision, kind=CredentialKind.PROVIDER_KEY)
    box = factories.box(
        name="vision-box-20261130",
        project=vision,
        **{**sshd.instance_fields(vision), "credential_id": ssh_key.pk},
        api_credential=api_key,
    )
    caplog.set_level(logging.DEBUG)
    outcome = run_probe(box, "light")  # the variable holds no key: a clear error that names only the variable
    assert not outcome.ok and "VISION_MISCONFIGURED" in outcome.error
    pod = factories.box(
        name="vision-pod-20261130", project=vision, profile_key="runpod", provider_id="p1", api_credential=api_key
    )
    with pytest.raises(calls.ProviderError, match="401"):
        calls.api_call(pod, "release")  # the stub refuses the canary key: an error, without the key

    client.force_login(admin_user)
    pages = [
        client.get(reverse("instance-detail", args=[box.pk])),
        client.get(reverse("instance-list")),
        client.get(reverse("instance-create")),
        client.get(reverse("credential-list")),
        client.get(reverse("credential-edit", args=[ssh_key.pk])),
        client.get("/api/instances/"),
        client.get(f"/api/instances/{box.pk}/"),
    ]
    client.force_login(bob)
    pages += [client.get(reverse("instance-detail", args=[box.pk])), client.get("/api/instances/")]
    assert all(page.status_code == 200 for page in pages), [page.status_code for page in pages]
    for page in pages:
        assert CANARY not in page.content.decode()
    assert CANARY not in caplog.text
    assert CANARY not in every_column_as_text()
