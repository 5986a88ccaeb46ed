"""DELIVER's pages: the three buttons and evidence deletion over a selection, a request's page, its decision
(one request or a batch), attestation, retry, cancel and settle, a box's hold and cache cleanup, and a
project's waste opt-in."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_POST

from core.flash import perform
from delivery.actions.attention import do_resolve_attention
from delivery.actions.base import TeardownRefused
from delivery.actions.decisions import do_approve_teardown, do_cancel_teardown, do_reject_teardown
from delivery.actions.execution import do_attest_teardown, do_retry_execution
from delivery.actions.holds import do_place_hold
from delivery.actions.requests import do_file_teardown
from delivery.caches import do_request_cache_cleanup
from delivery.forms import EvidenceSelectionForm, TeardownRequestForm
from delivery.levels import consequence_of
from delivery.models import TeardownKind, TeardownRequest, TeardownStatus
from delivery.queue import waiting
from delivery.waste import do_set_waste_shutdown
from fleet.views import operated_instance
from projects.models import Project
from projects.roles import require


def _back_to_instance(pk):
    return redirect("instance-detail", pk=pk)


def _refused(request, form, pk) -> HttpResponse:
    """A teardown form that does not validate: its errors as one message, back on the box's page."""
    messages.error(request, " ".join(error for errors in form.errors.values() for error in errors))
    return _back_to_instance(pk)


def _decide(pk, decision: str, comment: str, actor, waive_active: bool = False):
    """One request approved or rejected by its action (its own checks, its own audit entry)."""
    if decision == "approve":
        return do_approve_teardown(pk, comment, waive_active, actor=actor)
    return do_reject_teardown(pk, comment, actor=actor)


DECISIONS = {"approve": "Approved.", "reject": "Rejected."}


@require_POST
@permission_required("projects.operate", raise_exception=True)
def teardown_create(request, pk):
    """One of the three buttons: kind comes from the button, never implied by another."""
    instance = operated_instance(request, pk)
    form = TeardownRequestForm(request.POST, instance=instance)
    if not form.is_valid():
        return _refused(request, form, pk)
    data = form.cleaned_data
    created = []

    def action():
        created.append(
            do_file_teardown(
                instance.pk,
                data["kind"],
                data["reason"],
                data.get("run"),
                data.get("location") or "",
                data.get("retire_hold", False),
                data.get("resource"),
                actor=request.user,
            )
        )

    if perform(request, action, "Request filed: checking the box before it goes to an approver."):
        return redirect(created[0])
    return _back_to_instance(pk)


@require_POST
@permission_required("projects.operate", raise_exception=True)
def teardown_select_evidence(request, pk):
    """Evidence deletion over the exports a person ticked: one request each under one batch, each checked
    on its own (one refused leaves the others filed); the person reads what was filed and what refused."""
    instance = operated_instance(request, pk)
    form = EvidenceSelectionForm(request.POST, instance=instance)
    if not form.is_valid():
        return _refused(request, form, pk)
    data, batch = form.cleaned_data, uuid.uuid4()
    filed, refused = [], []
    kind, reason, location = TeardownKind.DELETE_EVIDENCE, data["reason"], data["location"]
    for run in data["run"]:
        try:
            filed.append(do_file_teardown(pk, kind, reason, run, location, batch=batch, actor=request.user))
        except TeardownRefused as exc:
            refused.append(f"{run.run_id}: {' '.join(exc.messages)}")
    if filed:
        messages.success(request, f"{len(filed)} deletion request{pluralize(len(filed))} filed: checking the box.")
    if refused:
        messages.error(request, f"{len(refused)} refused — " + "; ".join(refused))
    return _back_to_instance(pk)


@require_POST
def teardown_decide_batch(request, batch):
    """Approve or reject every pending request of a batch, each on its own (its checks, its audit entry)."""
    requests = TeardownRequest.objects.visible_to(request.user).filter(batch=batch).pending().order_by("pk")
    if not requests:  # decided meanwhile (another tab, another approver): the queue says what is left
        messages.info(request, "Nothing of that batch is pending any more: it was decided meanwhile.")
        return redirect("approval-queue")
    decision = request.POST.get("decision")
    if decision not in DECISIONS:
        messages.error(request, "Choose approve or reject.")
        return redirect("approval-queue")
    comment = request.POST.get("comment", "")[:2000]
    done, refused = 0, []
    for item in requests:
        try:
            _decide(item.pk, decision, comment, request.user)
            done += 1
        except ValidationError as exc:
            refused.append(f"#{item.pk}: {' '.join(exc.messages)}")
    if done:
        messages.success(request, f"{done} request{pluralize(done)} {decision}d.")
    if refused:
        messages.error(request, "Not decided — " + "; ".join(refused))
    return redirect("approval-queue")


def teardown_detail(request, pk):
    requests = TeardownRequest.objects.visible_to(request.user).select_related("instance__project", "requester", "run")
    req = get_object_or_404(requests, pk=pk)
    profile, project = req.instance.profile, req.instance.project
    context = {
        "req": req,
        "consequence": consequence_of(req.kind, req.instance, req.resource),
        "waiting": waiting([req])[0] if req.status == TeardownStatus.PENDING else None,
        "profile": profile,
        "may_decide": request.user.has_perm("projects.approve_cost", project) and request.user.pk != req.requester_id,
        "is_requester": request.user.pk == req.requester_id,
        "can_settle": request.user.has_perm("projects.approve_cost", project),
        "can_operate": request.user.has_perm("projects.operate", project),
        "audit": req.auditentry_set.select_related("actor").order_by("at", "id"),
        "batch": list(requests.filter(batch=req.batch).exclude(pk=req.pk).order_by("pk")[:50]) if req.batch else [],
    }
    return render(request, "delivery/teardown_detail.html", context)


@require_POST
def teardown_decide(request, pk):
    """Approve or reject; the requester and non-approvers get 403 whatever the page showed."""
    get_object_or_404(TeardownRequest.objects.visible_to(request.user), pk=pk)
    decision = request.POST.get("decision")
    if decision not in DECISIONS:
        return HttpResponseBadRequest("decision must be approve or reject")
    comment = request.POST.get("comment", "")[:2000]
    waive = request.POST.get("waive_active") == "on"
    perform(request, lambda: _decide(pk, decision, comment, request.user, waive), DECISIONS[decision])
    return redirect("teardown-detail", pk=pk)


@require_POST
@permission_required("projects.operate", raise_exception=True)
def teardown_attest(request, pk):
    return _on_request(request, pk, do_attest_teardown, "Attested; verifying offline.", "projects.operate")


@require_POST
@permission_required("projects.operate", raise_exception=True)
def teardown_retry(request, pk):
    return _on_request(request, pk, do_retry_execution, "Execution queued again.", "projects.operate")


@require_POST
def teardown_cancel(request, pk):
    return _on_request(request, pk, do_cancel_teardown, "Request cancelled.")


@require_POST
def teardown_settle(request, pk):
    """An approver settles an interrupted execution: it happened, or retry with the same key."""
    get_object_or_404(TeardownRequest.objects.visible_to(request.user), pk=pk)
    happened = request.POST.get("outcome") == "happened"
    comment = request.POST.get("comment", "")[:2000]
    message = "Recorded as done." if happened else "Execution queued again with the same idempotency key."
    perform(request, lambda: do_resolve_attention(pk, happened, comment, actor=request.user), message)
    return redirect("teardown-detail", pk=pk)


def _on_request(request, pk, action, success, perm=None):
    """An action on a request the user can see (404 otherwise), by a holder of perm in its box's
    project (403 otherwise); a refusal becomes a message."""
    req = get_object_or_404(TeardownRequest.objects.visible_to(request.user).select_related("instance__project"), pk=pk)
    if perm:
        require(request.user, perm, req.instance.project)
    perform(request, lambda: action(pk, actor=request.user), success)
    return redirect("teardown-detail", pk=pk)


@require_POST
@permission_required("projects.operate", raise_exception=True)
def instance_hold(request, pk):
    instance = operated_instance(request, pk)
    reason = request.POST.get("reason", "")[:2000]
    perform(request, lambda: do_place_hold(instance.pk, reason, actor=request.user), "“Never release” hold placed.")
    return _back_to_instance(pk)


@require_POST
@permission_required("projects.operate", raise_exception=True)
def instance_cache_cleanup(request, pk):
    """The fourth, separate action: only allow-listed, regenerable caches (L1)."""
    instance = operated_instance(request, pk)
    queued = "Cache cleanup queued (allow-listed caches only)."
    perform(request, lambda: do_request_cache_cleanup(instance.pk, actor=request.user), queued)
    return _back_to_instance(pk)


@require_POST
def project_waste_shutdown(request, slug):
    """A project's opt-in: a box that bills for nothing has its shutdown request filed in this person's name."""
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    on = request.POST.get("on") == "1"
    said = "Boxes that bill for nothing get their shutdown request filed in your name." if on else "Opted out."
    perform(request, lambda: do_set_waste_shutdown(project.pk, on, actor=request.user), said)
    return redirect(project)
