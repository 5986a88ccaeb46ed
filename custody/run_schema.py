"""run.json's schema: the scientific identity of a run, checked field by field. Pure.

It holds identity, splits, selection and checkpoint bindings, seeds and determinism; never a file
inventory (a roster, sizes or hashes of the export's files: the custody record keeps those). Wrong
types and broken bindings fail closed; a missing recommended field is a warning.
"""

import re

SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
INVENTORY_KEYS = ("files", "roster", "file_hashes", "sizes", "inventory")
RECOMMENDED = ("run_id", "selection")


def problems(run: dict, hashes: dict[str, str]) -> tuple[list[str], list[str]]:
    """(failures, warnings) of a run.json; hashes: the export's files by path, as custody read them."""
    failures, warnings = [], []
    for key in RECOMMENDED:
        if key not in run:
            warnings.append(f"run.json has no {key}")
    if "run_id" in run and not isinstance(run["run_id"], str):
        failures.append("run.json: run_id is not a string")
    splits = run.get("splits")
    if splits is not None and not (isinstance(splits, dict) and all(isinstance(v, list) for v in splits.values())):
        failures.append("run.json: splits is not a mapping of split names to id lists")
    failures += _selection(run.get("selection"))
    failures += _bindings(run.get("checkpoints"), hashes)
    for key in INVENTORY_KEYS:
        if isinstance(run.get(key), list | dict):
            failures.append(f"run.json carries a file inventory ({key}): the custody record holds the export's roster")
    return failures, warnings


def _selection(selection) -> list[str]:
    if selection is None:
        return []
    if not isinstance(selection, dict):
        return ["run.json: selection is not a mapping"]
    found = []
    if selection.get("direction") not in (None, "min", "max"):
        found.append("run.json: selection direction is neither min nor max")
    if "selection_id" in selection or "manifest_sha256" in selection:
        if not isinstance(selection.get("selection_id"), str) or not selection["selection_id"]:
            found.append("run.json: a selection manifest hash without its selection_id")
        if not SHA256.match(str(selection.get("manifest_sha256", ""))):
            found.append("run.json: selection_id is not bound to its manifest by a SHA-256 (manifest_sha256)")
    return found


def _bindings(checkpoints, hashes: dict[str, str]) -> list[str]:
    """checkpoints: {"best.pth": {"sha256": …}, …}: each bound checkpoint is the export's file, byte for byte."""
    if checkpoints is None:
        return []
    if not isinstance(checkpoints, dict):
        return ["run.json: checkpoints is not a mapping of file names to their bindings"]
    found = []
    for name, binding in checkpoints.items():
        sha = binding.get("sha256") if isinstance(binding, dict) else None
        if not isinstance(sha, str) or not SHA256.match(sha):
            found.append(f"run.json: checkpoint {name} has no SHA-256 binding")
        elif hashes.get(name) != sha:
            found.append(f"run.json binds {name} to {sha[:12]}…, the export's {name} is {str(hashes.get(name))[:12]}…")
    return found
