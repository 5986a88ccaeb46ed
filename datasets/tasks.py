"""Dataset tasks: a box's dataset hashed on that box (the bytes never leave it)."""

from celery import shared_task
from django.conf import settings

from datasets.actions import do_record_scan
from datasets.models import Dataset, DatasetState
from fleet.node_client import NodeClient
from node.transport import TransportError


@shared_task(acks_late=True, soft_time_limit=settings.STAGE_TIMEOUT, time_limit=settings.STAGE_TIMEOUT + 60)
def scan_dataset(dataset_pk: int) -> str:
    dataset = Dataset.objects.select_related("source_instance", "project").filter(pk=dataset_pk).first()
    if dataset is None or dataset.state != DatasetState.SCANNING:
        return "nothing to scan"
    try:
        with NodeClient(dataset.source_instance) as node:
            node.install_wrapper(node.tools)
            answer = node.invoke(
                node.tools,
                "dataset-roster",
                request={"root": dataset.source_path},
                timeout=settings.STAGE_TIMEOUT,
                bound=True,
            )
    except TransportError as exc:
        return do_record_scan(dataset_pk, None, f"the box could not hash it: {exc}").state
    return do_record_scan(dataset_pk, answer["files"]).state
