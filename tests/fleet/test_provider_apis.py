"""The provider adapters against stubs written from each provider's documentation: exact requests,
status read from the provider's own field, bounded retries on 429/5xx, and timeouts that re-ask."""

import base64
import json
import urllib.error
import urllib.request

import pytest

from delivery import execution
from delivery.actions.decisions import do_approve_teardown
from delivery.actions.execution import do_retry_execution
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownKind, TeardownStatus
from fleet import provider_calls as calls
from fleet.models import Instance
from providers import APIS
from providers.interface import GONE, RUNNING, STOPPED, UNKNOWN
from providers.reading import read_state
from tests import factories
from tests.provider_stub import API_KEY, api_credential


def in_database(test):
    """Consequences run in this process inside durable transactions; no worker runs one beside them."""
    return pytest.mark.usefixtures("no_worker")(pytest.mark.django_db(transaction=True)(test))


def box(project, profile_key: str, provider_id: str) -> Instance:
    return factories.box(
        name=f"{project.slug}-{provider_id}-20261130",
        project=project,
        profile_key=profile_key,
        provider_id=provider_id,
        api_credential=api_credential(project),
        state="running",
    )


@pytest.mark.parametrize(
    ("provider", "http_status", "body", "state"),
    [
        ("runpod", 200, {"status": "RUNNING", "name": "stopped-exited-terminated"}, RUNNING),
        ("runpod", 200, {"status": "PROVISIONING"}, RUNNING),  # allocated: it bills
        ("runpod", 200, {"status": "EXITED"}, STOPPED),
        ("runpod", 200, {"status": "TERMINATED"}, GONE),
        ("runpod", 404, {"title": "Not Found", "status": 404, "detail": "pod not found"}, GONE),
        # A 404 that is not RunPod's own (a retired v1 base, a wrong path) is not a pod gone.
        ("runpod", 404, {"error": "404 page not found"}, UNKNOWN),
        ("runpod", 404, {"message": "Pod not found"}, UNKNOWN),  # v1's shape: not v2's word
        ("runpod", 200, {"status": "ERROR"}, UNKNOWN),
        ("runpod", 200, {"desiredStatus": "EXITED"}, UNKNOWN),  # v1's field
        ("runpod", 200, ["EXITED"], UNKNOWN),
        ("vastai", 200, {"instances": {"actual_status": "running", "status_msg": "was stopped"}}, RUNNING),
        ("vastai", 200, {"instances": {"actual_status": "exited"}}, STOPPED),
        ("vastai", 200, {"instances": None}, GONE),
        ("vastai", 200, {"instances": {"actual_status": None}}, UNKNOWN),
        ("lambda", 200, {"data": {"status": "active", "name": "terminated-run"}}, RUNNING),
        ("lambda", 200, {"data": {"status": "terminating"}}, STOPPED),
        ("lambda", 404, {"error": {"code": "global/object-does-not-exist"}}, GONE),
        ("lambda", 404, {"error": "not found"}, UNKNOWN),  # not Lambda's documented not-found
        ("lambda", 200, {"data": {"status": "preempted"}}, STOPPED),
        ("lambda", 200, {"status": "terminated"}, UNKNOWN),  # not where Lambda puts it
        ("paperspace", 200, {"state": "ready"}, RUNNING),
        ("paperspace", 200, {"state": "off"}, STOPPED),
        ("paperspace", 200, {"state": 7}, UNKNOWN),
    ],
)
def test_a_status_answer_is_read_from_the_providers_own_field(provider, http_status, body, state):
    assert read_state(APIS[provider], http_status, body) == state


@pytest.mark.parametrize(
    ("profile_key", "kind", "method", "path", "body"),
    [
        ("runpod", "shutdown", "POST", "/v2/pods/{id}/action", {"action": "stop"}),
        ("runpod", "release", "DELETE", "/v2/pods/{id}", None),
        ("vastai", "shutdown", "PUT", "/api/v0/instances/{id}/", {"state": "stopped"}),
        ("vastai", "release", "DELETE", "/api/v0/instances/{id}/", None),
        ("lambda", "release", "POST", "/api/v1/instance-operations/terminate", {"instance_ids": ["{id}"]}),
        ("paperspace", "shutdown", "PATCH", "/v1/machines/{id}/stop", None),
        ("paperspace", "release", "DELETE", "/v1/machines/{id}", None),
    ],
)
@in_database
def test_each_consequence_sends_the_documented_request_and_the_status_follows(
    project, provider_api, profile_key, kind, method, path, body
):
    ident = {"shutdown": "8801", "release": "8802"}[kind] if profile_key == "vastai" else f"{profile_key}-{kind}"
    target = box(project, profile_key, ident)  # vast.ai's instance ids are integers (its Instance.id)
    assert calls.provider_state(target) == RUNNING
    calls.execute(target, kind, "key-1")
    sent = [r for r in provider_api.requests if r["method"] != "GET"]
    assert [(r["method"], r["path"]) for r in sent] == [(method, path.replace("{id}", target.provider_id))]
    [call] = provider_api.calls_for(target.provider_id)
    expected_body = json.loads(json.dumps(body).replace("{id}", target.provider_id)) if body else None
    assert call["body"] == expected_body
    assert calls.provider_state(target) in ({STOPPED} if kind == "shutdown" else {GONE, STOPPED})
    assert calls.provider_says_stopped(target) is True


def _raw(stub, method, path, body=None, auth=f"Bearer {API_KEY}") -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(stub.url + path, data=data, method=method)  # noqa: S310 (the stub, http)
    request.add_header("Authorization", auth)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_stubs_refuse_what_the_providers_refuse(provider_api):
    """So a wrong scheme, body or method in an adapter fails a test instead of passing silently."""
    basic = "Basic " + base64.b64encode(f"{API_KEY}:".encode()).decode()
    assert _raw(provider_api, "GET", "/api/v1/instances/i-1") == 401  # Lambda wants basic auth
    assert _raw(provider_api, "GET", "/api/v1/instances/i-1", auth=basic) == 200
    assert _raw(provider_api, "GET", "/v2/pods/p-1", auth=basic) == 401  # RunPod wants a Bearer key
    assert _raw(provider_api, "PUT", "/api/v0/instances/71/", {"state": "off"}) == 400
    assert _raw(provider_api, "PUT", "/api/v0/instances/71/", {"state": "stopped", "force": 1}) == 400
    assert _raw(provider_api, "POST", "/api/v1/instance-operations/terminate", {"instance_ids": []}, basic) == 400
    assert _raw(provider_api, "POST", "/v2/pods/p-1/action", {"action": "stop", "reason": "x"}) == 422  # v2: closed
    assert _raw(provider_api, "POST", "/v2/pods/p-1/action", {"action": "reset"}) == 422  # not in PodAction
    assert _raw(provider_api, "POST", "/v1/pods/p-1/stop") == 404  # v1: retired
    assert _raw(provider_api, "POST", "/v1/machines/m-1/stop") == 405  # Paperspace stops with PATCH
    assert _raw(provider_api, "POST", "/v2/pods/p-1/terminate") == 404  # RP14: not an endpoint
    assert provider_api.calls == []


@in_database
def test_a_rate_limit_is_waited_out_and_the_consequence_happens_once(project, provider_api):
    target = box(project, "runpod", "pod-429")
    provider_api.fail_next("pod-429", 429, 503)
    answer = calls.execute(target, TeardownKind.RELEASE, "key-1")
    assert answer["http_status"] == 204
    assert [r["method"] for r in provider_api.requests] == ["DELETE"] * 3
    assert len(provider_api.calls_for("pod-429", "terminate")) == 1


@in_database
def test_a_provider_that_keeps_failing_is_a_clear_failure_and_nothing_happened(project, provider_api, settings):
    target = box(project, "vastai", "8803")
    provider_api.fail_next("8803", *[503] * (settings.PROVIDER_API_RETRIES + 1))
    with pytest.raises(calls.ProviderError) as failure:
        calls.execute(target, TeardownKind.SHUTDOWN, "key-1")
    assert "vastai answered 503 3 times" in str(failure.value)
    assert "the provider then said running: not done, retry" in str(failure.value)
    assert provider_api.calls_for("8803") == []


@in_database
def test_a_timeout_re_asks_the_provider_before_calling_it_failed(project, provider_api, settings):
    settings.PROVIDER_API_TIMEOUT = 1
    lost = box(project, "lambda", "lam-timeout")
    provider_api.fail_next("lam-timeout", "timeout")  # nothing happened
    with pytest.raises(calls.ProviderError, match=r"did not answer within 1 s .*said running: not done, retry"):
        calls.execute(lost, TeardownKind.RELEASE, "key-1")
    assert provider_api.calls_for("lam-timeout") == []

    landed = box(project, "lambda", "lam-late")
    provider_api.fail_next("lam-late", "late")  # it happened; only the answer was lost (LAM14)
    answer = calls.execute(landed, TeardownKind.RELEASE, "key-2")
    assert "the provider then said gone" in answer["note"]
    assert len(provider_api.calls_for("lam-late", "terminate")) == 1


@in_database
def test_a_release_of_a_box_the_provider_does_not_know_is_not_called_done(project, provider_api):
    target = box(project, "paperspace", "ps-gone")
    provider_api.states["ps-gone"] = GONE  # a wrong provider id, or released in the console
    with pytest.raises(calls.ProviderError, match="does not know ps-gone"):
        calls.execute(target, TeardownKind.RELEASE, "key-1")


@in_database
def test_a_failed_execution_is_retried_with_the_same_key_and_happens_once(alice, bob, project, provider_api):
    target = box(project, "runpod", "pod-retry")
    provider_api.fail_next("pod-retry", 503, 503, 503)  # the call and its retries; the re-ask says running
    request = do_request_teardown(target.pk, TeardownKind.RELEASE, "finished", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    assert execution.execute(request.pk) == "failed"
    request.refresh_from_db()
    assert request.status == TeardownStatus.FAILED and "runpod answered 503 3 times" in request.failure
    assert execution.execute(request.pk) == "nothing to do"  # a failed request never runs by itself

    do_retry_execution(request.pk, actor=alice)
    assert execution.execute(request.pk) == "done"
    request.refresh_from_db()
    assert request.status == TeardownStatus.DONE and request.attempts == 2
    assert len(provider_api.calls_for("pod-retry", "terminate")) == 1


@in_database
@pytest.mark.parametrize(
    ("provider", "target", "lingering", "outcome"),
    [
        ("runpod", "pod-late", 2, "done"),  # reads as running twice after DELETE, then 404
        ("vastai", "8804", 0, "done"),  # its stub shows the destroyed box once ("exited"), then null
        ("runpod", "pod-stays", 1000, "needs a person"),  # keeps listing the pod after DELETE
        ("lambda", "lam-alert", 0, "needs a person"),  # the terminate left the box in Alert
    ],
)
def test_released_means_the_provider_reports_it_gone(
    alice, bob, project, provider_api, settings, provider, target, lingering, outcome
):
    """API releases were done on the 200. RunPod and vast.ai destroy eventually, Lambda can
    leave a box in Alert: the release stays executing while a bounded poll asks the provider."""
    settings.TEARDOWN_OFFLINE_WAIT, settings.TEARDOWN_GONE_POLL_SECONDS = 2, 0.2
    released = box(project, provider, target)
    provider_api.linger[target] = lingering
    if provider == "lambda":
        provider_api.alert.add(target)
    request = do_request_teardown(released.pk, TeardownKind.RELEASE, "finished", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    assert execution.execute(request.pk) == outcome
    request.refresh_from_db()
    released.refresh_from_db()
    if outcome == "done":
        assert request.status == TeardownStatus.DONE and released.state == "released"
    else:
        assert request.status == TeardownStatus.NEEDS_ATTENTION and released.state == "running"
        assert "check the console" in request.failure
