"""What the API shows and accepts. Reads come from the models; a new run obeys runs/validation.py."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from custody.models import CustodyRecord, EvidenceLocation
from datasets.models import Dataset, DatasetSource
from delivery.models import TeardownKind, TeardownRequest
from fleet.models import Instance
from node import slurm
from projects.models import Project
from runs import validation
from runs.forms import MIB
from runs.models import Capsule, Run, RunEvent, SourceKind, Sweep
from runs.trainer_files import check_any as check_trainer_files


def seen(queryset, field: str, noun: str = "", **lookup):
    """The one object of queryset (what the user may see) matching lookup, else a 400 naming field."""
    found = queryset.filter(**lookup).first()
    if found is None:
        value = next(iter(lookup.values()))
        raise serializers.ValidationError({field: [f"no {noun or field} {value!r} that you can see"]})
    return found


class DocumentedModelSerializer(serializers.ModelSerializer):
    """A model serializer whose schema says what it answers: a read-only choice of a field that may be
    blank keeps "" among its choices (DRF drops allow_blank from read-only fields, and the schema then
    listed only the choices while the API answered "")."""

    def include_extra_kwargs(self, kwargs, extra_kwargs):
        blank = kwargs.get("allow_blank") and "choices" in kwargs
        kwargs = super().include_extra_kwargs(kwargs, extra_kwargs)
        if blank:
            kwargs["allow_blank"] = True
        return kwargs


class ProjectSerializer(DocumentedModelSerializer):
    class Meta:
        model = Project
        fields = ["slug", "name", "description", "created"]


class InstanceSerializer(DocumentedModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    address = serializers.CharField(read_only=True)

    class Meta:
        model = Instance
        fields = ["id", "name", "project", "profile_key", "address", "state", "gpu_description", "created"]


class RunSerializer(DocumentedModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    instance = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Run
        fields = [
            "run_id",
            "title",
            "project",
            "instance",
            "state",
            "attempt",
            "command",
            "config_path",
            "capsule",
            "source_kind",
            "source_path",
            "resolved_commit",
            "source_tree_sha256",
            "config_sha256",
            "manifest_sha256",
            "gpus",
            "health",
            "exit_code",
            "created",
            "launched_at",
            "exited_at",
            "environment",
            "config_overrides",
            "trainer_files",
            "secrets",
            "hooks",
            "hooks_sha256",
            "datasets",
            "data_sha256",
            "failure_class",
            "failure_excerpt",
            "smoke_exit_code",
            "smoke_output",
            "close_reason",
            "stop_asked_at",
            "stop_delivered_at",
            "scheduler",
        ]
        read_only_fields = fields


def _rule(check):
    """A runs.validation rule as a DRF field validator (the same message as on the form)."""

    def validate(self, value):
        try:
            return check(value)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None

    return validate


class RunCreateSerializer(serializers.Serializer):
    """Typed input checked by the same rules as the run form (runs/validation.py)."""

    project = serializers.SlugField(max_length=40)
    instance = serializers.CharField(max_length=100)
    title = serializers.CharField(max_length=120, required=False, default="", allow_blank=True)
    source_kind = serializers.ChoiceField(choices=SourceKind.choices)
    source_path = serializers.CharField(max_length=500)
    source_commit = serializers.CharField(max_length=64, required=False, default="", allow_blank=True)
    command = serializers.ListField(child=serializers.CharField(max_length=500), min_length=1, max_length=100)
    config_path = serializers.CharField(max_length=300)
    data_paths = serializers.ListField(child=serializers.CharField(max_length=500), max_length=50, default=list)
    manifest_path = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)
    gpus = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=63), max_length=64, default=list)
    expected_minutes = serializers.IntegerField(min_value=1, max_value=100000, default=60)
    checkpoint_mib = serializers.IntegerField(min_value=0, max_value=10**7, default=100)
    scratch_mib = serializers.IntegerField(min_value=0, max_value=10**8, default=0)
    checkpoints_retained = serializers.IntegerField(min_value=1, max_value=100, default=2)
    step_key = serializers.CharField(max_length=40, required=False, default="", allow_blank=True)
    # The no-edit path: where an unchanged script leaves its files (a mapping, or key: value lines).
    trainer_files = serializers.JSONField(
        required=False,
        default=dict,
        help_text="The no-edit path (docs/contract.md): an object, or `key: value` lines, of checkpoints, "
        "resume_args, smoke_args, weights, weights_key, metrics or log_pattern, predictions, test_id; paths "
        "relative to the source directory. A bad declaration is a 400 naming every problem.",
    )
    expected_files = serializers.IntegerField(min_value=1, max_value=10**12, default=1000)
    environment = serializers.CharField(max_length=300, required=False, default="", allow_blank=True)
    capsule = serializers.ChoiceField(choices=Capsule.choices, default=Capsule.SOFTWARE)
    auto_relaunch = serializers.BooleanField(default=False)
    max_relaunches = serializers.IntegerField(min_value=0, max_value=100, default=3)
    # A mapping, or key=value lines (what the CLI's --config-override sends): typed as YAML reads them.
    config_overrides = serializers.JSONField(required=False, default=dict)
    secrets = serializers.ListField(child=serializers.CharField(max_length=60), max_length=20, default=list)
    secrets_in_smoke = serializers.BooleanField(default=False)
    convert_crlf = serializers.BooleanField(default=False)
    datasets = serializers.ListField(child=serializers.CharField(max_length=60), max_length=20, default=list)
    move_candidates = serializers.ListField(child=serializers.CharField(max_length=100), max_length=20, default=list)
    slurm_options = serializers.JSONField(
        required=False,
        default=dict,
        help_text="A run on a Slurm box (its login node): partition, time_minutes, gres, signal_seconds (SIGUSR1 "
        "this long before the walltime; the command must catch it), requeue; over several nodes: nodes, "
        "tasks_per_node, collective_timeout_seconds, ifname (the command is then `python script.py …`, run "
        "under torchrun on every node). A bad option, or options for another box, is a 400.",
    )

    peer_boxes = serializers.ListField(
        child=serializers.CharField(max_length=100),
        max_length=15,
        default=list,
        help_text="A run over several SSH boxes: the other boxes of the project, in node-rank order (the run's "
        "box is rank 0: it hosts the rendezvous and seals the export). The command is then `python script.py "
        "…`, started under torchrun on every box.",
    )
    multinode = serializers.JSONField(
        required=False,
        default=dict,
        help_text="With peer_boxes: tasks_per_node, collective_timeout_seconds (600 unless set), ifname.",
    )

    validate_command = _rule(validation.check_command)
    validate_config_path = _rule(validation.check_config_path)
    validate_data_paths = _rule(validation.check_data_paths)
    validate_manifest_path = _rule(validation.check_manifest_path)
    validate_gpus = _rule(validation.check_gpus)
    validate_environment = _rule(validation.check_environment)
    validate_step_key = _rule(validation.check_step_key)
    validate_trainer_files = _rule(check_trainer_files)
    validate_secrets = _rule(validation.check_secret_names)
    validate_datasets = _rule(validation.check_dataset_names)
    validate_move_candidates = _rule(validation.check_box_names)

    def validate(self, data):
        user = self.context["user"]
        data["project"] = seen(Project.objects.visible_to(user), "project", slug=data["project"])
        data["instance"] = seen(Instance.objects.visible_to(user).billing(), "instance", name=data["instance"])
        problems = validation.relation_problems(data, user)
        if problems:
            raise serializers.ValidationError({field: [problem] for field, problem in problems.items()})
        data["slurm_options"] = _slurm_options(data["instance"], data.get("slurm_options"), data.get("command"))
        data["peer_boxes"] = _peer_boxes(data, user)
        if data["slurm_options"] is not None and data.get("gpus"):
            raise serializers.ValidationError(
                {"gpus": ["On a Slurm box the job's GPUs are asked with gres, not indices."]}
            )
        try:
            data["config_overrides"] = validation.check_config_overrides(
                data.get("config_overrides"), data["source_kind"], data["source_path"], data["config_path"]
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError({"config_overrides": exc.messages}) from None
        return data

    @staticmethod
    def current(run) -> dict:
        """A run's editable fields as this serializer takes them: a PATCH is checked as a whole run."""
        fields = [name for name in RunCreateSerializer._declared_fields if not name.endswith("_mib")]
        data = {name: getattr(run, name) for name in fields if name not in ("project", "instance", *PEER_FIELDS)}
        data["project"], data["instance"] = run.project.slug, run.instance.name
        data["peer_boxes"] = [peer.instance.name for peer in run.peers.select_related("instance")]
        data["multinode"] = run.multinode
        data["checkpoint_mib"], data["scratch_mib"] = run.checkpoint_bytes // MIB, run.scratch_bytes // MIB
        return data

    def unsaved_run(self) -> Run:
        data = dict(self.validated_data)
        options = data.pop("slurm_options", None)
        data["scheduler"] = {"options": options} if options is not None else {}
        peers, multinode = data.pop("peer_boxes", []), data.pop("multinode", {})
        if peers:
            data["scheduler"] = {"multinode": multinode}
        data["checkpoint_bytes"] = data.pop("checkpoint_mib") * MIB
        data["scratch_bytes"] = data.pop("scratch_mib") * MIB
        return Run(**data)


MULTINODE_KEYS = {"tasks_per_node", "collective_timeout_seconds", "ifname"}
PEER_FIELDS = ("peer_boxes", "multinode")


def _peer_boxes(data, user) -> list:
    """The other boxes of a run over several boxes, checked: the project's, each once, none the run's own
    box nor a cluster's login node; the command one torchrun can start; the options as a Slurm run's."""
    names, options = data.get("peer_boxes") or [], data.get("multinode") or {}
    if not names:
        if options:
            raise serializers.ValidationError({"multinode": ["Only a run with peer_boxes takes multinode options."]})
        return []
    if not isinstance(options, dict):
        raise serializers.ValidationError(
            {"multinode": ["An object: tasks_per_node, collective_timeout_seconds, ifname"]}
        )
    problems = [f"{key}: not a multinode option" for key in sorted(set(options) - MULTINODE_KEYS)]
    problems += slurm.option_problems(options)
    nodes = slurm.JobOptions.of({**options, "nodes": len(names) + 1})
    problems += slurm.command_problems(nodes, data.get("command") or [])
    if problems:
        raise serializers.ValidationError({"multinode": problems})
    boxes = {box.name: box for box in Instance.objects.filter(project=data["project"], name__in=names)}
    wrong = [name for name in names if name not in boxes]
    wrong += [name for name in names if boxes.get(name) == data["instance"] or names.count(name) > 1]
    wrong += [name for name in names if name in boxes and boxes[name].profile.runs_jobs]
    if wrong or data["instance"].profile.runs_jobs:
        said = "each another box of the project, once, not a cluster's login node (a cluster runs nodes itself)"
        raise serializers.ValidationError({"peer_boxes": [f"{', '.join(sorted(set(wrong))) or 'this box'}: {said}"]})
    refused = [problem for name in names if (problem := validation.box_problem(boxes[name], user))]
    if refused:
        raise serializers.ValidationError({"peer_boxes": refused})
    return [boxes[name] for name in names]


def _slurm_options(instance, options, command=None) -> dict | None:
    """The job options of a run on a Slurm box, checked as the form checks them; None on another box."""
    if not instance.profile.runs_jobs:
        if options:
            raise serializers.ValidationError({"slurm_options": ["Only a run on a Slurm box takes Slurm options."]})
        return None
    if not isinstance(options, dict):
        raise serializers.ValidationError({"slurm_options": ["An object: partition, time_minutes, gres, ..."]})
    problems = [f"{key}: not a Slurm option here" for key in sorted(set(options) - slurm.OPTION_KEYS)]
    problems += slurm.option_problems(options)
    if not problems:
        problems += slurm.command_problems(slurm.JobOptions.of(options), command or [])
    if "requeue" in options and not isinstance(options["requeue"], bool):
        problems.append("requeue: true or false")
    if problems:
        raise serializers.ValidationError({"slurm_options": problems})
    return options


class EventSerializer(DocumentedModelSerializer):
    class Meta:
        model = RunEvent
        fields = ["id", "at", "kind", "message", "data"]


class CustodySerializer(DocumentedModelSerializer):
    run = serializers.SlugRelatedField(slug_field="run_id", read_only=True)

    class Meta:
        model = CustodyRecord
        fields = [
            "id",
            "run",
            "status",
            "uri",
            "roster_sha256",
            "total_bytes",
            "file_count",
            "bytes_done",
            "files_done",
            "provider",
            "mutability",
            "mirror_uri",
            "mirror_verified",
            "verified_at",
            "consumer_location",
            "evidence",
            "warnings",
            "failure",
            "created",
        ]
        read_only_fields = fields


class TeardownSerializer(DocumentedModelSerializer):
    instance = serializers.SlugRelatedField(slug_field="name", read_only=True)
    requester = serializers.SlugRelatedField(slug_field="username", read_only=True)
    approver = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    run = serializers.SlugRelatedField(slug_field="run_id", read_only=True, allow_null=True)

    class Meta:
        model = TeardownRequest
        fields = [
            "id",
            "kind",
            "instance",
            "run",
            "location",
            "level",
            "status",
            "requester",
            "reason",
            "approver",
            "decision_comment",
            "check_at_request",
            "check_at_execution",
            "created",
            "expires_at",
            "finished_at",
            "provider_answer",
            "failure",
            "offline_verified",
        ]
        read_only_fields = fields


class TeardownCreateSerializer(serializers.Serializer):
    """The request's shape; its rules (which kind names a run, a location or a resource) are the page's
    form's, custody.forms.TeardownRequestForm, which the view applies after this."""

    instance = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=TeardownKind.choices)
    reason = serializers.CharField(max_length=2000)
    run = serializers.CharField(
        max_length=64, required=False, default="", allow_blank=True, help_text="evidence deletion: the exported run"
    )
    location = serializers.ChoiceField(
        choices=["", *EvidenceLocation.values], required=False, default="", help_text="evidence deletion: which copy"
    )
    resource = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="resource deletion: the registered resource's id"
    )
    retire_hold = serializers.BooleanField(default=False)


class SweepSerializer(DocumentedModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    base_run = serializers.SlugRelatedField(slug_field="run_id", read_only=True)
    cells = serializers.SerializerMethodField()

    class Meta:
        model = Sweep
        fields = ["id", "name", "project", "base_run", "independent", "gpus_per_box", "created", "cells"]
        read_only_fields = fields

    def get_cells(self, sweep) -> list[dict]:
        return [
            {"cell": run.cell, "run_id": run.run_id, "state": run.state, "overrides": run.config_overrides}
            for run in sorted(sweep.cells.all(), key=lambda run: run.cell or 0)
        ]


class SweepCreateSerializer(serializers.Serializer):
    """The sweep form's fields; cells are a list of mappings of the base run's config keys."""

    name = serializers.CharField(max_length=120)
    base_run = serializers.CharField(max_length=64)
    cells = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=500)
    instances = serializers.ListField(child=serializers.CharField(max_length=100), min_length=1, max_length=50)
    gpus_per_box = serializers.IntegerField(min_value=1, max_value=16, default=1)
    seeds = serializers.IntegerField(min_value=1, max_value=20, default=1)
    independent = serializers.BooleanField(default=True)


class DatasetSerializer(DocumentedModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    source_instance = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        model = Dataset
        fields = [
            "id",
            "project",
            "name",
            "source_kind",
            "source_path",
            "source_instance",
            "state",
            "refusal",
            "roster_sha256",
            "file_count",
            "total_bytes",
            "created",
        ]
        read_only_fields = fields


class DatasetCreateSerializer(serializers.Serializer):
    """A roster, if given, is checked entry by entry (datasets/roster.py) and against the files."""

    project = serializers.SlugField(max_length=40)
    name = serializers.SlugField(max_length=60)
    source_kind = serializers.ChoiceField(choices=DatasetSource.choices)
    source_path = serializers.CharField(max_length=500)
    source_instance = serializers.CharField(max_length=100, required=False, default="", allow_blank=True)
    roster = serializers.JSONField(required=False, default=None)

    def validate(self, data):
        user = self.context["user"]
        data["project"] = seen(Project.objects.visible_to(user), "project", slug=data["project"])
        name = data["source_instance"]
        boxes = Instance.objects.visible_to(user)
        data["source_instance"] = seen(boxes, "source_instance", "instance", name=name) if name else None
        return data


class ErrorSerializer(serializers.Serializer):
    """Every API error (api/errors.py)."""

    error = serializers.CharField()
    detail = serializers.JSONField()


class EventsAnswerSerializer(serializers.Serializer):
    state = serializers.CharField()
    events = EventSerializer(many=True)


class LogAnswerSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    state = serializers.CharField()
    attempt = serializers.IntegerField()
    current_attempt = serializers.IntegerField()
    offset = serializers.IntegerField()
    next_offset = serializers.IntegerField()
    more = serializers.BooleanField()
    text = serializers.CharField(allow_blank=True)


class RunEditedSerializer(RunSerializer):
    changed = serializers.ListField(child=serializers.CharField(), help_text="The fields the edit changed")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "changed"]
