"""A project's notifications page: its channels (operators add and remove them), each member's own
e-mail opt-in, and the recent outbox with what each target answered."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.models import AuditAction, AuditEntry
from notifications.actions import (
    do_add_channel,
    do_remove_channel,
    do_save_notify_variable,
    do_set_preference,
    events_of,
)
from notifications.models import Channel, Event, NotifyVariable
from projects.models import Project


def _project(request, slug):
    return get_object_or_404(Project.objects.visible_to(request.user), slug=slug)


def _can_configure(user, project) -> bool:
    return user.has_perm("projects.change_project", project)


@login_required
def notification_settings(request, slug):
    project = _project(request, slug)
    context = {
        "project": project,
        "events": Event.choices,
        "channels": project.channels.all(),
        "variables": NotifyVariable.objects.granted_to(project),
        "mine": events_of(project, request.user),
        "outbox": project.notifications.all()[:20],
        "can_configure": _can_configure(request.user, project),
        "has_email": bool(request.user.email),
    }
    return render(request, "notifications/settings.html", context)


@login_required
@require_POST
def set_preference(request, slug):
    project = _project(request, slug)
    try:
        do_set_preference(project, request.user, request.POST.getlist("events"), actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, "Your e-mail notifications for this project are saved.")
    return redirect("notification-settings", slug=project.slug)


@login_required
@require_POST
def add_channel(request, slug):
    project = _project(request, slug)
    if not _can_configure(request.user, project):
        messages.error(request, "Only the project's operators and admins configure its channels.")
        return redirect("notification-settings", slug=project.slug)
    post = request.POST
    try:
        channel = do_add_channel(
            project,
            post.get("name", "")[:80],
            post.get("kind", ""),
            post.get("target", "")[:2000],
            post.getlist("events"),
            actor=request.user,
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Channel “{channel.name}” added.")
    return redirect("notification-settings", slug=project.slug)


@login_required
@require_POST
def remove_channel(request, slug, pk):
    project = _project(request, slug)
    channel = get_object_or_404(Channel, pk=pk, project=project)
    if _can_configure(request.user, project):
        do_remove_channel(channel.pk, actor=request.user)
        messages.success(request, f"Channel “{channel.name}” removed.")
    else:
        messages.error(request, "Only the project's operators and admins configure its channels.")
    return redirect("notification-settings", slug=project.slug)


class NotifyVariableForm(forms.ModelForm):
    projects = forms.ModelMultipleChoiceField(
        queryset=Project.objects.order_by("name"), required=False, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = NotifyVariable
        fields = ["variable", "projects", "note"]


def _admin_only(request) -> None:
    if not request.user.is_superuser:
        raise PermissionDenied("Only an administrator registers notification variables.")


@login_required
def variable_list(request):
    _admin_only(request)
    variables = NotifyVariable.objects.prefetch_related("projects")
    return render(request, "notifications/variable_list.html", {"variables": variables})


@login_required
def variable_edit(request, pk=None):
    _admin_only(request)
    variable = get_object_or_404(NotifyVariable, pk=pk) if pk else None
    form = NotifyVariableForm(request.POST or None, instance=variable)
    if request.method == "POST" and form.is_valid():
        try:
            saved = do_save_notify_variable(form.save(commit=False), form.cleaned_data["projects"], actor=request.user)
        except ValidationError as exc:
            form.add_error("variable", exc)
        else:
            messages.success(request, f"Notification variable {saved.variable} saved.")
            return redirect("notify-variable-list")
    events = []
    if variable:
        events = AuditEntry.objects.filter(action=AuditAction.VARIABLE_CHANGED, data__variable=variable.variable)
        events = events.select_related("actor")[:20]
    context = {"form": form, "variable": variable, "events": events}
    return render(request, "notifications/variable_form.html", context)
