"""Material signals from what a node reports, and the failure classes with their remediation.

Pure: no Django, no SSH. A log line proves only that something happened once; states are
decided from live facts (process, markers, mtimes) by `watching.observe` and the actions.
"""

import re
from dataclasses import dataclass

from wrapper.export import CONTRACT, PAPERWORK  # the one wording of a seal refused for its shape

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")

# Log patterns that are material the first time they appear in an attempt.
LOG_SIGNALS = {
    "traceback": re.compile(r"Traceback \(most recent call last\)"),
    "killed": re.compile(r"^Killed\b|\bKilled$", re.MULTILINE),
    "cuda_oom": re.compile(r"CUDA out of memory|CUDA error: out of memory"),
    "nan_loss": re.compile(r"loss\w*\s*(?:[=:]|\bis\b)?\s*-?(nan|inf)\b", re.IGNORECASE),
    "disk_full": re.compile(r"No space left on device|Disk quota exceeded|ENOSPC"),
}
SIGNAL_MESSAGES = {
    "traceback": "A Traceback appeared in the log",
    "killed": "The log says Killed",
    "cuda_oom": "CUDA out of memory",
    "nan_loss": "The loss became NaN/Inf",
    "disk_full": "No space left on the device",
    "stalled": "Stalled: alive but nothing written",
    "stale_heartbeat": "The wrapper's heartbeat is stale",
    "disk_pressure": "Disk pressure on the run root",
    "inode_pressure": "Inode pressure on the run root",
    "ckpt_lag": "Durable checkpoint lags",
    "no_checkpoint": "No checkpoint where RemoteGPU looks",
    "resume_broken": "Resume broken",
    "box_lost": "The provider says the run's box is not running",
}
# What a person should do about each alert (issue 49: an alert that says nothing to do teaches people to
# ignore alerts). Said after the alert's own words, on the run page, in its events and notifications.
SIGNAL_ADVICE = {
    "traceback": "read it in the log; the run fails only if the command exits non-zero",
    "killed": "usually the box's memory: lower the batch size or ask for a bigger box",
    "cuda_oom": "lower the batch size or the model's size, or use more GPUs",
    "nan_loss": "stop the run and lower the learning rate (or clip gradients); its checkpoints hold the last good step",
    "disk_full": "free space under the run root or stop the run before it corrupts a checkpoint",
    "stalled": "look at the log and the box (ssh); stop it if it is hung: a retry resumes from its checkpoint",
    "stale_heartbeat": "the wrapper stopped writing: the box may be gone or overloaded; its next probe decides",
    "disk_pressure": "free space under the run root before the next checkpoint or the export is written",
    "inode_pressure": "delete small files under the run root (caches, per-sample outputs)",
    "ckpt_lag": "the durable copy is behind: a box lost now loses the steps since it; see the checkpoint panel",
    "no_checkpoint": "save checkpoints into $REMOTEGPU_CHECKPOINT_DIR (or declare the script's trainer files)",
    "resume_broken": "the command did not continue from its checkpoint: make it load the newest one on start",
    "box_lost": "continue the run on another box (Move), or wait if the provider says it comes back",
}
# Said of a normal run as a note, never as an alert: most runs finish before a guessed duration.
FAST_FINISH = (
    "Finished in {elapsed:.0f} s of an expected {expected} min: if it should have trained longer, check its last epochs"
)


def alert_message(name: str, detail: str = "") -> str:
    """An alert's words: what was seen, its detail, then what to do."""
    return SIGNAL_MESSAGES[name] + (f": {detail}" if detail else "") + f" — {SIGNAL_ADVICE[name]}"


@dataclass(frozen=True)
class FailureClass:
    key: str
    label: str
    remediation: str
    retry_offered: bool


FAILURE_CLASSES = {
    "probabilistic": FailureClass(
        "probabilistic",
        "Probabilistic (preemption, stall, transient)",
        "Retry the identical config: it resumes from the latest checkpoint.",
        True,
    ),
    "interrupted": FailureClass(
        "interrupted",
        "Interrupted (reboot, container restart, preemption)",
        "Relaunch the identical command: it resumes from the latest checkpoint.",
        True,
    ),
    "disk_full": FailureClass(
        "disk_full",
        "Disk full",
        "Free the largest regenerable items under the run's scratch allow-list, or expand the disk, then retry. "
        "Never shrink the experiment silently.",
        True,
    ),
    "stopped": FailureClass(
        "stopped",
        "Stopped by a person",
        "Retry the identical config when you want it to go on: it resumes from the latest checkpoint.",
        True,
    ),
    "oom": FailureClass("oom", "Out of memory (cgroup OOM / exit 137)", "Stop and fix: lower memory use.", False),
    "cuda_oom": FailureClass("cuda_oom", "CUDA out of memory", "Stop and fix: batch size, precision, model.", False),
    "nan": FailureClass("nan", "NaN/Inf loss", "Stop and fix: learning rate, data, numerics.", False),
    "code_error": FailureClass(
        "code_error", "Code error", "Stop and fix the code; a retry would fail the same way.", False
    ),
    # A node of a multi-node run failed first (its tree died, or it was lost): the others were ended with it.
    "node_failed": FailureClass(
        "node_failed",
        "A node of the run failed",
        "Read which node and how in the close reason; a retry resumes every node from the latest checkpoint, "
        "or leave that node out.",
        True,
    ),
    # The command ended well but its export breaks the contract: the same script would again.
    "contract": FailureClass(
        "contract",
        "Export contract not met",
        "Stop and fix what the script writes: every problem is listed in the close reason, and the contract "
        "(variables, files, columns) is docs/contract.md; `python -m remotegpu check-export DIR` checks a "
        "directory before anything is rented. A retry would fail the same way.",
        False,
    ),
}


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def log_signals(chunk: str) -> list[str]:
    return [name for name, pattern in LOG_SIGNALS.items() if pattern.search(chunk)]


def excerpt(log: str, limit: int = 1500) -> str:
    """The traceback if there is one, else the end of the log."""
    clean = strip_ansi(log)
    start = clean.rfind("Traceback (most recent call last)")
    return (clean[start:] if start >= 0 else clean)[-limit:]


NODE_FAILED = re.compile(r"; node \S{1,100} \(task [0-9]{1,5}\): ")  # wrapper/distributed.py: nodes_said


def node_failure(close_reason: str) -> bool:
    """Whether a node of a multi-node run failed first: srun named it, or the watcher stopped this node
    because another box's node failed."""
    reason = close_reason or ""
    return NODE_FAILED.search(reason) is not None or reason.startswith("a node of the run failed: ")


def contract_failure(close_reason: str) -> bool:
    """Whether the wrapper refused the seal for the export's own shape (wrapper/export.py)."""
    return close_reason.startswith(CONTRACT)


# What an older wrapper refused a seal for that is paperwork now (wrapper/export.py: PAPERWORK).
PAPERWORK_PROBLEMS = {f"required file {name} is missing" for name in PAPERWORK}


def paperwork_only(close_reason: str) -> bool:
    """A seal refused for missing paperwork alone: "export contract not met (N problems): a; b", each a
    PAPERWORK_PROBLEMS line. Such an attempt may be sealed after all (runs/actions/reseal.py)."""
    if not contract_failure(close_reason or "") or "): " not in close_reason:
        return False
    problems = [problem.strip() for problem in close_reason.split("): ", 1)[1].split("; ")]
    return bool(problems) and all(problem in PAPERWORK_PROBLEMS for problem in problems)


def classify(
    exit_code: int | None,
    signals: set[str],
    dead: bool = False,
    interrupted: bool = False,
    stopped: bool = False,
    contract: bool = False,
    node: bool = False,
) -> str:
    """One failure class for an attempt that did not seal an export."""
    if stopped:
        return "stopped"  # the person's stop explains the exit code (143, or 137 after the grace)
    if interrupted:
        return "interrupted"
    if node:  # the exit code is the node's (137: killed), not this box's memory
        return "node_failed"
    if "disk_full" in signals:
        return "disk_full"
    if contract:
        return "contract"
    if "cuda_oom" in signals:
        return "cuda_oom"
    if exit_code == 137 or "killed" in signals:
        return "oom"
    if "nan_loss" in signals:
        return "nan"
    if dead or "stalled" in signals:
        return "probabilistic"
    if "traceback" in signals or exit_code not in (None, 0):
        return "code_error"
    return "probabilistic"


def parse_csv_rows(header: list[str] | None, chunk: str) -> tuple[list[str] | None, list[dict]]:
    """New train.csv rows as numbers; the header comes with the first chunk."""
    rows = []
    for line in chunk.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if header is None or cells == header:
            header = cells
            continue
        row = {}
        for name, cell in zip(header, cells, strict=False):
            try:
                row[name] = float(cell)
            except ValueError:
                continue
        if row:
            rows.append(row)
    return header, rows


def pressure(space: dict, min_free_bytes: int, min_free_fraction: float) -> set[str]:
    found = set()
    if space["free_bytes"] < min_free_bytes or space["free_bytes"] < space["total_bytes"] * min_free_fraction:
        found.add("disk_pressure")
    if space["total_inodes"] and space["free_inodes"] < space["total_inodes"] * min_free_fraction:
        found.add("inode_pressure")
    return found


def beyond(text: str, start: int, offset: int) -> str:
    """The part of a log chunk that began at node byte `start` lying past byte `offset` (all of it when
    offset <= start): what a page has not been sent yet."""
    if offset <= start:
        return text
    return text.encode()[offset - start :].decode(errors="replace")
