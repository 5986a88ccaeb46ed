"""The population a metric was computed over, and what makes two results comparable. Pure.

A run declares each test set: `population.<test-id>` as `{"ids": [...]}` or `{"size": N}`, else its
`splits.test` ids. results.parquet must cover it exactly: every declared id once, nothing else. A
metric over a truncated or padded population is a wrong number, so a mismatch fails closed; an
undeclared population is a warning. Leakage beyond ids: `content_sha256.train` and `.test` (one
hash per sample's bytes) must not share a hash.

The fairness facts of a result (its test population, the selection rule, the evaluation code and the
training budget) are what a comparison needs equal before it may call a difference an effect.
"""

import hashlib
import json
from collections import Counter

EXAMPLES = 5


def _ids(values) -> list | None:
    if not isinstance(values, list):
        return None
    ids = [value for value in values if isinstance(value, int | str) and not isinstance(value, bool)]
    return ids if len(ids) == len(values) else None


def declared(run: dict, test_id: str) -> dict | None:
    """{"ids": [...]} or {"size": N} the run declares for this test, or None."""
    population = (run.get("population") or {}) if isinstance(run.get("population"), dict) else {}
    mine = population.get(test_id)
    if isinstance(mine, dict):
        if (ids := _ids(mine.get("ids"))) is not None:
            return {"ids": ids}
        size = mine.get("size")
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            return {"size": size}
    splits = run.get("splits") if isinstance(run.get("splits"), dict) else {}
    ids = _ids(splits.get("test"))
    return {"ids": ids} if ids is not None else None


def digest(ids) -> str:
    return hashlib.sha256(json.dumps(sorted(map(str, ids))).encode()).hexdigest()


def coverage(test_id: str, wanted: dict | None, sample_ids, rows: int) -> tuple[dict, list[str], list[str]]:
    """(facts, failures, warnings) of one test's results against its declared population."""
    failures, warnings = [], []
    if wanted is None:
        warnings.append(f"test/{test_id}: no declared test population: coverage not checked")
        return {"declared": None, "covered": rows}, failures, warnings
    if sample_ids is None:
        if "ids" in wanted or rows != wanted["size"]:
            failures.append(
                f"test/{test_id}: results have no sample_id, so the declared population is not shown covered"
            )
        return {"declared": len(wanted.get("ids", [])) or wanted.get("size"), "covered": rows}, failures, warnings
    seen = Counter(str(value) for value in sample_ids)
    twice = sorted(key for key, count in seen.items() if count > 1)
    if twice:
        failures.append(f"test/{test_id}: {len(twice)} sample id(s) appear more than once, e.g. {twice[:EXAMPLES]}")
    if "ids" in wanted:
        expected = {str(value) for value in wanted["ids"]}
        missing, extra = sorted(expected - set(seen)), sorted(set(seen) - expected)
        if missing:
            failures.append(
                f"test/{test_id}: results cover {len(expected) - len(missing)} of {len(expected)} declared test "
                f"samples ({len(missing)} missing, e.g. {missing[:EXAMPLES]})"
            )
        if extra:
            failures.append(f"test/{test_id}: {len(extra)} result(s) for undeclared samples, e.g. {extra[:EXAMPLES]}")
        facts = {"declared": len(expected), "covered": len(set(seen) & expected), "sha256": digest(expected)}
    else:
        if len(seen) != wanted["size"]:
            failures.append(f"test/{test_id}: results cover {len(seen)} samples; the run declares {wanted['size']}")
        facts = {"declared": wanted["size"], "covered": len(seen), "sha256": digest(seen)}
    return facts, failures, warnings


def content_overlap(run: dict) -> str | None:
    """Why the declared train and test contents overlap (the same bytes on both sides), or None."""
    content = run.get("content_sha256")
    if not isinstance(content, dict):
        return None
    train, test = _ids(content.get("train")) or [], _ids(content.get("test")) or []
    shared = sorted(set(map(str, train)) & set(map(str, test)))
    if not shared:
        return None
    return f"train/test leakage by content: {len(shared)} test sample(s) have the bytes of a training sample"


def fairness(run: dict, populations: dict) -> dict:
    """What must be equal between two results before a difference between them can be an effect."""
    selection = run.get("selection") if isinstance(run.get("selection"), dict) else {}
    rule = {key: selection.get(key) for key in ("split", "metric", "direction", "manifest_sha256")}
    budget = {key: run.get(key) for key in ("epochs", "steps", "budget") if isinstance(run.get(key), int | float)}
    return {
        "test population": ", ".join(f"{t}:{(p.get('sha256') or '?')[:12]}" for t, p in sorted(populations.items()))
        or "undeclared",
        "selection": hashlib.sha256(json.dumps(rule, sort_keys=True, default=str).encode()).hexdigest()[:12],
        "evaluation code": str(run.get("evaluation_sha256") or "undeclared")[:64],
        "budget": json.dumps(budget, sort_keys=True) if budget else "undeclared",
    }
