"""The datasets pages: a project's datasets, one dataset's roster, and registering one."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render

from datasets.actions import do_register_dataset
from datasets.forms import DatasetForm
from datasets.models import Dataset

ROSTER_SHOWN = 200


@login_required
def dataset_list(request):
    datasets = Dataset.objects.visible_to(request.user).select_related("project", "source_instance")
    return render(request, "datasets/dataset_list.html", {"datasets": datasets})


@login_required
def dataset_detail(request, pk):
    dataset = get_object_or_404(Dataset.objects.visible_to(request.user).select_related("project"), pk=pk)
    context = {
        "dataset": dataset,
        "roster": dataset.roster[:ROSTER_SHOWN],
        "more": max(dataset.file_count - ROSTER_SHOWN, 0),
    }
    return render(request, "datasets/dataset_detail.html", context)


FIELDS = ("project", "name", "source_kind", "source_path", "source_instance")


@permission_required("projects.operate", raise_exception=True)
def dataset_create(request):
    form = DatasetForm(request.POST or None, user=request.user, initial={"project": request.GET.get("project")})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            dataset = do_register_dataset(*(data[field] for field in FIELDS), data["roster_text"], actor=request.user)
        except ValidationError as exc:
            for field, problems in exc.message_dict.items():
                form.add_error("roster_text" if field == "roster" else field, problems)
        else:
            messages.success(request, f"Dataset {dataset.name} registered: {dataset.get_state_display()}.")
            return redirect(dataset)
    return render(request, "datasets/dataset_form.html", {"form": form})
