"""A worker SIGKILLed half-way through a pull: the next verification resumes from what arrived."""

import pytest

from custody.actions import do_start_verification
from custody.models import CustodyRecord, CustodyStatus
from custody.verify import custody_dir
from tests.conftest import WorkerProcess, database_url
from tests.custody.test_custody_e2e import exported, wait_record
from tests.runs.conftest import edit_train
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

BLOB_MIB = 24


def add_blob_to_export(source) -> None:
    """The example also writes a large incompressible file into its export, so a pull takes seconds."""
    edit_train(
        source,
        "json.dump(run, handle, indent=2)",
        "json.dump(run, handle, indent=2)\n"
        f'    open(os.path.join(out_dir, "blob.bin"), "wb").write(os.urandom({BLOB_MIB} << 20))',
    )


def wait_bytes(record: CustodyRecord, low: int, timeout: float = 60) -> None:
    wait_until(
        lambda: record.refresh_from_db() or record.bytes_done >= low, timeout, 0.1, f"the pull passing {low} bytes"
    )


def test_a_sigkilled_pull_resumes_and_every_hash_verifies(bob, make_run, source, celery_worker_process):
    add_blob_to_export(source)
    run = exported(make_run, source, bob)
    celery_worker_process.stop()
    # A worker held to 8 MiB/s, so the kill lands half-way through the blob.
    slow = WorkerProcess(database_url(), name="slow", CUSTODY_PULL_MAX_RATE=str(8 << 20))
    slow.start()
    try:
        first = do_start_verification(run.pk, actor=bob)
        wait_bytes(first, 6 << 20)
        slow.kill()
    finally:
        slow.stop()
    canonical = custody_dir(run)
    assert not (canonical / "blob.bin").exists()  # never visible under its final name half-written
    arrived = (canonical / "blob.bin.partial").stat().st_size
    assert 0 < arrived < BLOB_MIB << 20

    celery_worker_process.start()
    second = wait_record(do_start_verification(run.pk, actor=bob))
    assert second.status == CustodyStatus.VERIFIED, second.failure
    pull = second.evidence["pull"]
    assert pull["bytes_moved"] <= second.total_bytes - arrived  # resumed: what arrived was not fetched again
    assert second.artifacts.filter(verified=True).count() == second.file_count
    assert not list(canonical.rglob("*.partial"))
    first.refresh_from_db()
    assert first.status == CustodyStatus.FAILED and f"#{second.pk} resumes" in first.failure
