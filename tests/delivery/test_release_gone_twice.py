"""A release is done when the provider says the box is gone twice, some seconds apart, and is read again
soon after. A provider that answered 404 once and listed the pod again had it marked released at once;
only the next provider reconciliation (every 600 s by default) said `still_billing`. The provider is the
RunPod stub speaking its documented API: its release accepted and nothing changed (`lies`), its status
answering 404 once (`flicker`)."""

from django.core import mail

from delivery import execution
from delivery.actions.decisions import do_approve_teardown
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownKind, TeardownStatus
from delivery.tasks import recheck_release
from tests.fleet.test_provider_apis import box, in_database
from tests.personas import join
from tests.provider_stub import RUNNING
from tests.waiting import deliver_notifications


def settle_fast(settings) -> None:
    settings.TEARDOWN_OFFLINE_WAIT, settings.TEARDOWN_GONE_POLL_SECONDS = 2, 0.2
    settings.TEARDOWN_GONE_CONFIRM_BY_PROVIDER = {"runpod": 0.3}


def released(alice, bob, project, target):
    request = do_request_teardown(target.pk, TeardownKind.RELEASE, "finished", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    return request


@in_database
def test_one_404_then_listed_again_is_not_released(alice, bob, project, provider_api, settings):
    settle_fast(settings)
    target = box(project, "runpod", "pod-flicker")
    provider_api.lies.add("pod-flicker")  # the DELETE answers 200 and the pod stays
    provider_api.flicker["pod-flicker"] = 1  # its status says 404 once, then lists it again
    request = released(alice, bob, project, target)
    assert execution.execute(request.pk) == "needs a person"  # before: "done" on the first 404
    request.refresh_from_db()
    target.refresh_from_db()
    assert request.status == TeardownStatus.NEEDS_ATTENTION and target.state == "running"
    assert "still reports the box (running)" in request.failure


@in_database
def test_a_release_really_gone_is_done_and_its_recheck_says_gone(alice, bob, project, provider_api, settings):
    settle_fast(settings)
    target = box(project, "runpod", "pod-really-gone")
    request = released(alice, bob, project, target)
    assert execution.execute(request.pk) == "done"
    assert recheck_release(request.pk) == "gone"
    request.refresh_from_db()
    assert request.status == TeardownStatus.DONE
    assert settings.TEARDOWN_RELEASE_RECHECK_SECONDS <= 60


@in_database
def test_a_box_listed_again_after_its_release_reopens_it_as_still_billing_and_tells_the_approvers(
    alice, bob, erin, project, provider_api, settings
):
    settle_fast(settings)
    join(project, erin)
    erin.email, alice.email, bob.email = "erin@example.com", "alice@example.com", "bob@example.com"
    for person in (erin, alice, bob):
        person.save()
    target = box(project, "runpod", "pod-back")
    request = released(alice, bob, project, target)
    assert execution.execute(request.pk) == "done"
    provider_api.states["pod-back"] = RUNNING  # the provider lists it again, billing
    mail.outbox.clear()
    assert recheck_release(request.pk) == "still billing"
    request.refresh_from_db()
    target.refresh_from_db()
    assert request.status == TeardownStatus.NEEDS_ATTENTION and "Still billing" in request.failure
    assert target.state == "unknown"  # no longer called released
    deliver_notifications()
    told = {address for message in mail.outbox for address in message.to if "Still billing" in message.body}
    assert {"alice@example.com", "erin@example.com"} <= told  # the approvers, whatever they chose
    assert recheck_release(request.pk) == "nothing to do"  # re-opened once
