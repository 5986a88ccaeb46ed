"""The Celery app: Redis broker and results, settings read from Django's CELERY_* names."""

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "remotegpu_site.settings")

app = Celery("remotegpu")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _refuse_an_open_control_plane(**_):
    """A worker runs the control host's commands: it does not start while their user reaches the control
    plane (core/wall.py)."""
    from core.wall import refuse_to_start

    refuse_to_start()
