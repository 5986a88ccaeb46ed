"""A sweep on a Slurm cluster as one job array: each cell still its own run (its preflight, smoke, spec,
checkpoints and export), launched together as the array's tasks ("<array>_<cell>"), the cluster running
at most the sweep's slots at a time. Only where the cluster keeps accounting (its preflight measured
it): sacct can then name each task after it leaves the queue; a completion log cannot tell them apart.

A cell whose files are on the login node waits, ready, for its siblings still in preflight or smoke; the
last one ready has the array submitted. A cell that comes after the array, a relaunch, or one that waited
past SLURM_ARRAY_GATHER_SECONDS goes as its own job: no cell waits on another for ever.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.enqueue import after_commit
from runs.actions.base import lock_run, locked_sweep, run_event
from runs.models import Run, RunState, Sweep

ALONE, WAIT = "alone", "wait"
SUBMIT_CLAIM_SECONDS = 120  # a submit that claimed the array and vanished is taken over after this


def wants_array(run: Run) -> bool:
    """The run is a first attempt of a cell of an array sweep, on a cluster that keeps accounting."""
    accounted = ((run.preflight_report or {}).get("slurm") or {}).get("accounting") is True
    return bool(run.sweep_id) and run.attempt == 1 and accounted and bool(run.sweep.array.get("wanted"))


def _ready(cell: Run) -> bool:
    return cell.state == RunState.LAUNCHING and bool((cell.scheduler or {}).get("array_ready_at"))


def do_ready_array_cell(run_pk: int, attempt: int) -> str:
    """The cell's files are on the login node. ALONE: launch it as its own job now (its sweep's array has
    gone, or it waited long enough); WAIT: the array takes it (submitted now when it was the last)."""
    with transaction.atomic(durable=True):
        sweep_pk = Run.objects.values_list("sweep_id", flat=True).get(pk=run_pk)
        sweep = locked_sweep(sweep_pk)  # its boxes, its project, the sweep, then the cell: as do_advance_sweep
        run = lock_run(run_pk, run_only=True)
        if run.state != RunState.LAUNCHING or run.attempt != attempt:
            return WAIT  # moved on: nothing to launch
        if sweep.array_job:
            return ALONE
        now = timezone.now()
        since = (run.scheduler or {}).get("array_ready_at")
        if since is None:
            run.scheduler = {**(run.scheduler or {}), "array_ready_at": now.isoformat()}
            run.save(update_fields=["scheduler"])
            run_event(run, "note", f"Ready: waits for sweep {sweep.name}'s other cells, to go as one job array")
        elif now - datetime.fromisoformat(since) > timedelta(seconds=settings.SLURM_ARRAY_GATHER_SECONDS):
            run_event(run, "note", "Waited for the sweep's job array long enough: goes as its own job")
            return ALONE
        submit_when_gathered(sweep)
    return WAIT


GATHERING = {RunState.PREFLIGHT, RunState.SMOKE, RunState.LAUNCHING}


def submit_when_gathered(sweep: Sweep) -> bool:
    """The array is submitted once no cell is still on its way (in preflight, smoke, or launching and not
    ready) and one is ready. Called with the sweep locked: when a cell is ready, and when one drops out (a
    failed smoke must not leave the ready ones waiting for it until the gather deadline)."""
    if not sweep.array.get("wanted") or sweep.array_job:
        return False
    cells = list(Run.objects.filter(sweep=sweep))
    if any(cell.state in GATHERING and not _ready(cell) for cell in cells) or not any(map(_ready, cells)):
        return False
    after_commit("runs.tasks.submit_sweep_array", sweep.pk)
    return True


def do_claim_array(sweep_pk: int) -> list[Run]:
    """The ready cells the array is submitted for, claimed so one submit at a time sends it; [] when the
    array has gone or another submit holds it."""
    with transaction.atomic(durable=True):
        sweep = Sweep.objects.select_for_update().get(pk=sweep_pk)
        claimed = sweep.array.get("claimed_at")
        fresh = claimed and timezone.now() - datetime.fromisoformat(claimed) < timedelta(seconds=SUBMIT_CLAIM_SECONDS)
        if sweep.array_job or fresh:
            return []
        cells = [
            cell
            for cell in Run.objects.filter(sweep=sweep).select_related("instance", "project").order_by("cell")
            if _ready(cell) and cell.attempt == 1
        ]
        if cells:
            sweep.array = {**sweep.array, "claimed_at": timezone.now().isoformat()}
            sweep.save(update_fields=["array"])
    return cells


def do_record_array(sweep_pk: int, job: str, cells: list[Run], at_once: int) -> None:
    """The array is queued: the sweep names it; each cell is marked launched by its caller."""
    with transaction.atomic(durable=True):
        sweep = Sweep.objects.select_for_update().get(pk=sweep_pk)
        listed = [cell.cell for cell in cells]
        sweep.array = {**sweep.array, "job": job, "cells": listed, "at_once": at_once, "claimed_at": None}
        sweep.save(update_fields=["array"])
        for cell in cells:
            message = f"Goes as task {cell.cell} of job array {job} (cells {listed}, at most {at_once} at once)"
            run_event(cell, "note", message)


def do_release_array_claim(sweep_pk: int) -> None:
    """The submit failed: the claim goes, so a retry of a cell may try again."""
    with transaction.atomic(durable=True):
        sweep = Sweep.objects.select_for_update().get(pk=sweep_pk)
        sweep.array = {**sweep.array, "claimed_at": None}
        sweep.save(update_fields=["array"])
