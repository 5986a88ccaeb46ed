"""Slurm through a cluster's login node: the batch script a run becomes, the commands that ask the
scheduler about its job, and how their answers read. Pure: no Django, no SSH (the fleet's node client runs
the commands over the box's transport).

Measured on Slurm 22.05 (../shared/reference/clusters/slurm-on-one-machine.md): `sbatch --parsable` returns
at once, so the SSH session ending is the detach; SLURM_RESTART_COUNT is unset on the first run and counts
the requeues after it; a job leaves squeue after MinJobAge and only sacct knows it then (`sacct -c` reads
the completion log where the cluster keeps no accounting database); `squeue --only-job-state` is refused.
"""

import re
import shlex
from dataclasses import dataclass, fields
from datetime import datetime

from wrapper.digits import ascii_int

PARTITION = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
GRES = re.compile(r"[a-z]{1,16}(:[A-Za-z0-9_.-]{1,32})?(:[0-9]{1,3})?")  # gpu, gpu:2, gpu:a100:2
SUBMITTED = re.compile(r"([0-9]{1,12})(;[A-Za-z0-9_.-]{1,64})?")  # sbatch --parsable: "JOBID" or "JOBID;CLUSTER"
JOB = re.compile(r"[0-9]{1,12}(_[0-9]{1,7})?")  # a job, or one task of an array ("12_3"), as squeue and sacct name it
MOST_MINUTES = 60 * 24 * 30
IFNAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}\Z")  # a Linux interface name (IFNAMSIZ 16, with its NUL)


def interface_name(said) -> bool:
    """Whether a box's word is an interface name we may pin a collective to."""
    return isinstance(said, str) and IFNAME.fullmatch(said) is not None


DEFAULT_COLLECTIVE_SECONDS = 600
PYTHON = re.compile(r"^(.*/)?python[0-9.]*\Z")

# squeue -O: each field ends with "|" (its suffix); the reason can be long ("ReqNodeNotAvail, May be …").
SQUEUE_FIELDS = "JobArrayID:24|,State:24|,Reason:120|,RestartCnt:8|,TimeLeft:16|,NodeList:120|,StartTime:20|"
HOLD_AHEAD_SECONDS = 10  # a requeued job whose start is further away than this is released
SACCT_FIELDS = "JobID,State,ExitCode"  # JobID: an array's task as "12_3" (JobIDRaw is its own number)

# The job's states (squeue / sacct): where it still is, and what a final state means for the run.
LIVE = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
    "RESV_DEL_HOLD",
}
FINAL = {
    "COMPLETED": "completed",
    "FAILED": "the command failed",
    "TIMEOUT": "the walltime ran out",
    "OUT_OF_MEMORY": "out of memory",
    "PREEMPTED": "preempted by a higher-priority job",
    "NODE_FAIL": "its node failed",
    "CANCELLED": "cancelled",
    "BOOT_FAIL": "its node failed to boot",
    "DEADLINE": "its deadline passed",
    "REVOKED": "revoked by a sibling cluster",
}


@dataclass(frozen=True)
class JobOptions:
    """What a run asks of the scheduler. time_minutes None: no limit (a maintenance reservation holds it)."""

    partition: str = ""
    time_minutes: int | None = None
    gres: str = ""
    signal_seconds: int | None = None  # SIGUSR1 this long before the walltime: the command checkpoints
    requeue: bool = True
    nodes: int = 1  # more than one: torchrun on every node (srun), one rendezvous, one run
    tasks_per_node: int = 1  # torchrun's --nproc-per-node: processes (GPUs) per node
    collective_timeout_seconds: int | None = None  # how long a collective waits for a peer (torch: 30 min)
    ifname: str = ""  # the network interface the collectives use (GLOO_/NCCL_SOCKET_IFNAME)
    cpus_per_task: int | None = None  # CPUs per process (its data loader's, its OMP threads); None: Slurm's 1

    @property
    def distributed(self) -> bool:
        return self.nodes > 1 or self.tasks_per_node > 1

    @classmethod
    def of(cls, data: dict | None) -> "JobOptions":
        data = data or {}
        return cls(
            partition=data.get("partition") or "",
            time_minutes=data.get("time_minutes"),
            gres=data.get("gres") or "",
            signal_seconds=data.get("signal_seconds"),
            requeue=data.get("requeue", True) is not False,
            nodes=data.get("nodes") or 1,
            tasks_per_node=data.get("tasks_per_node") or 1,
            collective_timeout_seconds=data.get("collective_timeout_seconds"),
            ifname=data.get("ifname") or "",
            cpus_per_task=data.get("cpus_per_task"),
        )

    def distributed_spec(self) -> dict | None:
        """What the wrapper needs to start torchrun on every node, or None for a one-process run. A
        collective waits DEFAULT_COLLECTIVE_SECONDS unless the run says otherwise (torch's 30 minutes
        would let a frozen peer hold every node that long)."""
        if not self.distributed:
            return None
        timeout = self.collective_timeout_seconds or DEFAULT_COLLECTIVE_SECONDS
        shape = {"nodes": self.nodes, "tasks_per_node": self.tasks_per_node, "timeout": timeout, "ifname": self.ifname}
        return shape | ({"cpus_per_task": self.cpus_per_task} if self.cpus_per_task else {})


def option_problems(data: dict) -> list[str]:
    """Every problem of a run's scheduler options, named at once (they reach a batch script)."""
    problems = []
    partition, gres = data.get("partition") or "", data.get("gres") or ""
    if partition and not PARTITION.fullmatch(partition):
        problems.append("partition: letters, digits, '.', '_' and '-' only (at most 64)")
    if gres and not GRES.fullmatch(gres):
        problems.append("gres: as Slurm writes it, e.g. gpu:1 or gpu:a100:2")
    minutes = data.get("time_minutes")
    whole = isinstance(minutes, int) and not isinstance(minutes, bool) and minutes >= 1
    if minutes is not None and not whole:
        problems.append("time limit: whole minutes, at least 1")
    elif minutes is not None and minutes > MOST_MINUTES:
        problems.append(f"time limit: at most {MOST_MINUTES} minutes (30 days)")
    problems += _distributed_problems(data)
    seconds = data.get("signal_seconds")
    if seconds is None:
        return problems
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 10 <= seconds <= 3600:
        problems.append("checkpoint signal: 10 to 3600 seconds before the walltime")
    elif not whole:
        problems.append("checkpoint signal: it needs a time limit to come before")
    elif seconds >= minutes * 60:
        problems.append("checkpoint signal: it must come before the time limit, not at or after it")
    return problems


def _whole_in(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


CPUS = ("cpus_per_task", "CPUs per process", 256)
OPTION_KEYS = frozenset(field.name for field in fields(JobOptions))  # every option a run may ask, by name


def _distributed_problems(data: dict) -> list[str]:
    problems = []
    for key, what, high in (("nodes", "nodes", 64), ("tasks_per_node", "processes per node", 16), CPUS):
        if data.get(key) is not None and not _whole_in(data[key], 1, high):
            problems.append(f"{what}: a whole number from 1 to {high}")
    timeout = data.get("collective_timeout_seconds")
    if timeout is not None and not _whole_in(timeout, 10, 86400):
        problems.append("collective timeout: 10 to 86400 seconds")
    if data.get("ifname") and not (isinstance(data["ifname"], str) and IFNAME.fullmatch(data["ifname"])):
        problems.append("network interface: a Linux interface name, e.g. eth0 or ib0")
    return problems


def command_problems(options: JobOptions, command: list[str]) -> list[str]:
    """A run over several processes starts its command under torchrun on every node: the command must be
    `<python> <script> [args]`, which torchrun runs as `<python> -m torch.distributed.run … <script> [args]`."""
    if not options.distributed:
        return []
    if len(command) < 2 or not PYTHON.fullmatch(command[0]) or command[1].startswith("-"):
        return ["a multi-node or multi-process run's command is `python script.py [args]`: torchrun starts that script"]
    return []


def warnings_of(options: JobOptions) -> list[str]:
    if options.time_minutes is None:
        return [
            "No time limit: a maintenance reservation holds a job without one (ReqNodeNotAvail) while jobs with"
            " a limit that ends before it still start. Set one."
        ]
    return []


def batch_script(options: JobOptions, *, job_name: str, output: str, wrapper_argv: list[str]) -> str:
    """The job's script: its options as #SBATCH lines, then the wrapper exec'd, so the batch shell is the
    wrapper (Slurm's B:USR1 and the TERM of a cancel or a requeue reach it, and it passes them on)."""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --output={output}",
        "#SBATCH --open-mode=append",  # a requeued attempt appends: the earlier attempt's lines stay
        "#SBATCH --requeue" if options.requeue else "#SBATCH --no-requeue",
    ]
    if options.signal_seconds and options.time_minutes is not None:
        # B: to the batch shell only, which is the wrapper; it passes USR1 on to the command.
        lines.append(f"#SBATCH --signal=B:USR1@{int(options.signal_seconds)}")
    lines += [f"#SBATCH {flag}" for flag in asked(options)]
    if options.distributed:  # one task per node: that node's torchrun, started by the wrapper's srun
        lines.append("#SBATCH --ntasks-per-node=1")
    return "\n".join([*_checked(lines), "exec " + shlex.join(wrapper_argv), ""])


@dataclass(frozen=True)
class ArrayTask:
    """One cell of a sweep as a task of a job array: its index, its run's active folder (its output goes
    there, as a single job's does), and its wrapper."""

    index: int
    active: str
    wrapper_argv: list[str]


def array_script(options: JobOptions, *, job_name: str, tasks: list[ArrayTask], at_once: int) -> str:
    """One job array for a sweep's cells: the options as #SBATCH lines, `--array=<indices>%<at_once>` (the
    cluster runs at most that many cells at a time), and a branch per task that sends its output to its
    cell's own file and exec's its cell's wrapper, so each task is its cell's run as a single job would be."""
    if not tasks or at_once < 1:
        raise ValueError("an array needs a task and room for one at a time")
    indices = ",".join(str(int(task.index)) for task in tasks)
    head = batch_script(options, job_name=job_name, output="/dev/null", wrapper_argv=["true"]).splitlines()[:-1]
    lines = [*_checked([*head, f"#SBATCH --array={indices}%{int(at_once)}"]), 'case "$SLURM_ARRAY_TASK_ID" in']
    for task in tasks:
        output = shlex.quote(f"{task.active}/slurm-") + '"$SLURM_JOB_ID".out'  # slurm-%j.out, as a job's
        lines += [f"  {int(task.index)}) exec >>{output} 2>&1", f"     exec {shlex.join(task.wrapper_argv)} ;;"]
    return "\n".join([*lines, "esac", 'echo "no cell for array task $SLURM_ARRAY_TASK_ID" >&2', "exit 2", ""])


def _checked(lines: list[str]) -> list[str]:
    for line in lines[1:]:
        if "\n" in line or not re.fullmatch(r"#SBATCH --[a-z-]+(=[\w.:@/%,+-]+)?", line):
            raise ValueError(f"not a safe #SBATCH line: {line!r}")
    return lines


def asked(options: JobOptions) -> list[str]:
    """The request's own flags: where, how long, what GPUs (a batch script's, a test's, a preflight's)."""
    flags = [f"--partition={options.partition}"] if options.partition else []
    flags += [f"--time={int(options.time_minutes)}"] if options.time_minutes is not None else []
    flags += [f"--nodes={int(options.nodes)}"] if options.nodes > 1 else []
    # One task per node runs torchrun, which starts tasks_per_node processes: the task asks for them all.
    flags += (
        [f"--cpus-per-task={int(options.cpus_per_task) * int(options.tasks_per_node)}"] if options.cpus_per_task else []
    )
    return flags + ([f"--gres={options.gres}"] if options.gres else [])


def submitted_job(stdout: str) -> str | None:
    """The job id sbatch --parsable printed, or None when it printed anything else."""
    found = SUBMITTED.fullmatch(stdout.strip())
    return found.group(1) if found else None


RESTARTS_LIMIT = 10_000  # Slurm's MaxBatchRequeue is 5 by default; a count past this is not a count
LINES_LIMIT = 5000  # an answer about a login node's jobs is read this far, no further (untrusted)


def squeue_argv(jobs: list[str]) -> list[str]:
    """-r: one line per array task, a waiting one too (else the waiting tasks share one line, "12_[2-5]")."""
    return ["squeue", "-h", "-r", "-j", ",".join(jobs), "-O", SQUEUE_FIELDS]


def squeue_script(jobs: list[str]) -> str:
    """The login node's local time, then squeue's lines: squeue writes times in the same local time."""
    return "date +%Y-%m-%dT%H:%M:%S && " + shlex.join(squeue_argv(jobs))


def sacct_argv(jobs: list[str], completion_log: bool) -> list[str]:
    """Every attempt of the jobs (-D: a requeued job's earlier runs too), one line each; from the completion
    log where the cluster has no accounting database."""
    where = ["-c"] if completion_log else ["-X", "-D"]
    return ["sacct", *where, "-P", "-n", "-j", ",".join(jobs), "-o", SACCT_FIELDS]


def no_accounting(stderr: str) -> bool:
    return "accounting storage is disabled" in stderr.lower()


def squeue_lists(exit_code: int, stderr: str) -> bool:
    """Whether squeue's answer lists the jobs asked (exit 0), or says in its own words that none of them is in
    the queue any more (22.05, one job asked: exit 1, "slurm_load_jobs error: Invalid job id specified"). Any
    other failure is a controller that did not answer ("Socket timed out on send/recv operation" from a busy
    or stalled slurmctld): nothing is known of the jobs then, and sacct's final word is not asked, because a
    job at its time limit has its final state in the completion log while its processes are still ending."""
    if exit_code == 0 or "invalid job id specified" in stderr.lower():
        return True
    raise SchedulerSilent(f"squeue failed (exit {exit_code}): {stderr.strip()[-200:] or 'no message'}")


class MalformedAnswer(ValueError):
    """squeue, sacct or sbatch said something no Slurm says (a count in other digits, a number past any bound):
    the login node is untrusted, so the answer is refused and named, never read as far as it goes."""


class SchedulerSilent(MalformedAnswer):
    """The controller did not answer squeue: this tick knows nothing of the jobs (none is read as gone)."""


@dataclass(frozen=True)
class Job:
    """The scheduler's word on one job. source: squeue (it is live), sacct (it has left the queue), or
    unknown (neither knows it: never read as done)."""

    job: str
    state: str
    source: str
    reason: str = ""
    restarts: int = 0
    time_left: str = ""
    nodes: str = ""
    exit_code: int | None = None
    start_in: float | None = None  # seconds until its expected start (a pending job), as the login node's clock says

    @property
    def live(self) -> bool:
        return self.source == "squeue" and self.state in LIVE

    @property
    def running(self) -> bool:
        return self.source == "squeue" and self.state in ("RUNNING", "COMPLETING")

    @property
    def final(self) -> bool:
        return self.source == "sacct" and self.state in FINAL

    def describe(self) -> str:
        if self.source == "unknown":
            return f"job {self.job}: neither squeue nor sacct knows it"
        said = FINAL.get(self.state, self.state.lower())
        why = f" ({self.reason})" if self.reason and self.reason != "None" else ""
        code = f", exit code {self.exit_code}" if self.exit_code not in (None, 0) else ""
        return f"job {self.job} {self.state}{why}: {said}{code}" if self.final else f"job {self.job} {said}{why}"

    def as_dict(self) -> dict:
        return {**self.__dict__, "live": self.live, "final": self.final, "said": self.describe()}


def read_squeue(job: str, stdout: str) -> Job | None:
    """The job's line of squeue (after the login node's local time, squeue_script's first line), or None
    when squeue does not list it (it has left the queue)."""
    lines = stdout.splitlines()
    now = _local_time(lines[0]) if lines else None
    for line in lines[1 : 1 + LINES_LIMIT]:
        fields = [field.strip() for field in line.split("|")]
        if len(fields) >= 7 and fields[0] == job:
            state = fields[1].split()[0] if fields[1] else ""
            if not re.fullmatch(r"[A-Z_]{1,24}", state):
                return None
            restarts = ascii_int(fields[3] or "0", RESTARTS_LIMIT)
            if restarts is None:
                raise MalformedAnswer(f"squeue gave job {job} a restart count that is not one: {fields[3][:40]!r}")
            start = _local_time(fields[6])
            start_in = (start - now).total_seconds() if start and now else None
            return Job(job, state, "squeue", fields[2][:200], restarts, fields[4][:32], fields[5][:200], None, start_in)
    return None


def _local_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None  # "N/A", "Unknown", anything else


def read_sacct(job: str, stdout: str) -> Job | None:
    """The job's last line in sacct (its newest attempt), or None when sacct does not know it."""
    found = None
    for line in stdout.splitlines()[:LINES_LIMIT]:
        fields = line.strip().split("|")
        if len(fields) < 3 or fields[0] != job:
            continue
        state = fields[1].split()[0] if fields[1] else ""  # "CANCELLED by 0"
        code = fields[2].split(":")[0]
        if re.fullmatch(r"[A-Z_]{1,24}", state):
            exit_code = ascii_int(code, 255) if code else None
            if code and exit_code is None:
                raise MalformedAnswer(f"sacct gave job {job} an exit code that is not one: {code[:40]!r}")
            found = Job(job, state, "sacct", exit_code=exit_code)
    return found


def held_after_requeue(job: Job) -> bool:
    """A requeued job held by Slurm's begin-time delay (about 120 s after a requeue): pending, its start more
    than HOLD_AHEAD_SECONDS away. Released once (its start then comes within seconds), and again only if
    Slurm sets the delay anew (after a node failure it does, once the lost node's part is cleaned up)."""
    far = job.start_in is not None and job.start_in > HOLD_AHEAD_SECONDS
    return job.source == "squeue" and job.state == "PENDING" and job.restarts > 0 and far


def unknown(job: str) -> Job:
    return Job(job, "UNKNOWN", "unknown")


def merged(status: dict, job: Job, base_attempt: int) -> dict:
    """One attempt's status as the wrapper wrote it on shared storage, with the scheduler's word on its job.

    Whether the job lives is the scheduler's to say (the login node cannot see a compute node's processes):
    a queued or running job is alive; one the scheduler still holds keeps its attempt open even when the
    attempt's markers say it ended (a preempted attempt is requeued before its job leaves the queue); a
    job neither squeue nor sacct knows is never read as done unless the attempt's own markers say so.
    requeued_to: the attempt the job runs now, when Slurm requeued it past the one asked about."""
    status = dict(status, scheduler=job.as_dict())
    ended = status.get("exit_code") is not None or bool(status.get("quarantine_reason"))
    current = base_attempt + job.restarts
    if job.live and current > status["attempt"]:
        status["requeued_to"] = current
    if job.live:
        status.update(launched=True, wrapper_alive=True, child_alive=job.running and not ended)
    elif job.source == "unknown" and not ended:
        status.update(launched=True, wrapper_alive=True)
    elif job.final and not ended:
        status.update(wrapper_alive=False, child_alive=False)  # dead: quarantined with the scheduler's word
    return status
