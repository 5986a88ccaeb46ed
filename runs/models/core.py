"""Runs (one experiment on one box), their events, GPU locks, sweeps and watch leases."""

from django.conf import settings
from django.db import models
from django.urls import reverse

from core.states import Transitions
from projects.models import Project


class RunState(models.TextChoices):
    DRAFT = "draft", "Draft"
    PREFLIGHT = "preflight", "Preflight"
    FAILED_PREFLIGHT = "failed_preflight", "Failed preflight"
    SMOKE = "smoke", "CPU smoke"
    FAILED_SMOKE = "failed_smoke", "Failed smoke"
    LAUNCHING = "launching", "Launching"
    FAILED_LAUNCH = "failed_launch", "Failed launch"
    RUNNING = "running", "Running"
    EXITED = "exited", "Exited"
    EXPORTED = "exported", "Closed: exported"
    QUARANTINED = "quarantined", "Closed: quarantined"


# The only legal moves. Retrying (an identical new attempt) re-enters LAUNCHING from a failure;
# continuing on another box (runs/actions/moves.py) re-enters PREFLIGHT, on the new box.
RUN_TRANSITIONS = Transitions(
    RunState,
    {
        RunState.DRAFT: {RunState.PREFLIGHT},
        RunState.PREFLIGHT: {RunState.SMOKE, RunState.FAILED_PREFLIGHT},
        RunState.FAILED_PREFLIGHT: {RunState.PREFLIGHT},
        RunState.SMOKE: {RunState.LAUNCHING, RunState.FAILED_SMOKE},
        RunState.FAILED_SMOKE: {RunState.PREFLIGHT},
        RunState.LAUNCHING: {RunState.RUNNING, RunState.FAILED_LAUNCH},
        RunState.FAILED_LAUNCH: {RunState.LAUNCHING, RunState.PREFLIGHT},
        RunState.RUNNING: {RunState.EXITED},
        RunState.EXITED: {RunState.EXPORTED, RunState.QUARANTINED},
        RunState.EXPORTED: set(),
        # A re-seal: an attempt quarantined for paperwork alone, sealed after all (runs/actions/reseal.py).
        RunState.QUARANTINED: {RunState.LAUNCHING, RunState.PREFLIGHT, RunState.EXPORTED},
    },
    "A run",
)
# Failed attempts whose active/ may still hold checkpoints and logs on the node until closed.
UNCLOSED_STATES = [RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE, RunState.FAILED_LAUNCH, RunState.QUARANTINED]
LIVE_STATES = {RunState.PREFLIGHT, RunState.SMOKE, RunState.LAUNCHING, RunState.RUNNING, RunState.EXITED}
RETRYABLE_STATES = {RunState.QUARANTINED, RunState.FAILED_LAUNCH}
# Nothing of these ran on the box yet: what the run is may still change (a launched one keeps what it ran).
EDITABLE_STATES = {RunState.DRAFT, RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE}


class SourceKind(models.TextChoices):
    LOCAL_DIR = "local_dir", "Directory on the control host (shipped to the node)"
    GIT = "git", "Git repository + commit on the control host (shipped)"
    NODE_PATH = "node_path", "Directory already on the node"


class Capsule(models.TextChoices):
    """What a run seals (artifact-layout.md): a software run, or a weight-free hardware capsule that binds
    a capture, its decode and the closed model run it applied, kept apart from every software export."""

    SOFTWARE = "software", "Software run (export/<run-id>: weights, config, history, tests)"
    HARDWARE = "hardware", "Hardware capsule (export/hardware/<run-id>: bindings and tests, no weights)"


class RunQuerySet(models.QuerySet):
    def stop_undelivered(self):
        """Running runs whose person's stop the box has not been told of yet."""
        return self.filter(state=RunState.RUNNING, stop_asked_at__isnull=False, stop_delivered_at__isnull=True)

    def visible_to(self, user):
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser:
            return self
        # A subquery, not a join: the planner can then walk the (created, id) index and stop early.
        return self.filter(project__in=Project.objects.filter(members=user).values("pk"))

    def live(self):
        return self.filter(state__in=LIVE_STATES)


class Run(models.Model):
    run_id = models.CharField(max_length=64, unique=True, editable=False)
    title = models.CharField(max_length=120, blank=True)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="runs")
    instance = models.ForeignKey("profiles.Instance", on_delete=models.PROTECT, related_name="runs")
    source_kind = models.CharField(max_length=16, choices=SourceKind.choices)
    source_path = models.CharField(max_length=500)
    source_commit = models.CharField(max_length=64, blank=True, help_text="Git revision (for git sources)")
    command = models.JSONField(help_text="argv, run without a shell on the node")
    config_path = models.CharField(max_length=300, help_text="Relative to the source directory")
    data_paths = models.JSONField(default=list, blank=True)
    manifest_path = models.CharField(max_length=500, blank=True)
    gpus = models.JSONField(default=list, blank=True, help_text="GPU indices on the instance")
    expected_minutes = models.PositiveIntegerField(default=60)
    checkpoint_bytes = models.BigIntegerField(default=0)
    checkpoints_retained = models.PositiveIntegerField(default=2)
    step_key = models.CharField(
        max_length=40,
        blank=True,
        help_text="The top-level key your checkpoint keeps its step in, when it is none of step, global_step, "
        "iter_num, iteration, epoch",
    )
    trainer_files = models.JSONField(
        default=dict,
        blank=True,
        help_text="Where an unchanged script leaves its files (runs/trainer_files.py): the box builds the export "
        "from them",
    )
    # A run on a Slurm cluster's login node: "options" (partition, time_minutes, gres, signal_seconds,
    # requeue; node/slurm.py checks them) as asked; "job" and "base_attempt" once sbatch took it.
    scheduler = models.JSONField(default=dict, blank=True)
    scratch_bytes = models.BigIntegerField(default=0)
    expected_files = models.PositiveBigIntegerField(default=1000, help_text="Inodes the run will create")
    state = models.CharField(max_length=20, choices=RunState.choices, default=RunState.DRAFT)
    attempt = models.PositiveIntegerField(default=0)
    # Bound identities (set by preflight, from what is actually on the node).
    source_tree_sha256 = models.CharField(max_length=64, blank=True)
    resolved_commit = models.CharField(max_length=40, blank=True)
    config_sha256 = models.CharField(max_length=64, blank=True)
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    preflight_report = models.JSONField(default=dict, blank=True)
    smoke_exit_code = models.IntegerField(null=True, blank=True)
    smoke_output = models.TextField(blank=True)
    wrapper_name = models.CharField(max_length=80, blank=True)
    detach = models.CharField(max_length=16, blank=True)
    launched_command = models.TextField(blank=True)
    launched_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exited_at = models.DateTimeField(null=True, blank=True)
    gpu_seconds = models.FloatField(default=0, help_text="GPU-seconds used, summed over attempts")
    close_reason = models.TextField(blank=True)
    last_status = models.JSONField(default=dict, blank=True)
    gpu_holders_waived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="An approver let the next preflight start beside processes outside RemoteGPU on its GPUs.",
    )
    # A person's Stop of the current attempt: asked, then delivered to the box (the wrapper
    # sends SIGTERM, SIGKILL after the grace); an undelivered one is re-sent until its deadline.
    stop_asked_at = models.DateTimeField(null=True, blank=True)
    stop_asked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    stop_delivered_at = models.DateTimeField(null=True, blank=True)
    # What the watcher has learned (DOMAIN §3): offsets into the node's files, the curve, health.
    stall_seconds = models.PositiveIntegerField(default=1800, help_text="Alive but silent this long = stalled")
    log_offset = models.BigIntegerField(default=0)
    csv_offset = models.BigIntegerField(default=0)
    curve = models.JSONField(default=list, blank=True)
    last_metrics = models.JSONField(default=dict, blank=True, help_text="The curve's latest row: history's columns")
    log_kept_bytes = models.BigIntegerField(default=0, help_text="Of this attempt's log, kept on the control host")
    alerts = models.JSONField(default=list, blank=True, help_text="Material signals already reported this attempt")
    health = models.CharField(max_length=20, blank=True)
    health_since = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # GPU use as the watcher measures it (runs/gpu_use.py): since when every GPU of the run has been
    # under its project's idle threshold (None: busy, or not measured), and the last sample kept.
    gpu_idle_since = models.DateTimeField(null=True, blank=True)
    gpu_accepted = models.JSONField(
        default=dict,
        blank=True,
        help_text="An approver's acceptance of a box whose GPUs differ from the rent's: {by, comment, measured}",
    )
    gpu_sampled_at = models.DateTimeField(null=True, blank=True)
    failure_class = models.CharField(max_length=20, blank=True)
    failure_excerpt = models.TextField(blank=True)
    export_deleted_at = models.DateTimeField(null=True, blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True, help_text="When the run entered its state")
    redrives = models.PositiveSmallIntegerField(default=0, help_text="Re-drives of the task of this state")
    active_closed_at = models.DateTimeField(
        null=True, blank=True, help_text="A failed attempt's active/ was moved into quarantine/ by a person"
    )
    capsule = models.CharField(
        "what it seals",
        max_length=10,
        choices=Capsule.choices,
        default=Capsule.SOFTWARE,
        help_text="A hardware capsule holds a capture's results with no weights, sealed under export/hardware/",
    )
    auto_relaunch = models.BooleanField(
        "relaunch after an interruption",
        default=False,
        help_text="When the box reboots or its container restarts mid-run, relaunch the identical command.",
    )
    max_relaunches = models.PositiveSmallIntegerField(default=3)
    relaunches = models.PositiveSmallIntegerField(default=0)
    boot_relaunches = models.PositiveSmallIntegerField(
        default=0, help_text="Relaunches the box's start hook made with no control plane, as last read back"
    )
    environment = models.CharField(
        max_length=300,
        blank=True,
        help_text="Interpreter path, venv directory or conda env name on the node; blank = the image's python3",
    )
    env_identity = models.JSONField(default=dict, blank=True, help_text="sys.executable, Python, torch, CUDA")
    secrets = models.JSONField(
        default=list, blank=True, help_text="Names of the run secrets its command gets (never their values)"
    )
    secrets_in_smoke = models.BooleanField(
        "secrets in the smoke too", default=False, help_text="Give the secrets to the CPU smoke as well."
    )
    convert_crlf = models.BooleanField(
        "convert CRLF line endings",
        default=False,
        help_text="Ship shell scripts with Windows line endings converted to LF (else they are refused).",
    )
    datasets = models.JSONField(
        default=list, blank=True, help_text="Names of the project's datasets it reads, staged at preflight"
    )
    data_sha256 = models.CharField(
        max_length=64, blank=True, help_text="The data identity: its dataset's roster hash (or of its datasets')"
    )
    staging = models.JSONField(default=dict, blank=True, help_text="Datasets being staged: progress, last at")
    hooks = models.JSONField(default=dict, blank=True, help_text="The platform hooks as the node applied them")
    hooks_sha256 = models.CharField(max_length=64, blank=True, help_text="The hooks' identity")
    sweep = models.ForeignKey("Sweep", null=True, blank=True, on_delete=models.PROTECT, related_name="cells")
    cell = models.PositiveSmallIntegerField(null=True, blank=True)
    config_overrides = models.JSONField(default=dict, blank=True, help_text="A sweep cell's changes to the config")
    write_bytes_per_second = models.BigIntegerField(null=True, blank=True, help_text="Measured at preflight")
    ckpt_mirror = models.JSONField(
        default=dict, blank=True, help_text="The current attempt's checkpoint mirror, as its node last said"
    )
    durable_ckpt = models.JSONField(
        default=dict,
        blank=True,
        help_text="The newest durable copy of each checkpoint (where, which box, SHA-256, step): what a move restores",
    )
    resume_floor = models.IntegerField(
        null=True, blank=True, help_text="The step the current attempt must resume from (set at relaunch)"
    )
    resume_broken = models.TextField(blank=True, help_text="Why an attempt did not resume; stops automatic relaunches")
    moves = models.JSONField(default=list, blank=True, help_text="Each continuation on another box")
    move_candidates = models.JSONField(
        default=list,
        blank=True,
        help_text="Boxes (names, in order) a run that relaunches by itself continues on when its provider says "
        "its box is gone: the first free one, from the newest durable checkpoint",
    )
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    definition_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who last wrote what the run runs (made or edited it): on the control host only an administrator's",
    )

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        indexes = [
            models.Index(fields=["-created", "-id"], name="run_history_order"),
            models.Index(fields=["state", "-created"], name="run_state_created"),
            # History's search: a prefix of a hex identifier is a range on these (runs/search.py).
            models.Index(fields=["resolved_commit"], name="run_resolved_commit"),
            models.Index(fields=["config_sha256"], name="run_config_sha256"),
        ]

    def __str__(self):
        return self.run_id

    def get_absolute_url(self):
        return reverse("run-detail", args=[self.run_id])

    @property
    def slurm_options(self) -> dict:
        """The job options asked for a Slurm box's run (node/slurm.py checks them); {} elsewhere."""
        return (self.scheduler or {}).get("options") or {}

    @property
    def is_multinode(self) -> bool:
        return "multinode" in (self.scheduler or {})

    def nodes(self) -> list:
        """rank 0 (this run's box) and every other box's node, for the run page."""
        peers = list(self.peers.select_related("instance"))
        return [{"rank": 0, "box": self.instance, "status": self.last_status, "head": True}] + [
            {"rank": peer.rank, "box": peer.instance, "status": peer.last_status, "head": False} for peer in peers
        ]

    @property
    def multinode(self) -> dict:
        """A run over several SSH boxes (RunPeer rows): its torchrun options; {} for one box."""
        return (self.scheduler or {}).get("multinode") or {}

    @property
    def slurm_job(self) -> str:
        """The Slurm job of this run's attempts, once sbatch took it; "" elsewhere."""
        return (self.scheduler or {}).get("job") or ""

    @property
    def slurm_base_attempt(self) -> int:
        """The attempt sbatch took the job as: its requeues are the attempts after it (SLURM_RESTART_COUNT)."""
        return int((self.scheduler or {}).get("base_attempt") or self.attempt)

    @property
    def node_source(self) -> str:
        """The source directory already on the node (a node-path source), else "": the node layout reads it."""
        return self.source_path if self.source_kind == SourceKind.NODE_PATH else ""

    @property
    def editable(self) -> bool:
        """Nothing of it ran on its box and no sweep made it: what it is may still change."""
        return self.state in EDITABLE_STATES and not self.attempt and not self.sweep_id

    @property
    def identities_bound(self) -> bool:
        return bool(self.config_sha256 and (self.source_tree_sha256 or self.resolved_commit))


class RunEvent(models.Model):
    """Append-only: something material that happened to a run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=24)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    message = models.TextField()
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["run", "-at", "-id"], name="runevent_newest_per_run")]

    def __str__(self):
        return f"{self.run_id} {self.kind}: {self.message[:60]}"


class LogChunk(models.Model):
    """A piece of an attempt's training log as the watcher read it: [start, end) bytes of log.txt on the node.

    The control host keeps what it has read (up to LOG_KEEP_BYTES per attempt) so the full log can
    be paged, downloaded and followed without another trip to a box that may be gone.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="log_chunks")
    attempt = models.PositiveIntegerField()
    start = models.BigIntegerField()
    end = models.BigIntegerField()
    text = models.TextField()

    class Meta:
        ordering = ["run", "attempt", "start"]
        constraints = [models.UniqueConstraint(fields=["run", "attempt", "start"], name="one_chunk_per_offset")]

    def __str__(self):
        return f"{self.run_id} attempt {self.attempt} [{self.start}, {self.end})"


class GpuSample(models.Model):
    """What nvidia-smi said of a run's GPUs at one watcher tick (at most one per GPU_SAMPLE_SECONDS):
    utilisation (%) and memory used (MiB) per GPU index, the run's GPUs only. Plotted on the run page."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="gpu_samples")
    at = models.DateTimeField()
    gpus = models.JSONField(help_text='[{"index": 0, "utilization_pct": 97, "memory_used_mib": 20480}, …]')

    class Meta:
        ordering = ["run", "at"]
        indexes = [models.Index(fields=["run", "at"], name="gpu_sample_run_at")]

    def __str__(self):
        return f"{self.run_id} GPUs at {self.at:%H:%M:%S}"


class Totals(models.Model):
    """Kept totals of the runs of one project or one box: changed by the actions that change them, in
    their transaction (`runs/rollups.py`), so history reads a row instead of scanning every run.
    `manage.py check_rollups` recomputes them from the runs."""

    runs = models.PositiveIntegerField(default=0)
    gpu_seconds = models.FloatField(default=0)
    verified = models.PositiveIntegerField(default=0, help_text="Runs with a verified custody record")

    class Meta:
        abstract = True


class ProjectTotals(Totals):
    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="totals")

    def __str__(self):
        return f"totals of {self.project_id}"


class InstanceTotals(Totals):
    instance = models.OneToOneField("profiles.Instance", on_delete=models.CASCADE, related_name="totals")

    def __str__(self):
        return f"totals of box {self.instance_id}"


class GpuLock(models.Model):
    """One writer per GPU: a row per (instance, GPU index) held by one run until it exits."""

    instance = models.ForeignKey("profiles.Instance", on_delete=models.CASCADE, related_name="gpu_locks")
    gpu_index = models.PositiveIntegerField()
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="gpu_locks")
    acquired = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["instance", "gpu_index"], name="one_writer_per_gpu")]

    def __str__(self):
        return f"GPU {self.gpu_index} on {self.instance_id} held by {self.run_id}"


class WatchLease(models.Model):
    """The one watcher of an instance's live runs: an owner and an expiry, claimed atomically.

    One combined probe per instance per tick covers every live run on it, so the lease is per
    instance and each live run is watched by exactly one lease holder.
    """

    instance = models.OneToOneField("profiles.Instance", on_delete=models.CASCADE, related_name="watch_lease")
    owner = models.CharField(max_length=200)
    expires_at = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField()
    ticks = models.PositiveIntegerField(default=0)
    connects = models.PositiveIntegerField(default=0)
    unreachable_since = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"watch of {self.instance_id} by {self.owner} until {self.expires_at:%H:%M:%S}"


class RunPeer(models.Model):
    """Another box of a run over several boxes, and its node rank. The run's own box is rank 0: it hosts
    the rendezvous and seals the export; each peer's wrapper runs its node's part and seals nothing."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="peers")
    instance = models.ForeignKey("profiles.Instance", on_delete=models.PROTECT, related_name="peer_nodes")
    rank = models.PositiveSmallIntegerField()
    last_status = models.JSONField(default=dict, blank=True, help_text="What its box said at the last probe")
    probed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["rank"]
        constraints = [
            models.UniqueConstraint(fields=["run", "instance"], name="run_peer_once"),
            models.UniqueConstraint(fields=["run", "rank"], name="run_peer_rank_once"),
        ]

    def __str__(self):
        return f"{self.run_id} node {self.rank} on {self.instance_id}"
