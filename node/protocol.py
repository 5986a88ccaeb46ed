"""The node protocol: what each wrapper subcommand answers, and the one way an answer is read.

The wrapper prints one JSON object as its last line of stdout. The box is untrusted: its answer may
be missing, not JSON, a list, an object with the wrong fields, or an error. Every such answer
becomes a NodeError naming the subcommand, never an exception of another kind and never a value
of the wrong type reaching the code that acts on it. `tests/runs/test_protocol_contract.py` runs
the wrapper's own functions and checks each answer against ANSWERS, so the two sides cannot drift.
"""

import json

from node.transport import TransportError

NUMBER = (int, float)
OPTIONAL_INT = (int, type(None))
OPTIONAL_NUMBER = (int, float, type(None))

# subcommand -> {field: the types its value may have}. Fields not listed are passed through.
ANSWERS = {
    "preflight": {"missing": list, "hashes": dict, "space": dict, "tmux": bool, "python": str},
    "smoke": {"exit_code": int, "output": str, "seconds": NUMBER},
    "extract": {"extracted": bool},
    "status": {},  # one run's status: checked by STATUS below
    "probe": {"now": NUMBER, "runs": dict},
    "roster": {"export": str, "files": list},
    "mirror": {"mirror": str, "verified": bool, "mount": dict},
    "rehash": {"copies": list},
    "close-active": {"closed": bool},
    "reseal": {"sealed": bool},
    "abandon": {"abandoned": bool},
    "stop": {"stopped": bool},
    "put-secrets": {"written": list},
    "dataset-roster": {"root": str, "files": list},
    "stage-check": {"complete": bool, "need": list},
    "stage-receive": {"received": int, "files": int, "complete": bool},
    "stage-send": {"sent": int, "files": int},
    "stage-pull": {"received": int, "files": int, "complete": bool},
    "stage-grant": {"granted": bool},
    "idle": {"busy": list},
    "boot-resume": {"relaunched": list, "skipped": list},
    "clean-caches": {"freed": int, "removed": list},
    "remove-copy": {"removed": bool, "bytes": int},
    "gpus": {"gpus": dict},  # {"nvidia_smi": false} where the box has none
    "rendezvous": {},  # listen: {listening, reached_by, ifname, why?}; connect: {reached, ifname?, why?}
}

# One run's status (`status`, and each entry of `probe`'s runs): the fields observation reads.
STATUS = {
    "now": NUMBER,
    "launched": bool,
    "wrapper_alive": bool,
    "child_alive": bool,
    "exit_code": OPTIONAL_INT,
    "heartbeat_at": OPTIONAL_NUMBER,
    "exported": bool,
    "rebooted": bool,
    "log_mtime": OPTIONAL_NUMBER,
    "ckpt_mtime": OPTIONAL_NUMBER,
    "log_chunk": str,
    "log_start": OPTIONAL_INT,
    "log_offset": int,
    "csv_chunk": str,
    "csv_offset": int,
    "log_tail": str,
}

# Fields a status may carry besides STATUS, with their types; anything else a box sends is dropped
# before it is stored (Run.last_status) or rendered (an 8 MiB field once reached the run page).
STATUS_OPTIONAL = {
    "run_id": str,
    "attempt": int,
    "quarantine_reason": (str, type(None)),
    "ran": (dict, type(None)),
    "ckpt_mirror": (dict, type(None)),
    "boot_relaunches": int,
    "stopped_processes": int,
    "log_from": int,
    "csv_from": int,
    "space": dict,
    "regenerable": list,
    "paperwork": list,  # what a sealed export lacks that cannot make a number wrong (export.PAPERWORK)
}
# The longest text each field may be: what the wrapper sends at most (a 64 KiB read decoded with
# replacements, a 4,000-byte tail), so a longer one is a lying box, refused rather than cut.
TEXT_LIMITS = {"log_chunk": 65536, "csv_chunk": 65536, "log_tail": 4096, "quarantine_reason": 4096, "run_id": 100}
NESTED_LIMIT = 16384  # ran, space, regenerable, ckpt_mirror, paperwork: their JSON at most this long

# Answers stored whole on a run (preflight_report, smoke_output): only these fields, and bounded, reach
# the database and the page; what else a box adds is dropped.
STORED_ANSWERS = {
    "preflight": {
        "write_bytes_per_second": OPTIONAL_NUMBER,
        "environment": dict,
        "gpu_holders": (dict, type(None)),
        "gpu_inventory": (dict, type(None)),
        "mounts": dict,
        "hooks": dict,
    },
    "smoke": {"warnings": list},
}
SMOKE_OUTPUT_LIMIT = 24000  # the wrapper sends the last 20,000 characters
STORED_NESTED_LIMIT = 65536  # preflight's missing, hashes, space, environment: their JSON at most this long

TAIL = 400


class NodeError(TransportError):
    """The node answered, but not with what the wrapper promises (or the wrapper reported an error)."""


def _mistyped(answer: dict, fields: dict) -> list[str]:
    wrong = []
    for field, kinds in fields.items():
        value = answer.get(field)
        # bool is an int in Python: a number field must not accept True, a bool field only bools.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _as_tuple(kinds)):
            wrong.append(field)
    return wrong


def _as_tuple(kinds) -> tuple:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def status_problem(status) -> str | None:
    """Why a run's status from the node cannot be applied, or None."""
    if not isinstance(status, dict):
        return "the run's status is not a JSON object"
    if "error" in status:
        return str(status["error"])[:TAIL]
    wrong = _mistyped(status, STATUS)
    if wrong:
        return f"the run's status lacks or mistypes {', '.join(wrong)}"
    present = {field: kinds for field, kinds in STATUS_OPTIONAL.items() if field in status}
    wrong = _mistyped(status, present)
    if wrong:
        return f"the run's status mistypes {', '.join(wrong)}"
    long = [f for f, limit in TEXT_LIMITS.items() if isinstance(status.get(f), str) and len(status[f]) > limit]
    nested = ("ran", "space", "regenerable", "ckpt_mirror", "paperwork")
    long += [f for f in nested if status.get(f) and len(json.dumps(status[f])) > NESTED_LIMIT]
    return f"the run's status has over-long {', '.join(long)}" if long else None


def known_status(status: dict) -> dict:
    """Only the fields a status's schema names: what the control side stores and shows."""
    return {field: value for field, value in status.items() if field in STATUS or field in STATUS_OPTIONAL}


def parse_answer(subcommand: str, exit_code: int, stdout: str, stderr: str) -> dict:
    """The wrapper's answer to subcommand, checked against its schema; NodeError otherwise."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        detail = stderr.strip()[-TAIL:] or stdout.strip()[-TAIL:] or "nothing"
        raise NodeError(f"{subcommand} gave no answer on the node (exit {exit_code}): {detail}") from None
    if isinstance(answer, dict) and "error" not in answer and exit_code != 0:
        raise NodeError(f"{subcommand} failed on the node (exit {exit_code}): {stderr.strip()[-TAIL:]}")
    return check_answer(subcommand, answer)


def check_answer(subcommand: str, answer) -> dict:
    """An answer however it arrived (a command's last line, or assembled from the follow stream),
    checked against the subcommand's schema; NodeError otherwise."""
    if not isinstance(answer, dict):
        raise NodeError(f"{subcommand} answered a JSON {type(answer).__name__}, not an object")
    if "error" in answer:
        raise NodeError(f"{subcommand} failed on the node: {str(answer['error'])[:TAIL]}")
    wrong = _mistyped(answer, ANSWERS[subcommand])
    if wrong:
        raise NodeError(f"{subcommand} answered without a valid {', '.join(wrong)}")
    if subcommand == "status":
        problem = status_problem(answer)
        if problem:
            raise NodeError(f"status: {problem}")
    if subcommand in STORED_ANSWERS:
        return _stored(subcommand, answer)
    return answer


def _stored(subcommand: str, answer: dict) -> dict:
    """A preflight or smoke answer with only its schema's fields, each within its bound."""
    optional = {field: kinds for field, kinds in STORED_ANSWERS[subcommand].items() if field in answer}
    wrong = _mistyped(answer, optional)
    if wrong:
        raise NodeError(f"{subcommand} answered without a valid {', '.join(wrong)}")
    kept = {field: answer[field] for field in (*ANSWERS[subcommand], *optional)}
    if subcommand == "smoke" and len(kept["output"]) > SMOKE_OUTPUT_LIMIT:
        raise NodeError(f"smoke answered an output longer than {SMOKE_OUTPUT_LIMIT} characters")
    long = [f for f, v in kept.items() if isinstance(v, dict | list) and len(json.dumps(v)) > STORED_NESTED_LIMIT]
    if long or len(kept.get("python", "")) > 100:
        raise NodeError(f"{subcommand} answered an over-long {', '.join(long) or 'python'}")
    return kept


FOLLOW_KINDS = {"log", "exit", "heartbeat", "end", "error", "status", "probed"}
FOLLOW_TEXT = 1 << 17  # a log event carries at most one 64 KiB read (decoded, with room for replacements)


def follow_event(line: bytes) -> dict | None:
    """One line of the wrapper's follow stream as an event, or None when it is not one (a hostile or
    broken box: the line is dropped, the probe stays the truth)."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("type") not in FOLLOW_KINDS:
        return None
    if event["type"] in ("log", "exit") and _mistyped(event, {"run_id": str, "attempt": int}):
        return None
    if event["type"] == "log":
        if _mistyped(event, {"start": int, "end": int, "text": str}):
            return None
        if not 0 <= event["start"] < event["end"] or len(event["text"]) > FOLLOW_TEXT:
            return None
    # A probe's answer: one "status" per run (checked as any run status, by status_problem, when
    # applied), then "probed" with the answer's own fields (checked by check_answer).
    if event["type"] == "status" and _mistyped(event, {"probe": int, "run_id": str}):
        return None
    if event["type"] == "probed" and _mistyped(event, {"probe": int}):
        return None
    return event
