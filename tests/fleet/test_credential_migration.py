"""The move to registered credentials loses nothing: each reference in use becomes a credential granted
to the projects whose instances used it."""

import pytest

from tests.migrating import migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("migrated_copy")]

# runs stays before Project moved to the projects app (runs 0013 needs profiles 0009).
BEFORE = [("profiles", "0005_instance_data_tier_instance_mirror_tier"), ("runs", "0012_membership_event")]
AFTER = [("profiles", "0008_remove_references"), ("runs", "0012_membership_event")]


def test_references_become_granted_credentials():
    old = migrate(BEFORE)
    project_model, instance_model = old.get_model("runs", "Project"), old.get_model("profiles", "Instance")
    vision = project_model.objects.create(name="Vision", slug="vision")
    audio = project_model.objects.create(name="Audio", slug="audio")
    rows = [
        ("vision-a-20261130", vision, "env:LAB_SSH_KEY", "env:RUNPOD_API_KEY"),
        ("vision-b-20261130", vision, "env:LAB_SSH_KEY", ""),
        ("audio-a-20261130", audio, "env:LAB_SSH_KEY", "env:RUNPOD_API_KEY"),
        ("audio-b-20261130", audio, "/home/ops/.ssh/id_ed25519", ""),
    ]
    for name, project, ssh, api in rows:
        instance_model.objects.create(
            name=name, project=project, profile_key="generic-ssh", credential_ref=ssh, api_key_ref=api
        )
    new = migrate(AFTER)
    credential_model, instance_model = (
        new.get_model("profiles", "Credential"),
        new.get_model("profiles", "Instance"),
    )
    found = {
        (c.name, c.kind, c.reference, tuple(sorted(c.projects.values_list("slug", flat=True))))
        for c in credential_model.objects.all()
    }
    assert found == {
        ("lab-ssh-key", "ssh-key", "env:LAB_SSH_KEY", ("audio", "vision")),
        ("id-ed25519", "ssh-key", "/home/ops/.ssh/id_ed25519", ("audio",)),
        ("runpod-api-key", "provider-key", "env:RUNPOD_API_KEY", ("audio", "vision")),
    }
    uses = {i.name: (i.credential.reference, i.api_credential_id is not None) for i in instance_model.objects.all()}
    assert uses == {
        "vision-a-20261130": ("env:LAB_SSH_KEY", True),
        "vision-b-20261130": ("env:LAB_SSH_KEY", False),
        "audio-a-20261130": ("env:LAB_SSH_KEY", True),
        "audio-b-20261130": ("/home/ops/.ssh/id_ed25519", False),
    }
