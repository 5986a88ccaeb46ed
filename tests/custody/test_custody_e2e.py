"""VERIFY end to end: the example trains and seals on the loopback sshd, then custody proves it."""

import json

import pytest
from django.urls import reverse

from custody.actions import do_start_verification
from custody.models import CustodyRecord, CustodyStatus
from custody.roster import parse_roster
from custody.verify import custody_dir
from node.pull import partial_of, pull_one
from runs.actions.lifecycle import do_start_preflight
from runs.box_spec import run_node
from runs.models import RunState
from tests.custody import sealed
from tests.runs.conftest import edit_train, set_config, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def exported(make_run, source, bob, **config):
    set_config(source, epochs=3, **config)
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    return wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_SMOKE}, timeout=180)


def wait_record(record, timeout=120) -> CustodyRecord:
    def settled():
        record.refresh_from_db()
        return record if record.status in (CustodyStatus.VERIFIED, CustodyStatus.FAILED) else None

    return wait_until(settled, timeout, 0.3, f"custody #{record.pk} settling")


def test_pull_readback_load_recompute_gives_a_verified_record_exported_as_json(
    client, bob, carol, charlie, make_run, source, node, tmp_path, celery_worker_process, durable_mount
):
    """One exported run (a full training is most of this module's time) serves four checks: the
    verified record, its JSON export, a pull killed half-way resuming from what arrived, and a byte
    flipped after sealing failing the next verification closed."""
    if not durable_mount:
        pytest.skip("the durable mirror needs a disk of its own: mounting a tmpfs needs root")
    run = exported(make_run, source, bob)
    assert run.state == RunState.EXPORTED
    run.instance.mirror_root = sealed.MIRROR_ROOT  # the box's durable disk (a tmpfs of its own)
    run.instance.save()
    record = wait_record(do_start_verification(run.pk, actor=bob))
    assert record.status == CustodyStatus.VERIFIED, record.failure
    claimed = json.loads((node.export(run) / "test" / "synthetic" / "metrics.json").read_text())
    accuracy = next(m for m in record.evidence["metrics"] if m["name"] == "accuracy")
    assert accuracy["claimed"] == claimed["accuracy"] and accuracy["within_tolerance"]
    assert {item["path"] for item in record.evidence["loaded"]} == {"best.pth", "last.pth"}
    assert any("no vis/" in warning for warning in record.warnings)  # paperwork: warn and proceed
    assert record.file_count == record.artifacts.filter(verified=True).count() >= 6
    for artifact in record.artifacts.all():
        assert (custody_dir(run) / artifact.path).stat().st_size == artifact.bytes
    assert not list(custody_dir(run).rglob("*.partial"))
    mirror = sealed.mirror_dir(run)
    assert record.mirror_verified and record.mirror_uri == str(mirror)
    assert record.mirror_mount["fstype"] == "tmpfs" and record.mirror_mount["mountpoint"] == str(mirror.parents[2])
    assert (mirror / "best.pth").read_bytes() == (node.export(run) / "best.pth").read_bytes()
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert f"Custody #{record.pk}" in page and record.roster_sha256 in page

    client.force_login(charlie)  # the outsider: this real record is not found for them
    assert client.get(reverse("custody-json", args=[record.pk])).status_code == 404
    client.force_login(carol)  # a member, even one without a role, reads it
    response = client.get(reverse("custody-json", args=[record.pk]))
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    document = response.json()
    assert document["roster_sha256"] == record.roster_sha256 and document["status"] == "verified"
    assert document["run"]["config_sha256"] == run.config_sha256
    assert {a["path"] for a in document["artifacts"]} >= {"best.pth", "run.json", "test/synthetic/metrics.json"}
    assert document["architecture"]["ok"] and document["architecture"]["checked"]
    assert client.get(reverse("custody-json", args=[record.pk + 999])).status_code == 404

    resume_partial_pull(run, node, tmp_path / "resume")
    flipped_byte_fails_closed(run, node, bob)


def resume_partial_pull(run, node, target) -> None:
    """What a pull killed half-way leaves (the first half under the .partial name, nothing final)
    resumes: only the rest moves, and the file ends identical."""
    with run_node(run) as session:
        session.prepare()
        entry = next(e for e in parse_roster(session.roster()) if e.path == "test/synthetic/results.parquet")
        half = (node.export(run) / entry.path).read_bytes()[: entry.bytes // 2]
        partial = partial_of(target / entry.path)
        partial.parent.mkdir(parents=True)
        partial.write_bytes(half)
        moved = pull_one(session.transport, session.layout.export, entry, target)
    assert moved == entry.bytes - len(half)
    assert (target / entry.path).read_bytes() == (node.export(run) / entry.path).read_bytes()
    assert not partial.exists()


def flipped_byte_fails_closed(run, node, bob) -> None:
    """A byte flipped in the sealed export after a verified copy: the next verification fails closed
    naming the file (the seal's hash, not the earlier record, is what the pull checks against)."""
    best = node.export(run) / "best.pth"
    data = bytearray(best.read_bytes())
    data[len(data) // 2] ^= 0xFF
    best.write_bytes(bytes(data))
    record = wait_record(do_start_verification(run.pk, actor=bob))
    assert record.status == CustodyStatus.FAILED
    assert "hash mismatch: best.pth changed since sealing" in record.failure
    assert run.events.filter(kind="custody", message__contains="failed closed").exists()


def test_an_inflated_metric_and_an_edited_config_each_fail_closed_with_their_reason(
    bob, make_run, source, celery_worker_process
):
    """One training that lies twice: metrics.json claims 0.05 more accuracy than its predictions give,
    and the export's config.yaml claims a narrower network than the one trained and checkpointed. The
    readback names both (each gate on its own: either alone fails the record)."""
    edit_train(
        source,
        'json.dump({"accuracy": accuracy, "loss": loss}',
        'json.dump({"accuracy": accuracy + 0.05, "loss": loss}',
    )
    edit_train(
        source,
        "json.dump(run, handle, indent=2)",
        "json.dump(run, handle, indent=2)\n"
        '    cfg = os.path.join(out_dir, "config.yaml")\n'
        '    open(cfg, "a").write("hidden: 32\\n")',
    )
    run = exported(make_run, source, bob)
    assert run.state == RunState.EXPORTED, run.failure_excerpt
    record = wait_record(do_start_verification(run.pk, actor=bob))
    assert record.status == CustodyStatus.FAILED
    assert "metric drift in test/synthetic: accuracy claimed" in record.failure
    assert "(delta -0.05" in record.failure
    assert "best.pth does not match the config's architecture" in record.failure
    assert "0.weight: checkpoint [64, 16], config says [32, 16]" in record.failure


def test_only_a_sealed_export_can_be_verified(bob, make_run):
    from core.states import IllegalTransition

    run = make_run(state=RunState.RUNNING, attempt=1)
    with pytest.raises(IllegalTransition):
        do_start_verification(run.pk, actor=bob)
    assert not CustodyRecord.objects.exists()
