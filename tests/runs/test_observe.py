"""Observation is pure: every predicate of watching.observe.observe, from made-up node statuses."""

import pytest

from watching.observe import Snapshot, observe

THRESHOLDS = {"stale_heartbeat": 60, "min_free_bytes": 1 << 30, "min_free_fraction": 0.03}
NOW = 1_800_000_000.0
ROOMY = {"free_bytes": 500 << 30, "total_bytes": 1000 << 30, "free_inodes": 10**6, "total_inodes": 2 * 10**6}


def snapshot(**overrides) -> Snapshot:
    base = {
        "state": "running",
        "attempt": 1,
        "health": "ok",
        "alerts": (),
        "log_offset": 0,
        "csv_offset": 0,
        "csv_header": None,
        "stall_seconds": 300,
        "ran": None,
    }
    return Snapshot(**{**base, **overrides})


def status(**overrides) -> dict:
    base = {
        "attempt": 1,
        "now": NOW,
        "launched": True,
        "wrapper_alive": True,
        "child_alive": True,
        "exit_code": None,
        "heartbeat_at": NOW - 5,
        "exported": False,
        "rebooted": False,
        "quarantine_reason": None,
        "log_mtime": NOW - 10,
        "ckpt_mtime": NOW - 20,
        "log_from": 0,
        "log_chunk": "",
        "log_offset": 0,
        "csv_from": 0,
        "csv_chunk": "",
        "csv_offset": 0,
        "log_tail": "",
        "space": ROOMY,
        "ran": None,
    }
    return {**base, **overrides}


def test_a_live_quiet_run_is_healthy_and_says_nothing_new():
    seen = observe(snapshot(), status(), THRESHOLDS)
    assert seen.applies and seen.alive and seen.health == "ok"
    assert (seen.finished, seen.dead, seen.new_alerts) == (False, False, [])


@pytest.mark.parametrize(
    ("snap", "stat"),
    [({"state": "exported"}, {}), ({"state": "queued"}, {}), ({}, {"attempt": 2}), ({"attempt": 3}, {})],
)
def test_a_probe_of_another_attempt_or_an_unwatched_state_does_not_apply(snap, stat):
    assert observe(snapshot(**snap), status(**stat), THRESHOLDS).applies is False


def test_finished_means_no_process_and_an_exit_marker():
    seen = observe(snapshot(), status(wrapper_alive=False, child_alive=False, exit_code=0), THRESHOLDS)
    assert seen.finished and not seen.dead and seen.exit_code == 0


def test_a_quarantine_marker_also_finishes_it():
    stat = status(wrapper_alive=False, child_alive=False, quarantine_reason="oom")
    seen = observe(snapshot(), stat, THRESHOLDS)
    assert seen.finished and seen.quarantine_reason == "oom" and seen.exit_code is None


def test_dead_means_no_process_and_no_marker():
    seen = observe(snapshot(), status(wrapper_alive=False, child_alive=False), THRESHOLDS)
    assert seen.dead and not seen.finished


@pytest.mark.parametrize("stat", [{"launched": False}, {"exported": True}])
def test_not_dead_before_launch_or_once_exported(stat):
    seen = observe(snapshot(), status(wrapper_alive=False, child_alive=False, **stat), THRESHOLDS)
    assert not seen.dead


def test_a_child_alone_alive_is_alive():
    seen = observe(snapshot(), status(wrapper_alive=False, child_alive=True), THRESHOLDS)
    assert seen.alive and not seen.dead and not seen.finished


def test_stalled_means_alive_but_nothing_written_for_stall_seconds():
    seen = observe(snapshot(stall_seconds=300), status(log_mtime=NOW - 301, ckpt_mtime=NOW - 400), THRESHOLDS)
    assert seen.health == "stalled" and "stalled" in seen.new_alerts
    quiet_but_dead = status(wrapper_alive=False, child_alive=False, log_mtime=NOW - 900, ckpt_mtime=None)
    assert "stalled" not in observe(snapshot(), quiet_but_dead, THRESHOLDS).new_alerts


def test_a_fresh_checkpoint_keeps_a_quiet_log_from_stalling():
    seen = observe(snapshot(stall_seconds=300), status(log_mtime=NOW - 900, ckpt_mtime=NOW - 30), THRESHOLDS)
    assert seen.health == "ok" and "stalled" not in seen.new_alerts


def test_a_stale_heartbeat_of_a_live_wrapper_is_material():
    seen = observe(snapshot(), status(heartbeat_at=NOW - 61), THRESHOLDS)
    assert "stale_heartbeat" in seen.new_alerts and seen.heartbeat_age == 61


def test_unreachable_then_answering_is_reachable_again():
    seen = observe(snapshot(health="unreachable"), status(), THRESHOLDS)
    assert seen.reachable_again and seen.health == "ok"
    dead_answer = status(wrapper_alive=False, child_alive=False)
    assert observe(snapshot(health="unreachable"), dead_answer, THRESHOLDS).health == "ok"


@pytest.mark.parametrize(
    ("chunk", "signal"),
    [
        ("Traceback (most recent call last):\n  File x\n", "traceback"),
        ("RuntimeError: CUDA out of memory. Tried to allocate\n", "cuda_oom"),
        ("epoch 3 loss = nan\n", "nan_loss"),
        ("OSError: [Errno 28] No space left on device\n", "disk_full"),
        ("Killed\n", "killed"),
    ],
)
def test_every_material_log_signal_is_found_once(chunk, signal):
    first = observe(snapshot(), status(log_chunk=chunk, log_offset=len(chunk)), THRESHOLDS)
    assert signal in first.new_alerts and first.log_offset == len(chunk)
    again = observe(
        snapshot(alerts=tuple(first.alerts), log_offset=len(chunk)),
        status(log_from=len(chunk), log_chunk=chunk, log_offset=2 * len(chunk)),
        THRESHOLDS,
    )
    assert signal not in again.new_alerts and signal in again.alerts


def test_a_chunk_from_an_offset_already_passed_is_not_applied_twice():
    seen = observe(snapshot(log_offset=100), status(log_from=0, log_chunk="Killed\n", log_offset=7), THRESHOLDS)
    assert seen.log_chunk == "" and seen.log_offset == 100 and "killed" not in seen.new_alerts


def test_curve_rows_continue_the_known_header():
    first = observe(snapshot(), status(csv_chunk="epoch,loss\n0,1.0\n", csv_offset=17), THRESHOLDS)
    assert first.csv_header == ["epoch", "loss"] and len(first.rows) == 1
    more = observe(
        snapshot(csv_offset=17, csv_header=first.csv_header),
        status(csv_from=17, csv_chunk="1,0.5\n", csv_offset=23),
        THRESHOLDS,
    )
    assert more.rows == [{"epoch": 1.0, "loss": 0.5}]


def test_pressure_is_material_once_and_rearms_when_it_clears():
    full = {**ROOMY, "free_bytes": 1 << 20}
    first = observe(snapshot(), status(space=full), THRESHOLDS)
    assert first.new_alerts == ["disk_pressure"]
    still = observe(snapshot(alerts=("disk_pressure",)), status(space=full), THRESHOLDS)
    assert still.new_alerts == [] and still.alerts == ["disk_pressure"]
    cleared = observe(snapshot(alerts=("disk_pressure", "traceback")), status(), THRESHOLDS)
    assert cleared.alerts == ["traceback"]  # a later crossing is news again; other alerts stay


def test_a_box_that_hides_its_disk_raises_no_pressure_and_no_error():
    for space in (None, {}, {"free_bytes": "lots"}, []):
        assert observe(snapshot(), status(space=space), THRESHOLDS).new_alerts == []


def test_the_interpreter_that_ran_is_reported_only_when_new():
    ran = {"python": "3.11.7", "torch": "2.13.0"}
    assert observe(snapshot(), status(ran=ran), THRESHOLDS).ran == ran
    assert observe(snapshot(ran=ran), status(ran=ran), THRESHOLDS).ran is None
