"""What the instance page shows for DELIVER: each consequence with its own level and custody check."""

from custody.copies import copies_of
from custody.models import EvidenceLocation
from delivery import checks
from delivery.evidence import Consequence as Planned
from delivery.evidence import candidates, in_flight
from delivery.facts import load
from delivery.levels import consequence_of
from delivery.models import OPEN_TEARDOWN, TeardownKind

# The exports a box's page lists (the unkept first); the rest are counted, and listed on ?exports=all: the
# page stays the same size from 10 to 1,000 runs on its box (issue 49).
SHOWN_EXPORTS = 25


def teardown_panel(instance, all_exports: bool = False) -> dict:
    """A preview from the database (no SSH, no re-hash): the request re-checks in full."""
    consequences = []
    facts = load([instance])[instance.pk]
    shutdown, release = Planned(TeardownKind.SHUTDOWN, instance.pk), Planned(TeardownKind.RELEASE, instance.pk)
    for kind, snapshot in (
        (TeardownKind.SHUTDOWN, checks.shutdown_checks(instance, shutdown, deep=False, facts=facts)),
        (TeardownKind.RELEASE, checks.release_checks(instance, release, False, False, deep=False, facts=facts)),
    ):
        consequences.append(
            {"kind": kind, "label": kind.label, "consequence": consequence_of(kind, instance), "check": snapshot}
        )
    # Those without a counting verified copy first: at team scale the one that matters is not the 12th.
    exports = sorted((_export(run, facts.flight) for run in facts.exported), key=lambda export: bool(export["copies"]))
    return {
        "consequences": consequences,
        "deletion": consequence_of(TeardownKind.DELETE_EVIDENCE, instance),
        "locations": EvidenceLocation.choices,
        "exports": exports if all_exports else exports[:SHOWN_EXPORTS],
        "exports_total": len(exports),
        "listed_all": all_exports,
        "exports_hidden": 0 if all_exports else max(0, len(exports) - SHOWN_EXPORTS),
        "kept": sum(1 for export in exports if export["copies"]),
        "unkept": [export for export in exports if not export["copies"]],
        "hold": facts.hold,
        # What the box runs, measured once for the whole page: its own runs and nodes of others', and
        # sweep cells still to start (the page once said "Nothing of ours runs on it" beside "still live").
        "live": facts.live,
        "queued": facts.queued,
        "open_requests": instance.teardown_requests.filter(status__in=OPEN_TEARDOWN).select_related("requester"),
        "recent_requests": instance.teardown_requests.select_related("requester")[:10],
    }


def _export(run, flight) -> dict:
    """Each copy of one sealed export: where, which tier, verified, and whether it still counts."""
    copies = copies_of(run)
    counting = {copy.location for copy in candidates(run, in_flight(run, flight), copies).survivors}
    rows = [
        {
            "key": copy.location,
            "label": EvidenceLocation(copy.location).label,
            "tier": copy.tier["name"],
            "present": not copy.gone,
            "counts": copy.location in counting,
            "state": copy.gone or ("verified" if copy.verified else "not verified"),
        }
        for copy in copies
    ]
    return {"run": run, "copies": [r["label"] for r in rows if r["counts"]], "locations": rows}
