"""Thin views: a rent asked, shown, decided, cancelled and its host key confirmed, each through an action."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.flash import perform
from platforms.catalog import get_profile
from projects.models import Project, Role
from projects.roles import require
from providers import RENTABLE
from rentals.actions import do_cancel_rental, do_confirm_rental, do_decide_rental, do_request_rental
from rentals.forms import RentalForm
from rentals.models import OPEN_STATES, Rental, RentalState


def rental_list(request):
    rentals = Rental.objects.visible_to(request.user).select_related("project", "requester", "instance")[:100]
    operated = Project.objects.where_role(request.user, Role.OPERATOR)
    return render(request, "rentals/rental_list.html", {"rentals": rentals, "operated": operated})


def rental_create(request):
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=request.GET.get("project", ""))
    require(request.user, "projects.operate", project)
    form = RentalForm(request.POST or None, project=project, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            rental = do_request_rental(form.save(), actor=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            first = "its run is proven where no GPU bills, then " if rental.run_id else ""
            messages.success(request, f"Rent #{rental.pk} asked: {first}another person approves its spend.")
            return redirect(rental)
    profiles = [get_profile(key) for key in RENTABLE]
    return render(request, "rentals/rental_form.html", {"form": form, "project": project, "profiles": profiles})


def _visible(request, pk) -> Rental:
    queryset = Rental.objects.visible_to(request.user).select_related(
        "project", "requester", "approver", "instance", "proving_box"
    )
    return get_object_or_404(queryset, pk=pk)


def rental_detail(request, pk):
    rental = _visible(request, pk)
    context = {
        "rental": rental,
        "attempts": rental.attempts.all(),
        "can_decide": request.user.has_perm("projects.approve_cost", rental.project)
        and rental.requester_id != request.user.pk,
        "can_operate": request.user.has_perm("projects.operate", rental.project),
        "seen_key": rental.instance.seen_host_key if rental.instance else None,
    }
    # Someone else or a worker moves it next (an approver, the create, the key scan): the page follows.
    moving = rental.state in OPEN_STATES or rental.state in (RentalState.REQUESTED, RentalState.PROVING)
    context["waiting"] = moving or (rental.state == RentalState.REGISTERED and context["seen_key"] is None)
    return render(request, "rentals/rental_detail.html", context)


@require_POST
def rental_decide(request, pk):
    rental = _visible(request, pk)
    approve = request.POST.get("decision") == "approve"
    comment = request.POST.get("comment", "")[:2000]
    said = "Approved: the candidates are being asked." if approve else "Rejected."
    perform(request, lambda: do_decide_rental(rental.pk, approve, comment, actor=request.user), said)
    return redirect(rental)


@require_POST
def rental_cancel(request, pk):
    rental = _visible(request, pk)
    perform(request, lambda: do_cancel_rental(rental.pk, actor=request.user), "Cancelled.")
    return redirect(rental)


@require_POST
def rental_confirm(request, pk):
    rental = _visible(request, pk)
    fingerprint = request.POST.get("fingerprint", "")[:200]
    said = "Host key pinned: the box is ready" + (" and the run's preflight started." if rental.run_id else ".")
    perform(request, lambda: do_confirm_rental(rental.pk, fingerprint, actor=request.user), said)
    return redirect(rental)
