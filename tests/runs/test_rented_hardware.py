"""What runs is what was rented. Nothing compared the box's GPUs with the offer the money was spent on:
a rent of an RTX 4090 that came up with a 3090 trained on it at the 4090's rate. Preflight now measures
the GPUs with nvidia-smi (model, count, memory) and compares them with the rent's offer, or with the
box's page for a box registered by hand; a mismatch fails closed, and an approver may accept that very
measurement (audited). When CUDA is unavailable, a driver/toolkit/torch mismatch is named as the cause.
nvidia-smi is a shim on the loopback box's PATH (this machine's torch is the CPU build)."""

import sys

import pytest
from django.core.exceptions import PermissionDenied

from core.models import AuditEntry
from fleet.models import Instance
from rentals.models import Rental, RentalState
from runs.actions.lifecycle import do_accept_gpu_mismatch
from runs.hardware import Declared, cuda_cause, from_description, hardware_problems, mismatch
from runs.models import RunState
from runs.tasks import preflight_run
from tests import factories
from tests.gpu_shims import box_with_nvidia_smi

pytestmark = pytest.mark.django_db(transaction=True)

SHIM = """#!/bin/sh
# nvidia-smi as a box holding one RTX 3090 answers (driver 535, CUDA 12.2).
case "$*" in
  *query-gpu=index,name,memory.total,driver_version*) printf '0, NVIDIA GeForce RTX 3090, 24576, 535.104.05\\n' ;;
  *query-gpu=index,uuid*) printf '0, GPU-aaaa\\n' ;;
  *query-compute-apps*) ;;
  *query-gpu*) printf '0, 0, 0\\n' ;;
  *) printf '| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\\n' ;;
esac
"""
OFFER = {"gpu_name": "RTX 4090", "gpu_count": 1, "gpu_memory_gb": 24, "rate": 0.38, "describe": "1× RTX 4090"}


@pytest.fixture
def source(standin_source):
    return standin_source


@pytest.fixture(scope="module")
def rtx3090_box(tmp_path_factory):
    server = box_with_nvidia_smi(tmp_path_factory.mktemp("rtx3090-box"), SHIM)
    yield server
    server.stop()


def test_the_comparison_names_model_count_and_memory():
    inventory = {"gpus": [{"name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576}], "driver": "535", "cuda": "12.2"}
    rented = Declared("RTX 4090", 2, 24, "rent #7's offer")
    assert mismatch(rented, inventory) == "1 GPU(s), not 2; NVIDIA GeForce RTX 3090, not RTX 4090"
    assert mismatch(Declared("RTX 3090", 1, 24, "x"), inventory) is None  # 24,576 MiB is a 24 GB card
    assert mismatch(
        Declared("A100", 1, 80, "x"), {"gpus": [{"name": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960}]}
    ) == ("40 GB per GPU, not 80 GB")
    assert mismatch(None, inventory) is None and mismatch(rented, None) is None  # nothing said, nothing measured
    accepted = {"measured": "NVIDIA GeForce RTX 3090 24576 MiB"}
    assert hardware_problems(Declared("RTX 4090", 1, 24, "x"), inventory, accepted) == []
    assert from_description("2× RTX 4090 (24 GB)") == Declared("RTX 4090", 2, 24.0, "the box's page")
    assert from_description("some GPU") is None
    cpu = {"torch": "2.5.1+cpu", "cuda": None}
    assert "torch 2.5.1+cpu is a CPU build" in cuda_cause(cpu, inventory)
    newer = {"torch": "2.5.1+cu124", "cuda": "12.4"}
    assert "built for CUDA 12.4, newer than the box's driver 535 (CUDA 12.2) supports" in cuda_cause(newer, inventory)
    assert cuda_cause({"torch": "2.5.1+cu121", "cuda": "12.1"}, inventory) == ""
    assert cuda_cause(cpu, {"gpus": []}) == ""


def test_a_box_whose_gpu_is_not_the_rents_offer_fails_preflight_until_an_approver_accepts_it(
    rtx3090_box, project, make_run, alice, bob, no_worker
):
    fields = rtx3090_box.instance_fields(project)
    box = Instance.objects.create(name=f"{project.slug}-rented-20261205", project=project, **fields)
    ssh = factories.ssh_key(project, "env:RGPU_TEST_UNUSED_KEY")
    Rental.objects.create(
        project=project, purpose="train", gpu_models=["RTX 4090"], max_rate="0.60", candidates=["vastai"],
        api_credentials={}, ssh_credential=ssh, expected_minutes=60, expected_cost="0.60", requester=bob,
        expires_at="2026-12-31T00:00:00Z", state=RentalState.READY, provider="vastai", offer=OFFER, instance=box,
    )  # fmt: skip
    run = make_run(instance=box, gpus=[0], state=RunState.PREFLIGHT, command=[sys.executable, "train.py"])
    preflight_run(run.pk)
    run.refresh_from_db()
    problems = " ".join(run.preflight_report["problems"])
    assert run.state == RunState.FAILED_PREFLIGHT
    rental_pk = box.rentals.get().pk
    assert (
        f"The box's GPUs are not what rent #{rental_pk}'s offer said: nvidia-smi measures "
        "NVIDIA GeForce RTX 3090, not RTX 4090" in problems
    )
    assert (
        "The cause: torch" in problems and "is a CPU build, while the box's driver 535.104.05 (CUDA 12.2)" in problems
    )

    with pytest.raises(PermissionDenied):
        do_accept_gpu_mismatch(run.pk, "a 3090 will do", actor=bob)  # an operator is not an approver
    do_accept_gpu_mismatch(run.pk, "a 3090 will do for this ablation", actor=alice)
    assert AuditEntry.objects.filter(message__contains="GPUs accepted as measured").exists()
    type(run).objects.filter(pk=run.pk).update(state=RunState.PREFLIGHT)
    preflight_run(run.pk)
    run.refresh_from_db()
    problems = " ".join(run.preflight_report["problems"])
    assert "not what rent" not in problems and "CUDA is not available" in problems  # CUDA is never accepted
