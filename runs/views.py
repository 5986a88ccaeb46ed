from django.contrib import messages
from django.contrib.auth.mixins import PermissionRequiredMixin
from django.shortcuts import get_object_or_404, render
from django.views.generic import CreateView

from remotegpu_site.health import system_health
from runs.dashboard import tiles_for
from runs.forms import ProjectForm
from runs.models import Project


def dashboard(request):
    context = {
        "tiles": tiles_for(request.user),
        "projects": Project.objects.visible_to(request.user)[:50],
        "checks": system_health(),
        "can_create_project": request.user.has_perm("runs.add_project"),
    }
    return render(request, "runs/dashboard.html", context)


def project_detail(request, slug):
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    return render(request, "runs/project_detail.html", {"project": project})


class ProjectCreateView(PermissionRequiredMixin, CreateView):
    permission_required = "runs.add_project"
    raise_exception = True
    form_class = ProjectForm
    template_name = "runs/project_form.html"

    def form_valid(self, form):
        response = super().form_valid(form)
        messages.success(self.request, f"Project “{self.object.name}” created.")
        return response
