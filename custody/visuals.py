"""Visual coverage of a test set (artifact-layout.md). Pure.

A run declares, per test, `visuals.<test-id>`: the fixed selection of sample ids it renders (K =
min(100, N) of the test population, chosen once per test set, never by performance), its conditions
and its task-native roles, and whether the visuals are evidence. Every condition × role × selected
id must exist at `test/<test-id>/vis/<condition>/<role>/<id>.png`. Missing visuals fail closed when
the run declares them evidence, and are a warning otherwise.
"""

from pathlib import Path

K_LIMIT = 100
EXAMPLES = 5


def _names(values) -> list[str] | None:
    if not isinstance(values, list) or not values:
        return None
    names = [str(value) for value in values if isinstance(value, str | int) and not isinstance(value, bool)]
    if len(names) != len(values) or any("/" in name or name in ("", ".", "..") for name in names):
        return None
    return names


def coverage(test_dir: Path, declared, population: int | None) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one test's visuals against what run.json declares."""
    test_id = test_dir.name
    if not isinstance(declared, dict):
        return [], []
    ids, conditions, roles = (_names(declared.get(key)) for key in ("sample_ids", "conditions", "roles"))
    evidence = declared.get("evidence") is True
    problems = []
    if ids is None or conditions is None or roles is None:
        problems.append(f"test/{test_id}: visuals need sample_ids, conditions and roles (lists of names)")
    else:
        if population is not None and len(set(ids)) != min(K_LIMIT, population):
            problems.append(
                f"test/{test_id}: the visual selection has {len(set(ids))} samples; "
                f"K = min({K_LIMIT}, {population}) = {min(K_LIMIT, population)}"
            )
        missing = [
            f"{condition}/{role}/{sample}.png"
            for condition in conditions
            for role in roles
            for sample in ids
            if not (test_dir / "vis" / condition / role / f"{sample}.png").is_file()
        ]
        if missing:
            total = len(conditions) * len(roles) * len(ids)
            problems.append(
                f"test/{test_id}: {len(missing)} of {total} visuals (conditions × roles × K) are missing, "
                f"e.g. {missing[:EXAMPLES]}"
            )
    return (problems, []) if evidence else ([], problems)
