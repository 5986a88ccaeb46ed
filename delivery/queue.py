"""The approval queue: pending requests re-checked from the database, stale ones said to be so."""

from dataclasses import dataclass

from delivery import checks
from delivery.facts import load


@dataclass
class Waiting:
    request: object
    fresh: dict  # the check re-evaluated now (database only: no SSH, no re-hash)

    @property
    def approvable(self) -> bool:
        return not self.fresh["blocking"]  # failing items that no approver may waive

    @property
    def why_not(self) -> str:
        return checks.refusal(self.fresh)


def waiting(requests) -> list[Waiting]:
    """Each pending request with its check as it stands now; stale ones do not wait for approval.

    The boxes' facts are loaded together: the queue's queries do not grow with its length.
    """
    requests = list(requests)
    facts = load({request.instance_id: request.instance for request in requests}.values())
    return [Waiting(request, checks.checks_for(request, False, facts[request.instance_id])) for request in requests]


def approvable_count(requests) -> int:
    return sum(1 for item in waiting(requests) if item.approvable)
