"""Sweeps: one run per cell, started as boxes free up."""

from functools import partial

from django.core.exceptions import PermissionDenied
from django.db import transaction

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from runs import rollups, sweeps
from runs.actions import arrays
from runs.actions.base import control_host_problem, locked_sweep, move_run, new_run_id, run_event
from runs.actions.spending import spend_gate
from runs.models import (
    LIVE_STATES,
    Run,
    RunState,
    SpendRequest,
    Sweep,
)

# ---------------------------------------------------------------- sweeps
CELL_FIELDS = [
    "project_id",
    "source_kind",
    "source_path",
    "source_commit",
    "command",
    "config_path",
    "data_paths",
    "manifest_path",
    "expected_minutes",
    "checkpoint_bytes",
    "checkpoints_retained",
    "step_key",
    "scratch_bytes",
    "expected_files",
    "environment",
    "capsule",
    "auto_relaunch",
    "max_relaunches",
    "stall_seconds",
    "secrets",  # each cell runs the base run's job: its secrets, datasets and source checks too
    "secrets_in_smoke",
    "datasets",
    "convert_crlf",
]


def do_create_sweep(
    base_run: Run, name: str, cells: list[dict], boxes: list, gpus_per_box: int, independent: bool, *, actor
) -> Sweep:
    """One run per cell (validated cells in, nothing launched yet), then start what fits."""
    if any(box.profile.is_local for box in boxes) and (refused := control_host_problem(base_run, actor)):
        raise PermissionDenied(refused)
    # What each cell runs is the base run's, with the sweep maker's overrides: both people wrote it.
    base_author = base_run.definition_by if base_run.definition_by_id else base_run.created_by
    author = actor if base_author is not None and base_author.is_superuser else base_author
    with transaction.atomic(durable=True):
        sweep = Sweep.objects.create(
            project=base_run.project,
            name=name,
            base_run=base_run,
            overrides=cells,
            created_by=actor,
            gpus_per_box=gpus_per_box if independent else 1,
            independent=independent,
            # One Slurm box: its cells go as one job array, where the cluster's accounting can name each task.
            array={"wanted": True} if len(boxes) == 1 and boxes[0].profile.runs_jobs else {},
        )
        sweep.instances.set(boxes)
        order = sweeps.assign_boxes(len(cells), [box.pk for box in boxes] if independent else [boxes[0].pk])
        for index, (overrides, box_pk) in enumerate(zip(cells, order, strict=True), start=1):
            cell = Run(**{field: getattr(base_run, field) for field in CELL_FIELDS})
            cell.instance_id, cell.sweep, cell.cell, cell.config_overrides = box_pk, sweep, index, overrides
            # A cell on a Slurm box asks for the base run's job options; its job is its own.
            cell.scheduler = {"options": base_run.slurm_options} if base_run.slurm_options else {}
            cell.title = f"{name} · cell {index}: " + ", ".join(f"{k}={v}" for k, v in overrides.items())
            cell.run_id, cell.created_by, cell.definition_by = new_run_id(base_run.project.slug), actor, author
            cell.save()
            rollups.add(cell, runs=1)
            run_event(cell, "created", f"Sweep {name}: cell {index} queued on box {box_pk}", actor, to_state=cell.state)
        transaction.on_commit(partial(do_advance_sweep, sweep.pk))
    return sweep


def do_advance_sweep(sweep_pk: int) -> list[str]:
    """Start every queued cell that has a free GPU on its box, in cell order (one sweep lock at a time)."""

    with transaction.atomic(durable=True):
        sweep = locked_sweep(sweep_pk)
        cells = {run.pk: run for run in Run.objects.select_for_update(no_key=True).filter(sweep=sweep).order_by("cell")}
        holding = LIVE_STATES - {RunState.EXITED}
        busy: dict[int, set[int]] = {}
        for run in cells.values():
            if run.state in holding:
                slots = busy.setdefault(run.instance_id if sweep.independent else 0, set())
                if run.gpus:
                    slots.update(run.gpus)
                else:  # a CPU cell holds a slot of its box without naming a GPU: the lowest free one
                    slots.add(min(set(range(len(slots) + 1)) - slots))
        queued = [
            (run.pk, run.instance_id if sweep.independent else 0)
            for run in cells.values()
            if run.state == RunState.DRAFT
        ]
        started = []
        # An array's cells all start: the cluster runs at most gpus_per_box of them at once (--array=…%N).
        slots = len(cells) if sweep.array.get("wanted") else sweep.gpus_per_box
        for run_pk, gpu in sweeps.plan_starts(queued, busy, slots):
            run = cells[run_pk]
            if spend_gate(run, run.attempt + 1, SpendRequest.Why.SWEEP, sweep.created_by) is not None:
                continue  # this cell waits for an approver; an approval advances the sweep again
            # A sweep of a CPU run runs its cells on CPU (a slot, not a GPU: preflight would refuse a GPU
            # the box does not have); a GPU run's cells each take their own GPU.
            run.gpus = [gpu] if sweep.base_run.gpus else []
            where = f"GPU {gpu}" if run.gpus else f"CPU slot {gpu}"
            move_run(run, RunState.PREFLIGHT, f"Sweep {sweep.name}: cell {run.cell} starts on {where}")
            # Each cell is a launch asked, audited as a single run's is (by who made the sweep).
            message = f"{run.run_id}: launch asked (sweep {sweep.name}, cell {run.cell})"
            record(AuditAction.RUN_LAUNCH_ASKED, message, actor=sweep.created_by, run=run)
            after_commit("runs.tasks.preflight_run", run.pk)
            started.append(run.run_id)
        arrays.submit_when_gathered(sweep)  # a cell that dropped out may have been the last one awaited
    return started
