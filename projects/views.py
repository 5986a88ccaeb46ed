"""The Team page (admins): people, their e-mail, their roles in each project, and the history of it."""

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.flash import perform
from core.models import AuditAction, AuditEntry
from projects import team as team_actions
from projects.models import Project
from wrapper.digits import ascii_int

ROLE_ACTIONS = [AuditAction.ROLE_GRANTED, AuditAction.ROLE_REVOKED]


def _admin(request):
    if not request.user.is_superuser:
        raise PermissionDenied("Only an administrator manages the team.")


def team(request, created=None):
    """Users, e-mail, roles and projects in one place (admins)."""
    _admin(request)
    users = get_user_model().objects.order_by("username").prefetch_related("memberships__project")
    context = {
        "people": [(user, team_actions.memberships_of(user)) for user in users],
        "projects": Project.objects.all(),
        "role_events": AuditEntry.objects.filter(action__in=ROLE_ACTIONS).select_related("actor", "project")[:15],
        "created": created,
    }
    return render(request, "projects/team.html", context)


@require_POST
def team_create_user(request):
    """The one-time password is in this response only: never in a message, the session or a log."""
    _admin(request)
    post = request.POST
    try:
        created = team_actions.do_create_user(
            post.get("username", "")[:150],
            post.get("email", "")[:254],
            set(post.getlist("roles")),
            team_actions.projects_named(post.getlist("projects")),
            actor=request.user,
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("team")
    response = team(request, created=created)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
def team_set_roles(request, pk):
    _admin(request)
    post = request.POST
    user = get_object_or_404(get_user_model(), pk=pk)

    # Each of the person's projects the form showed names its roles (none ticked: none held).
    shown = [pk for pk in map(ascii_int, post.getlist("projects")) if pk is not None]
    project_roles = {pk: set(post.getlist(f"roles-{pk}")) for pk in shown}

    def change():
        team_actions.do_set_roles(user.pk, post.get("admin") == "on", project_roles, actor=request.user)
        if post.get("email", "").strip() != user.email:
            team_actions.do_set_email(user.pk, post.get("email", "")[:254], actor=request.user)

    perform(request, change, f"{user.username} saved.")
    return redirect("team")
