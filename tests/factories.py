"""Test data with sensible defaults, every field overridable by keyword: a project (its members in
their persona roles), a box, a run, a credential. Names are unique, so tests that share a database
never collide. What a test is about (a platform, a state, a rate) should still be said in the test."""

import uuid
from datetime import timedelta

from django.utils import timezone

from custody.models import CustodyRecord, CustodyStatus
from delivery.models import TeardownRequest
from fleet.models import Credential, CredentialKind, Instance, Resource
from projects.models import Project
from runs.models import Run
from tests.personas import join


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def project(*members, **fields) -> Project:
    """A project whose members hold their persona's roles in it (tests/personas.py)."""
    slug = fields.pop("slug", None) or unique("p")
    made = Project.objects.create(name=fields.pop("name", slug), slug=slug, **fields)
    join(made, *members)
    return made


def box(project, profile: str = "generic-ssh", *, api: bool = False, **fields) -> Instance:
    """An instance of profile in project. api: with the provider stub's API credential, granted to project."""
    if api:
        from tests.provider_stub import api_credential

        fields.setdefault("api_credential", api_credential(project))
    profile = fields.pop("profile_key", profile)
    fields.setdefault("name", f"{project.slug}-{profile}-{uuid.uuid4().hex[:6]}")
    return Instance.objects.create(project=project, profile_key=profile, **fields)


def run(instance, **fields) -> Run:
    """A draft run on instance (a plain command, an hour expected) unless the fields say otherwise."""
    return Run.objects.create(**run_fields(instance, fields))


def runs(instance, count: int, **fields) -> list[Run]:
    """count runs as run() makes them, in one insert (a box with a thousand runs)."""
    return Run.objects.bulk_create([Run(**run_fields(instance, fields)) for _ in range(count)])


def run_fields(instance, fields: dict) -> dict:
    defaults = {
        "project": instance.project,
        "run_id": f"{instance.project.slug}-{uuid.uuid4().hex[:8]}",
        "source_path": "/x",
        "command": ["python3", "train.py"],
        "expected_minutes": 60,
    }
    return {"instance": instance, **defaults, **fields}


def ssh_key(project, reference: str, **fields) -> Credential:
    """An SSH key credential at reference (a key file, or env:NAME), granted to project."""
    fields.setdefault("name", unique(f"{project.slug}-key-"))
    credential = Credential.objects.create(kind=CredentialKind.SSH_KEY, reference=reference, **fields)
    credential.projects.add(project)
    return credential


def resource(instance, kind: str = "network_volume", **fields) -> Resource:
    """A billable resource beside instance (a volume unless kind says otherwise), at $1/h unless rate says."""
    fields.setdefault("name", unique(f"{kind}-"))
    fields.setdefault("rate", 1)
    return Resource.objects.create(instance=instance, kind=kind, **fields)


def verified_record(run, **fields) -> CustodyRecord:
    """A custody record of run, verified now unless the fields say otherwise."""
    fields.setdefault("status", CustodyStatus.VERIFIED)
    fields.setdefault("verified_at", timezone.now())
    return CustodyRecord.objects.create(run=run, **fields)


def teardown_request(instance, requester, kind: str = "release", **fields) -> TeardownRequest:
    """A request of kind on instance, as filed by requester (a row only: no checks ran), open for a day."""
    fields.setdefault("level", "L3")
    fields.setdefault("reason", "done")
    fields.setdefault("expires_at", timezone.now() + timedelta(hours=24))
    return TeardownRequest.objects.create(instance=instance, requester=requester, kind=kind, **fields)


def pulling_record(run, **fields) -> CustodyRecord:
    """A custody record of run as the verification's start makes it: pulling, nothing verified yet."""
    fields.setdefault("status", CustodyStatus.PULLING)
    return CustodyRecord.objects.create(run=run, **fields)


def credential(kind: str, reference: str, *projects, **fields) -> Credential:
    """A registered credential of kind at reference (an env:NAME or a key path), granted to projects."""
    fields.setdefault("name", unique(f"{kind}-"))
    made = Credential.objects.create(kind=kind, reference=reference, **fields)
    made.projects.add(*projects)
    return made
