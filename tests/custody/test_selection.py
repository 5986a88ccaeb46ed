"""The visual selection manifest run.json binds is read from the box and checked, not taken on its hash:
there, the bound bytes, a list of at most K distinct sample ids, and each test's visuals drawn for
exactly those samples."""

import hashlib
import json

from custody.selection import selection_gates


def bound(manifest: bytes, name: str = "bench-k8", visuals=None) -> dict:
    run = {"selection": {"selection_id": name, "manifest_sha256": hashlib.sha256(manifest).hexdigest()}}
    if visuals is not None:
        run["visuals"] = {"bench": {"sample_ids": visuals, "conditions": ["lab"], "roles": ["prediction"]}}
    return run


GOOD = json.dumps({"selection_id": "bench-k8", "sample_ids": list(range(8))}).encode()


def test_a_manifest_with_the_bound_bytes_and_the_visuals_samples_passes():
    facts, failures, warnings = selection_gates(bound(GOOD, visuals=[str(i) for i in range(8)]), GOOD)
    assert failures == [] and warnings == []
    assert facts == {
        "id": "bench-k8",
        "read": True,
        "sha256": hashlib.sha256(GOOD).hexdigest(),
        "bytes": len(GOOD),
        "samples": 8,
    }


def test_no_binding_reads_nothing():
    assert selection_gates({"selection": {"split": "val"}}, None) == ({}, [], [])
    assert selection_gates({"selection": {"selection_id": "../../etc/passwd"}}, None) == ({}, [], [])


def test_each_way_a_box_s_manifest_can_be_wrong_fails_closed():
    run = bound(GOOD)
    cases = [
        (run, None, "the box has no _trust/selections/bench-k8.json"),
        (run, GOOD + b" ", "is not the manifest run.json binds"),
        (bound(b"{not json"), b"{not json", "_trust/selections/bench-k8.json: not JSON"),
        (bound(b'{"sample_ids": [1, 1]}'), b'{"sample_ids": [1, 1]}', "a sample id is listed twice"),
        (bound(b'{"sample_ids": "1,2"}'), b'{"sample_ids": "1,2"}', "no list of sample_ids"),
        (bound(b'{"sample_ids": [true]}'), b'{"sample_ids": [true]}', "no list of sample_ids"),
    ]
    many = json.dumps({"sample_ids": list(range(101))}).encode()
    cases.append((bound(many), many, "101 samples; a selection holds 1 to 100"))
    huge = b" " * (1 << 20) + GOOD
    cases.append((bound(huge), huge, "is larger than 1048576 bytes"))
    for run_json, manifest, expected in cases:
        _facts, failures, _ = selection_gates(run_json, manifest)
        assert len(failures) == 1 and expected in failures[0], (expected, failures)


def test_visuals_drawn_for_other_samples_than_the_selection_fail():
    _facts, failures, _ = selection_gates(bound(GOOD, visuals=[str(i) for i in range(1, 9)]), GOOD)
    assert failures == ["test/bench: its visual samples are not selection bench-k8's"]
