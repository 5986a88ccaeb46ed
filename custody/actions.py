"""Custody state changes: one function per verb, in a transaction, with a run event."""

import hashlib
from functools import partial

from django.db import transaction
from django.utils import timezone

from custody.models import Artifact, CustodyRecord, CustodyStatus
from runs.actions import IllegalTransition, record_run_event
from runs.models import Run, RunState


def roster_digest(entries) -> str:
    lines = "".join(f"{e.path}\t{e.bytes}\t{e.sha256}\n" for e in sorted(entries, key=lambda e: e.path))
    return hashlib.sha256(lines.encode()).hexdigest()


def do_start_verification(run_pk: int, actor) -> CustodyRecord:
    """L1: any time after the export is sealed; never touches the node's export; a new record each time."""
    from custody.tasks import verify_custody

    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update().select_related("instance").get(pk=run_pk)
        if run.state != RunState.EXPORTED:
            raise IllegalTransition("Only a run with a sealed export can be verified.")
        record = CustodyRecord.objects.create(run=run, provider=run.instance.profile_key)
        record_run_event(run, "custody", f"Custody verification #{record.pk} started", actor)
        transaction.on_commit(partial(verify_custody.delay, record.pk))
    return record


def do_record_roster(record_id: int, entries, uri: str) -> None:
    with transaction.atomic(durable=True):
        record = CustodyRecord.objects.select_for_update().get(pk=record_id)
        record.artifacts.all().delete()
        Artifact.objects.bulk_create(
            [Artifact(record=record, path=e.path, bytes=e.bytes, sha256=e.sha256) for e in entries]
        )
        record.roster_sha256 = roster_digest(entries)
        record.total_bytes = sum(e.bytes for e in entries)
        record.file_count = len(entries)
        record.uri = uri
        record.save()


def do_record_progress(record_id: int, bytes_done: int, files_done: int) -> None:
    CustodyRecord.objects.filter(pk=record_id).update(bytes_done=bytes_done, files_done=files_done)


def do_finish_verification(record_id: int, evidence: dict | None, failure: str = "") -> CustodyRecord:
    with transaction.atomic(durable=True):
        record = CustodyRecord.objects.select_for_update().select_related("run").get(pk=record_id)
        if evidence is not None:
            failure = failure or "; ".join(evidence["failures"])
            record.evidence = {key: evidence[key] for key in ("consumer", "loaded", "metrics")}
            record.warnings = evidence["warnings"]
            record.consumer_location = evidence["consumer"]
            record.artifacts.update(verified=not failure)
        record.failure = failure
        record.status = CustodyStatus.FAILED if failure else CustodyStatus.VERIFIED
        record.verified_at = None if failure else timezone.now()
        record.save()
        if failure:
            message = f"Custody #{record.pk} failed closed: {failure}"
        else:
            message = f"Custody #{record.pk} verified: {record.file_count} files, {len(record.warnings)} warning(s)"
        record_run_event(record.run, "custody", message, data={"record": record.pk})
    return record
