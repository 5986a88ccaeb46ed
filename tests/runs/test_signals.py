"""Signals and failure classes from real log text (pure functions)."""

from runs.signals import classify, excerpt, log_signals, parse_csv_rows, pressure, strip_ansi

TRACEBACK = """epoch 1/5
Traceback (most recent call last):
  File "train.py", line 3, in <module>
    raise ValueError("bad shape")
ValueError: bad shape
"""


def test_log_signals_find_each_failure_once():
    assert log_signals(TRACEBACK) == ["traceback"]
    assert log_signals("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB") == ["cuda_oom"]
    assert log_signals("epoch 3 train_loss=nan val_loss=0.3") == ["nan_loss"]
    assert log_signals("step 9 loss: inf") == ["nan_loss"]
    assert log_signals("OSError: [Errno 28] No space left on device") == ["disk_full"]
    assert log_signals("Killed") == ["killed"]
    assert log_signals("epoch 2 train_loss=0.31 val_loss=0.29 (no financial news)") == []


def test_classification_maps_to_one_remediation():
    assert classify(137, set()) == "oom"
    assert classify(1, {"traceback"}) == "code_error"
    assert classify(1, {"traceback", "cuda_oom"}) == "cuda_oom"
    assert classify(1, {"disk_full", "traceback"}) == "disk_full"
    assert classify(None, set(), dead=True) == "probabilistic"
    assert classify(3, {"nan_loss"}) == "nan"
    # The command exited 0 and its export broke the contract: not "probabilistic" (retry: it resumes).
    assert classify(0, set(), contract=True) == "contract"
    assert classify(0, {"disk_full"}, contract=True) == "disk_full"  # a full disk refuses any seal


def test_a_contract_failure_is_known_by_the_wrappers_own_words_and_never_offers_a_retry():
    from runs.signals import FAILURE_CLASSES, contract_failure
    from wrapper.export import CONTRACT

    assert contract_failure(f"{CONTRACT} (1 problem): required file run.json is missing")
    assert not contract_failure("command exited with code 1")
    contract = FAILURE_CLASSES["contract"]
    assert not contract.retry_offered and "docs/contract.md" in contract.remediation


def test_excerpt_prefers_the_traceback():
    assert excerpt("noise\n" * 100 + TRACEBACK).startswith("Traceback (most recent call last)")


def test_ansi_codes_are_stripped():
    assert strip_ansi("\x1b[31mred\x1b[0m \x1b[2Kdone") == "red done"


def test_csv_rows_parse_across_chunks():
    header, rows = parse_csv_rows(None, "epoch,train_loss,val_loss\n1,0.9,1.0\n")
    assert header == ["epoch", "train_loss", "val_loss"] and rows == [{"epoch": 1, "train_loss": 0.9, "val_loss": 1.0}]
    header, rows = parse_csv_rows(header, "2,0.5,0.7\n3,0.4,0.6\n")
    assert [row["epoch"] for row in rows] == [2, 3]


def test_pressure_crosses_on_bytes_or_inodes():
    space = {"free_bytes": 10 * 1024**3, "total_bytes": 100 * 1024**3, "free_inodes": 50, "total_inodes": 10_000}
    assert pressure(space, 2 * 1024**3, 0.03) == {"inode_pressure"}
    assert pressure({**space, "free_bytes": 1024**3}, 2 * 1024**3, 0.03) == {"disk_pressure", "inode_pressure"}
