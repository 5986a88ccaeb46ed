"""Custody pages: the evidence index lives on the run page; here, its JSON export."""

from django.http import JsonResponse
from django.shortcuts import get_object_or_404

from custody.export import record_as_dict
from custody.models import CustodyRecord
from runs.models import Run


def custody_json(request, pk):
    runs = Run.objects.visible_to(request.user)
    records = CustodyRecord.objects.filter(run__in=runs).select_related("run__project", "run__instance")
    record = get_object_or_404(records.prefetch_related("artifacts"), pk=pk)
    response = JsonResponse(record_as_dict(record), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="custody-{record.run.run_id}-{record.pk}.json"'
    return response
