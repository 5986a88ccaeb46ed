import shlex

import yaml
from django import forms

from node import slurm
from platforms import catalog
from projects.models import Project, Role
from runs import sources, sweeps, trainer_files, validation
from runs.models import Capsule, Run, SourceKind


class EnvelopeRules:
    """The cost envelope's fields as the project form and the envelope form both check them."""

    # Left out of a post (a script's, an older page's): the project's own (a new project's: 10 %, 30 min).
    IDLE = ("gpu_idle_percent", "gpu_idle_minutes")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["budget_period"].required = False  # only read with a budget; a month by default
        for field in self.IDLE:
            self.fields[field].required = False

    def clean(self):
        cleaned = super().clean()
        cleaned["budget_period"] = cleaned.get("budget_period") or "month"
        for field in self.IDLE:
            if cleaned.get(field) is None:
                cleaned[field] = getattr(self.instance, field)
        for field in ("budget", "run_cost_threshold"):
            if cleaned.get(field) is not None and cleaned[field] < 0:
                self.add_error(field, "A spend limit is zero or more dollars.")
        return cleaned


class ProjectForm(EnvelopeRules, forms.ModelForm):
    class Meta:
        model = Project
        fields = [
            "name",
            "slug",
            "description",
            "shutdown_needs_approval",
            "require_data_identity",
            "budget",
            "budget_period",
            "run_cost_threshold",
            "gpu_idle_percent",
            "gpu_idle_minutes",
        ]

    def clean_slug(self):
        slug = self.cleaned_data["slug"]
        if slug != slug.lower() or "_" in slug:
            raise forms.ValidationError("Use lowercase letters, digits and hyphens only (it becomes a node path).")
        return slug


class EnvelopeForm(EnvelopeRules, forms.ModelForm):
    """A project's cost envelope, changed after creation (runs.budgets.do_set_envelope audits it)."""

    class Meta:
        model = Project
        fields = ["budget", "budget_period", "run_cost_threshold", "gpu_idle_percent", "gpu_idle_minutes"]

    def values(self) -> dict:
        return {field: self.cleaned_data.get(field) for field in self.Meta.fields}


MIB = 1024**2


class RunForm(forms.ModelForm):
    command_line = forms.CharField(
        label="Command",
        max_length=2000,
        help_text="Run without a shell, from the source directory, e.g. python3 train.py --config config.yaml",
    )
    data_paths_text = forms.CharField(
        label="Data paths on the node",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line; each must exist on the node before compute is paid for.",
    )
    gpus_text = forms.CharField(label="GPUs", required=False, help_text="Indices, e.g. 0 or 0,1; empty for CPU")
    checkpoint_mib = forms.IntegerField(label="Checkpoint size (MiB)", min_value=0, initial=100)
    scratch_mib = forms.IntegerField(label="Scratch (MiB)", min_value=0, initial=0)
    secrets_text = forms.CharField(
        label="Run secrets",
        required=False,
        max_length=1300,
        help_text="Names of run secrets granted to the project (e.g. wandb-key), comma-separated: the command "
        "gets each as an environment variable; values never leave the workers except to the box, for the attempt.",
    )
    datasets_text = forms.CharField(
        label="Datasets",
        required=False,
        max_length=1300,
        help_text="Names of the project's registered datasets, comma-separated: preflight stages each into the "
        "box's cache/data/ (hashed as it lands) and the command reads it from $REMOTEGPU_DATA_DIR.",
    )
    move_candidates_text = forms.CharField(
        label="Continue by itself on",
        required=False,
        max_length=2100,
        help_text="Box names of the project, comma-separated, in order: when the provider says this run's box is "
        "gone (preempted, terminated) and it relaunches by itself, it continues on the first free one.",
    )
    config_overrides_text = forms.CharField(
        label="Config overrides",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="key=value per line (keys of the config file), e.g. lr=0.01; the merged config is shipped "
        "and hashed as this run's own",
    )

    trainer_files_text = forms.CharField(
        label="Trainer files (no-edit path)",
        required=False,
        max_length=3000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="For a script you cannot change: where it leaves its files, key: value per line (checkpoints, "
        "resume_args, smoke_args, weights, weights_key, metrics or log_pattern, predictions, test_id; "
        "docs/contract.md). "
        "The box builds the export from them after the command exits 0.",
    )

    slurm_partition = forms.CharField(
        label="Slurm partition",
        required=False,
        max_length=64,
        help_text="A Slurm box: the partition (default: the cluster's)",
    )
    slurm_time_minutes = forms.IntegerField(
        label="Slurm time limit (minutes)",
        required=False,
        min_value=1,
        help_text="The job's walltime; without one a maintenance reservation holds it",
    )
    slurm_gres = forms.CharField(label="Slurm GPUs (gres)", required=False, max_length=64, help_text="e.g. gpu:1")
    slurm_signal_seconds = forms.IntegerField(
        label="Checkpoint signal (s before the walltime)",
        required=False,
        help_text="The command gets SIGUSR1 this long before its time limit, to save a checkpoint (it must catch "
        "it: Python's default for SIGUSR1 ends the process); empty: no signal",
    )

    peer_boxes = forms.ModelMultipleChoiceField(
        queryset=None,
        required=False,
        label="Other boxes (one run over several)",
        help_text="The run's box is rank 0 (it seals the export); each box chosen here runs another node of the "
        "same torchrun, in name order. The command is then python script.py …",
    )
    slurm_nodes = forms.IntegerField(
        label="Slurm nodes",
        required=False,
        help_text="More than one: the command (python script.py …) runs under torchrun on every node, one run",
    )
    slurm_tasks_per_node = forms.IntegerField(
        label="Processes per node", required=False, help_text="torchrun's --nproc-per-node (GPUs per node)"
    )
    slurm_collective_timeout_seconds = forms.IntegerField(
        label="Collective timeout (s)",
        required=False,
        help_text="How long a collective waits for a frozen peer before the run fails (torch's default: 30 "
        "minutes; here 600 s unless set)",
    )
    slurm_cpus_per_task = forms.IntegerField(
        label="CPUs per process",
        required=False,
        help_text="Each process's CPUs (its data loader, its OMP threads); empty: one",
    )
    slurm_ifname = forms.CharField(
        label="Network interface",
        required=False,
        max_length=15,
        help_text="For the collectives, e.g. eth0 or ib0; empty: the one the preflight measures the rendezvous on",
    )

    class Meta:
        model = Run
        fields = [
            "project",
            "instance",
            "title",
            "source_kind",
            "source_path",
            "source_commit",
            "config_path",
            "manifest_path",
            "expected_minutes",
            "checkpoints_retained",
            "step_key",
            "expected_files",
            "environment",
            "capsule",
            "auto_relaunch",
            "max_relaunches",
            "secrets_in_smoke",
            "convert_crlf",
        ]

    def clean_capsule(self):
        return self.cleaned_data.get("capsule") or Capsule.SOFTWARE

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from fleet.models import Instance

        self.user = user
        # Only where the person is an operator: a member without the role sees runs but makes none.
        operated = Project.objects.where_role(user, Role.OPERATOR)
        self.fields["project"].queryset = operated
        boxes = Instance.objects.filter(project__in=operated).billing()
        if not (user and user.is_superuser):  # the control host is an administrator's box to run on
            boxes = boxes.exclude(profile_key__in=catalog.local_keys())
        self.fields["instance"].queryset = boxes
        self.fields["peer_boxes"].queryset = boxes.exclude(profile_key="slurm").order_by("name")
        self.fields["max_relaunches"].required = False  # only read when relaunching is on; default 3
        self.fields["capsule"].required = False  # a software run unless the person says otherwise

    def clean_max_relaunches(self):
        value = self.cleaned_data.get("max_relaunches")
        return 3 if value is None else value

    # The rules themselves live in runs/validation.py, shared with the API and sweeps.
    def clean_command_line(self):
        return validation.parse_command(self.cleaned_data["command_line"])

    def clean_config_path(self):
        return validation.check_config_path(self.cleaned_data["config_path"])

    def clean_data_paths_text(self):
        return validation.check_data_paths(self.cleaned_data["data_paths_text"].splitlines())

    def clean_step_key(self):
        return validation.check_step_key(self.cleaned_data["step_key"])

    def clean_environment(self):
        return validation.check_environment(self.cleaned_data["environment"])

    def clean_manifest_path(self):
        return validation.check_manifest_path(self.cleaned_data["manifest_path"])

    def clean_secrets_text(self):
        return validation.parse_secret_names(self.cleaned_data["secrets_text"])

    def clean_datasets_text(self):
        return validation.parse_dataset_names(self.cleaned_data["datasets_text"])

    def clean_move_candidates_text(self):
        return validation.parse_box_names(self.cleaned_data["move_candidates_text"])

    def clean_trainer_files_text(self):
        return trainer_files.parse_text(self.cleaned_data["trainer_files_text"])

    def clean_gpus_text(self):
        return validation.parse_gpus(self.cleaned_data["gpus_text"])

    def clean(self):
        data = super().clean()
        data["secrets"] = data.get("secrets_text") or []
        data["datasets"] = data.get("datasets_text") or []
        data["move_candidates"] = data.get("move_candidates_text") or []
        data["trainer_files"] = data.get("trainer_files_text") or {}
        self._clean_scheduler(data)
        texts = {"secrets": "secrets_text", "datasets": "datasets_text", "move_candidates": "move_candidates_text"}
        for field, problem in validation.relation_problems(data, self.user).items():
            self.add_error(texts.get(field, field), problem)
        if data.get("config_overrides_text") and not self.errors:
            try:
                data["config_overrides"] = validation.check_config_overrides(
                    data["config_overrides_text"], data["source_kind"], data["source_path"], data["config_path"]
                )
            except forms.ValidationError as exc:
                self.add_error("config_overrides_text", exc)
        return data

    SLURM_FIELDS = {
        "partition": "slurm_partition",
        "time_minutes": "slurm_time_minutes",
        "gres": "slurm_gres",
        "signal_seconds": "slurm_signal_seconds",
        "nodes": "slurm_nodes",
        "tasks_per_node": "slurm_tasks_per_node",
        "collective_timeout_seconds": "slurm_collective_timeout_seconds",
        "ifname": "slurm_ifname",
        "cpus_per_task": "slurm_cpus_per_task",
    }

    # What a run over several boxes takes too.
    TORCHRUN_KEYS = ("tasks_per_node", "collective_timeout_seconds", "ifname", "cpus_per_task")

    def _clean_scheduler(self, data) -> None:
        """A Slurm box's job options, checked where they reach a batch script; the other boxes of a run over
        several SSH boxes and its torchrun options; on another box, none."""
        options = {key: data.get(name) for key, name in self.SLURM_FIELDS.items() if data.get(name) not in (None, "")}
        instance = data.get("instance")
        slurm_box = instance is not None and instance.profile.runs_jobs
        if slurm_box and data.get("gpus_text"):
            self.add_error("gpus_text", "On a Slurm box the job's GPUs are asked with gres (e.g. gpu:1), not indices.")
        peers = list(data.get("peer_boxes") or [])
        if peers and (slurm_box or instance is None):
            self.add_error("peer_boxes", "A cluster runs its nodes itself: ask for Slurm nodes instead.")
        if not slurm_box:
            self._clean_peers(data, peers, options)
            return
        for problem in slurm.option_problems(options):
            self.add_error(self.SLURM_FIELDS[self._field_of(problem)], problem)
        for problem in slurm.command_problems(slurm.JobOptions.of(options), data.get("command_line") or []):
            self.add_error("slurm_nodes", problem)
        data["scheduler"] = {"options": options}

    def _clean_peers(self, data, peers: list, options: dict) -> None:
        torchrun = {key: value for key, value in options.items() if key in self.TORCHRUN_KEYS}
        data["scheduler"] = {"multinode": torchrun} if peers else {}
        if set(options) - (set(self.TORCHRUN_KEYS) if peers else set()):
            self.add_error("slurm_partition", "Only a run on a Slurm box (its login node) takes Slurm options.")
            return
        if not peers:
            return
        project = data.get("project")
        wrong = [
            box.name for box in peers if box == data.get("instance") or project is None or box.project_id != project.pk
        ]
        if wrong:
            self.add_error("peer_boxes", f"{', '.join(wrong)}: each another box of the run's project")
        for problem in slurm.option_problems(torchrun):
            self.add_error(self.SLURM_FIELDS[self._field_of(problem)], problem)
        nodes = slurm.JobOptions.of({**torchrun, "nodes": len(peers) + 1})
        for problem in slurm.command_problems(nodes, data.get("command_line") or []):
            self.add_error("peer_boxes", problem)

    @staticmethod
    def _field_of(problem: str) -> str:
        fields = {"partition": "partition", "gres": "gres", "time limit": "time_minutes", "nodes": "nodes"}
        fields |= {"processes per node": "tasks_per_node", "collective timeout": "collective_timeout_seconds"}
        fields |= {"network interface": "ifname", slurm.CPUS[1]: "cpus_per_task"}
        return fields.get(problem.split(":")[0], "signal_seconds")

    # What an edit may change (project and identity-free fields of the model, and the derived ones).
    EDITED = [name for name in Meta.fields if name != "project"] + [
        "command",
        "data_paths",
        "gpus",
        "checkpoint_bytes",
        "scratch_bytes",
        "config_overrides",
        "secrets",
        "datasets",
        "move_candidates",
        "trainer_files",
        "scheduler",
    ]

    @classmethod
    def for_edit(cls, run, data=None, *, user):
        """The form of an edit of `run`: its values, its project fixed."""
        form = cls(data, user=user, initial={**cls.initial_like(run), "title": run.title})
        form.fields["project"].disabled = True
        # The other boxes of a run over several stay as made: an edit changes the run, not its nodes.
        form.fields["peer_boxes"].initial = [peer.instance for peer in run.peers.select_related("instance")]
        form.fields["peer_boxes"].disabled = True
        return form

    def changes(self) -> dict:
        unsaved = self.save(commit=False)
        return {name: getattr(unsaved, name) for name in self.EDITED}

    @staticmethod
    def initial_like(run) -> dict:
        """A new run like `run`: its fields, its overrides as key=value lines (a person edits them)."""
        fields = {name: getattr(run, name) for name in RunForm.Meta.fields if name not in ("project", "instance")}
        return {
            **fields,
            "project": run.project_id,
            "instance": run.instance_id,
            "title": f"like {run.run_id}"[:120],
            "command_line": shlex.join(run.command),
            "data_paths_text": "\n".join(run.data_paths),
            "gpus_text": ",".join(str(gpu) for gpu in run.gpus),
            "checkpoint_mib": run.checkpoint_bytes // MIB,
            "scratch_mib": run.scratch_bytes // MIB,
            "config_overrides_text": sweeps.overrides_text(run.config_overrides),
            "secrets_text": ", ".join(run.secrets),
            "datasets_text": ", ".join(run.datasets),
            "move_candidates_text": ", ".join(run.move_candidates),
            "trainer_files_text": trainer_files.as_text(run.trainer_files),
            **{
                name: (run.scheduler.get("options") or {}).get(key)
                for key, name in RunForm.SLURM_FIELDS.items()
                if (run.scheduler.get("options") or {}).get(key) is not None
            },
        }

    def save(self, commit=True):
        run = super().save(commit=False)
        data = self.cleaned_data
        run.command = data["command_line"]
        run.data_paths = data["data_paths_text"]
        run.gpus = data["gpus_text"]
        run.checkpoint_bytes = data["checkpoint_mib"] * MIB
        run.scratch_bytes = data["scratch_mib"] * MIB
        run.config_overrides = data.get("config_overrides") or {}
        run.secrets = data.get("secrets") or []
        run.datasets = data.get("datasets") or []
        run.move_candidates = data.get("move_candidates") or []
        run.trainer_files = data.get("trainer_files") or {}
        run.scheduler = data.get("scheduler") or {}
        if commit:
            run.save()
        return run


class SweepForm(forms.Form):
    name = forms.CharField(max_length=120)
    base_run = forms.ModelChoiceField(queryset=Run.objects.none(), to_field_name="run_id")
    overrides = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="A YAML or JSON list of cells, each a mapping of base-config keys, e.g. [{lr: 0.1}, {lr: 0.01}]",
    )
    instances = forms.ModelMultipleChoiceField(queryset=None, help_text="Boxes to spread independent cells over")
    gpus_per_box = forms.IntegerField(min_value=1, max_value=16, initial=1)
    independent = forms.BooleanField(required=False, initial=True, help_text="Cells may run at the same time")
    seeds = forms.IntegerField(
        label="Seeds per cell",
        min_value=1,
        max_value=20,
        initial=1,
        required=False,
        help_text="Replicates: each cell runs with this many seeds (the base config's, then the next ones), "
        "so a comparison can tell an effect from seed noise",
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from fleet.models import Instance

        operated = Project.objects.where_role(user, Role.OPERATOR)
        self.fields["base_run"].queryset = Run.objects.filter(project__in=operated, source_kind=SourceKind.LOCAL_DIR)
        self.fields["instances"].queryset = Instance.objects.filter(project__in=operated).billing()

    def clean(self):
        data = super().clean()
        base, boxes = data.get("base_run"), data.get("instances") or []
        if not base or "overrides" not in data:
            return data
        foreign = [box.name for box in boxes if box.project_id != base.project_id]
        unpinned = [box.name for box in boxes if not box.profile.is_local and box.pinned_host_key is None]
        if foreign:
            self.add_error("instances", f"Not in the base run's project: {', '.join(foreign)}.")
        if unpinned:
            self.add_error("instances", f"Confirm the host key first: {', '.join(unpinned)}.")
        try:
            text = (sources.confined_source(base.source_path) / base.config_path).read_text()
            config = yaml.safe_load(text)
        except (OSError, yaml.YAMLError, sources.SourceError) as exc:
            self.add_error("base_run", f"The base run's config cannot be read: {exc}")
            return data
        if not isinstance(config, dict):
            self.add_error("base_run", "The base run's config is not a mapping of keys to values.")
            return data
        try:
            data["cells"] = sweeps.replicate(
                sweeps.parse_cells(data["overrides"], config), data.get("seeds") or 1, config
            )
            for cell in data["cells"]:  # refused here, not at launch: a block value, say
                sweeps.merged_config(text, cell)
        except sweeps.SweepError as exc:
            self.add_error("overrides", str(exc))
        return data

    def create(self, *, actor):
        """The sweep this valid form describes (the page and the API make it the same way)."""
        from runs.actions.sweeps import do_create_sweep

        data = self.cleaned_data
        boxes = list(data["instances"])
        return do_create_sweep(
            data["base_run"], data["name"], data["cells"], boxes, data["gpus_per_box"], data["independent"], actor=actor
        )
