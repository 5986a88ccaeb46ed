"""The automation API: the same actions as the pages, the same rules; approval stays human."""

import json

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from api import serializers as s
from console import history
from console.history import CUSTODY_CHOICES
from custody.actions import do_start_verification
from custody.models import CustodyRecord
from datasets.actions import do_register_dataset
from datasets.models import Dataset
from delivery.actions.requests import do_file_teardown
from delivery.forms import TeardownRequestForm
from delivery.models import TeardownRequest
from fleet.models import Instance
from projects.models import Project
from projects.roles import ROLE_OF_PERMISSION
from runs import logs
from runs.actions.lifecycle import do_create_run, do_edit_run, do_retry_run, do_start_preflight
from runs.actions.stops import do_stop_run
from runs.forms import SweepForm
from runs.models import Run, RunState, Sweep
from wrapper.digits import ascii_int

OPERATE = "projects.operate"


# What the schema says each operation takes and answers (the errors: api/schema.py adds them to every one).
NO_BODY = {"request": None}
HUMAN_ONLY = {"request": None, "responses": {403: s.ErrorSerializer}}
HISTORY_FILTERS = [
    OpenApiParameter("project", str, description="A project's slug"),
    OpenApiParameter("instance", str, description="A box's name"),
    OpenApiParameter("platform", str, description="A platform profile's key, e.g. runpod"),
    OpenApiParameter("state", str, enum=list(RunState.values), description="Runs in this state"),
    OpenApiParameter("custody", str, enum=list(CUSTODY_CHOICES), description="Runs by what custody says of them"),
    OpenApiParameter("since", OpenApiTypes.DATE, description="Created on or after this day"),
    OpenApiParameter("until", OpenApiTypes.DATE, description="Created on or before this day"),
    OpenApiParameter("q", str, description="Search run ids, titles, commands and configs"),
]


class NewestFirst(CursorPagination):
    ordering = ("-created", "-id")
    page_size = 50


def natural(request, name: str, default: int, what: str = "a non-negative integer") -> int:
    """A non-negative integer query parameter that fits a database column, else a 400 naming it
    (str.isdigit alone admits "²" and 5,000-digit numbers, which int() or the database refuse)."""
    text = request.query_params.get(name, str(default))
    value = ascii_int(text)
    if value is None:
        raise ValidationError({name: [what]})
    return value


def no_body(request) -> None:
    """A verb that takes nothing refuses a body that says something (`false`, a field): a client that sends
    one expects it to matter, and it would not."""
    if request.data not in (None, {}):
        raise ValidationError({"non_field_errors": ["This action takes no body (send none, or {})."]})


def form_errors(form) -> dict:
    """A page form's errors as a 400's detail: under each field, the rest under non_field_errors."""
    return {("non_field_errors" if name == "__all__" else name): list(errors) for name, errors in form.errors.items()}


def require(user, perm: str, project=None) -> None:
    """403 unless user holds perm's role in project (without one: in some project, before any lookup)."""
    if not user.has_perm(perm, project):
        where = f" in project {project.slug}" if project is not None else " in some project"
        raise PermissionDenied(f"This needs the {ROLE_OF_PERMISSION[perm].label} role{where}.")


class ProjectViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = s.ProjectSerializer
    lookup_field = "slug"

    def get_queryset(self):
        return Project.objects.visible_to(self.request.user).order_by("slug")


class InstanceViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = r"[0-9]+"  # an id: typed as an integer in the schema
    serializer_class = s.InstanceSerializer

    def get_queryset(self):
        return Instance.objects.visible_to(self.request.user).select_related("project").order_by("name")


class DatasetViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = r"[0-9]+"  # an id: typed as an integer in the schema
    serializer_class = s.DatasetSerializer

    def get_queryset(self):
        return Dataset.objects.visible_to(self.request.user).select_related("project", "source_instance")

    def get_serializer_class(self):
        return s.DatasetCreateSerializer if self.action == "create" else s.DatasetSerializer

    @extend_schema(request=s.DatasetCreateSerializer, responses={201: s.DatasetSerializer})
    def create(self, request, *args, **kwargs):
        require(request.user, OPERATE)
        typed = s.DatasetCreateSerializer(data=request.data, context={"user": request.user})
        typed.is_valid(raise_exception=True)
        data = typed.validated_data
        require(request.user, OPERATE, data["project"])
        fields = ("project", "name", "source_kind", "source_path", "source_instance", "roster")
        dataset = do_register_dataset(*(data[field] for field in fields), actor=request.user)
        return Response(s.DatasetSerializer(dataset).data, status=status.HTTP_201_CREATED)


@extend_schema_view(list=extend_schema(parameters=HISTORY_FILTERS))
class RunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    lookup_field = "run_id"
    pagination_class = NewestFirst

    def get_queryset(self):
        if self.action == "list":  # the history filters: project, instance, platform, state, custody, q, …
            runs, _ = history.filtered(self.request.user, self.request.query_params)
            return runs.select_related("project", "instance")
        return Run.objects.visible_to(self.request.user).select_related("project", "instance")

    def get_serializer_class(self):
        return s.RunCreateSerializer if self.action == "create" else s.RunSerializer

    @extend_schema(request=s.RunCreateSerializer, responses={201: s.RunSerializer})
    def create(self, request, *args, **kwargs):
        require(request.user, OPERATE)
        typed = s.RunCreateSerializer(data=request.data, context={"user": request.user})
        typed.is_valid(raise_exception=True)
        peers = typed.validated_data.get("peer_boxes") or []
        unsaved = typed.unsaved_run()
        require(request.user, OPERATE, unsaved.project)
        run = do_create_run(unsaved, actor=request.user, peers=peers)
        return Response(s.RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(**NO_BODY, responses={202: s.RunSerializer})
    @action(detail=True, methods=["post"])
    def launch(self, request, run_id=None):
        """Preflight → smoke → detached launch, as the page's button."""
        no_body(request)
        run = self.get_object()
        require(request.user, OPERATE, run.project)
        do_start_preflight(run.pk, actor=request.user)
        run.refresh_from_db()
        return Response(s.RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=s.RunCreateSerializer(partial=True), responses={200: s.RunEditedSerializer})
    def partial_update(self, request, run_id=None):
        """Change a draft (or a failed preflight or smoke), as its Edit page: the fields given are checked
        with the rest of the run by the run form's rules; identities bound before are cleared."""
        run = self.get_object()
        require(request.user, OPERATE, run.project)
        body = request.data if isinstance(request.data, dict) else {}
        # The project and a run's other boxes stay as made (an edit changes the run, not its nodes).
        unchangeable = {"project", *s.PEER_FIELDS}
        declared = s.RunCreateSerializer._declared_fields
        fixed = sorted(name for name in body if name in unchangeable or name not in declared)
        if fixed:
            raise ValidationError({name: ["not a field a run's edit changes"] for name in fixed})
        typed = s.RunCreateSerializer(
            data={**s.RunCreateSerializer.current(run), **body}, context={"user": request.user}
        )
        typed.is_valid(raise_exception=True)
        edited = typed.unsaved_run()
        stored = {"checkpoint_mib": "checkpoint_bytes", "scratch_mib": "scratch_bytes"}
        changes = {
            stored.get(name, name): getattr(edited, stored.get(name, name))
            for name in typed.validated_data
            if name not in unchangeable
        }
        changed = do_edit_run(run.pk, changes, actor=request.user)
        run.refresh_from_db()
        return Response({**s.RunSerializer(run).data, "changed": changed})

    @extend_schema(**NO_BODY, responses={202: s.RunSerializer})
    @action(detail=True, methods=["post"])
    def stop(self, request, run_id=None):
        """Stop the running attempt, as the page's Stop button: SIGTERM, SIGKILL after the grace; the
        attempt is quarantined "stopped by <you>". A run that is not running: 400 with its state."""
        no_body(request)
        run = self.get_object()
        require(request.user, OPERATE, run.project)
        run = do_stop_run(run.pk, actor=request.user)
        return Response(s.RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(**NO_BODY, responses={202: s.RunSerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request, run_id=None):
        """Retry the identical config of a quarantined run or failed launch: it resumes from its checkpoint."""
        no_body(request)
        run = self.get_object()
        require(request.user, OPERATE, run.project)
        run = do_retry_run(run.pk, actor=request.user)
        run.refresh_from_db()
        return Response(s.RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={200: s.EventsAnswerSerializer},
        parameters=[OpenApiParameter("after", int, description="Only events after this event id")],
    )
    @action(detail=True, methods=["get"])
    def events(self, request, run_id=None):
        run = self.get_object()
        after = natural(request, "after", 0, "an event id (a non-negative integer)")
        events = run.events.filter(pk__gt=after).order_by("id")[:500]
        return Response({"state": run.state, "events": s.EventSerializer(events, many=True).data})

    @extend_schema(
        responses={200: s.LogAnswerSerializer},
        parameters=[
            OpenApiParameter("attempt", int, description="Which attempt's log (its current one by default)"),
            OpenApiParameter("offset", int, description="From this byte of the log"),
        ],
    )
    @action(detail=True, methods=["get"])
    def log(self, request, run_id=None):
        """The attempt's training log from byte `offset` on, as kept on the control host (`logs -f` polls this)."""
        run = self.get_object()
        numbers = {name: natural(request, name, default) for name, default in (("attempt", run.attempt), ("offset", 0))}
        text, next_offset, more = logs.since(run, numbers["attempt"], numbers["offset"])
        return Response(
            {
                "run_id": run.run_id,
                "state": run.state,
                "attempt": numbers["attempt"],
                "current_attempt": run.attempt,
                "offset": numbers["offset"],
                "next_offset": next_offset,
                "more": more,
                "text": text,
            }
        )

    @extend_schema(**NO_BODY, responses={202: s.CustodySerializer})
    @action(detail=True, methods=["post"])
    def verify(self, request, run_id=None):
        no_body(request)
        run = self.get_object()
        require(request.user, OPERATE, run.project)
        record = do_start_verification(run.pk, actor=request.user)
        return Response(s.CustodySerializer(record).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: s.CustodySerializer})
    @action(detail=True, methods=["get"])
    def custody(self, request, run_id=None):
        record = self.get_object().custody_records.first()
        if record is None:
            return Response({"error": "not_found", "detail": "This run has no custody record yet."}, status=404)
        return Response(s.CustodySerializer(record).data)


class CustodyViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = r"[0-9]+"  # an id: typed as an integer in the schema
    serializer_class = s.CustodySerializer
    pagination_class = NewestFirst

    def get_queryset(self):
        runs = Run.objects.visible_to(self.request.user)
        return CustodyRecord.objects.filter(run__in=runs).select_related("run")


class TeardownViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Scripts may *request* a consequence; approving one is a person's act in the approval queue."""

    lookup_value_regex = r"[0-9]+"  # an id: typed as an integer in the schema
    pagination_class = NewestFirst

    def get_queryset(self):
        return TeardownRequest.objects.visible_to(self.request.user).select_related(
            "instance", "requester", "approver", "run"
        )

    def get_serializer_class(self):
        return s.TeardownCreateSerializer if self.action == "create" else s.TeardownSerializer

    @extend_schema(request=s.TeardownCreateSerializer, responses={201: s.TeardownSerializer})
    def create(self, request, *args, **kwargs):
        require(request.user, OPERATE)
        typed = s.TeardownCreateSerializer(data=request.data)
        typed.is_valid(raise_exception=True)
        data = typed.validated_data
        instance = get_object_or_404(Instance.objects.visible_to(request.user), name=data["instance"])
        require(request.user, OPERATE, instance.project)
        form = TeardownRequestForm({**data, "resource": data["resource"] or ""}, instance=instance)
        if not form.is_valid():  # the page's rules: evidence deletion names an exported run and a location, …
            raise ValidationError(form_errors(form))
        clean = form.cleaned_data
        request_row = do_file_teardown(
            instance.pk,
            clean["kind"],
            clean["reason"],
            clean["run"],
            clean["location"],
            clean["retire_hold"],
            clean["resource"],
            actor=request.user,
        )
        return Response(s.TeardownSerializer(request_row).data, status=status.HTTP_201_CREATED)

    @extend_schema(**HUMAN_ONLY)
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        self.get_object()  # 404 for what the user cannot see, before saying no
        raise PermissionDenied("Approval stays human: an approver decides in the approval queue, not through the API.")

    @extend_schema(**HUMAN_ONLY)
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        self.get_object()
        raise PermissionDenied("Rejection stays human: an approver decides in the approval queue.")


class SweepViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Sweeps of the projects you see: list, one with its cells and their states, and create."""

    lookup_value_regex = r"[0-9]+"  # an id: typed as an integer in the schema
    pagination_class = NewestFirst

    def get_queryset(self):
        projects = Project.objects.visible_to(self.request.user)
        return (
            Sweep.objects.filter(project__in=projects)
            .select_related("project", "base_run")
            .prefetch_related("cells")
            .order_by("-created", "-id")
        )

    def get_serializer_class(self):
        return s.SweepCreateSerializer if self.action == "create" else s.SweepSerializer

    @extend_schema(request=s.SweepCreateSerializer, responses={201: s.SweepSerializer})
    def create(self, request, *args, **kwargs):
        """The sweep form's rules: cells of the base run's config keys, boxes of its project, pinned."""
        require(request.user, OPERATE)
        typed = s.SweepCreateSerializer(data=request.data)
        typed.is_valid(raise_exception=True)
        data = typed.validated_data
        boxes = Instance.objects.visible_to(request.user).billing().filter(name__in=data["instances"])
        for project in {box.project for box in boxes.select_related("project")}:
            require(request.user, OPERATE, project)
        missing = sorted(set(data["instances"]) - set(boxes.values_list("name", flat=True)))
        if missing:
            raise ValidationError({"instances": [f"no instance {name!r} that you can see" for name in missing]})
        form = SweepForm(
            {
                "name": data["name"],
                "base_run": data["base_run"],
                "overrides": json.dumps(data["cells"]),
                "instances": [box.pk for box in boxes],
                "gpus_per_box": data["gpus_per_box"],
                "independent": data["independent"],
                "seeds": data["seeds"],
            },
            user=request.user,
        )
        if not form.is_valid():
            raise ValidationError(form_errors(form))
        sweep = form.create(actor=request.user)
        return Response(s.SweepSerializer(self.get_queryset().get(pk=sweep.pk)).data, status=status.HTTP_201_CREATED)


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, for signed-in callers only (it maps the whole surface); refusals are JSON."""

    permission_classes = [IsAuthenticated]

    def handle_exception(self, exc):
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return super().handle_exception(exc)
