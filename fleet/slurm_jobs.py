"""A run's Slurm job through the box's transport (a cluster's login node): submitted once, asked about,
cancelled. What the commands are and how their answers read is node/slurm.py's (pure)."""

import random
import shlex

from django.conf import settings

from node import slurm, slurm_probe
from node.protocol import NodeError
from wrapper.contract import SpecError, spec_of


def submit(node, attempt: int, wrapper_argv: list[str]) -> tuple[str, str, str]:
    """The attempt's job: (detach, command, job id). A job of this run and attempt already queued (a
    redelivered launch) is adopted, never submitted twice: the job's name is the run's and the attempt's."""
    run, layout = node.run, node.layout
    name = f"rgpu-{run.run_id}-{attempt}"
    found = existing(node.transport, name)
    script_path = f"{layout.active}/launch-{attempt}.sbatch"
    command = f"sbatch --parsable {shlex.quote(script_path)}"
    if found:
        return "sbatch", command, found
    options = slurm.JobOptions.of(run.slurm_options)
    try:  # the options were checked when the run was made; a line that is not safe is refused again here
        script = slurm.batch_script(
            options, job_name=name, output=f"{layout.active}/slurm-%j.out", wrapper_argv=wrapper_argv
        )
    except ValueError as exc:
        raise NodeError(f"the job's options cannot be written as a batch script: {exc}") from None
    node.upload_bytes(script.encode(), script_path)
    return "sbatch", command, _sbatch(node.transport, script_path)


def submit_array(node, name: str, script_path: str, tasks: list[slurm.ArrayTask], at_once: int) -> tuple[str, str]:
    """A sweep's cells as one job array: (command, the array's job id). An array of this name already
    queued (a redelivered submit) is adopted, never submitted twice. Each cell's job is "<id>_<cell>"."""
    command = f"sbatch --parsable {shlex.quote(script_path)}"
    found = existing(node.transport, name)
    if found:
        return command, found
    options = slurm.JobOptions.of(node.run.slurm_options)
    try:
        script = slurm.array_script(options, job_name=name, tasks=tasks, at_once=at_once)
    except ValueError as exc:
        raise NodeError(f"the sweep's options cannot be written as a job array: {exc}") from None
    node.upload_bytes(script.encode(), script_path)
    return command, _sbatch(node.transport, script_path)


def _sbatch(transport, script_path: str) -> str:
    result = transport.run(["sbatch", "--parsable", script_path], timeout=settings.SSH_COMMAND_TIMEOUT)
    job = slurm.submitted_job(result.stdout) if result.exit_code == 0 else None
    if job is None:
        said = (result.stderr or result.stdout).strip()[-300:]
        raise NodeError(f"sbatch refused the job (exit {result.exit_code}): {said}")
    return job


def existing(transport, name: str) -> str | None:
    """The id of a queued job of ours with this name (an array's own id, %F), or None."""
    result = transport.run(["squeue", "-h", "--me", "-n", name, "-o", "%F"], timeout=settings.SSH_COMMAND_TIMEOUT)
    ids = [line.strip() for line in result.stdout.splitlines()[:100] if slurm.JOB.fullmatch(line.strip())]
    return ids[0] if result.exit_code == 0 and ids else None


def jobs_of(transport, jobs: list[str]) -> dict[str, slurm.Job]:
    """The scheduler's word on each job, in a fixed number of round-trips however many there are: squeue
    while a job is queued, else sacct (its accounting, or the completion log where the cluster keeps none),
    else unknown."""
    queued = transport.run_script(slurm.squeue_script(jobs), timeout=settings.SSH_COMMAND_TIMEOUT)
    slurm.squeue_lists(queued.exit_code, queued.stderr)  # a silent controller is not an empty queue
    found = {job: slurm.read_squeue(job, queued.stdout) if queued.exit_code == 0 else None for job in jobs}
    gone = [job for job, seen in found.items() if seen is None]
    if gone:
        accounted = transport.run(slurm.sacct_argv(gone, completion_log=False), timeout=settings.SSH_COMMAND_TIMEOUT)
        if accounted.exit_code != 0 and slurm.no_accounting(accounted.stderr):
            argv = slurm.sacct_argv(gone, completion_log=True)
            accounted = transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT)
        for job in gone:
            found[job] = slurm.read_sacct(job, accounted.stdout) if accounted.exit_code == 0 else None
    return {job: seen or slurm.unknown(job) for job, seen in found.items()}


def with_scheduler(transport, runs, statuses: dict) -> dict:
    """Each Slurm run's status merged with its job's state (node/slurm.py: merged); others as they were. A
    requeued job held by its begin time is released here, whatever its attempt's status said."""
    asked = [run for run in runs if run.slurm_job and statuses.get(run.run_id)]
    try:
        found = jobs_of(transport, sorted({run.slurm_job for run in asked})) if asked else {}
    except slurm.MalformedAnswer as exc:  # each run's tick notes the refusal (or the silence); none is read from it
        silent = isinstance(exc, slurm.SchedulerSilent)
        said = "the scheduler did not answer" if silent else "the login node's answer was refused"
        return {**statuses, **{run.run_id: {"error": f"{said}: {exc}"} for run in asked}}
    merged = dict(statuses)
    for run in asked:
        job, status = found[run.slurm_job], statuses[run.run_id]
        if settings.SLURM_RELEASE_REQUEUE_HOLD and slurm.held_after_requeue(job):
            release_hold(transport, run.slurm_job)
        if "error" not in status:
            merged[run.run_id] = slurm.merged(status, job, run.slurm_base_attempt)
    return merged


SPEC_LIMIT = 1024**2  # an attempt's spec is a few kilobytes; more is not one


def write_requeued_spec(node, run, attempt: int) -> None:
    """The spec of the attempt Slurm runs now, where the probes, the stop and the watcher read it: the
    launched attempt's, renumbered."""
    layout, base = node.layout_of(run), run.slurm_base_attempt
    target = layout.spec(f"attempt-{attempt}")
    if node.transport.stat(target) is not None:
        return
    try:
        spec = spec_of(node.read_json(layout.spec(f"attempt-{base}"), SPEC_LIMIT))
    except SpecError as exc:
        raise NodeError(f"the launched attempt's spec on the node is not one a launch wrote: {exc}") from None
    if spec.attempt != base or spec.scheduler != "slurm":
        raise NodeError(f"the launched attempt's spec on the node is not one a launch wrote: attempt-{base}")
    node.upload_bytes(spec.but(attempt=attempt).to_json().encode(), target)


def release_hold(transport, job: str) -> None:
    """A requeued job waits about 120 s (BeginTime) before Slurm runs it again: let it start in 3 s. Not
    `now`: that re-placed a job in the same second and failed it ("Job credential revoked")."""
    transport.run(["scontrol", "update", f"JobId={job}", "StartTime=now+3"], timeout=settings.SSH_COMMAND_TIMEOUT)


def cancel(transport, job: str) -> None:
    """scancel; a job already ended (or gone from the queue) is cancelled enough: its final state says how."""
    result = transport.run(["scancel", job], timeout=settings.SSH_COMMAND_TIMEOUT)
    ended = ("already completing or completed", "Invalid job id")
    if result.exit_code != 0 and not any(words in result.stderr for words in ended):
        raise NodeError(f"scancel {job} failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}")


def preflight(node, run, needs_torch: bool) -> tuple[dict, list[str]]:
    """The cluster's side of a run's preflight, from its login node: the partition exists and would accept
    the job as asked (sbatch --test-only), and one compute node, reached by srun, has the interpreter,
    torch where the command needs it, and the data root on its own storage, not under the job's $TMPDIR."""
    options = slurm.JobOptions.of(run.slurm_options)
    report, problems = {}, []
    listed = node.transport.run(slurm_probe.partitions_argv(), timeout=settings.SSH_COMMAND_TIMEOUT)
    report["partitions"] = slurm_probe.read_partitions(listed.stdout) if listed.exit_code == 0 else []
    if listed.exit_code != 0:
        return report, [f"Slurm: sinfo failed on the login node: {listed.stderr.strip()[-200:]}"]
    if options.partition and options.partition not in report["partitions"]:
        have = ", ".join(report["partitions"]) or "none"
        return report, [f"Slurm: partition {options.partition} does not exist on this cluster (it has: {have})"]
    asked = node.transport.run(slurm_probe.request_argv(options), timeout=settings.SSH_COMMAND_TIMEOUT)
    report["request"] = (asked.stderr or asked.stdout).strip()[-300:]
    if asked.exit_code != 0:
        return report, [f"Slurm: the cluster refuses the job as asked: {report['request']}"]
    # Whether sacct can name an array's task after it leaves the queue: only an accounting database can
    # (the completion log cannot tell tasks apart), so a sweep runs as one job array only where it says yes.
    accounted = node.transport.run(slurm.sacct_argv(["1"], completion_log=False), timeout=settings.SSH_COMMAND_TIMEOUT)
    report["accounting"] = accounted.exit_code == 0
    # The command's own interpreter where it names one by its path, else the wrapper's.
    command = run.command or []
    python = command[0] if command and command[0].startswith("/") else node.python or settings.NODE_PYTHON
    seconds = settings.SLURM_PREFLIGHT_SECONDS
    port = random.randint(20000, 39999)  # a multi-node run's rendezvous, measured on its first node
    probe = slurm_probe.compute_argv(options, python, node.layout.run_root, seconds, port)
    ran = node.transport.run(probe, timeout=seconds + 60)
    if ran.exit_code != 0:
        said = ran.stderr.strip()[-300:]
        return report, [f"Slurm: no compute node answered the preflight within {seconds} s: {said}"]
    answers = slurm_probe.read_computes(ran.stdout)
    report["compute"] = answers[0] if answers else None
    problems += slurm_probe.compute_problems(report["compute"], needs_torch)
    if options.nodes > 1:
        report["nodes"] = answers
        for answer in answers[1:]:
            said = slurm_probe.compute_problems(answer, needs_torch)
            problems += [f"{problem} ({answer.get('host', '?')})" for problem in said]
        problems += slurm_probe.nodes_problems(answers, options)
    return report, problems
