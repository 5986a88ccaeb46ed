import time
from decimal import Decimal

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.contrib.auth.mixins import PermissionRequiredMixin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from django.views.generic import CreateView

from core.flash import perform
from core.models import AuditAction, AuditEntry
from fleet.models import Instance
from platforms.layout import layout_for
from projects.membership import do_add_member, do_remove_member
from projects.models import Project
from projects.roles import require
from runs.actions.base import arm_watcher
from runs.actions.lifecycle import (
    do_accept_gpu_mismatch,
    do_close_active,
    do_create_run,
    do_edit_run,
    do_retry_run,
    do_start_preflight,
    do_waive_gpu_holders,
)
from runs.actions.moves import MOVABLE_STATES, do_continue_elsewhere
from runs.actions.reseal import do_reseal_run
from runs.actions.spending import do_decide_spend
from runs.actions.stops import do_stop_run
from runs.budgets import do_set_envelope, may_change_envelope
from runs.cadence import cadence_for
from runs.ckpt_pull import CONTROL
from runs.forms import EnvelopeForm, ProjectForm, RunForm, SweepForm
from runs.gpu_use import idle_past_window, plot_rows
from runs.models import (
    LIVE_STATES,
    RETRYABLE_STATES,
    UNCLOSED_STATES,
    Run,
    RunState,
    SpendRequest,
)
from runs.reach import reach_problem
from runs.signals import FAILURE_CLASSES, paperwork_only, strip_ansi
from runs.spend import envelope_of
from wrapper.digits import ascii_int

MEMBERSHIP_ACTIONS = [AuditAction.MEMBER_ADDED, AuditAction.MEMBER_REMOVED]


def project_detail(request, slug):
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    # Every live run however old (a week-long training is behind a thousand newer ones; at most 200, a
    # bounded read), then the newest others: the rest of a project's runs are in the history.
    runs = project.runs.select_related("instance").order_by("-created")
    live = list(runs.filter(state__in=LIVE_STATES)[:200])
    context = {
        "project": project,
        "envelope": envelope_of(project) if project.budget is not None else None,
        "envelope_form": EnvelopeForm(instance=project) if may_change_envelope(request.user, project) else None,
        "envelope_events": AuditEntry.objects.filter(
            project=project, action=AuditAction.ENVELOPE_CHANGED
        ).select_related("actor")[:10],
        "live_runs": live,
        "idle_gpus": idle_past_window(live, timezone.now()),
        "recent_runs": list(runs.exclude(state__in=LIVE_STATES)[:20]),
        "memberships": project.memberships.select_related("user").order_by("user__username"),
        "membership_events": AuditEntry.objects.filter(project=project, action__in=MEMBERSHIP_ACTIONS).select_related(
            "actor"
        )[:10],
        "can_share": request.user.has_perm("projects.change_project", project),
        "may_widen": request.user.has_perm("projects.approve_cost", project),
    }
    return render(request, "runs/project_detail.html", context)


@require_POST
def project_envelope(request, slug):
    """Set or change the project's cost envelope (operators and approvers of it; audited)."""
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    if not may_change_envelope(request.user, project):
        raise PermissionDenied("Only an operator or an approver of the project changes its cost envelope.")
    form = EnvelopeForm(request.POST, instance=Project.objects.get(pk=project.pk))
    if not form.is_valid():
        problems = [
            f"{form.fields[name].label if name in form.fields else name}: {' '.join(errors)}"
            for name, errors in form.errors.items()
        ]
        messages.error(request, "The envelope is unchanged. " + " ".join(problems))
        return redirect(project)
    perform(
        request,
        lambda: do_set_envelope(project.pk, form.values(), actor=request.user),
        "Cost envelope saved.",
    )
    return redirect(project)


@require_POST
@permission_required("projects.change_project", raise_exception=True)
def project_add_member(request, slug):
    """Share a project with a teammate (a member, or an admin, may add one)."""
    return _change_membership(request, slug, do_add_member, "{user} is now a member of {project}.")


@require_POST
@permission_required("projects.change_project", raise_exception=True)
def project_remove_member(request, slug):
    return _change_membership(request, slug, do_remove_member, "{user} no longer has access to {project}.")


def _change_membership(request, slug, action, success: str):
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    require(request.user, "projects.change_project", project)
    username = request.POST.get("username", "").strip()[:150]
    message = success.format(user=username, project=project.name)
    perform(request, lambda: action(project.pk, username, actor=request.user), message)
    return redirect(project)


class ProjectCreateView(PermissionRequiredMixin, CreateView):
    permission_required = "projects.add_project"
    raise_exception = True
    form_class = ProjectForm
    template_name = "runs/project_form.html"

    def form_valid(self, form):
        response = super().form_valid(form)
        # The creator is its first member and operator; approvers are an admin's to grant.
        do_add_member(self.object.pk, self.request.user.get_username(), actor=self.request.user, as_operator=True)
        messages.success(self.request, f"Project “{self.object.name}” created.")
        return response


@permission_required("projects.operate", raise_exception=True)
def run_create(request):
    like = Run.objects.visible_to(request.user).filter(run_id=request.GET.get("like", "")).first()
    form = RunForm(request.POST or None, user=request.user, initial=RunForm.initial_like(like) if like else None)
    if request.method == "POST" and form.is_valid():
        peers = form.cleaned_data.get("peer_boxes") or []
        run = do_create_run(form.save(commit=False), actor=request.user, peers=list(peers))
        messages.success(request, f"Run {run.run_id} created. Start the preflight when ready.")
        return redirect(run)
    return render(request, "runs/run_form.html", {"form": form, "like": like})


@permission_required("projects.operate", raise_exception=True)
def run_edit(request, run_id):
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("project"), run_id=run_id)
    require(request.user, "projects.operate", run.project)
    form = RunForm.for_edit(run, request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            changed = do_edit_run(run.pk, form.changes(), actor=request.user)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect(run)
        messages.success(request, f"Saved: {', '.join(changed)}." if changed else "Nothing changed.")
        return redirect(run)
    return render(request, "runs/run_form.html", {"form": form, "editing": run})


def run_detail(request, run_id):
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("project", "instance"), run_id=run_id)
    context = {
        "run": run,
        # The newest 200 events: a long run's timeline must not make its page slow (live.json pages likewise).
        "events": list(run.events.select_related("actor").order_by("-at", "-id")[:200])[::-1],
        "layout": layout_for(run),
        "can_operate": request.user.has_perm("projects.operate", run.project),
        "may_waive": request.user.has_perm("projects.approve_cost", run.project),
        "retryable": run.state in RETRYABLE_STATES,
        "resealable": run.state == RunState.QUARANTINED and paperwork_only(run.close_reason),
        "is_live": run.state in LIVE_STATES,
        "closable": run.state in UNCLOSED_STATES and run.active_closed_at is None,
        "log_tail": strip_ansi(run.last_status.get("log_tail", "")),
        "failure": FAILURE_CLASSES.get(run.failure_class),
        "custody": run.custody_records.prefetch_related("artifacts").first(),
        "preflight_summary": preflight_summary(run),
        "smoke_summary": smoke_summary(run),
        "cadence": cadence_for(run),
        "checkpoints": checkpoint_summary(run),
        "other_boxes": other_boxes(run) if run.state in MOVABLE_STATES and run.durable_ckpt.get("files") else [],
        "lease": getattr(run.instance, "watch_lease", None),
        "run_states": {"live": sorted(LIVE_STATES)},
        "gpu_use": gpu_use_rows(run),
        "gpu_sample_seconds": f"{settings.GPU_SAMPLE_SECONDS:g}",
        "idle_cost": idle_cost(run),
    }
    return render(request, "runs/run_detail.html", context)


def idle_cost(run) -> str:
    """What the run's idle streak has billed at its box's rate so far, in dollars ("" when not idle)."""
    if run.gpu_idle_since is None:
        return ""
    hours = Decimal((timezone.now() - run.gpu_idle_since).total_seconds()) / 3600
    return str((run.instance.rate_running * hours).quantize(Decimal("0.01")))


GPU_PLOT_POINTS = 1440  # a day of samples at GPU_SAMPLE_SECONDS = 60: the page does not grow with the run


def gpu_use_rows(run) -> list[dict]:
    """The newest GPU samples as chart rows; no query for a run never sampled (a CPU run, a draft)."""
    if not run.gpus or run.gpu_sampled_at is None:
        return []
    samples = list(run.gpu_samples.order_by("-at").values_list("at", "gpus")[:GPU_PLOT_POINTS])[::-1]
    return plot_rows(samples, samples[0][0]) if samples else []


def other_boxes(run) -> list:
    """The boxes of the run's project it could continue on (not its own, not released), each with why it
    cannot read the run's durable checkpoints (None where it can): only those are offered."""
    from_control = run.durable_ckpt.get("target") == CONTROL
    boxes = Instance.objects.filter(project_id=run.project_id).exclude(pk=run.instance_id).exclude(state="released")
    return [(box, reach_problem(run.instance, box, from_control)) for box in boxes]


def checkpoint_summary(run) -> dict | None:
    """The newest durable checkpoint and its age, what the mirror last said, the resume proof."""
    mirror, durable = run.ckpt_mirror or {}, run.durable_ckpt.get("files") or {}
    if not mirror and not durable and not run.durable_ckpt.get("pull"):
        return None
    newest = max(durable.values(), key=lambda entry: entry["seq"], default=None)
    rate = mirror.get("bytes", 0) / mirror["seconds"] if mirror.get("seconds") else None
    age = time.time() - newest["at"] if newest else None
    on_control = run.durable_ckpt.get("target") == CONTROL
    # A copy in progress is said only while the run is live: once it ends, the line would never clear.
    pull = run.durable_ckpt.get("pull") if run.state in LIVE_STATES else None
    # The box's newest checkpoint of this attempt, said beside the copy while it is newer (both times are
    # the box's clock): a retried attempt's progress is not hidden behind an earlier attempt's copy.
    local = mirror.get("local")
    on_box = local if local and (newest is None or local["at"] > newest["at"]) else None
    return {
        "mirror": mirror,
        "newest": newest,
        "on_box": on_box,
        "age": age,
        "rate": rate,
        "on_control": on_control,
        "pull": pull,
    }


def preflight_summary(run) -> str:
    if not run.preflight_report:
        return "Not run yet."
    problems = run.preflight_report.get("problems") or []
    return "Failed: " + "; ".join(problems) if problems else "Passed."


def smoke_summary(run) -> str:
    if run.smoke_exit_code is None:
        return "Not run yet."
    passed = run.smoke_exit_code == 0 and run.state != RunState.FAILED_SMOKE
    return f"{'passed' if passed else 'failed'} (exit {run.smoke_exit_code})"


def run_live(request, run_id):
    """What a (re)connecting run page needs before it follows the stream."""
    run = get_object_or_404(Run.objects.visible_to(request.user), run_id=run_id)
    events = list(run.events.order_by("-at", "-id")[:200])[::-1]
    failure = FAILURE_CLASSES.get(run.failure_class)
    return JsonResponse(
        {
            "run_id": run.run_id,
            "state": run.state,
            "state_label": run.get_state_display(),
            "health": run.health,
            "health_since": run.health_since.isoformat() if run.health_since else None,
            "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
            "events": [{"id": e.pk, "kind": e.kind, "message": e.message, "at": e.at.isoformat()} for e in events],
            "curve": run.curve,
            "gpu_use": gpu_use_rows(run),
            "log_tail": strip_ansi(run.last_status.get("log_tail", "")),
            "failure": {"label": failure.label, "remediation": failure.remediation} if failure else None,
            # Server-rendered facts that change as the run moves: the page refreshes them in place.
            "fields": {
                "source_tree_sha256": run.source_tree_sha256 or "not bound yet",
                "config_sha256": run.config_sha256 or "not bound yet",
                "manifest_sha256": run.manifest_sha256 or "not bound yet",
                "smoke_output": run.smoke_output,
                "launched_command": run.launched_command,
                "exit_code": "" if run.exit_code is None else str(run.exit_code),
                "attempt": str(run.attempt),
                "preflight_summary": preflight_summary(run),
                "smoke_summary": smoke_summary(run),
            },
        }
    )


def run_action(request, run_id, action, success, perm="projects.operate"):
    """A button on the run page: the run if the person sees it (404), the role in its project (403),
    then the action, its refusal a message."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("project"), run_id=run_id)
    require(request.user, perm, run.project)
    perform(request, lambda: action(run.pk, actor=request.user), success)
    return redirect("run-detail", run_id=run_id)


@require_POST
@permission_required("projects.operate", raise_exception=True)
def run_preflight(request, run_id):
    return run_action(request, run_id, do_start_preflight, "Preflight queued.")


def _approver_override(request, run_id, action, said: str):
    """An approver's audited override of a failed preflight, with the comment that says why."""
    comment = request.POST.get("comment", "")[:2000]
    return run_action(
        request, run_id, lambda pk, actor: action(pk, comment, actor=actor), said, perm="projects.approve_cost"
    )


@require_POST
@permission_required("projects.approve_cost", raise_exception=True)
def run_waive_gpu(request, run_id):
    said = "Override recorded: the next preflight starts beside the other process on the GPU."
    return _approver_override(request, run_id, do_waive_gpu_holders, said)


@require_POST
@permission_required("projects.approve_cost", raise_exception=True)
def run_accept_gpus(request, run_id):
    said = "Accepted: the next preflight takes the box's GPUs as measured."
    return _approver_override(request, run_id, do_accept_gpu_mismatch, said)


@require_POST
@permission_required("projects.operate", raise_exception=True)
def run_continue(request, run_id):
    """Continue on another box (the run page's form): the box, whether the old one is gone, and
    whether a different environment there is confirmed."""
    instance = request.POST.get("instance", "")

    def go(pk, actor):
        if ascii_int(instance) is None:
            raise ValidationError("Choose a box to continue on.")
        flags = {name: request.POST.get(name) == "on" for name in ("box_gone", "confirm_difference")}
        do_continue_elsewhere(pk, ascii_int(instance), actor=actor, **flags)

    return run_action(request, run_id, go, "Continuing on the other box: preflight there first.")


@require_POST
@permission_required("projects.operate", raise_exception=True)
def run_retry(request, run_id):
    return run_action(request, run_id, do_retry_run, "Retry of the identical config queued.")


@require_POST
@permission_required("projects.operate", raise_exception=True)
def run_stop(request, run_id):
    grace = settings.RUN_STOP_GRACE_SECONDS
    return run_action(request, run_id, do_stop_run, f"Stop sent: SIGTERM, then SIGKILL after {grace} s.")


@require_POST
@permission_required("projects.operate", raise_exception=True)
def run_close_active(request, run_id):
    reason = request.POST.get("reason", "")[:2000]
    return run_action(
        request, run_id, lambda pk, actor: do_close_active(pk, reason, actor=actor), "Closing active/ queued."
    )


@require_POST
@permission_required("projects.operate", raise_exception=True)
def run_reseal(request, run_id):
    return run_action(request, run_id, do_reseal_run, "Re-seal asked: the box checks the kept export again.")


@require_POST
def run_refresh(request, run_id):
    """Make sure a watcher is on the run's instance; a second one is refused by the lease."""
    run = get_object_or_404(Run.objects.visible_to(request.user), run_id=run_id)
    arm_watcher(run.instance_id)
    messages.success(request, "Watching the node.")
    return redirect(run)


@permission_required("projects.operate", raise_exception=True)
def sweep_create(request):
    form = SweepForm(request.POST or None, user=request.user, initial={"base_run": request.GET.get("base")})
    if request.method == "POST" and form.is_valid():
        sweep = form.create(actor=request.user)
        messages.success(request, f"Sweep “{sweep.name}”: {len(form.cleaned_data['cells'])} cells queued.")
        return redirect(sweep)
    return render(request, "runs/sweep_form.html", {"form": form})


@require_POST
@permission_required("projects.approve_cost", raise_exception=True)
def spend_decide(request, pk):
    """Approve or reject one spend request (an approver who is not its requester)."""
    spends = SpendRequest.objects.filter(run__in=Run.objects.visible_to(request.user)).select_related("run__project")
    spend_request = get_object_or_404(spends, pk=pk)
    require(request.user, "projects.approve_cost", spend_request.run.project)
    decision = request.POST.get("decision")
    if decision not in ("approve", "reject"):  # a malformed form must never count as a rejection
        messages.error(request, "Choose Approve spend or Reject.")
        return redirect("approval-queue")
    approve = decision == "approve"
    comment = request.POST.get("comment", "")[:2000]
    verdict = "approved: the run continues" if approve else "rejected"
    perform(
        request,
        lambda: do_decide_spend(spend_request.pk, approve, comment, actor=request.user),
        f"Spend request #{spend_request.pk} {verdict}.",
    )
    return redirect("approval-queue")
