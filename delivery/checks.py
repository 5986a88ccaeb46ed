"""Custody checks for each consequence, evaluated at request time and again at execution time.

Each returns a snapshot {"ok", "items": [{"label", "ok", "detail"}]} that is stored on the request;
execution compares its fresh snapshot with the approved one and refuses when the answer changed.
"""

from dataclasses import asdict, dataclass

from custody.copies import copies_of, present_copies
from custody.models import EvidenceLocation
from custody.rehash import rehash
from delivery.evidence import Consequence, in_flight, survivors, touched
from delivery.facts import BoxFacts, load
from delivery.levels import resource_data_lost
from delivery.models import TeardownKind
from fleet.models import InstanceState
from fleet.node_client import NodeClient
from node.transport import TransportError
from platforms.layout import resolve_home


@dataclass
class Item:
    label: str
    ok: bool
    detail: str
    waivable: bool = False  # an L3 approver may waive it at approval (unclosed active/ dirs)
    unconfirmed: bool = False  # not measured (the box did not answer in time): says nothing of custody


def _snapshot(items: list[Item]) -> dict:
    blocking = [item.label for item in items if not item.ok and not item.waivable]
    return {
        "ok": all(item.ok for item in items),
        "blocking": blocking,
        "items": [asdict(item) for item in items],
    }


def _no_live_run(facts: BoxFacts) -> Item:
    live, queued = facts.live, facts.queued
    said = [", ".join(live) + " still live"] if live else []
    said += [", ".join(queued) + " queued to start here (sweep cells)"] if queued else []
    return Item("No live run on the box", not said, "; ".join(said) or "none live or queued")


def _node_idle(instance) -> Item:
    root = instance.data_root
    try:
        with NodeClient(instance) as node:  # resolves $HOME once, as every node session does
            busy = node.idle(resolve_home(root, node.home))
    except TransportError as exc:
        detail = f"could not confirm the box is idle: {exc}"
        return Item("No writer under the run roots", False, detail, unconfirmed=True)
    detail = "; ".join(f"pid {b['pid']} {b['why']}" for b in busy[:5]) or f"nothing writes under {root}"
    return Item("No writer under the run roots", not busy, detail)


class Measured:
    """The slow measurements of one request's checks (the box's idle scan over SSH, re-hashes where its
    copies live), taken once outside any lock and kept, so the checks judged again under the lock read
    them with the database as it is then (who else is in flight): a slow box never holds the row, and
    two consequences judged at once still see each other. Passed where `deep` is (it is truthy)."""

    def __init__(self):
        self.idle: Item | None = None
        self.hashes: dict[int, dict[str, str | None]] = {}

    def idle_of(self, instance) -> Item:
        if self.idle is None:
            self.idle = _node_idle(instance)
        return self.idle

    def rehash(self, run, copies) -> dict[str, str | None]:
        """rehash's answer, measured once per copy: the first intact copy suffices, as there."""
        known = self.hashes.setdefault(run.pk, {})
        cached = {copy.location: known[copy.location] for copy in copies if copy.location in known}
        if any(problem is None for problem in cached.values()):
            return cached
        missing = [copy for copy in copies if copy.location not in known]
        if missing:
            known.update(rehash(run, missing))
        return {copy.location: known[copy.location] for copy in copies if copy.location in known}


def _idle_item(instance, deep) -> Item:
    return deep.idle_of(instance) if isinstance(deep, Measured) else _node_idle(instance)


def _no_expecting_watcher(facts: BoxFacts) -> Item:
    expecting = facts.watched and bool(facts.live)
    return Item("No watcher expecting progress", not expecting, "a watcher holds the lease" if expecting else "none")


def evidence_items(facts: BoxFacts, planned: Consequence, deep: bool, runs: list | None = None) -> list[Item]:
    """For each sealed export the consequence touches: does a verified copy survive it, and every
    other consequence in flight? deep: re-hash the surviving copies where they live."""
    items = []
    for run in facts.exported if runs is None else runs:
        copies = copies_of(run)  # read once: what the consequence touches and what survives it
        lost = touched(run, planned, copies)
        if not lost:
            continue
        consequences = [planned, *in_flight(run, facts.flight, planned.request_id)]
        rehasher = deep.rehash if isinstance(deep, Measured) else rehash
        verdict = survivors(run, consequences, rehasher if deep else None, copies)
        detail = "loses " + ", ".join(copy.label for copy in lost) + "; " + verdict.detail()
        items.append(Item(f"A verified copy of {run.run_id} survives", verdict.ok, detail))
    return items


def _unclosed_active(facts: BoxFacts, waive_active: bool) -> list[Item]:
    unclosed = facts.unclosed
    if not unclosed:
        return []
    detail = "active/ not closed: " + ", ".join(unclosed) + ("; waived by the approver" if waive_active else "")
    return [Item("Every active/ directory closed or waived", waive_active, detail, waivable=True)]


def _not_released(instance) -> Item:
    """A released box is gone: no shutdown or release of it can run (found by the stateful test)."""
    released = instance.state == InstanceState.RELEASED
    return Item("The box is not already released", not released, "released" if released else instance.state)


def _facts_of(instance, facts: BoxFacts | None) -> BoxFacts:
    return facts if facts is not None else load([instance])[instance.pk]


def shutdown_checks(
    instance, planned: Consequence, waive_active: bool = False, deep: bool = True, facts: BoxFacts | None = None
) -> dict:
    """deep: also ask the node (over SSH) whether anything still writes under the run roots."""
    facts = _facts_of(instance, facts)
    items = [_not_released(instance), _no_live_run(facts), _no_expecting_watcher(facts)]
    if deep and not instance.profile.is_local and instance.state != InstanceState.RELEASED:
        items.append(_idle_item(instance, deep))
    items += evidence_items(facts, planned, deep)
    if instance.profile.loses(instance.measured_data_tier, "shutdown"):
        items += _unclosed_active(facts, waive_active)
    clock = release_clock(instance.profile)
    if clock:
        items.append(Item("Release clock", True, clock))
    return _snapshot(items)


def release_clock(profile) -> str:
    hours = profile.stopped_released_after_hours
    if hours is None:
        return ""
    lost = ", ".join(f"{t['name']} ({t['path']})" for t in profile.tiers if profile.loses(t, "release")) or "nothing"
    return f"a stopped box is released by {profile.name} after {hours} h, and with it: {lost}"


def release_checks(
    instance, planned: Consequence, waive_active: bool, retire_hold: bool, deep: bool = True, facts=None
) -> dict:
    """deep: re-hash each surviving copy where it lives instead of trusting its record."""
    facts = _facts_of(instance, facts)
    items = [_not_released(instance), _no_live_run(facts), *evidence_items(facts, planned, deep)]
    items += _unclosed_active(facts, waive_active)
    hold = facts.hold
    if hold:
        detail = f"“never release” hold by {hold.created_by}: {hold.reason}"
        items.append(Item("No “never release” hold", retire_hold, detail + ("; to be retired" if retire_hold else "")))
    profile = instance.profile
    lost = ", ".join(f"{t['name']} ({t['path']})" for t in profile.tiers if profile.loses(t, "release")) or "nothing"
    items.append(Item("What release destroys", True, lost))
    return _snapshot(items)


def deletion_checks(run, planned: Consequence, deep: bool = True, facts: BoxFacts | None = None) -> dict:
    label = EvidenceLocation(planned.location).label
    exists = planned.location in present_copies(run)
    items = [Item(f"The {label} exists", exists, "present" if exists else "already gone")]
    if exists:
        items += evidence_items(_facts_of(run.instance, facts), planned, deep, runs=[run])
    return _snapshot(items)


def checks_for(request, deep: bool = True, facts: BoxFacts | None = None) -> dict:
    """facts: the request's box, loaded together with others' (the approval queue); else loaded here."""
    planned = Consequence.of(request)
    if request.kind == TeardownKind.SHUTDOWN:
        return shutdown_checks(request.instance, planned, request.waive_active, deep, facts)
    if request.kind == TeardownKind.RELEASE:
        return release_checks(request.instance, planned, request.waive_active, request.retire_hold, deep, facts)
    if request.kind == TeardownKind.DELETE_RESOURCE:
        return resource_checks(request.resource, planned, deep, facts)
    return deletion_checks(request.run, planned, deep, facts)


def resource_checks(resource, planned: Consequence, deep: bool = True, facts: BoxFacts | None = None) -> dict:
    """Deleting a volume, filesystem or storage destroys the copies on the tier it is, as evidence
    deletion does: a verified copy of every export it holds must survive elsewhere."""
    exists = resource.deleted_at is None
    items = [Item(f"The {resource.facts.label} still exists", exists, "registered" if exists else "already deleted")]
    if exists:
        items += evidence_items(_facts_of(resource.instance, facts), planned, deep)
    lost = resource_data_lost(resource)
    items.append(Item("What deleting it destroys", True, "; ".join(lost) or "nothing stored"))
    return _snapshot(items)


def unconfirmed_only(snapshot: dict) -> str:
    """What could not be measured, in words, where that is all that blocks (a retry, not a refusal); ""
    otherwise."""
    failing = [item for item in snapshot["items"] if not item["ok"] and not item.get("waivable")]
    if not failing or not all(item.get("unconfirmed") for item in failing):
        return ""
    return "; ".join(f"{item['label']}: {item['detail']}" for item in failing)


def refusal(snapshot: dict) -> str:
    """What blocks, in words: each failing blocking check with its detail (empty: nothing blocks)."""
    failing = [i for i in snapshot["items"] if not i["ok"] and i["label"] in snapshot["blocking"]]
    return "; ".join(f"{item['label']}: {item['detail']}" for item in failing)
