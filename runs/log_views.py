"""The full training log of a run: paged from the end, downloadable, followed live on its page."""

from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render

from runs import logs
from runs.models import LIVE_STATES, Run


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _chosen(request, run_id) -> tuple[Run, int]:
    run = get_object_or_404(Run.objects.visible_to(request.user), run_id=run_id)
    attempt = _int(request.GET.get("attempt"))
    return run, run.attempt if attempt is None or attempt < 0 else attempt


def run_log(request, run_id):
    run, attempt = _chosen(request, run_id)
    before = _int(request.GET.get("before"))
    shown = logs.page(run, attempt, before if before is None or before >= 0 else None)
    context = {
        "run": run,
        "attempt": attempt,
        "attempts": sorted(set(logs.attempts(run)) | {run.attempt}),
        "page": shown,
        # Following makes sense only at the end of the current attempt of a run that still writes.
        "followable": shown.newest and attempt == run.attempt and run.state in LIVE_STATES,
    }
    return render(request, "runs/run_log.html", context)


def run_log_download(request, run_id):
    run, attempt = _chosen(request, run_id)
    if attempt not in logs.attempts(run):
        raise Http404("No log was kept for that attempt.")
    response = StreamingHttpResponse(logs.stream(run, attempt), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{run.run_id}-attempt{attempt}.log"'
    return response
