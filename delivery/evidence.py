"""The evidence invariant in one place (DOMAIN §5): what each consequence destroys of the copies of a
sealed export (custody/copies.py), and which intact, verified copies survive every consequence in flight.

Shutdown, release, evidence deletion and cache cleanup all ask `survivors`; nothing else decides.
Which requests are in flight on a box is loaded by `delivery.facts` (IN_FLIGHT below says which).
A copy targeted by another approved or executing request — or on a tier that an approved,
executing or (while the box stays stopped) done shutdown or release loses — counts as gone.
"""

from dataclasses import dataclass, field

from custody.copies import PREFERENCE, Copy, copies_of
from delivery.models import TeardownKind, TeardownStatus

# Requests whose consequence may already have happened, or will without another decision.
IN_FLIGHT = [
    TeardownStatus.APPROVED,
    TeardownStatus.EXECUTING,
    TeardownStatus.AWAITING_ATTESTATION,
    TeardownStatus.NEEDS_ATTENTION,
]


@dataclass(frozen=True)
class Consequence:
    """A teardown as far as evidence is concerned: what it would destroy."""

    kind: str
    instance_id: int
    run_id: int | None = None
    location: str = ""
    request_id: int | None = None
    tier: str = ""  # a resource deletion: the tier of the box that the resource is

    @classmethod
    def of(cls, request) -> "Consequence":
        tier = request.resource.tier if request.kind == TeardownKind.DELETE_RESOURCE else ""
        return cls(request.kind, request.instance_id, request.run_id, request.location, request.pk, tier)

    def describe(self) -> str:
        name = TeardownKind(self.kind).label.lower()
        return f"{name} #{self.request_id}" if self.request_id else name


@dataclass
class Verdict:
    """Which copies of one export survive a set of consequences, and why the others do not count."""

    run: object
    survivors: list[Copy] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.survivors)

    def detail(self) -> str:
        head = "survives: " + ", ".join(c.label for c in self.survivors) if self.ok else "no verified copy survives"
        return "; ".join([head, *self.notes])


def destroys(consequence: Consequence, copy: Copy, profile) -> bool:
    if consequence.kind == TeardownKind.DELETE_EVIDENCE:
        return consequence.run_id == copy.run_id and consequence.location == copy.location
    if copy.instance_id is None or copy.instance_id != consequence.instance_id:
        return False
    if consequence.kind == TeardownKind.DELETE_RESOURCE:
        # A copy not measured on its tier's mount may still be on it: the least-surviving reading.
        return bool(consequence.tier) and consequence.tier in (copy.tier["name"], copy.tier.get("path_tier"))
    return profile.loses(copy.tier, "release" if consequence.kind == TeardownKind.RELEASE else "shutdown")


def wiped_by(consequence: Consequence, copy: Copy, profile) -> bool:
    """What a consequence that has happened wiped for good: beside `destroys`, which counts what one in
    flight would lose. A stop wipes only a tier that does not survive a stop; what only the release
    clock threatens stays on the stopped box (and `in_flight` keeps counting it as lost meanwhile)."""
    if copy.gone or copy.instance_id is None or copy.instance_id != consequence.instance_id:
        return False
    if consequence.kind == TeardownKind.SHUTDOWN:
        return copy.tier["survives"].get("stop") is False
    return destroys(consequence, copy, profile)


def in_flight(run, on_box: list[Consequence], exclude_request_id: int | None = None) -> list[Consequence]:
    """Consequences that count as already happened for this run's copies.

    on_box: the box's consequences in flight (delivery.facts loads them once for all its runs);
    each run keeps those on the box, and of evidence deletions only its own.
    """
    return [
        c
        for c in on_box
        if c.request_id != exclude_request_id and (c.kind != TeardownKind.DELETE_EVIDENCE or c.run_id == run.pk)
    ]


def candidates(run, consequences: list[Consequence], copies: list[Copy] | None = None) -> Verdict:
    """From the database only: verified, present copies that none of the consequences destroys."""
    verdict = Verdict(run)
    profile = run.instance.profile
    for copy in copies if copies is not None else copies_of(run):
        killers = [c for c in consequences if destroys(c, copy, profile)]
        if copy.gone:
            verdict.notes.append(f"{copy.label} {copy.gone}")
        elif not copy.verified:
            verdict.notes.append(f"{copy.label} was never verified")
        elif killers:
            verdict.notes.append(f"{copy.label} is lost by " + ", ".join(k.describe() for k in killers))
        else:
            verdict.survivors.append(copy)
    verdict.survivors.sort(key=lambda copy: PREFERENCE.index(copy.location))
    return verdict


def survivors(run, consequences: list[Consequence], rehash=None, copies: list[Copy] | None = None) -> Verdict:
    """The copies that survive; with rehash(run, copies) -> {location: problem or None}, only those
    re-hashed intact where they live count (the first intact one suffices)."""
    verdict = candidates(run, consequences, copies)
    if rehash is None or not verdict.survivors:
        return verdict
    problems = rehash(run, verdict.survivors)
    intact = [copy for copy in verdict.survivors if problems.get(copy.location, "not re-hashed") is None]
    for copy in verdict.survivors:
        if copy.location in problems and problems[copy.location] is not None:
            verdict.notes.append(f"{copy.label} does not count: {problems[copy.location]}")
    verdict.survivors = intact
    return verdict


def touched(run, consequence: Consequence, copies: list[Copy] | None = None) -> list[Copy]:
    """Present copies of this run that the consequence destroys."""
    profile = run.instance.profile
    copies = copies if copies is not None else copies_of(run)
    return [copy for copy in copies if not copy.gone and destroys(consequence, copy, profile)]
