"""The visual selection manifest, read from the box and checked against what run.json binds. Pure.

A selection is fixed per test set and reused across models (artifact-layout.md): run.json names it
(`selection.selection_id`) and binds its manifest under the project's `_trust/selections/<id>.json` by a
SHA-256. Custody reads that manifest from the box (bounded) instead of trusting the binding: it must be
there, have the bound hash, be a JSON object listing at most K = 100 distinct sample ids, and every
test's declared visual sample ids must be exactly those.
"""

import hashlib
import json
import re

SELECTION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
LIMIT = 1 << 20  # bytes read of a manifest at most
K_LIMIT = 100


def selection_id(run: dict) -> str | None:
    """The selection run.json binds, where it is a name a path may hold; None when it binds none."""
    selection = run.get("selection") if isinstance(run.get("selection"), dict) else {}
    name = selection.get("selection_id")
    return name if isinstance(name, str) and SELECTION_ID.match(name) else None


def selection_gates(run: dict, manifest: bytes | None) -> tuple[dict, list[str], list[str]]:
    """(facts, failures, warnings) of the manifest read from the box (None: not there)."""
    name = selection_id(run)
    if name is None:
        return {}, [], []
    where = f"_trust/selections/{name}.json"
    if manifest is None:
        return {"id": name, "read": False}, [f"run.json binds selection {name}, but the box has no {where}"], []
    digest = hashlib.sha256(manifest).hexdigest()
    facts = {"id": name, "read": True, "sha256": digest, "bytes": len(manifest)}
    if len(manifest) > LIMIT:
        return facts, [f"{where} is larger than {LIMIT} bytes: not a selection manifest"], []
    if digest != run["selection"].get("manifest_sha256"):
        return facts, [f"{where} on the box is not the manifest run.json binds (SHA-256 {digest[:12]}…)"], []
    ids, problem = _ids(manifest)
    if problem:
        return facts, [f"{where}: {problem}"], []
    facts["samples"] = len(ids)
    visuals = run.get("visuals") if isinstance(run.get("visuals"), dict) else {}
    failures = [
        f"test/{test_id}: its visual samples are not selection {name}'s"
        for test_id, declared in sorted(visuals.items())
        if isinstance(declared, dict)
        and isinstance(declared.get("sample_ids"), list)
        and {str(sample) for sample in declared["sample_ids"]} != ids
    ]
    return facts, failures, []


def _ids(manifest: bytes) -> tuple[set[str], str | None]:
    try:
        document = json.loads(manifest)
    except ValueError:
        return set(), "not JSON"
    samples = document.get("sample_ids") if isinstance(document, dict) else None
    if not isinstance(samples, list) or not all(isinstance(s, str | int) and not isinstance(s, bool) for s in samples):
        return set(), "no list of sample_ids"
    ids = {str(sample) for sample in samples}
    if len(ids) != len(samples):
        return ids, "a sample id is listed twice"
    if not 0 < len(ids) <= K_LIMIT:
        return ids, f"{len(ids)} samples; a selection holds 1 to {K_LIMIT}"
    return ids, None
