"""Sweeps: cells validated before anything launches; parallel across boxes, queued per box."""

import time

import pytest
from django.urls import reverse
from django.utils import timezone

from runs import sweeps
from runs.models import Run, RunState, Sweep
from tests import factories
from tests.runs.conftest import set_config
from tests.sshd import Sshd


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


BASE = {"lr": 0.01, "epochs": 3, "hidden": 64}


def test_cells_parse_from_yaml_or_json_and_bad_cells_say_why():
    assert sweeps.parse_cells("[{lr: 0.1}, {lr: 0.01}]", BASE) == [{"lr": 0.1}, {"lr": 0.01}]
    assert sweeps.parse_cells('[{"hidden": 32}]', BASE) == [{"hidden": 32}]
    cases = {
        "[{lr: 0.1}": "not valid YAML or JSON",
        "{lr: 0.1}": "non-empty list",
        "[]": "non-empty list",
        "[{lr: 0.1}, {lr: 0.1}]": "Cell 2 duplicates cell 1",
        "[{lr: 0.1}, {momentum: 0.9}]": "Cell 2: unknown config key(s) momentum",
        "[3]": "Cell 1: not a mapping",
        "[{lr: [1, 2]}]": "scalar values only",
    }
    for text, message in cases.items():
        with pytest.raises(sweeps.SweepError, match=message.replace("(", r"\(").replace(")", r"\)")):
            sweeps.parse_cells(text, BASE)


def test_plan_fills_free_gpus_in_cell_order_and_queues_the_rest():
    queued = [(1, 10), (2, 20), (3, 10), (4, 20)]
    assert sweeps.plan_starts(queued, {}, slots=1) == [(1, 0), (2, 0)]
    assert sweeps.plan_starts(queued[2:], {10: {0}}, slots=1) == [(4, 0)]
    assert sweeps.plan_starts(queued, {}, slots=2) == [(1, 0), (2, 0), (3, 1), (4, 1)]
    assert "lr: 0.1" in sweeps.merged_config("lr: 0.01\nepochs: 3\n", {"lr": 0.1})


# A public trainer's config as its own parser reads it: Python literals (False), comments, an order.
NANO = """# config for training a character-level model
out_dir: out-shakespeare-char  # where ckpt.pt goes
eval_interval: 250
always_save_checkpoint: False
compile: False
learning_rate: 1e-3 # with baby networks can afford to go a bit higher
layers:
  - 6
"""


def test_overrides_change_their_own_lines_and_keep_the_users_file_otherwise():
    """An override rewrote the whole file through a YAML dump: comments gone, `False` became `false`,
    and the trainer's own parser then failed with a bare AssertionError."""
    merged = sweeps.merged_config(NANO, {"eval_interval": 50, "compile": True, "seed": 3})
    assert (
        merged
        == NANO.replace("eval_interval: 250", "eval_interval: 50").replace("compile: False", "compile: True")
        + "seed: 3\n"
    )
    assert "always_save_checkpoint: False" in merged and "# where ckpt.pt goes" in merged
    with pytest.raises(sweeps.SweepError, match="layers holds a block"):
        sweeps.merged_config(NANO, {"layers": 4})


@pytest.mark.django_db
def test_a_bad_sweep_form_launches_nothing(client, bob, make_run, instance):
    base = make_run()
    client.force_login(bob)
    before = Run.objects.count()
    cases = {
        "[{lr: 0.1}, {nope: 1}]": "Cell 2: unknown config key(s) nope",
        "[{lr: 0.1}, {lr: 0.1}]": "Cell 2 duplicates cell 1",
        "lr: [unclosed": "not valid YAML or JSON",
    }
    for overrides, message in cases.items():
        response = client.post(
            reverse("sweep-create"),
            {
                "name": "s",
                "base_run": base.run_id,
                "overrides": overrides,
                "instances": [instance.pk],
                "gpus_per_box": 1,
                "independent": "on",
            },
        )
        page = response.content.decode()
        assert response.status_code == 200 and message in page
    assert Run.objects.count() == before and not Sweep.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_four_cells_on_two_boxes_run_two_at_a_time_and_a_failing_cell_stays_alone(
    client, bob, project, make_run, instance, source, tmp_path, gate, celery_worker_process
):
    box2_sshd = Sshd(tmp_path / "box2").start()
    try:
        box2 = factories.box(
            name=f"{project.slug}-box2-{timezone.localdate():%Y%m%d}",
            project=project,
            **{**box2_sshd.instance_fields(project), "data_root_override": str(tmp_path / "box2-data")},
        )
        set_config(source, epochs=3, hold_file=gate.path)  # every cell held after epoch 1 until both boxes were busy
        base = make_run()
        client.force_login(bob)
        response = client.post(
            reverse("sweep-create"),
            {
                "name": "lr",
                "base_run": base.run_id,
                "instances": [instance.pk, box2.pk],
                "gpus_per_box": 1,
                "independent": "on",
                "overrides": "[{lr: 0.1}, {lr: 0.05}, {batch_size: 0}, {lr: 0.001}]",
            },
        )
        sweep = Sweep.objects.get()
        assert response.url == sweep.get_absolute_url()
        cells = list(sweep.cells.order_by("cell"))
        boxes = [c.instance_id for c in cells]
        assert boxes[0] == boxes[2] != boxes[1] == boxes[3] and set(boxes) == {instance.pk, box2.pk}  # round-robin
        peak, deadline = 0, time.monotonic() + 300
        while time.monotonic() < deadline:
            states = [c.state for c in sweep.cells.order_by("cell")]
            busy = sum(s in (RunState.PREFLIGHT, RunState.SMOKE, RunState.LAUNCHING, RunState.RUNNING) for s in states)
            peak = max(peak, busy)
            assert busy <= 2  # one writer per box's single GPU
            if peak == 2:
                gate.release()
            if all(s in (RunState.EXPORTED, RunState.FAILED_SMOKE, RunState.QUARANTINED) for s in states):
                break
            time.sleep(0.3)
        states = {c.cell: c.state for c in sweep.cells.all()}
        assert states == {1: "exported", 2: "exported", 3: "failed_smoke", 4: "exported"}, states
        assert peak == 2
        hashes = set(sweep.cells.exclude(cell=3).values_list("config_sha256", flat=True))
        assert len(hashes) == 3  # each cell's own merged config, its own identity
        on_box2 = next(c for c in cells if c.instance_id == box2.pk and c.cell != 3)
        assert (tmp_path / "box2-data" / project.slug / "export" / on_box2.run_id / "best.pth").exists()
        page = client.get(sweep.get_absolute_url()).content.decode()
        assert page.count("Closed: exported") == 3 and "Failed smoke" in page
    finally:
        box2_sshd.stop()


@pytest.mark.django_db(transaction=True)
def test_a_cpu_sweep_runs_its_cells_on_cpu_slots_and_a_gpu_sweep_on_gpus(bob, make_run, instance, no_worker):
    """Preflight refuses a GPU the box does not have, so a sweep of a CPU run no longer
    writes GPU indices into its cells; each box still runs at most gpus_per_box cells at once."""
    from runs.actions.sweeps import do_advance_sweep, do_create_sweep

    cpu = do_create_sweep(make_run(), "cpu", [{"lr": n} for n in range(3)], [instance], 2, True, actor=bob)
    do_advance_sweep(cpu.pk)
    started = cpu.cells.filter(state=RunState.PREFLIGHT)
    assert started.count() == 2 and all(cell.gpus == [] for cell in started)
    assert "starts on CPU slot" in started.first().events.filter(kind="state").last().message
    # Each cell started is a launch asked in the audit log, as a single run's is (a sweep of six wrote none).
    from core.models import AuditEntry

    asked = AuditEntry.objects.filter(action="run.launch_asked", run__in=started)
    assert asked.count() == 2 and {entry.actor for entry in asked} == {bob}
    gpu = do_create_sweep(make_run(gpus=[0]), "gpu", [{"lr": n} for n in range(3)], [instance], 2, True, actor=bob)
    do_advance_sweep(gpu.pk)
    assert sorted(cell.gpus for cell in gpu.cells.filter(state=RunState.PREFLIGHT)) == [[0], [1]]


@pytest.mark.django_db(transaction=True)
def test_each_cell_runs_the_base_runs_job_with_its_secrets_and_datasets(bob, make_run, instance, no_worker):
    from runs.actions.sweeps import do_create_sweep

    base = make_run(secrets=["wandb-key"], datasets=["imagenet-mini"], secrets_in_smoke=True, convert_crlf=True)
    sweep = do_create_sweep(base, "job", [{"lr": 0.1}, {"lr": 0.2}], [instance], 1, True, actor=bob)
    for cell in sweep.cells.all():
        assert (cell.secrets, cell.datasets) == (["wandb-key"], ["imagenet-mini"])
        assert cell.secrets_in_smoke and cell.convert_crlf
