"""What the scheduler says, read as Slurm 22.05 writes it (node/slurm.py, pure): a job's options checked
before they reach a batch script, sbatch's answer, squeue's and sacct's lines (the completion log's too),
and one attempt's status merged with its job: a queued job is alive, a job nobody knows is never done."""

import json

import pytest

from node import slurm, slurm_probe

STATUS = {"attempt": 1, "launched": False, "wrapper_alive": False, "child_alive": False, "exit_code": None}


def test_good_options_pass_and_every_bad_one_is_named_at_once():
    assert slurm.option_problems({"partition": "gpu-a100", "time_minutes": 90, "gres": "gpu:a100:2"}) == []
    problems = slurm.option_problems(
        {"partition": "low; rm -rf /", "gres": "gpu:1 --wrap=x", "time_minutes": 0, "signal_seconds": 5}
    )
    assert [p.split(":")[0] for p in problems] == ["partition", "gres", "time limit", "checkpoint signal"]
    assert slurm.option_problems({"time_minutes": 10**6})[0].startswith("time limit: at most")
    assert slurm.option_problems({"time_minutes": 1, "signal_seconds": 60})[0].endswith("not at or after it")
    assert slurm.option_problems({"time_minutes": True}) == ["time limit: whole minutes, at least 1"]
    assert slurm.option_problems({"signal_seconds": 60}) == ["checkpoint signal: it needs a time limit to come before"]


def test_the_batch_script_carries_the_options_and_execs_the_wrapper():
    options = slurm.JobOptions(partition="low", time_minutes=30, gres="gpu:1", signal_seconds=90)
    script = slurm.batch_script(
        options,
        job_name="rgpu-r1-1",
        output="/p/active/r1/slurm-%j.out",
        wrapper_argv=["py", "/w x.py", "run", "/s.json"],
    )
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash" and lines[-1] == "exec py '/w x.py' run /s.json"
    for line in (
        "--partition=low",
        "--time=30",
        "--gres=gpu:1",
        "--signal=B:USR1@90",
        "--requeue",
        "--open-mode=append",
    ):
        assert f"#SBATCH {line}" in lines
    assert "#SBATCH --no-requeue" in slurm.batch_script(
        slurm.JobOptions(requeue=False), job_name="n", output="/o", wrapper_argv=["w"]
    )
    assert "--time" not in slurm.batch_script(slurm.JobOptions(), job_name="n", output="/o", wrapper_argv=["w"])
    with pytest.raises(ValueError, match="not a safe"):
        slurm.batch_script(
            slurm.JobOptions(partition="low\n#SBATCH --uid=0"), job_name="n", output="/o", wrapper_argv=["w"]
        )
    assert slurm.warnings_of(slurm.JobOptions())[0].startswith("No time limit")
    assert slurm.warnings_of(options) == []


def script_of(options: slurm.JobOptions) -> str:
    return slurm.batch_script(options, job_name="n", output="/o", wrapper_argv=["w"])


@pytest.mark.parametrize(
    ("printed", "job"),
    [
        ("4242\n", "4242"),
        ("4242;cluster-a\n", "4242"),
        ("Submitted batch job 4242\n", None),
        ("", None),
        ("12;a;b", None),
    ],
)
def test_sbatch_parsable_answers(printed, job):
    assert slurm.submitted_job(printed) == job


NOW = "2026-12-05T10:00:00\n"  # squeue_script's first line: the login node's local time


def test_squeue_lines_read_state_reason_restarts_and_when_it_starts():
    padded = "77" + " " * 18 + "|PENDING" + " " * 17  # squeue -O pads each field to its width
    line = padded + "|ReqNodeNotAvail, May be reserved for other job|1       |10:00|(null)|2026-12-05T10:02:00|"
    job = slurm.read_squeue("77", NOW + line)
    assert (job.state, job.restarts, job.live, job.running, job.final) == ("PENDING", 1, True, False, False)
    assert job.reason.startswith("ReqNodeNotAvail, May be reserved") and job.start_in == 120
    assert "pending (ReqNodeNotAvail" in job.describe()
    assert slurm.read_squeue("77", NOW + "77|RUNNING|None|0|9:00|n1|N/A|").start_in is None
    assert slurm.read_squeue("77", NOW + "78|RUNNING|None|0|9:00|n1|N/A|") is None  # another job's line
    assert slurm.read_squeue("77", NOW) is None and slurm.read_squeue("77", "") is None  # left the queue
    assert slurm.read_squeue("77", NOW + "77|running; rm|None|0|1|n1|N/A|") is None  # not a state word


def test_sacct_reads_the_newest_attempt_and_its_exit_code():
    completion_log = "9|PENDING|0:0\n9|TIMEOUT|0:0\n"  # -c: a requeued attempt, then the last one
    job = slurm.read_sacct("9", completion_log)
    assert (job.state, job.final, job.source) == ("TIMEOUT", True, "sacct")
    assert "the walltime ran out" in job.describe()
    failed = slurm.read_sacct("9", "9|FAILED|3:0\n")
    assert failed.exit_code == 3 and "exit code 3" in failed.describe()
    assert slurm.read_sacct("9", "9|CANCELLED by 0|0:15\n").state == "CANCELLED"
    assert slurm.read_sacct("9", "10|COMPLETED|0:0\n") is None and slurm.read_sacct("9", "garbage") is None
    assert slurm.no_accounting("sacct: error: Slurm accounting storage is disabled")


def test_a_queued_or_unknown_job_is_never_dead_and_a_requeue_names_the_attempt():
    pending = slurm.Job("5", "PENDING", "squeue", "Priority")
    merged = slurm.merged(STATUS, pending, 1)
    assert merged["wrapper_alive"] and merged["launched"] and not merged["child_alive"]
    assert merged["scheduler"]["said"] == "job 5 pending (Priority)" and "requeued_to" not in merged
    requeued = slurm.merged(STATUS, slurm.Job("5", "RUNNING", "squeue", restarts=2), 1)
    assert requeued["requeued_to"] == 3 and requeued["child_alive"]
    # The attempt's markers say it ended while the job is still held (a preempted copy): it stays open.
    ended = slurm.merged({**STATUS, "exit_code": 143}, slurm.Job("5", "COMPLETING", "squeue"), 1)
    assert ended["wrapper_alive"] and not ended["child_alive"]
    unknown = slurm.merged(STATUS, slurm.unknown("5"), 1)
    assert unknown["wrapper_alive"] and "neither squeue nor sacct" in unknown["scheduler"]["said"]
    gone = slurm.merged({**STATUS, "launched": True}, slurm.Job("5", "NODE_FAIL", "sacct"), 1)
    assert not gone["wrapper_alive"] and gone["launched"]  # dead: quarantined with the scheduler's word
    done = slurm.merged({**STATUS, "exit_code": 0}, slurm.Job("5", "COMPLETED", "sacct", exit_code=0), 1)
    assert not done["wrapper_alive"] and done["exit_code"] == 0


def test_only_a_requeued_job_whose_start_is_far_off_is_released():
    """Released once: a start a few seconds off is the release itself (releasing it again would push it
    back every probe: the job never started, seen on the cluster)."""
    held = slurm.Job("5", "PENDING", "squeue", "BeginTime", restarts=1, start_in=118)
    assert slurm.held_after_requeue(held)
    assert slurm.held_after_requeue(slurm.Job("5", "PENDING", "squeue", "None", restarts=1, start_in=119))
    assert not slurm.held_after_requeue(slurm.Job("5", "PENDING", "squeue", "BeginTime", restarts=1, start_in=3))
    assert not slurm.held_after_requeue(slurm.Job("5", "PENDING", "squeue", "BeginTime", restarts=0, start_in=118))
    assert not slurm.held_after_requeue(slurm.Job("5", "RUNNING", "squeue", "None", restarts=1, start_in=None))


def test_a_sweeps_job_array_runs_each_cell_by_its_task_and_writes_its_own_output():
    options = slurm.JobOptions(partition="low", time_minutes=30, signal_seconds=90)
    tasks = [
        slurm.ArrayTask(1, "/p/active/r 1", ["py", "/w.py", "run", "/p/active/r 1/spec/attempt-1.json"]),
        slurm.ArrayTask(3, "/p/active/r3", ["py", "/w.py", "run", "/p/active/r3/spec/attempt-1.json"]),
    ]
    script = slurm.array_script(options, job_name="rgpu-sweep-7", tasks=tasks, at_once=2)
    lines = script.splitlines()
    for line in ("--array=1,3%2", "--partition=low", "--time=30", "--signal=B:USR1@90", "--requeue"):
        assert f"#SBATCH {line}" in lines
    assert """  1) exec >>'/p/active/r 1/slurm-'"$SLURM_JOB_ID".out 2>&1""" in lines
    assert "     exec py /w.py run '/p/active/r 1/spec/attempt-1.json' ;;" in lines
    assert """  3) exec >>/p/active/r3/slurm-"$SLURM_JOB_ID".out 2>&1""" in lines
    assert lines[-2:] == ['echo "no cell for array task $SLURM_ARRAY_TASK_ID" >&2', "exit 2"]  # not a cell: fails
    with pytest.raises(ValueError, match="not a safe"):
        slurm.array_script(slurm.JobOptions(gres="gpu:1\nrm -rf /"), job_name="n", tasks=tasks, at_once=1)
    with pytest.raises(ValueError, match="needs a task"):
        slurm.array_script(options, job_name="n", tasks=[], at_once=1)


def test_an_array_task_is_read_by_its_own_id_in_squeue_and_sacct():
    assert slurm.JOB.fullmatch("12_3") and slurm.JOB.fullmatch("12") and not slurm.JOB.fullmatch("12_[3-5]")
    assert "-r" in slurm.squeue_argv(["12_3"])  # one line per task, a waiting one too
    queued = NOW + "12_1|RUNNING|None|0|9:00|n1|N/A|\n12_3|PENDING|JobArrayTaskLimit|0|10:00||N/A|\n"
    assert slurm.read_squeue("12_3", queued).reason == "JobArrayTaskLimit"
    assert slurm.read_squeue("12_1", queued).running and slurm.read_squeue("12", queued) is None
    accounted = "12_1|COMPLETED|0:0\n12_3|FAILED|2:0\n"
    assert slurm.read_sacct("12_3", accounted).exit_code == 2 and slurm.read_sacct("12_1", accounted).final


def test_a_multi_node_runs_options_reach_the_batch_script_and_the_wrapper():
    options = slurm.JobOptions.of({"nodes": 2, "tasks_per_node": 4, "ifname": "ib0"})
    assert options.distributed and "--nodes=2" in slurm.asked(options)
    script = slurm.batch_script(options, job_name="n", output="/o", wrapper_argv=["w"]).splitlines()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
    assert options.distributed_spec() == {"nodes": 2, "tasks_per_node": 4, "timeout": 600, "ifname": "ib0"}
    assert slurm.JobOptions().distributed_spec() is None and "--nodes" not in " ".join(slurm.asked(slurm.JobOptions()))
    assert slurm.option_problems({"nodes": 65, "tasks_per_node": True, "ifname": "a" * 16}) == [
        "nodes: a whole number from 1 to 64",
        "processes per node: a whole number from 1 to 16",
        "network interface: a Linux interface name, e.g. eth0 or ib0",
    ]
    assert slurm.command_problems(options, ["/opt/venv/bin/python3.11", "train.py"]) == []
    for command in (["torchrun", "train.py"], ["python"], ["python", "-m", "pkg"], ["bash", "-c", "python x.py"]):
        assert slurm.command_problems(options, command), command
    assert slurm.command_problems(slurm.JobOptions(), ["bash", "go.sh"]) == []  # one process: any command


def test_every_nodes_preflight_answer_is_read_and_compared():
    answer = '{"host": "n%d", "python": "3.11.7", "torch": "%s", "cuda": false, "root": true, "rank": %d%s}'
    meeting0 = ', "rendezvous": {"endpoint": "10.0.0.1:29500", "reached_by": 1, "of": 1}'
    meeting1 = ', "rendezvous": {"endpoint": "10.0.0.1:29500", "reached": true}'
    same = "\n".join([answer % (2, "2.13.0", 1, meeting1), "garbage", answer % (1, "2.13.0", 0, meeting0)])
    answers = slurm_probe.read_computes(same)
    assert [found["host"] for found in answers] == ["n1", "n2"]  # by rank
    options = slurm.JobOptions(nodes=2)
    assert slurm_probe.nodes_problems(answers, options) == []
    lines = [answer % (1, "2.13.0", 0, meeting0), answer % (2, "2.4.0", 1, meeting1)]
    differ = slurm_probe.read_computes("\n".join(lines))
    assert slurm_probe.nodes_problems(differ, options) == [
        "Slurm: the nodes' environments differ (n1: python 3.11.7, torch 2.13.0, cuda False; n2: python 3.11.7,"
        " torch 2.4.0, cuda False); a multi-node run needs one"
    ]
    unreached = same.replace('"reached": true', '"reached": false').replace('"reached_by": 1', '"reached_by": 0')
    problems = slurm_probe.nodes_problems(slurm_probe.read_computes(unreached), options)
    assert problems[0].startswith("Slurm: 0 of 1 nodes reached the rendezvous endpoint 10.0.0.1:29500 on n1")
    assert problems[1] == "Slurm: node n2 could not reach the rendezvous endpoint 10.0.0.1:29500 within 20 s"
    assert slurm_probe.nodes_problems(answers[:1], options) == ["Slurm: only 1 of 2 nodes answered the preflight"]
    assert slurm_probe.nodes_problems(answers[:1], slurm.JobOptions()) == []


@pytest.mark.parametrize("said", ["lo\n", "eth0; reboot", "a" * 16, "", 7, None, "ib0\u202e"])
def test_a_nodes_interface_that_is_not_a_name_is_never_pinned(said):
    """The interface a compute node says its rendezvous went through reaches every rank's environment
    (GLOO_/NCCL_SOCKET_IFNAME): only a Linux interface name is kept, and pinned only where every node of
    the preflight said the same one (runs.box_spec.cluster_interface)."""
    from runs.box_spec import cluster_interface, pinned

    line = '{"host": "n%d", "rank": %d, "rendezvous": {"endpoint": "n1:2", "reached": true, "ifname": %s}}'
    answers = slurm_probe.read_computes("\n".join(line % (rank, rank, json.dumps(said)) for rank in (0, 1)))
    assert all("ifname" not in answer["rendezvous"] for answer in answers)
    assert cluster_interface({"slurm": {"nodes": answers}}) is None
    shape = {"nodes": 2, "ifname": ""}
    assert pinned(shape, said) == shape


def test_the_measured_interface_is_pinned_only_where_every_node_agrees_and_nobody_named_one():
    from runs.box_spec import cluster_interface, pinned

    line = '{"host": "n%d", "rank": %d, "rendezvous": {"endpoint": "n1:2", "reached": true, "ifname": "%s"}}'
    same = slurm_probe.read_computes("\n".join(line % (rank, rank, "ib0") for rank in (0, 1)))
    differ = slurm_probe.read_computes("\n".join(line % (rank, rank, name) for rank, name in ((0, "ib0"), (1, "eth0"))))
    assert cluster_interface({"slurm": {"nodes": same}}) == "ib0"
    assert cluster_interface({"slurm": {"nodes": differ}}) is None  # the job's nodes are the scheduler's pick
    assert pinned({"nodes": 2, "ifname": ""}, "ib0")["ifname"] == "ib0"
    assert pinned({"nodes": 2, "ifname": "eth1"}, "ib0")["ifname"] == "eth1"  # a person's word stands
