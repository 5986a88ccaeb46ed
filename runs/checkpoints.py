"""What a run's checkpoints say, from its node's status: the newest durable copy and its lag, and
whether a relaunched attempt really resumed. Pure: no database, no clock.

The box is untrusted: its mirror state (`status["ckpt_mirror"]`) is read field by field, typed and
bounded, and whatever does not fit is dropped, never stored or shown. A checkpoint's name is a rented
box's word on what the next box gets back: only a name the checkpoint rules or the run's own declaration
allow is kept (wrapper/ckpt_names.py, the rule the box applies too); every other is refused and
named (`refused`), so a copy called `declared-file-torch.py` never becomes `<cwd>/torch.py` elsewhere.
"""

import re

from wrapper.ckpt_names import file_problem, name_problem

SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
TEXT_LIMIT = 500
REFUSED_LIMIT = 10  # names refused in one state, said; the rest are counted


def _number(value) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value) -> int | None:
    number = _int(value)
    return number if number is not None and number >= 0 else None


def _text(value) -> str | None:
    return value[:TEXT_LIMIT] if isinstance(value, str) and value else None


class Names:
    """The names one mirror state reports, judged against the run's declared checkpoints: each refusal
    kept with its reason (bounded), for the run's events."""

    def __init__(self, declared_checkpoints: str | None):
        self.declared, self.refused = declared_checkpoints, {}

    def allowed(self, name, stored=None) -> bool:
        problem = name_problem(name, self.declared) or (file_problem(stored) if stored is not None else None)
        if problem and len(self.refused) < REFUSED_LIMIT:
            shown = repr(name[:120]) if isinstance(name, str) else "a name that is not text"
            self.refused.setdefault(shown, problem)
        return problem is None


def _checkpoint(item, durable: bool, names: Names) -> dict | None:
    """One checkpoint as the node described it: name, step, bytes, time (and for a durable copy its
    stored file, SHA-256 and sequence number), or None when it is not one."""
    if not isinstance(item, dict) or not names.allowed(item.get("name")):
        return None
    at, size = _number(item.get("at")), _count(item.get("bytes"))
    if at is None or size is None:
        return None
    found = {"name": item["name"], "step": _int(item.get("step")), "bytes": size, "at": at}
    if not durable:
        return found
    sha, stored, seq = item.get("sha256"), item.get("file"), _count(item.get("seq"))
    if not (isinstance(sha, str) and SHA256.match(sha) and names.allowed(item["name"], stored) and seq):
        return None
    return {**found, "sha256": sha, "file": stored, "seq": seq, "attempt": _int(item.get("attempt"))}


def _held(item, names: Names) -> dict | None:
    """The checkpoint the box holds for the control host to pull (no durable tier): with its SHA-256."""
    found = _checkpoint(item, durable=False, names=names)
    sha = item.get("sha256") if found else None
    return {**found, "sha256": sha} if isinstance(sha, str) and SHA256.match(sha) else None


HELD_LIMIT = 20  # checkpoint names a box may hold for the control host


def _held_all(held, names: Names) -> dict:
    """name → what the box holds of that checkpoint for the control host; what does not fit is dropped."""
    if not isinstance(held, dict):
        return {}
    found = {}
    for name, item in list(held.items())[:HELD_LIMIT]:
        entry = _held(item, names)
        if entry is not None and entry["name"] == name:
            found[name] = entry
    return found


def parse_mirror(state, declared_checkpoints: str | None = None) -> dict | None:
    """The node's checkpoint-mirror state, validated; None when it sent none (or not an object).
    declared_checkpoints: the run's declared checkpoint glob (trainer files), which a copy's name must match."""
    if not isinstance(state, dict):
        return None
    names = Names(declared_checkpoints)
    parsed = {
        "durable": state.get("durable") is True,
        "target": _text(state.get("target")),
        "error": _text(state.get("error")),
        "unusable": _text(state.get("unusable")),  # why the box's durable root does not count
        "error_at": _number(state.get("error_at")),
        "newest": _checkpoint(state.get("newest"), durable=True, names=names),
        "local": _checkpoint(state.get("local"), durable=False, names=names),
        "start": _checkpoint(state.get("start"), durable=False, names=names),
        "first_written": _checkpoint(state.get("first_written"), durable=False, names=names),
        "held": _held_all(state.get("held"), names),
        "files": _durable_files(state.get("files"), names),
        "restored": _restored(state.get("restored"), names),
        "mirrored": _count(state.get("mirrored")) or 0,
        "bytes": _count(state.get("bytes")) or 0,
        "seconds": _number(state.get("seconds")) or 0.0,
    }
    return {**parsed, "refused": names.refused}


def _durable_files(items, names: Names) -> dict:
    """name → the newest durable copy of that checkpoint the box's manifest keeps; what does not fit is
    dropped."""
    if not isinstance(items, list):
        return {}
    found = {}
    for item in items[:HELD_LIMIT]:
        entry = _checkpoint(item, durable=True, names=names)
        if entry is not None:
            found[entry["name"]] = entry
    return found


def _restored(items, names: Names) -> list[dict]:
    """The copies a continued attempt started from, as its wrapper restored them: name, file, step."""
    if not isinstance(items, list):
        return []
    found = []
    for item in items[:HELD_LIMIT]:
        texts = isinstance(item, dict) and all(isinstance(item.get(key), str) for key in ("name", "file"))
        if texts and names.allowed(item["name"], item["file"]):
            found.append({"name": item["name"], "file": item["file"], "step": _int(item.get("step"))})
    return found


def lag_problem(mirror: dict, node_now: float, allowance: float, pulled: dict | None = None) -> str | None:
    """Why the durable copy is behind: a copy that failed, or a newer checkpoint on the box left
    uncopied for longer than the allowance (the run's cadence). Without a durable tier the copy is the
    control host's (pulled: the newest checkpoint it holds, as the box described it). None while it
    keeps up."""
    if mirror["error"]:
        return f"the checkpoint mirror failed: {mirror['error']}"
    if not mirror["durable"] and not mirror.get("held"):
        return None  # a wrapper that holds nothing for the control host: nothing to lag behind
    local, newest = mirror["local"], mirror["newest"] if mirror["durable"] else pulled
    where = "on the durable tier" if mirror["durable"] else "on the control host"
    if local is None or (newest is not None and newest["at"] >= local["at"]):
        return None
    behind = node_now - local["at"]
    if behind <= allowance:
        return None
    had = f"the newest copy is of step {newest['step']}" if newest else "nothing is copied yet"
    return f"a checkpoint written {behind:.0f} s ago is not {where} ({had}; allowed {allowance:.0f} s)"


def missing_problem(mirror: dict, logged_steps: int, running_seconds: float, allowance: float) -> str | None:
    """Why a training is not resumable though it trains: it has logged steps for longer than its cadence
    and no checkpoint appeared where the product looks (one it started from counts). None otherwise."""
    if mirror["local"] is not None or mirror["start"] is not None or mirror["newest"] is not None:
        return None
    if logged_steps <= 0 or running_seconds <= allowance:
        return None
    return (
        f"{logged_steps} steps logged over {running_seconds:.0f} s and no checkpoint in $REMOTEGPU_CHECKPOINT_DIR "
        "(active/<run-id>/ckpt on the box), the only folder RemoteGPU watches: a checkpoint saved anywhere else "
        "is neither copied nor resumed from (docs/contract.md)"
    )


def resume_floor(mirror: dict | None, same_box: bool) -> int | None:
    """The step a relaunch must not start below: the newest durable copy's, and on the same box also
    the newest checkpoint left there (its ckpt/ stays for the next attempt)."""
    if not mirror:
        return None
    steps = [mirror["newest"]["step"]] if mirror["newest"] else []
    if same_box and mirror["local"]:
        steps.append(mirror["local"]["step"])
    steps = [step for step in steps if step is not None]
    return max(steps) if steps else None


def resume_problem(mirror: dict, floor: int | None) -> str | None:
    """Why this attempt did not resume from the floor: it had no checkpoint at its start, or one below
    the floor, or its own first checkpoint is below the floor (it started again from the beginning).
    A first checkpoint *at* the floor is a trainer that evaluates and saves again at the step it resumed
    from: a correct resume, proven once it trains past it (resume_proven). None when it resumed, or when
    nothing can be told yet."""
    if floor is None:
        return None
    start, first = mirror["start"], mirror["first_written"]
    if start is None:
        return f"the attempt started with no checkpoint; the last durable one is at step {floor}"
    if start["step"] is not None and start["step"] < floor:
        return f"the attempt started from step {start['step']}, below the last durable checkpoint's step {floor}"
    if first is not None and first["step"] is not None and first["step"] < floor:
        return (
            f"its first checkpoint is at step {first['step']}, below the step {floor} it was given: "
            "the command started again instead of resuming"
        )
    return None


def resume_proven(mirror: dict, floor: int | None) -> bool:
    """The attempt resumed: its first checkpoint is at or beyond the floor and it has trained past it."""
    first, local = mirror["first_written"], mirror["local"]
    if floor is None or first is None or first["step"] is None or first["step"] < floor:
        return False
    return local is not None and local["step"] is not None and local["step"] > floor
