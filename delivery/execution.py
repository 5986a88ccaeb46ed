"""Carrying out an approved teardown request: one execution, then the offline check.

No Celery here: `delivery.tasks.execute_teardown` calls `execute` and retries on EvidenceBusy.
"""

import time

from django.conf import settings

from delivery import checks
from delivery.actions.attention import do_need_person, do_reopen_release
from delivery.actions.execution import do_await_attestation, do_begin_execution, do_fail_execution, do_finish_execution
from delivery.models import TeardownKind, TeardownRequest, TeardownStatus
from delivery.removal import remove_copy
from fleet.node_client import transport_for
from fleet.provider_calls import (
    NeedsAttestation,
    by_api,
    provider_says_stopped,
    provider_state,
    resource_console_steps,
)
from fleet.provider_calls import execute as provider_execute
from node.transport import TransportError, Unreachable
from providers.http import ProviderError
from providers.interface import GONE, UNKNOWN


def _poll(seen, interval: float):
    """seen() until it is truthy or TEARDOWN_OFFLINE_WAIT has passed; its last answer."""
    deadline = time.monotonic() + settings.TEARDOWN_OFFLINE_WAIT
    while not (answer := seen()) and time.monotonic() <= deadline:
        time.sleep(interval)
    return answer


def _offline(instance) -> bool:
    """Poll until the box stops answering (or the provider says stopped), up to the configured wait."""

    def down() -> bool:
        if provider_says_stopped(instance):
            return True
        try:
            with transport_for(instance) as transport:
                transport.run(["true"], timeout=settings.SSH_COMMAND_TIMEOUT)
        except Unreachable:
            return True
        except TransportError:
            pass  # an unknown host key or a refused credential proves nothing about power
        return False

    return _poll(down, 2)


def gone_confirm_seconds(profile_key: str) -> float:
    return settings.TEARDOWN_GONE_CONFIRM_BY_PROVIDER.get(profile_key, settings.TEARDOWN_GONE_CONFIRM_SECONDS)


def _still_listed(instance) -> str | None:
    """Poll the provider until it says the box is gone (404, destroyed, terminated; vast.ai's
    `instances: null`) on two reads some seconds apart, up to TEARDOWN_OFFLINE_WAIT: None when gone,
    else the state it last reported. A 200 to a DELETE is not gone: RunPod and vast.ai destroy
    eventually, Lambda can leave a box in Alert; and one 404 is not gone either (a provider answered
    404 once and listed the pod again)."""
    states = []

    def gone() -> bool:
        states.append(provider_state(instance))
        if states[-1] != GONE:
            return False
        time.sleep(gone_confirm_seconds(instance.profile_key))
        states.append(provider_state(instance))
        return states[-1] == GONE

    return None if _poll(gone, settings.TEARDOWN_GONE_POLL_SECONDS) else states[-1]


def recheck_release(request_id: int) -> str:
    """A release done by API, read again soon after: still gone, or listed again (still billing)."""
    request = TeardownRequest.objects.select_related("instance").filter(pk=request_id).first()
    if request is None or request.status != TeardownStatus.DONE or request.kind != TeardownKind.RELEASE:
        return "nothing to do"
    state = provider_state(request.instance)
    if state in (GONE, UNKNOWN):
        return "gone" if state == GONE else "unknown"  # unknown: the provider reconciliation reads it again
    do_reopen_release(request.pk, state)
    return "still billing"


def _finish_attested(request_id: int) -> bool:
    """A console consequence a person did: only the offline check remains. False when none waits."""
    attested = TeardownRequest.objects.filter(pk=request_id, status=TeardownStatus.EXECUTING).exclude(attested_by=None)
    request = attested.select_related("instance", "attested_by").first()
    if request is None:
        return False
    # Only a shutdown or a release takes the box offline; a deleted volume or copy leaves it up.
    takes_box_down = request.kind in (TeardownKind.SHUTDOWN, TeardownKind.RELEASE)
    offline = _offline(request.instance) if takes_box_down else None
    answer = {"attested_by": request.attested_by.get_username()}
    if request.kind == TeardownKind.RELEASE and offline is False:
        # Released means gone: a box that still answers is not released, whatever the attestation says.
        why = f"{request.attested_by.get_username()} attested the release, but the box still answers SSH"
        do_need_person(request.pk, answer, f"{why}: it is not released and may still bill. Check the console.")
        return True
    do_finish_execution(request.pk, answer, offline)
    return True


def measured(request_id: int) -> "checks.Measured | None":
    """The slow measurements of an approved request's checks, taken outside any transaction (None when it
    is not approved: nothing to measure)."""
    request = TeardownRequest.objects.select_related("instance__project", "run", "resource").get(pk=request_id)
    if request.status != TeardownStatus.APPROVED:
        return None
    taken = checks.Measured()
    checks.checks_for(request, deep=taken)
    return taken


def execute(request_id: int) -> str:
    """What happened: attested, nothing to do, deleted, awaiting attestation, failed or done.

    Raises EvidenceBusy while another consequence executes on the same box.
    """
    if _finish_attested(request_id):
        return "attested"
    request = do_begin_execution(request_id, measured(request_id))
    if request is None:
        return "nothing to do"  # not approved, already claimed, or refused by the re-check
    try:
        if request.kind == TeardownKind.DELETE_EVIDENCE:
            do_finish_execution(request.pk, remove_copy(request.run, request.location))
            return "deleted"
        if request.kind == TeardownKind.DELETE_RESOURCE:
            raise NeedsAttestation(resource_console_steps(request.resource))
        answer = provider_execute(request.instance, request.kind, str(request.idempotency_key))
    except NeedsAttestation as steps:
        do_await_attestation(request.pk, steps.steps)
        return "awaiting attestation"
    except (ProviderError, TransportError, OSError) as exc:
        do_fail_execution(request.pk, str(exc))
        return "failed"
    state = (
        _still_listed(request.instance)
        if request.kind == TeardownKind.RELEASE and by_api(request.instance, request.kind)
        else None
    )
    if state is not None:
        why = f"{request.instance.profile.name} accepted the release but still reports the box ({state}) after "
        do_need_person(request.pk, answer, why + f"{settings.TEARDOWN_OFFLINE_WAIT} s: check the console.")
        return "needs a person"
    offline = _offline(request.instance) if request.kind == TeardownKind.SHUTDOWN else None
    do_finish_execution(request.pk, answer, offline)
    return "done"
