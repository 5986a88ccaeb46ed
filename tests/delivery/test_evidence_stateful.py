"""A stateful property test of the evidence invariant (DOMAIN §5) over every platform profile that a
shutdown or release can happen to.

Hypothesis interleaves verify / request / approve / execute / tamper for shutdown, release and
the three deletions on a box of a random platform (the loopback sshd, its disks on that
platform's tiers). After every step, every sealed export still has at least one intact copy on
disk (re-hashed from the files themselves), and no request executed twice.

Execution goes through the real actions (claim under the instance lock, deep re-check with the
node-side re-hash over SSH); only the provider is stood in for by its effect on the files: a
shutdown or release wipes the tiers the profile says it loses (a release clock counted as run
out), a deletion is the real `remove_copy`.

A box's durable disk is mounted (a tmpfs of its own), or absent: a plain directory on the data
root's disk, or no directory at all (a RunPod pod without its network volume, AutoDL without file
storage in the region). The mirror goes where the node's measurement accepts it and nowhere else;
an absent disk's declared tier must never make a consequence look safe.
"""

import hashlib
import shutil
import uuid

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, event
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from core.models import AuditEntry
from custody.copies import present_copies
from custody.models import CustodyRecord, EvidenceLocation
from custody.verify import custody_dir
from delivery.actions.attention import do_flag_stuck_executions, do_resolve_attention
from delivery.actions.base import EvidenceBusy, TeardownRefused
from delivery.actions.decisions import do_approve_teardown
from delivery.actions.execution import do_begin_execution, do_finish_execution
from delivery.actions.requests import do_request_teardown as request_teardown
from delivery.models import TeardownKind, TeardownRequest, TeardownStatus
from delivery.removal import remove_copy
from platforms.catalog import all_profiles
from platforms.resources import kinds_for
from tests import factories
from tests.custody import sealed
from tests.personas import join

pytestmark = pytest.mark.django_db(transaction=True)
LOCATIONS = [EvidenceLocation.NODE, EvidenceLocation.CUSTODY, EvidenceLocation.MIRROR]
ABSENT = ["plain", "missing"]
KINDS = [TeardownKind.SHUTDOWN, TeardownKind.RELEASE, TeardownKind.DELETE_EVIDENCE, TeardownKind.DELETE_RESOURCE]
STACK = {}  # the session's sshd and personas, handed to the machine by the test


# Every profile a box consequence can happen to: a Slurm login node has neither a shutdown nor a release
# (its runs' jobs end, the cluster stays), and its evidence deletion is any box's.
PROFILES = st.sampled_from(
    sorted(
        p.key
        for p in all_profiles()
        if not p.is_local and {p.data["teardown"][kind]["via"] for kind in ("shutdown", "release")} != {"none"}
    )
)
VERIFIED = st.lists(st.booleans(), min_size=2, max_size=2)


class EvidenceMachine(RuleBasedStateMachine):
    """Boxes whose durable disk is mounted. Every platform reached over SSH: the local workstation's
    commands run on the control host only as a separate OS user or with the admin alone,
    and this machine has two people."""

    @initialize(profile=PROFILES, verified=VERIFIED)
    def a_box(self, profile, verified):
        self.make_box(profile, verified, "mounted")

    def make_box(self, profile, verified, disk):
        self.profile = next(p for p in all_profiles() if p.key == profile)
        slug = f"h{uuid.uuid4().hex[:10]}"
        self.project = factories.project(name=slug, slug=slug, shutdown_needs_approval=True)
        join(self.project, STACK["alice"], STACK["bob"])  # roles are held per project
        durable = self.profile.durable_root
        self.disk = disk if durable else "none"
        STACK["disks"].add(self.disk)
        event(f"durable disk {self.disk}")
        box = {**STACK["sshd"].instance_fields(self.project, pinned=False), "profile_key": profile}
        self.instance = factories.box(
            name=f"{slug}-box-20261130",
            project=self.project,
            **box,
            host_key_type=STACK["key"].key_type,
            host_key_base64=STACK["key"].key_base64,
            host_key_confirmed_at=timezone.now(),
            data_tier=self.profile.tier_of(self.profile.data_root)["name"],
            mirror_root=self.durable_root(slug) if durable else "",
            mirror_tier=self.profile.tier_of(durable)["name"] if durable else "",
        )
        self.runs, self.files, self.requests, self.effects = [], {}, [], {}
        # A billable resource that is the durable tier (a network volume, a filesystem): deleting it
        # destroys the mirror copies there, under the same invariant as every other consequence.
        kinds = kinds_for(profile)
        self.resource = None
        if kinds and self.instance.mirror_tier:
            self.resource = factories.resource(
                instance=self.instance, kind=kinds[0][0], name="durable", tier=self.instance.mirror_tier, rate=1
            )
        for _ in range(2):
            run = factories.run(
                project=self.project,
                instance=self.instance,
                command=["true"],
                run_id=f"{slug}-{uuid.uuid4().hex[:6]}",
                config_path="c.yaml",
            )
            sealed.seal(run)
            self.files[run.pk] = {p.name: p.read_bytes() for p in sealed.export_dir(run).iterdir()}
            self.runs.append(run)
            if verified[len(self.runs) - 1]:
                sealed.verify(run, mirror=bool(durable))

    def durable_root(self, slug: str) -> str:
        """Where the declared durable tier is: its own disk, or a plain directory, or nothing."""
        if self.disk == "mounted":
            return sealed.MIRROR_ROOT
        absent = f"$HOME/{slug}-durable"
        if self.disk == "plain":
            sealed.node_path(absent).mkdir()
        return absent

    def teardown(self):
        for run in getattr(self, "runs", []):
            sealed.cleanup(run)
        if getattr(self, "disk", "") == "plain":
            shutil.rmtree(sealed.node_path(self.instance.mirror_root), ignore_errors=True)

    # ------------------------------------------------------------------ the files themselves

    def where(self, run, location) -> object:
        return {
            EvidenceLocation.NODE: sealed.export_dir(run),
            EvidenceLocation.CUSTODY: custody_dir(run),
            EvidenceLocation.MIRROR: sealed.mirror_dir(run),
        }[location]

    def intact(self, run, location) -> bool:
        root = self.where(run, location)
        if not root.is_dir() or {p.name for p in root.iterdir()} != set(self.files[run.pk]):
            return False
        return all(
            hashlib.sha256((root / name).read_bytes()).digest() == hashlib.sha256(data).digest()
            for name, data in self.files[run.pk].items()
        )

    def wipe_tiers(self, consequence: str) -> None:
        tiers = {
            EvidenceLocation.NODE: self.instance.data_tier_info,
            EvidenceLocation.MIRROR: self.instance.mirror_tier_info,
        }
        for location, tier in tiers.items():
            if self.profile.loses(tier, consequence):
                for run in self.runs:
                    shutil.rmtree(self.where(run, location), ignore_errors=True)

    def wipe_tier_named(self, name: str) -> None:
        tiers = {
            EvidenceLocation.NODE: self.instance.data_tier_info,
            EvidenceLocation.MIRROR: self.instance.mirror_tier_info,
        }
        for location, tier in tiers.items():
            if tier["name"] == name:
                for run in self.runs:
                    shutil.rmtree(self.where(run, location), ignore_errors=True)

    # ------------------------------------------------------------------ rules

    @rule(index=st.integers(0, 1))
    def verify(self, index):
        run = self.runs[index]
        if self.intact(run, EvidenceLocation.NODE) and self.instance.state != "released":
            run.refresh_from_db()
            if run.export_deleted_at is None:
                sealed.verify(run, mirror=bool(self.profile.durable_root))

    @rule(kind=st.sampled_from(KINDS), index=st.integers(0, 1), data=st.data())
    def request(self, kind, index, data):
        run, location = None, ""
        if kind == TeardownKind.DELETE_RESOURCE and self.resource is None:
            return
        if kind == TeardownKind.DELETE_EVIDENCE:
            run = self.runs[index]
            run.refresh_from_db()
            present = present_copies(run)
            if not present:
                return
            location = data.draw(st.sampled_from(present))
        try:
            resource = self.resource if kind == TeardownKind.DELETE_RESOURCE else None
            made = request_teardown(
                self.instance.pk, kind, "property", run, location, resource=resource, actor=STACK["bob"]
            )
        except TeardownRefused:
            event(f"refused {kind}")
            return
        event(f"requested {kind}")
        self.requests.append(made.pk)

    def with_status(self, status) -> list[int]:
        return list(TeardownRequest.objects.filter(pk__in=self.requests, status=status).values_list("pk", flat=True))

    @precondition(lambda self: self.with_status(TeardownStatus.PENDING))
    @rule(data=st.data())
    def approve(self, data):
        pk = data.draw(st.sampled_from(self.with_status(TeardownStatus.PENDING)))
        try:
            do_approve_teardown(pk, "property", actor=STACK["alice"])
            event("approved")
        except TeardownRefused as exc:
            event(f"approval refused: {str(exc)[:60]}")

    @precondition(lambda self: self.with_status(TeardownStatus.APPROVED))
    @rule(data=st.data(), worker_dies=st.booleans())
    def execute(self, data, worker_dies):
        """Claim, then the provider's effect; a worker that dies after the effect never finishes it."""
        pk = data.draw(st.sampled_from(self.with_status(TeardownStatus.APPROVED)))
        try:
            claimed = do_begin_execution(pk)
        except EvidenceBusy:
            return
        if claimed is None:
            return
        self.effects[pk] = self.effects.get(pk, 0) + 1
        STACK["executed"].add(claimed.kind)
        event(f"executed {claimed.kind}")
        if claimed.kind == TeardownKind.DELETE_EVIDENCE:
            remove_copy(claimed.run, claimed.location)
        elif claimed.kind == TeardownKind.DELETE_RESOURCE:
            self.wipe_tier_named(self.resource.tier)
        else:
            self.wipe_tiers("shutdown" if claimed.kind == TeardownKind.SHUTDOWN else "release")
        if not worker_dies:
            do_finish_execution(pk, {"property": True})
        self.instance.refresh_from_db()

    @rule()
    def lease_runs_out(self):
        """The reconciler: executions past their lease (0 s here) need a person."""
        do_flag_stuck_executions()

    @precondition(lambda self: self.with_status(TeardownStatus.NEEDS_ATTENTION))
    @rule(data=st.data())
    def a_person_settles(self, data):
        """The person checked the provider: the effect did happen (it always did here)."""
        pk = data.draw(st.sampled_from(self.with_status(TeardownStatus.NEEDS_ATTENTION)))
        do_resolve_attention(pk, happened=True, comment="seen in the console", actor=STACK["alice"])
        self.instance.refresh_from_db()

    @rule(index=st.integers(0, 1), data=st.data())
    def tamper(self, index, data):
        """A flipped bit on one copy, never on the last intact one (that loss is no consequence's doing)."""
        run = self.runs[index]
        intact = [location for location in LOCATIONS if self.intact(run, location)]
        if len(intact) >= 2:
            sealed.tamper(self.where(run, data.draw(st.sampled_from(intact))))

    # ------------------------------------------------------------------ the invariant

    @invariant()
    def every_sealed_export_keeps_an_intact_copy(self):
        for run in getattr(self, "runs", []):
            survivors = [loc for loc in LOCATIONS if self.intact(run, loc)]
            assert survivors, f"{run.run_id} on {self.profile.key}: no intact copy left"

    @invariant()
    def no_mirror_without_its_disk(self):
        """An absent durable disk holds no copy and no record says it does (the mirror was refused)."""
        if getattr(self, "disk", "") in ("plain", "missing"):
            for run in self.runs:
                assert not sealed.mirror_dir(run).exists(), f"a mirror was written on {self.disk}"
            assert not CustodyRecord.objects.filter(run__in=self.runs).exclude(mirror_uri="").exists()

    @invariant()
    def nothing_executed_twice(self):
        assert all(count == 1 for count in getattr(self, "effects", {}).values())
        for pk in getattr(self, "requests", []):
            assert AuditEntry.objects.filter(request_id=pk, action="executing").count() <= 1
            status = TeardownRequest.objects.get(pk=pk).status
            happened = {TeardownStatus.DONE, TeardownStatus.EXECUTING, TeardownStatus.NEEDS_ATTENTION}
            assert (status in happened) == (pk in self.effects), (pk, status)


class AbsentDiskMachine(EvidenceMachine):
    """The same rules on boxes whose declared durable disk is absent: a plain directory on the data
    root's disk, or nothing at all."""

    @initialize(profile=PROFILES, verified=VERIFIED, disk=st.sampled_from(ABSENT))
    def a_box(self, profile, verified, disk):
        self.make_box(profile, verified, disk)


def machine_settings(examples: int):
    return hypothesis_settings(
        max_examples=examples,
        stateful_step_count=25,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@pytest.mark.timeout(900)  # 110 machines of 25 steps over ssh: 2-5 min, near the default 300 s on a loaded box
def test_the_last_intact_copy_survives_every_interleaving(alice, bob, sshd, settings, no_worker):
    from node.transport import scan_host_key

    settings.TEARDOWN_EXECUTION_LEASE = 0
    key = scan_host_key("127.0.0.1", sshd.port, timeout=5)
    STACK.update(sshd=sshd, alice=alice, bob=bob, key=key, executed=set(), disks=set())
    run_state_machine_as_test(EvidenceMachine, settings=machine_settings(80))
    # A declared durable disk that is not there: the mirror is refused by the node's measurement, and
    # no interleaving of consequences loses the last intact copy.
    mounted, STACK["executed"] = STACK["executed"], set()
    run_state_machine_as_test(AbsentDiskMachine, settings=machine_settings(30))
    assert STACK["disks"] >= {"mounted", *ABSENT}, STACK["disks"]
    assert {TeardownKind.SHUTDOWN, TeardownKind.RELEASE} & STACK["executed"], STACK["executed"]
    # The machines reached every kind of consequence, resource deletions included, and executed them.
    assert mounted | STACK["executed"] == set(KINDS), (mounted, STACK["executed"])
