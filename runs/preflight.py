"""What a preflight's report means: the one verdict, pure (no node, no database write, no task).

The node reports what it found (inputs, hashes, space, environment, GPUs, mounts); this says what
blocks a launch: inputs missing on the node, an environment that will not persist, a storage budget
that does not fit, GPUs that are absent or held, a declared tier that is not what the path is on.
Binding the identities and taking the GPU locks is left to the action that records the verdict."""

from django.conf import settings

from runs import hooks
from runs.budget import storage_budget
from runs.environment import environment_problems
from runs.gpus import gpu_problems
from runs.hardware import Declared, from_description, from_offer, hardware_problems
from runs.tiers import declared_tier_problem


def verdict(run, report: dict) -> tuple[dict, list[str]]:
    """The report as it is kept (with its storage budget) and the problems that block a launch."""
    environment = report.get("environment") or {}
    problems = [f"Missing {item['input']} on the node: {item['path']}" for item in report["missing"]]
    problems += environment_problems(environment, run.instance.profile.data["identity"]["persistent"])
    budget = storage_budget(run, report["space"], settings.STORAGE_MARGIN_FRACTION, settings.STORAGE_MARGIN_MIN_BYTES)
    problems += budget.problems()
    waived = run.gpu_holders_waived_by_id is not None
    problems += gpu_problems(run.gpus, environment, report.get("gpu_holders"), waived, report.get("gpu_inventory"))
    if run.gpus:  # what runs is what was rented: measured against the rent's offer or the box's page
        problems += hardware_problems(declared_hardware(run.instance), report.get("gpu_inventory"), run.gpu_accepted)
    tier = declared_tier_problem(run.instance.data_tier, report.get("mounts") or {})
    problems += [tier] if tier else []
    kept_hooks = hooks.record(run.instance.effective_hooks, report.get("hooks"))
    return {**report, "budget": budget.as_dict(), "hooks": kept_hooks}, problems


def declared_hardware(instance) -> Declared | None:
    """What the box's GPUs were said to be: the offer its rent created it onto, else its page's text."""
    rental = instance.rentals.exclude(offer={}).order_by("-pk").first()
    declared = from_offer(rental.offer, rental.pk) if rental is not None else None
    return declared or from_description(instance.gpu_description)
