"""Custody pages: the custody record's JSON export, teardown requests, the approval queue, the audit log."""

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.flash import perform
from custody.actions import do_start_verification
from custody.export import record_as_dict
from custody.forms import ProjectMetricForm
from custody.models import CustodyRecord, ProjectMetric
from custody.project_metrics import do_register_metric
from projects.models import Project
from projects.roles import require
from runs.models import Run
from runs.views import run_action


def custody_json(request, pk):
    runs = Run.objects.visible_to(request.user)
    records = CustodyRecord.objects.filter(run__in=runs).select_related("run__project", "run__instance")
    record = get_object_or_404(records.prefetch_related("artifacts"), pk=pk)
    response = JsonResponse(record_as_dict(record), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="custody-{record.run.run_id}-{record.pk}.json"'
    return response


def run_report(request, run_id):
    """The run's verification report: usable artifacts and verified status first, then the residuals,
    then the evidence index. One self-contained page (inline styles, no scripts) to print or attach;
    ?format=json for the same as data."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("project", "instance"), run_id=run_id)
    records = run.custody_records.prefetch_related("artifacts").order_by("-verified_at", "-id")
    record = next((r for r in records if r.status == "verified"), None) or records.first()
    if record is None:
        messages.error(request, "No custody record yet: verify custody first, then the report says what it found.")
        return redirect(run.get_absolute_url())
    data = record_as_dict(record)
    if request.GET.get("format") == "json":
        response = JsonResponse(data, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = f'attachment; filename="report-{run.run_id}.json"'
        return response
    usable = [item for item in data["artifacts"] if item["path"] in USABLE or item["path"].endswith("results.parquet")]
    response = render(request, "custody/report.html", {"run": run, "record": record, "data": data, "usable": usable})
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="report-{run.run_id}.html"'
    return response


USABLE = ("best.pth", "last.pth", "config.yaml", "run.json")


@require_POST
def run_verify(request, run_id):
    """The run page's Verify custody: an operator of the run's project queues the verification."""
    return run_action(request, run_id, do_start_verification, "Custody verification queued.")


def project_metrics(request, slug):
    """A project's own metrics: every member sees them; an operator registers one (checked, audited)."""
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    form = ProjectMetricForm(request.POST or None)
    if request.method == "POST":
        require(request.user, "projects.operate", project)
        if form.is_valid():
            data = form.cleaned_data
            register = lambda: do_register_metric(project, **data, actor=request.user)  # noqa: E731
            if perform(request, register, f"Metric {data['name']} registered: runs that claim it are recomputed."):
                return redirect("project-metrics", slug=slug)
    metrics = ProjectMetric.objects.filter(project=project)
    return render(request, "custody/project_metrics.html", {"project": project, "metrics": metrics, "form": form})
