"""An idle GPU was invisible: the probe collected nvidia-smi's utilisation and nothing read it, and the
waste alarms skipped every box with a live run. Now the watcher keeps what nvidia-smi says of the run's
own GPUs (plotted on the run page), and a run whose every GPU stays under its project's threshold for
its window is told once per threshold, with its $/h and a stop suggested. nvidia-smi is a shim on the
loopback box's PATH whose answer the test changes between ticks, as a stuck data loader would."""

from datetime import timedelta

import pytest

from delivery.models import WasteAlarm, WasteKind
from delivery.waste import do_raise_waste_alarms
from fleet.models import Instance
from fleet.node_client import NodeClient
from notifications.models import Event, Notification
from runs.box_spec import run_node
from runs.gpu_use import is_idle, read_sample
from runs.models import GpuSample, RunState
from tests.gpu_shims import box_with_nvidia_smi
from watching.watch import tick

pytestmark = pytest.mark.django_db(transaction=True)

SHIM = """#!/bin/sh
# nvidia-smi as a box with two GPUs answers; the utilisation rows are the test's file.
case "$*" in
  *query-gpu=index,utilization.gpu,memory.used*) cat "{use}" ;;
  *query-gpu=index,uuid*) printf '0, GPU-aaaa\\n1, GPU-bbbb\\n' ;;
  *) ;;
esac
"""


@pytest.fixture
def source(standin_source):
    return standin_source


@pytest.fixture(scope="module")
def gpu_box(tmp_path_factory):
    directory = tmp_path_factory.mktemp("idle-gpu-box")
    use = directory / "use.csv"
    server = box_with_nvidia_smi(directory, SHIM.format(use=use))
    server.use = use
    yield server
    server.stop()


def test_what_nvidia_smi_says_is_read_as_untrusted_input():
    answer = [
        {"index": 0, "utilization_pct": 3, "memory_used_mib": 900},
        {"index": 1, "utilization_pct": 99, "memory_used_mib": 20000},  # not the run's GPU
        {"index": 0, "utilization_pct": "0"},
        "garbage",
        {"index": 2, "utilization_pct": 101, "memory_used_mib": 5},  # out of range: not a reading
    ]
    assert read_sample(answer, [0]) == [{"index": 0, "utilization_pct": 3, "memory_used_mib": 900}]
    assert read_sample(answer, [2]) is None and read_sample(None, [0]) is None and read_sample(answer, []) is None
    sample = read_sample(answer, [0, 1])
    assert not is_idle(sample, 10)  # one GPU of the run busy: slow, not idle
    assert is_idle(sample[:1], 10) and not is_idle(sample[:1], 0)  # 0 %: the project never calls a run idle


def test_a_run_at_zero_percent_gpu_raises_the_alarm_once_per_threshold(
    gpu_box, project, make_run, no_worker, settings, client, alice
):
    settings.WASTE_ALARM_MINUTES = [30, 360, 1440]
    project.gpu_idle_percent, project.gpu_idle_minutes = 10, 45
    project.save()
    fields = {**gpu_box.instance_fields(project), "rate_running": "2.50"}
    box = Instance.objects.create(name=f"{project.slug}-idle-20261205", project=project, **fields)
    run = make_run(instance=box, gpus=[0], state=RunState.RUNNING, attempt=1)
    gpu_box.use.write_text("0, 0, 812\n1, 88, 30000\n")  # GPU 1 is someone else's: the run's GPU 0 is idle
    with run_node(run) as node:
        node.prepare()  # the wrapper on the box (the launch put it there)
        tick(node, [run])
        tick(node, [run])  # within GPU_SAMPLE_SECONDS: the streak goes on, no second sample
    run.refresh_from_db()
    since = run.gpu_idle_since
    assert since is not None
    (sample,) = GpuSample.objects.filter(run=run)
    assert sample.gpus == [{"index": 0, "utilization_pct": 0, "memory_used_mib": 812}]

    assert do_raise_waste_alarms(now=since + timedelta(minutes=44)) == []  # inside the project's window
    (first,) = do_raise_waste_alarms(now=since + timedelta(minutes=46))
    alarm = WasteAlarm.objects.get(pk=first)
    assert (alarm.kind, alarm.threshold_minutes, alarm.suggested) == (WasteKind.GPU_IDLE, 45, "stop_run")
    assert f"run {run.run_id}'s GPU 0 stayed under 10 % utilisation" in alarm.message
    assert "at $2.50/h" in alarm.message and "Suggested: stop the run." in alarm.message
    told = Notification.objects.filter(event=Event.WASTE, project=project)
    assert told.count() == 1 and told.get().data["link"].endswith(f"/runs/{run.run_id}/#stop")
    assert do_raise_waste_alarms(now=since + timedelta(minutes=50)) == []  # told once per threshold
    (second,) = do_raise_waste_alarms(now=since + timedelta(minutes=361))
    assert WasteAlarm.objects.get(pk=second).threshold_minutes == 360
    assert do_raise_waste_alarms(now=since + timedelta(minutes=362)) == []

    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="gpu-idle"' in page and '"GPU 0 utilisation %": 0' in page
    assert 'id="gpu-idle-rate">$2.50/h<' in page and 'id="gpu-idle-cost">about $' in page  # its money, said

    gpu_box.use.write_text("0, 97, 20480\n1, 88, 30000\n")  # training again: the streak ends
    with NodeClient(box) as node:
        tick(node, [run])
    run.refresh_from_db()
    assert run.gpu_idle_since is None
    assert do_raise_waste_alarms(now=since + timedelta(minutes=1500)) == []


def test_a_gpu_reading_that_is_not_a_number_is_skipped_not_a_failed_probe(tmp_path, monkeypatch):
    """A MIG slice or a fallen-off GPU reads "[N/A]": int() of it raised inside the probe, and every run
    of the box went without a status that tick. Such a row is skipped; the others are read."""
    import os

    from wrapper.gpus import gpu_utilization

    shim = tmp_path / "nvidia-smi"
    shim.write_text("#!/bin/sh\nprintf '0, [N/A], [N/A]\\n1, 97, 20480\\n'\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert gpu_utilization() == [{"index": 1, "utilization_pct": 97, "memory_used_mib": 20480}]


def test_the_idle_threshold_and_window_are_the_projects_changed_on_its_page_and_audited(project, bob, client):
    from core.models import AuditEntry

    client.force_login(bob)  # an operator: these change what the project is told, not what it may spend
    form = {"budget": "", "budget_period": "month", "run_cost_threshold": "", "gpu_idle_percent": 5}
    client.post(f"/projects/{project.slug}/envelope/", {**form, "gpu_idle_minutes": 90})
    project.refresh_from_db()
    assert (project.gpu_idle_percent, project.gpu_idle_minutes) == (5, 90)
    assert AuditEntry.objects.filter(project=project, message="gpu idle minutes: 30 → 90").exists()
    client.post(f"/projects/{project.slug}/envelope/", {**form, "gpu_idle_minutes": 0})  # not a window
    client.post(f"/projects/{project.slug}/envelope/", {**form, "gpu_idle_percent": 150, "gpu_idle_minutes": 60})
    project.refresh_from_db()
    assert (project.gpu_idle_percent, project.gpu_idle_minutes) == (5, 90)
    assert "stays under 5 % for 90 min" in client.get(f"/projects/{project.slug}/").content.decode()


def test_a_tick_that_changes_nothing_takes_no_lock():
    """500 live GPU runs ticked every 5 s: a write (and a row lock) only when a sample is due or the idle
    streak starts or ends."""
    from datetime import UTC, datetime

    from projects.models import Project
    from runs.gpu_use import worth_writing
    from runs.models import Run

    now = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    box = Instance(profile_key="generic-ssh")
    run = Run(gpus=[0], project=Project(gpu_idle_percent=10), instance=box, gpu_sampled_at=now - timedelta(seconds=20))
    idle = [{"index": 0, "utilization_pct": 0, "memory_used_mib": 1}]
    busy = [{"index": 0, "utilization_pct": 95, "memory_used_mib": 1}]
    assert not worth_writing(run, busy, 60, now)  # busy, sampled 20 s ago: nothing to write
    assert worth_writing(run, idle, 60, now)  # a streak starts
    run.gpu_idle_since = now - timedelta(minutes=5)
    assert not worth_writing(run, idle, 60, now) and worth_writing(run, busy, 60, now)  # goes on; ends
    assert worth_writing(run, idle, 60, now + timedelta(seconds=41))  # a sample is due
    assert not worth_writing(run, None, 0, now)  # nvidia-smi said nothing: nothing measured
    run.instance = Instance(profile_key="slurm")  # the login node's nvidia-smi is not the job's GPUs
    assert not worth_writing(run, idle, 60, now + timedelta(seconds=41))
