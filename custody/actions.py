"""Custody state changes: one function per verb, in a transaction, with a run event."""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.enqueue import after_commit
from core.states import IllegalTransition
from custody.models import Artifact, CustodyRecord, CustodyStatus
from runs import rollups
from runs.actions.base import locked_run, record_run_event
from runs.live import push_run_update
from runs.models import RunState
from watching.masking import mask_tree, values_for


def roster_digest(entries) -> str:
    lines = "".join(f"{e.path}\t{e.bytes}\t{e.sha256}\n" for e in sorted(entries, key=lambda e: e.path))
    return hashlib.sha256(lines.encode()).hexdigest()


def do_start_verification(run_pk: int, *, actor) -> CustodyRecord:
    """L1: any time after the export is sealed; never touches the node's export; a new record each time."""

    with transaction.atomic(durable=True):
        run = locked_run(run_pk)  # the one lock order: run, instance, project
        if run.state != RunState.EXPORTED:
            raise IllegalTransition("Only a run with a sealed export can be verified.")
        record = CustodyRecord.objects.create(run=run, provider=run.instance.profile_key)
        record_run_event(run, "custody", f"Custody verification #{record.pk} started", actor)
        after_commit("custody.tasks.verify_custody", record.pk)
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


def do_record_mirror(record_id: int, uri: str, verified: bool, tier: str = "", mount: dict | None = None) -> None:
    CustodyRecord.objects.filter(pk=record_id).update(
        mirror_uri=uri, mirror_verified=verified, mirror_tier=tier, mirror_mount=mount or {}
    )


def do_record_progress(record_id: int, bytes_done: int, files_done: int, rate: float = 0.0, eta: float = 0.0) -> None:
    """Progress is not a state change: an UPDATE and a live push, no event."""
    CustodyRecord.objects.filter(pk=record_id).update(bytes_done=bytes_done, files_done=files_done)
    record = CustodyRecord.objects.select_related("run__project").get(pk=record_id)
    payload = {
        "type": "custody",
        "record": record.pk,
        "status": record.status,
        "bytes_done": bytes_done,
        "total_bytes": record.total_bytes,
        "files_done": files_done,
        "file_count": record.file_count,
        "rate": round(rate),
        "eta": round(eta, 1),
    }
    push_run_update(record.run.run_id, payload)


def do_close_interrupted(run_pk: int, current_id: int) -> int:
    """Earlier records of this run still 'pulling' lost their worker: close them, pointing at the new one."""
    with transaction.atomic(durable=True):
        stale = list(
            CustodyRecord.objects.select_for_update()
            .filter(run_id=run_pk, status__in=[CustodyStatus.PULLING, CustodyStatus.VERIFYING], pk__lt=current_id)
            .select_related("run")
        )
        for record in stale:
            record.status = CustodyStatus.FAILED
            record.failure = f"interrupted: the worker pulling it stopped; #{current_id} resumes from what arrived"
            record.save(update_fields=["status", "failure"])
            record_run_event(record.run, "custody", f"Custody #{record.pk} {record.failure}")
    return len(stale)


# What a readback found that the record keeps: the seeds, populations and fairness facts are what the run
# page, reports and comparisons read (a record that dropped them made every comparison "unverified").
EVIDENCE_KEYS = (
    "consumer",
    "loaded",
    "metrics",
    "architecture",
    "pull",
    "reproducibility",
    "population",
    "fairness",
    "capsule",
    "selection",
)


def do_finish_verification(record_id: int, evidence: dict | None, failure: str = "") -> CustodyRecord:
    with transaction.atomic(durable=True):
        # FOR UPDATE over the join locks the run's row too: two verifications of one run finishing at
        # once are ordered, so only one counts the run verified (tests/runs/test_rollups.py races it).
        record = (
            CustodyRecord.objects.select_for_update(no_key=True, of=("self", "run"))
            .select_related("run")
            .get(pk=record_id)
        )
        if record.status not in (CustodyStatus.PULLING, CustodyStatus.VERIFYING):
            return record  # already closed (interrupted and superseded): a late finisher changes nothing
        first_verified = not record.run.custody_records.filter(status=CustodyStatus.VERIFIED).exists()
        values = values_for(record.run)  # what run.json and metrics say is kept masked, like its log
        evidence, failure = mask_tree(evidence, values), mask_tree(failure, values)
        if evidence is not None:
            failure = failure or "; ".join(evidence["failures"])
            record.evidence = {key: evidence[key] for key in EVIDENCE_KEYS if key in evidence}
            record.warnings = evidence["warnings"]
            record.consumer_location = evidence["consumer"]
            record.artifacts.update(verified=not failure)
        record.failure = failure
        record.status = CustodyStatus.FAILED if failure else CustodyStatus.VERIFIED
        record.verified_at = None if failure else timezone.now()
        record.save()
        if not failure and first_verified:
            rollups.add(record.run, verified=1)
        if failure:
            message = f"Custody #{record.pk} failed closed: {failure}"
        else:
            message = f"Custody #{record.pk} verified: {record.file_count} files, {len(record.warnings)} warning(s)"
        record_run_event(record.run, "custody", message, data={"record": record.pk})
    return record


def do_fail_stranded_records() -> int:
    """Records still pulling past RECONCILE_CUSTODY_SECONDS lost their worker: fail them with the way out."""
    due = timezone.now() - timedelta(seconds=settings.RECONCILE_CUSTODY_SECONDS)
    stranded = CustodyRecord.objects.filter(
        status__in=[CustodyStatus.PULLING, CustodyStatus.VERIFYING], created__lt=due
    )
    reason = "interrupted: no worker finished this verification in time; verify again (the pull resumes)"
    return sum(1 for pk in stranded.values_list("pk", flat=True) if do_finish_verification(pk, None, reason))
