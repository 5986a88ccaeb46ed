from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.flash import perform
from core.models import AuditEntry
from fleet.actions import (
    do_change_instance_state,
    do_confirm_host_key,
    do_create_instance,
    do_edit_instance,
    do_register_resource,
    do_request_probe,
    do_save_credential,
    needs_acknowledgement,
)
from fleet.forms import CredentialForm, InstanceEditForm, InstanceForm, StateForm
from fleet.models import Credential, Instance, InstanceProbe, InstanceState
from platforms import catalog
from projects.models import Project
from projects.roles import require


def platform_list(request):
    return render(request, "fleet/platform_list.html", {"profiles": catalog.all_profiles()})


def platform_detail(request, key):
    try:
        profile = catalog.get_profile(key)
    except KeyError:
        raise Http404("No such platform") from None
    return render(request, "fleet/platform_detail.html", {"profile": profile})


def instance_list(request):
    instances = Instance.objects.visible_to(request.user).select_related("project")
    project = None
    if request.GET.get("project"):
        project = get_object_or_404(Project.objects.visible_to(request.user), slug=request.GET["project"])
        instances = instances.filter(project=project)
    context = {
        "instances": instances,
        "project": project,
        "can_create": request.user.has_perm("projects.operate", project),
    }
    return render(request, "fleet/instance_list.html", context)


@permission_required("projects.operate", raise_exception=True)
def instance_create(request):
    form = InstanceForm(request.POST or None, user=request.user, initial={"project": request.GET.get("project")})
    if request.method == "POST" and form.is_valid():
        try:
            instance = do_create_instance(form.save(commit=False), form.cleaned_data["acknowledge"], actor=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Instance {instance.name} registered. Test the connection to pin its host key.")
            return redirect(instance)
    # First contact with a platform in a project: show its conveniences and danger clocks.
    surface_profile = None
    if form.is_bound:
        key, project = form.cleaned_data.get("profile_key"), form.cleaned_data.get("project")
        if key and project and needs_acknowledgement(project, key):
            surface_profile = catalog.get_profile(key)
    return render(request, "fleet/instance_form.html", {"form": form, "surface_profile": surface_profile})


@require_POST
@permission_required("projects.operate", raise_exception=True)
def instance_add_resource(request, pk):
    instance = operated_instance(request, pk)
    post = request.POST
    try:
        rate = Decimal(post.get("rate", "").strip() or "0")
    except InvalidOperation:
        messages.error(request, "The hourly rate is a number of dollars, e.g. 0.07.")
        return redirect("instance-detail", pk=pk)
    return _act(
        request,
        instance.pk,
        lambda: do_register_resource(
            instance.pk,
            post.get("kind", ""),
            post.get("name", "")[:80],
            post.get("tier", "")[:80],
            rate,
            post.get("provider_id", "")[:120],
            actor=request.user,
        ),
        "Resource registered: it counts in spend until it is deleted.",
    )


def operated_instance(request, pk):
    """The box, if the person sees it (else 404) and operates in its project (else 403)."""
    instance = get_object_or_404(Instance.objects.visible_to(request.user).select_related("project"), pk=pk)
    require(request.user, "projects.operate", instance.project)
    return instance


def _act(request, pk, action, success):
    perform(request, action, success)
    return redirect("instance-detail", pk=pk)


@require_POST
def instance_probe(request, pk):
    get_object_or_404(Instance.objects.visible_to(request.user), pk=pk)
    kind = request.POST.get("kind")
    if kind not in InstanceProbe.Kind.values:
        messages.error(request, "Unknown probe kind.")
        return redirect("instance-detail", pk=pk)
    label = InstanceProbe.Kind(kind).label
    return _act(request, pk, lambda: do_request_probe(pk, kind, actor=request.user), f"{label} queued.")


@require_POST
@permission_required("projects.operate", raise_exception=True)
def instance_confirm_host_key(request, pk):
    operated_instance(request, pk)
    fingerprint = request.POST.get("fingerprint", "")
    return _act(request, pk, lambda: do_confirm_host_key(pk, fingerprint, actor=request.user), "Host key pinned.")


@require_POST
@permission_required("projects.operate", raise_exception=True)
def instance_set_state(request, pk):
    operated_instance(request, pk)
    form = StateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a valid state.")
        return redirect("instance-detail", pk=pk)
    state, reason = form.cleaned_data["state"], form.cleaned_data["reason"]
    return _act(request, pk, lambda: do_change_instance_state(pk, state, reason, actor=request.user), "State recorded.")


def _admin_only(request):
    if not request.user.is_superuser:
        raise PermissionDenied("Only an administrator registers credentials.")


def credential_list(request):
    _admin_only(request)
    credentials = Credential.objects.prefetch_related("projects").annotate(
        ssh_uses=Count("ssh_instances", distinct=True), api_uses=Count("api_instances", distinct=True)
    )
    return render(request, "fleet/credential_list.html", {"credentials": credentials})


def credential_edit(request, pk=None):
    _admin_only(request)
    credential = get_object_or_404(Credential, pk=pk) if pk else None
    form = CredentialForm(request.POST or None, instance=credential)
    if request.method == "POST" and form.is_valid():
        saved = do_save_credential(form.save(commit=False), form.cleaned_data["projects"], actor=request.user)
        messages.success(request, f"Credential {saved.name} saved.")
        return redirect("credential-list")
    events = AuditEntry.objects.filter(credential=credential).select_related("actor")[:20] if credential else []
    return render(request, "fleet/credential_form.html", {"form": form, "credential": credential, "events": events})


@permission_required("projects.operate", raise_exception=True)
def instance_edit(request, pk):
    instance = operated_instance(request, pk)
    if instance.state == InstanceState.RELEASED:
        messages.error(request, "A released box is gone: register a new instance instead.")
        return redirect(instance)
    if instance.profile.is_local and not request.user.is_superuser:
        # Its commands run on the control host itself, beside the database and every secret.
        messages.error(
            request, "The local workstation runs commands on the control host: only an administrator edits it."
        )
        return redirect(instance)
    form = InstanceEditForm(request.POST or None, instance=instance, user=request.user)
    if request.method == "POST" and form.is_valid():
        changes = {field: form.cleaned_data[field] for field in form.Meta.fields if field in form.cleaned_data}
        fresh = Instance.objects.get(pk=pk)  # the form wrote onto `instance` while validating
        try:
            changed = do_edit_instance(fresh.pk, changes, actor=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Saved: {', '.join(changed)}." if changed else "Nothing changed.")
            return redirect(fresh)
    return render(request, "fleet/instance_edit.html", {"form": form, "instance": instance})
