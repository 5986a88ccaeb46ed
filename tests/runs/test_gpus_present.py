"""A GPU was there because the form said so. Preflight now asks the run's own interpreter
whether CUDA is available and how many GPUs it sees, and nvidia-smi which processes hold the requested
GPUs; a process outside RemoteGPU fails the run unless an approver overrides it (audited). This machine's
torch is the CPU build ("no CUDA" is real here); the foreign process comes from an nvidia-smi shim on
the loopback box's PATH, as a rented box with a colleague's notebook would answer."""

import sys

import pytest
from django.core.exceptions import PermissionDenied

from fleet.models import Instance
from runs.actions.lifecycle import do_waive_gpu_holders
from runs.gpus import gone_problem, gpu_problems
from runs.models import RunState
from runs.tasks import launch_run, preflight_run
from tests.gpu_shims import box_with_nvidia_smi

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


SHIM = """#!/bin/sh
# nvidia-smi as a box with two GPUs answers, one of them holding a process that is not ours.
case "$*" in
  *query-gpu=index,uuid*) printf '0, GPU-aaaa\\n1, GPU-bbbb\\n' ;;
  *query-compute-apps*) printf '4242, GPU-aaaa, 2048\\n' ;;
  *) printf '0, 3, 100\\n1, 0, 0\\n' ;;
esac
"""


def test_the_rules_name_the_interpreter_the_missing_index_and_the_holder():
    cpu = {"interpreter": "/venv/bin/python", "torch": "2.13.0+cpu", "cuda_available": False}
    assert (
        "CUDA is not available to /venv/bin/python (2.13.0+cpu): it cannot use GPU 0" in gpu_problems([0], cpu, None)[0]
    )
    one = {"interpreter": "/venv/bin/python", "cuda_available": True, "cuda_device_count": 1}
    assert gpu_problems([0, 1], one, None) == ["GPU 1 does not exist: /venv/bin/python sees 1 GPU(s)."]
    held = {"indices": [0], "holders": [{"index": 0, "pid": 77, "used_mib": 512}, "garbage", {"index": "0"}]}
    assert gpu_problems([0], one, held) == [
        "GPU 0 is in use by a process outside RemoteGPU (pid 77, 512 MiB): free it, pick another GPU, "
        "or ask an approver to override."
    ]
    assert gpu_problems([0], one, held, waived=True) == []
    assert gpu_problems([], cpu, held) == []  # a CPU run asks for nothing


@pytest.fixture(scope="module")
def gpu_box(tmp_path_factory):
    """A loopback sshd whose sessions find the nvidia-smi shim first on their PATH."""
    server = box_with_nvidia_smi(tmp_path_factory.mktemp("gpu-box"), SHIM)
    yield server
    server.stop()


def preflight_on(gpu_box, project, make_run, gpus):
    fields = gpu_box.instance_fields(project)
    box, _ = Instance.objects.get_or_create(name=f"{project.slug}-gpus-20261201", project=project, defaults=fields)
    run = make_run(instance=box, gpus=gpus, state=RunState.PREFLIGHT, command=[sys.executable, "train.py"])
    preflight_run(run.pk)  # the worker's code path, in this process
    run.refresh_from_db()
    return run


def test_a_cpu_torch_and_a_foreign_process_fail_preflight_and_an_approver_overrides_the_holder(
    alice, bob, gpu_box, project, make_run, no_worker
):
    run = preflight_on(gpu_box, project, make_run, [0])
    problems = " ".join(run.preflight_report["problems"])
    assert run.state == RunState.FAILED_PREFLIGHT
    assert f"CUDA is not available to {sys.executable}" in problems
    assert "GPU 0 is in use by a process outside RemoteGPU (pid 4242, 2048 MiB)" in problems
    with pytest.raises(PermissionDenied):
        do_waive_gpu_holders(run.pk, "colleague's notebook", actor=bob)  # an operator is not an approver
    do_waive_gpu_holders(run.pk, "colleague's notebook, 2 GB, it stays", actor=alice)
    assert "overridden for the next preflight" in run.events.filter(kind="note").latest("at").message
    type(run).objects.filter(pk=run.pk).update(state=RunState.PREFLIGHT)
    preflight_run(run.pk)
    run.refresh_from_db()
    problems = " ".join(run.preflight_report["problems"])
    assert "outside RemoteGPU" not in problems and "CUDA is not available" in problems  # never waived


def test_a_run_on_no_gpu_passes_beside_the_foreign_process(gpu_box, project, make_run, no_worker):
    run = preflight_on(gpu_box, project, make_run, [])
    assert run.state == RunState.SMOKE, run.preflight_report["problems"]


def test_a_gpu_gone_at_relaunch_fails_the_launch_instead_of_running_on_cpu(gpu_box, project, make_run, no_worker):
    """A box back from a restart without its GPUs (RunPod) is never a CPU run billed at the GPU rate:
    every (re)launch asks nvidia-smi again, and a requested GPU it no longer lists fails the launch."""
    fields = gpu_box.instance_fields(project)
    box, _ = Instance.objects.get_or_create(name=f"{project.slug}-gpus-20261201", project=project, defaults=fields)
    run = make_run(instance=box, gpus=[3], state=RunState.LAUNCHING, attempt=1, command=[sys.executable, "train.py"])
    launch_run(run.pk, 1)  # the worker's code path, in this process
    run.refresh_from_db()
    assert run.state == RunState.FAILED_LAUNCH
    assert "GPU 3 is not on this box now (nvidia-smi lists 0, 1): not run on CPU" in run.events.last().message


def test_the_relaunch_rule():
    listed = {"indices": [0, 1], "holders": []}
    assert gone_problem([1], listed, listed) is None
    assert "GPU 2 is not on this box now" in gone_problem([2], listed, listed)
    absent = {"nvidia_smi": False}
    assert "lost its GPUs" in gone_problem([0], absent, listed)  # nvidia-smi answered at preflight, not now
    assert gone_problem([0], absent, None) is None and gone_problem([], absent, listed) is None
