"""`python -m remotegpu check-export DIR`: the run contract's checks on a local directory, before
anything is rented. The same code as on the box and the control host: the seal's rules (the wrapper's
export_problems) and the custody readback (every checkpoint loaded, every metric recomputed from the
predictions, the architecture against config.yaml). Offline: no server, no token.

Exit 0: the directory would seal and verify. Exit 1: what would fail, every item listed."""

import sys
from pathlib import Path

CONTRACT_PAGE = "docs/contract.md"


def check(directory: Path, tolerance: float = 1e-6) -> dict:
    """{"seal": [...], "failures": [...], "warnings": [...], "metrics": [...]} for the directory."""
    from custody.readback import read_back
    from custody.roster import RosterEntry
    from wrapper.contract import local_spec
    from wrapper.export import export_problems
    from wrapper.roster import roster_of

    seal = export_problems(local_spec(str(directory), [sys.executable]), str(directory))
    try:
        entries = [RosterEntry(item["path"], item["bytes"], item["sha256"]) for item in roster_of(str(directory))]
    except ValueError as exc:  # a symlink: never sealed, nothing to read back
        return {"seal": [*seal, str(exc)], "failures": [], "warnings": [], "metrics": []}
    evidence = read_back(directory, entries, tolerance)
    return {
        "seal": seal,
        "failures": evidence["failures"],
        "warnings": evidence["warnings"],
        "metrics": evidence["metrics"],
    }


def report(result: dict, out=sys.stdout) -> bool:
    """Print what was found; True when nothing fails."""
    for metric in result["metrics"]:
        claimed, recomputed = metric.get("claimed"), metric.get("recomputed")
        mark = "ok" if metric.get("within_tolerance") else "DRIFT"
        print(
            f"metric {metric.get('test')}/{metric.get('name')}: claimed {claimed}, recomputed {recomputed} {mark}",
            file=out,
        )
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=out)
    problems = [f"seal: {p}" for p in result["seal"]] + [f"verify: {p}" for p in result["failures"]]
    for problem in problems:
        print(f"FAIL {problem}", file=out)
    if problems:
        print(f"{len(problems)} problem(s); the contract: {CONTRACT_PAGE}", file=out)
        return False
    print("ok: this directory would seal on the box and verify on the control host", file=out)
    return True


def main(directory: Path, tolerance: float = 1e-6) -> int:
    if not directory.is_dir():
        print(f"remotegpu: {directory} is not a directory", file=sys.stderr)
        return 2
    return 0 if report(check(directory, tolerance)) else 1
