"""A real Celery worker process on the machine's Redis runs a task end to end."""

import pytest

from runs.tasks import worker_selfcheck
from tests import factories


@pytest.mark.django_db(transaction=True)
def test_worker_process_runs_a_task_against_the_same_database(celery_worker_process):
    factories.project(name="Vision", slug="vision")
    factories.project(name="Speech", slug="speech")
    result = worker_selfcheck.delay().get(timeout=30)
    assert result["projects"] == 2
    assert celery_worker_process.poll() is None


def test_celery_is_configured_for_json_and_late_acks():
    from remotegpu_site.celery import app

    assert app.conf.task_serializer == "json"
    assert app.conf.accept_content == ["json"]
    assert app.conf.task_acks_late is True
    assert app.conf.task_soft_time_limit < app.conf.task_time_limit
    assert app.conf.broker_url.startswith("redis://")
