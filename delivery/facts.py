"""What the custody checks read about a box, loaded in a fixed number of queries for any number of boxes.

The checks of one request and the approval queue's re-checks of every pending request read the
same facts the same way; loading them together keeps a page's queries flat as requests grow.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Prefetch, Q
from django.utils import timezone

from custody.models import CustodyRecord, CustodyStatus
from delivery.evidence import IN_FLIGHT, Consequence
from delivery.models import ReleaseHold, TeardownKind, TeardownRequest, TeardownStatus
from fleet.models import InstanceState
from runs.models import LIVE_STATES, UNCLOSED_STATES, Run, RunState, WatchLease


@dataclass
class BoxFacts:
    live: list[str] = field(default_factory=list)  # run ids
    queued: list[str] = field(default_factory=list)  # sweep cells waiting to start on the box (run ids)
    unclosed: list[str] = field(default_factory=list)  # run ids whose active/ is not closed
    hold: ReleaseHold | None = None
    watched: bool = False  # a watcher holds an unexpired lease
    exported: list[Run] = field(default_factory=list)  # sealed exports, verified records prefetched
    flight: list[Consequence] = field(default_factory=list)  # consequences in flight on the box


def verified_first(runs):
    """Runs with their verified custody records, newest first (evidence.latest_verified reads them)."""
    records = CustodyRecord.objects.filter(status=CustodyStatus.VERIFIED).order_by("-verified_at", "-id")
    runs = runs.select_related("project", "instance")
    return runs.prefetch_related(Prefetch("custody_records", queryset=records, to_attr="verified_records"))


def load(instances) -> dict[int, BoxFacts]:
    """BoxFacts for each instance, keyed by its id."""
    facts = {instance.pk: BoxFacts() for instance in instances}
    ids = list(facts)
    states = Run.objects.filter(instance_id__in=ids).order_by("pk")
    # A live run holds its own box, and every other box running a node of it (a run over several boxes);
    # a sweep's cell not yet started is a run the box owes (released, it fails at its preflight): one
    # query for all, a row per node.
    holding = Q(state__in=LIVE_STATES) | Q(state=RunState.DRAFT, sweep__isnull=False)
    live = Run.objects.filter(Q(instance_id__in=ids) | Q(peers__instance_id__in=ids), holding)
    for own, peer, run_id, state in live.order_by("pk").values_list(
        "instance_id", "peers__instance_id", "run_id", "state"
    ):
        for box in (own, peer):
            found = (facts[box].queued if state == RunState.DRAFT else facts[box].live) if box in facts else [run_id]
            if run_id not in found:
                found.append(run_id)
    unclosed = states.filter(state__in=UNCLOSED_STATES, active_closed_at__isnull=True)
    for instance_id, run_id in unclosed.values_list("instance_id", "run_id"):
        facts[instance_id].unclosed.append(run_id)
    for hold in ReleaseHold.objects.filter(instance_id__in=ids, retired_at__isnull=True).order_by("pk"):
        facts[hold.instance_id].hold = facts[hold.instance_id].hold or hold
    for lease in WatchLease.objects.filter(instance_id__in=ids, expires_at__gt=timezone.now()):
        facts[lease.instance_id].watched = True
    for run in verified_first(states.filter(state=RunState.EXPORTED)):
        facts[run.instance_id].exported.append(run)
    for instance_id, consequences in _flight(instances).items():
        facts[instance_id].flight = consequences
    return facts


def _flight(instances) -> dict[int, list[Consequence]]:
    """Per box: its requests in flight (by pk), then, while it stays stopped, its newest done shutdown."""
    ids = [instance.pk for instance in instances]
    on_box = Q(instance_id__in=ids) & ~Q(kind=TeardownKind.DELETE_EVIDENCE)
    deletions = Q(kind=TeardownKind.DELETE_EVIDENCE, run__instance_id__in=ids)
    found = defaultdict(list)
    for request in TeardownRequest.objects.filter(on_box | deletions, status__in=IN_FLIGHT).select_related(
        "run", "resource"
    ):
        box = request.run.instance_id if request.kind == TeardownKind.DELETE_EVIDENCE else request.instance_id
        found[box].append(Consequence.of(request))
    for consequences in found.values():
        consequences.sort(key=lambda consequence: consequence.request_id)
    stopped = [instance.pk for instance in instances if instance.state == InstanceState.STOPPED]
    done = TeardownRequest.objects.filter(
        instance_id__in=stopped, kind=TeardownKind.SHUTDOWN, status=TeardownStatus.DONE
    )
    newest = {}
    for request in done.order_by("pk"):
        newest[request.instance_id] = request
    for instance_id, request in newest.items():
        found[instance_id].append(Consequence.of(request))
    return found
