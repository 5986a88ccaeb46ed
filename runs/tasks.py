"""Celery tasks of the runs app (thin wrappers; the work lives in named modules)."""

import socket

from celery import shared_task

from runs.models import Project


@shared_task(acks_late=True, soft_time_limit=20, time_limit=30)
def worker_selfcheck() -> dict:
    """A worker proves it reaches the same database the web process uses."""
    return {"hostname": socket.gethostname(), "projects": Project.objects.count()}
