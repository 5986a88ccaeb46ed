"""The Celery app: Redis broker and results, settings read from Django's CELERY_* names."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "remotegpu_site.settings")

app = Celery("remotegpu")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
