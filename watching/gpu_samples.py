"""Keep what the watcher measured of a run's GPUs: a sample at most every GPU_SAMPLE_SECONDS, and the
idle streak its waste alarm reads (delivery/waste.py). One short transaction with the run locked."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.actions.base import lock_run
from runs.gpu_use import read_sample, sample_due, streak_flips
from runs.models import GpuSample, RunState

WATCHED = (RunState.RUNNING, RunState.EXITED)


def do_record_gpu_use(run_pk: int, answer, now=None) -> bool:
    """answer: the probe's `gpus` (nvidia-smi on the box). Whether a sample was kept."""
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        run = lock_run(run_pk, run_only=True)
        sample = read_sample(answer, run.gpus) if run.state in WATCHED else None
        if sample is None:
            return False
        changed = []
        if streak_flips(run, sample):  # busy again ends the streak: a new one is news again
            run.gpu_idle_since = now if run.gpu_idle_since is None else None
            changed.append("gpu_idle_since")
        due = sample_due(run, settings.GPU_SAMPLE_SECONDS, now)
        if due:
            GpuSample.objects.create(run=run, at=now, gpus=sample)
            run.gpu_sampled_at = now
            changed.append("gpu_sampled_at")
        if changed:
            run.save(update_fields=changed)
    return due
