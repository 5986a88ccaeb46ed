"""Rents over the API: asked by a script with the page's rules (rentals/forms.py), read back with each
candidate asked; approving the spend and confirming the host key stay a person's acts on the page."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from api.serializers import DocumentedModelSerializer, ErrorSerializer
from api.views import NewestFirst
from fleet.models import Credential
from projects.models import Project
from providers import RENTABLE
from rentals.actions import do_request_rental
from rentals.forms import RentalForm
from rentals.models import Rental, RentalAttempt


class AttemptSerializer(DocumentedModelSerializer):
    class Meta:
        model = RentalAttempt
        fields = ["provider", "outcome", "offer", "provider_id", "detail", "at"]


class RentalSerializer(DocumentedModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    requester = serializers.SlugRelatedField(slug_field="username", read_only=True)
    approver = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    instance = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    proving_box = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    attempts = AttemptSerializer(many=True, read_only=True)
    host_key_seen = serializers.SerializerMethodField(help_text="The fingerprint waiting for a person, if any.")

    class Meta:
        model = Rental
        fields = [
            "id",
            "project",
            "name",
            "state",
            "gpu_models",
            "gpu_count",
            "gpu_memory_gb",
            "disk_gb",
            "max_rate",
            "candidates",
            "expected_minutes",
            "expected_cost",
            "spend_note",
            "requester",
            "approver",
            "provider",
            "provider_id",
            "offer",
            "instance",
            "reason",
            "region",
            "durable_volume",
            "volume_gb",
            "volume",
            "proving_box",
            "proof",
            "attempts",
            "host_key_seen",
            "created",
            "expires_at",
        ]

    def get_host_key_seen(self, rental) -> str:
        seen = rental.instance.seen_host_key if rental.instance else None
        return seen.fingerprint if seen else ""


class RentalCreateSerializer(serializers.Serializer):
    project = serializers.SlugField()
    purpose = serializers.CharField(max_length=40)
    gpu_models = serializers.ListField(child=serializers.CharField(max_length=40), min_length=1, max_length=10)
    gpu_count = serializers.IntegerField(default=1)
    gpu_memory_gb = serializers.IntegerField(default=0)
    disk_gb = serializers.IntegerField(default=50)
    max_rate = serializers.DecimalField(max_digits=8, decimal_places=4)
    candidates = serializers.ListField(child=serializers.CharField(max_length=40), min_length=1, max_length=4)
    api_keys = serializers.DictField(
        child=serializers.CharField(max_length=60), help_text="{provider: credential name}"
    )
    ssh_key = serializers.CharField(max_length=60, help_text="The SSH key credential's name")
    ssh_user = serializers.CharField(max_length=64, required=False, default="", allow_blank=True)
    image = serializers.CharField(max_length=200, required=False)
    expected_minutes = serializers.IntegerField()
    run = serializers.CharField(
        max_length=100, required=False, default="", allow_blank=True, help_text="A draft run id"
    )
    acknowledge = serializers.BooleanField(default=False)
    region = serializers.CharField(max_length=40, required=False, default="", allow_blank=True)
    durable_volume = serializers.CharField(
        max_length=100,
        required=False,
        default="",
        allow_blank=True,
        help_text="RunPod network volume id, Lambda filesystem",
    )
    volume_gb = serializers.IntegerField(
        required=False, default=0, help_text="With durable_volume: create it this large where none is listed"
    )
    proving_box = serializers.CharField(
        max_length=100,
        required=False,
        default="",
        allow_blank=True,
        help_text="With a run: the box its checks and CPU smoke pass on before the rent (default: the local node)",
    )


def _pk(project, name: str) -> int | str:
    """A credential granted to project, by name; an unknown name stays a name, which the form refuses."""
    found = Credential.objects.filter(projects=project, name=name).values_list("pk", flat=True).first()
    return found if found is not None else name


def _box_pk(project, name: str) -> int | str:
    """A box of project, by name; an unknown name stays a name, which the form refuses."""
    if not name:
        return ""
    found = project.instances.filter(name=name).values_list("pk", flat=True).first()
    return found if found is not None else name


class RentalViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = r"[0-9]+"  # an id: typed as an integer in the schema
    pagination_class = NewestFirst

    def get_queryset(self):
        return (
            Rental.objects.visible_to(self.request.user)
            .select_related("project", "requester", "approver", "instance", "proving_box")
            .prefetch_related("attempts")
        )

    def get_serializer_class(self):
        return RentalCreateSerializer if self.action == "create" else RentalSerializer

    @extend_schema(request=RentalCreateSerializer, responses={201: RentalSerializer})
    def create(self, request, *args, **kwargs):
        typed = RentalCreateSerializer(data=request.data)
        typed.is_valid(raise_exception=True)
        data = typed.validated_data
        project = get_object_or_404(Project.objects.visible_to(request.user), slug=data["project"])
        if not request.user.has_perm("projects.operate", project):
            raise PermissionDenied(f"This needs the operator role in project {project.slug}.")
        unknown = sorted(set(data["api_keys"]) - set(RENTABLE))
        if unknown:
            raise ValidationError({"api_keys": [f"not a platform renting here: {', '.join(unknown)}"]})
        run = project.runs.filter(run_id=data["run"]).values_list("pk", flat=True).first() if data["run"] else None
        if data["run"] and run is None:
            raise ValidationError({"run": ["no such run in this project"]})
        fields = {
            **{key: data[key] for key in ("purpose", "gpu_count", "gpu_memory_gb", "disk_gb", "max_rate")},
            **{key: data[key] for key in ("ssh_user", "expected_minutes", "acknowledge")},
            "gpu_models": ", ".join(data["gpu_models"]),
            "candidates": ", ".join(data["candidates"]),
            "ssh_credential": _pk(project, data["ssh_key"]),
            "image": data.get("image") or Rental._meta.get_field("image").default,
            "run": run or "",
            "region": data["region"],
            "durable_volume": data["durable_volume"],
            "volume_gb": data["volume_gb"],
            "proving_box": _box_pk(project, data["proving_box"]),
            **{f"key_{provider}": _pk(project, name) for provider, name in data["api_keys"].items()},
        }
        form = RentalForm(fields, project=project, user=request.user)
        if not form.is_valid():
            raise ValidationError({name: list(errors) for name, errors in form.errors.items()})
        try:
            rental = do_request_rental(form.save(), actor=request.user)
        except DjangoValidationError as exc:
            raise ValidationError({"non_field_errors": exc.messages}) from None
        return Response(RentalSerializer(self.get_queryset().get(pk=rental.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={403: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        self.get_object()  # 404 for what the user cannot see, before saying no
        raise PermissionDenied("Approving a rent's spend stays human: an approver decides on the rent's page.")

    @extend_schema(request=None, responses={403: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def confirm(self, request, pk=None):
        self.get_object()
        raise PermissionDenied("A host key is confirmed by a person who compares it, on the rent's page.")
