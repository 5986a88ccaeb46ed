"""Every list and detail page runs a fixed number of queries, whatever the amount of data (no N+1).

Each page is measured with a little data and again after adding five more of everything it lists;
the count must not move, and it is pinned so a new per-row query shows up here first.
"""

import hashlib
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.models import AuditEntry
from custody.models import Artifact
from fleet.models import Credential, Instance, InstanceEvent
from rentals.models import Rental, RentalAttempt
from runs.models import GpuSample, Run, RunEvent, RunState, SpendRequest, Sweep
from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db

# page -> queries it may run (signed-in session and user included).
PINNED = {
    "dashboard": 31,  # and idle GPUs past their window, the rents in flight, the teardowns that need a person, …
    "history": 10,
    "project": 14,  # the cost envelope: boxes and their states, resources, orphan drift, every live run, recent ones
    "run": 9,  # and its GPU samples, the newest day of them (a run never sampled asks nothing)
    "instances": 4,
    "instance": 20,
    # A release-clock platform: what the shutdown would take, for every export; and its waste alarms.
    "instance_autodl": 23,
    "sweep": 7,
    "approvals": 15,  # and the rents waiting, the teardowns that need a person
    "audit": 3,
    "compare": 4,
    "rentals": 4,
    "rental": 5,
}


class World:
    def __init__(self, alice, bob):
        self.alice, self.bob = alice, bob
        self.project = factories.project(name="Vision", slug="vision", budget=500)
        join(self.project, alice, bob)
        self.instance = self.box("node")
        # A platform whose stopped box is released on a clock (AutoDL): its page asks what the shutdown's
        # clock would take, for every sealed export on it.
        self.autodl = self.box("adl", profile_key="autodl")
        # Its data disk as a preflight measured it: the shutdown's clock is then what decides its level.
        data_disk = {"mountpoint": "/root/autodl-tmp", "device": "253:16", "fstype": "ext4", "source": "/dev/vdb"}
        Instance.objects.filter(pk=self.autodl.pk).update(data_mounts={"data": data_disk})
        self.first = self.run(RunState.EXPORTED, gpu_sampled_at=timezone.now())
        self.second = self.run(RunState.EXPORTED)
        self.sweep = Sweep.objects.create(
            project=self.project, name="lr sweep", base_run=self.first, overrides=[{"lr": 0.1}], created_by=bob
        )
        self.sweep.instances.add(self.instance)
        self.grow(1)

    def box(self, purpose: str, profile_key: str = "runpod") -> Instance:
        return factories.box(
            name=f"vision-{purpose}-20261130",
            project=self.project,
            profile_key=profile_key,
            host="203.0.113.9",
            user="root",
            state="running",
            rate_running=2,
            rate_stopped="0.2",
        )

    def run(self, state, instance=None, **fields) -> Run:
        run = factories.run(
            project=self.project,
            instance=instance or self.instance,
            run_id=f"vision-{uuid.uuid4().hex[:10]}",
            state=state,
            command=["python", "train.py"],
            config_path="config.yaml",
            expected_minutes=5,
            source_path="/src",
            launched_at=timezone.now() - timedelta(hours=1),
            gpus=[0],
            **fields,
        )
        for n in range(3):
            RunEvent.objects.create(run=run, kind="state", message=f"event {n}")
        record = factories.verified_record(run, uri="/custody/x", file_count=2)
        for name in ("metrics.json", "best.pth"):
            Artifact.objects.create(
                record=record, path=name, bytes=10, sha256=hashlib.sha256(name.encode()).hexdigest()
            )
        return run

    def grow(self, n: int) -> None:
        """n more of everything the pages list: runs, sweep cells, boxes, requests, audit rows, events."""
        for _ in range(n):
            GpuSample.objects.create(
                run=self.first, at=timezone.now(), gpus=[{"index": 0, "utilization_pct": 50, "memory_used_mib": 9}]
            )
            self.run(RunState.EXPORTED)
            self.rental = self.rent()
            RentalAttempt.objects.create(rental=self.rental, provider="vastai", outcome="created", provider_id="1")
            # Its copy on the box deleted: no export there is touched, so every one of them is read.
            self.run(RunState.EXPORTED, instance=self.autodl, export_deleted_at=timezone.now())
            self.run(RunState.RUNNING, sweep=self.sweep)
            box = self.box(uuid.uuid4().hex[:6])
            InstanceEvent.objects.create(instance=self.instance, kind="state", message="State Running → Running")
            request = factories.teardown_request(box, self.bob, check_at_request={"items": [], "ok": True})
            AuditEntry.objects.create(actor=self.bob, action="requested", request=request, instance=box, message="m")
            factories.resource(instance=box, kind="network_volume", name="v", tier="network volume", rate=1)
            factories.resource(instance=self.instance, kind="network_volume", name=uuid.uuid4().hex, rate=1)
            spending = self.run(RunState.DRAFT)
            SpendRequest.objects.create(
                run=spending,
                attempt=1,
                why="launch",
                expected_cost=9,
                reason="over",
                requester=self.bob,
                expires_at=timezone.now() + timedelta(hours=24),
            )
            released = self.box(uuid.uuid4().hex[:6])
            Instance.objects.filter(pk=released.pk).update(state="released")
            factories.resource(instance=released, kind="network_volume", name="orphan", rate=1)

    def pages(self) -> dict[str, str]:
        return {
            "dashboard": "/",
            "history": "/runs/",
            "project": f"/projects/{self.project.slug}/",
            "run": f"/runs/{self.first.run_id}/",
            "instances": "/instances/",
            "instance": f"/instances/{self.instance.pk}/",
            "instance_autodl": f"/instances/{self.autodl.pk}/",
            "sweep": f"/sweeps/{self.sweep.pk}/",
            "approvals": "/approvals/",
            "audit": "/audit/",
            "compare": f"/runs/compare/?run={self.first.run_id}&run={self.second.run_id}",
            "rentals": "/rentals/",
            "rental": f"/rentals/{self.rental.pk}/",
        }

    def rent(self, state: str = "requested") -> Rental:
        key, _ = Credential.objects.get_or_create(name="vision-ssh", defaults={"kind": "ssh-key", "reference": "/k"})
        rental = Rental.objects.create(
            project=self.project,
            purpose="train",
            gpu_models=["A100"],
            max_rate=2,
            candidates=["lambda", "vastai"],
            api_credentials={},
            ssh_credential=key,
            expected_minutes=60,
            expected_cost=2,
            state=state,
            name=f"vision-train-r{uuid.uuid4().hex[:4]}-20261202",
            requester=self.bob,
            instance=self.instance,
            expires_at=timezone.now() + timedelta(hours=24),
        )
        RentalAttempt.objects.create(rental=rental, provider="lambda", outcome="no_capacity")
        return rental


def count(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(queries)


def test_no_page_runs_more_queries_with_more_data(client, alice, bob):
    world = World(alice, bob)
    client.force_login(alice)
    small = {page: count(client, url) for page, url in world.pages().items()}
    world.grow(5)
    large = {page: count(client, url) for page, url in world.pages().items()}
    assert large == small, {page: (small[page], large[page]) for page in small if small[page] != large[page]}
    assert small == PINNED
