"""What the instance page shows for DELIVER: each consequence with its own level and custody check."""

from custody import checks
from custody.evidence import present_copies, verified_copies
from custody.levels import consequence_of
from custody.models import OPEN_TEARDOWN, EvidenceLocation, TeardownKind
from runs.models import RunState


def teardown_panel(instance) -> dict:
    """A preview from the database (no SSH, no re-hash): the request re-checks in full."""
    profile, project = instance.profile, instance.project
    consequences = []
    for kind, snapshot in (
        (TeardownKind.SHUTDOWN, checks.shutdown_checks(instance, deep=False)),
        (TeardownKind.RELEASE, checks.release_checks(instance, False, False, deep=False)),
    ):
        consequences.append(
            {
                "kind": kind,
                "label": kind.label,
                "consequence": consequence_of(kind, profile, project),
                "check": snapshot,
            }
        )
    exports = []
    for run in instance.runs.filter(state=RunState.EXPORTED).select_related("project"):
        copies, _ = verified_copies(run, deep=False)
        present = present_copies(run)
        locations = [
            {"key": loc.value, "label": loc.label, "present": loc.value in present} for loc in EvidenceLocation
        ]
        exports.append({"run": run, "copies": [EvidenceLocation(c).label for c in copies], "locations": locations})
    return {
        "consequences": consequences,
        "deletion": consequence_of(TeardownKind.DELETE_EVIDENCE, profile, project),
        "exports": exports,
        "hold": checks.active_hold(instance),
        "open_requests": instance.teardown_requests.filter(status__in=OPEN_TEARDOWN).select_related("requester"),
        "recent_requests": instance.teardown_requests.select_related("requester")[:10],
    }
