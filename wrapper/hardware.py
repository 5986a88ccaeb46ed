"""A hardware capsule's contract at sealing (artifact-layout.md).

A capsule holds what a closed model run did on real captures, apart from every software export: run.json
and test/ only, no weights anywhere. run.json binds the capture, its decode and the model run (each an
id and a SHA-256) and the best.pth it applied (its SHA-256: never the file). Every test declares its
ground-truth branch in run.json (never inferred from absent files): without machine-readable ground
truth its metrics are declared not applicable, and it has no metric values and no ground-truth or error
visuals; with ground truth it is a test like a software run's.
"""

import json
import os
import re

SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
TOP = ("run.json", "test")
WEIGHTS = (".pth", ".pt", ".ckpt", ".safetensors", ".bin", ".h5", ".onnx", ".pkl")
BINDINGS = ("capture", "decode", "model_run")
NO_GT = "unavailable_no_machine_readable_gt"
WITH_GT = "available"
NOT_APPLICABLE = "not_applicable"
# Visual roles that need a ground truth to draw: forbidden in a test without one.
GT_ROLES = ("ground_truth", "groundtruth", "gt", "target", "label", "error", "residual", "difference")
COUNTS = ("n", "rows", "samples", "count")  # numbers a test without ground truth may state


def hardware_problem(partial):
    """Why the staged capsule may not be sealed, or None."""
    for name in sorted(os.listdir(partial)):
        if name not in TOP:
            return f"{name} is not allowed in a hardware capsule (run.json and test/ only)"
    for directory, _dirs, names in os.walk(partial):
        for name in names:
            if name.lower().endswith(WEIGHTS):
                relative = os.path.relpath(os.path.join(directory, name), partial)
                return f"{relative} looks like model weights: a hardware capsule binds best.pth by hash, never holds it"
    try:
        with open(os.path.join(partial, "run.json")) as handle:
            run = json.load(handle)
    except (OSError, ValueError) as exc:
        return f"run.json is missing or unreadable: {exc}"
    if not isinstance(run, dict):
        return "run.json is not an object"
    return bindings_problem(run) or tests_problem(partial, run)


def bindings_problem(run):
    for key in BINDINGS:
        binding = run.get(key)
        if not isinstance(binding, dict) or not isinstance(binding.get("id"), str) or not binding["id"]:
            return f"run.json does not bind the {key} by an id ({key}.id)"
        if not SHA256.match(str(binding.get("sha256", ""))):
            return f"run.json does not bind the {key} by a SHA-256 ({key}.sha256)"
    if not SHA256.match(str(run["model_run"].get("best_pth_sha256", ""))):
        return "run.json does not bind the best.pth it applied by its SHA-256 (model_run.best_pth_sha256)"
    return None


def tests_problem(partial, run):
    tests_dir = os.path.join(partial, "test")
    found = sorted(os.listdir(tests_dir)) if os.path.isdir(tests_dir) else []
    if not found:
        return "a hardware capsule has no test/<test-id>/"
    declared = run.get("tests") if isinstance(run.get("tests"), dict) else {}
    for test_id in found:
        problem = one_test_problem(os.path.join(tests_dir, test_id), test_id, declared.get(test_id))
        if problem:
            return problem
    return None


def one_test_problem(test, test_id, branch):
    if not isinstance(branch, dict) or branch.get("ground_truth_status") not in (NO_GT, WITH_GT):
        return (
            f"run.json does not declare test {test_id}'s ground-truth branch"
            f" (tests.{test_id}.ground_truth_status: {WITH_GT} or {NO_GT})"
        )
    for name in ("metrics.json", "results.parquet"):
        if not os.path.isfile(os.path.join(test, name)):
            return f"test/{test_id}/{name} is missing"
    if not os.path.isdir(os.path.join(test, "vis")):
        return f"test/{test_id}/vis/ is missing: a capsule's predictions are shown"
    if branch["ground_truth_status"] == WITH_GT:
        return None
    if branch.get("metric_applicability") != NOT_APPLICABLE:
        return f"test {test_id} has no ground truth: run.json must declare metric_applicability={NOT_APPLICABLE}"
    return no_gt_problem(test, test_id)


def no_gt_problem(test, test_id):
    """A test without ground truth states no metric and draws no ground truth."""
    try:
        with open(os.path.join(test, "metrics.json")) as handle:
            metrics = json.load(handle)
    except (OSError, ValueError) as exc:
        return f"test/{test_id}/metrics.json is unreadable: {exc}"
    if not isinstance(metrics, dict) or metrics.get("metric_applicability") != NOT_APPLICABLE:
        return f"test/{test_id}/metrics.json must declare metric_applicability={NOT_APPLICABLE}"
    for key, value in metrics.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)  # noqa: UP038 (a 3.8 box)
        if number and key.lower() not in COUNTS:
            return f"test/{test_id}/metrics.json states {key} without ground truth: metrics are not applicable"
    vis = os.path.join(test, "vis")
    for condition in sorted(os.listdir(vis)):
        roles = os.path.join(vis, condition)
        for role in sorted(os.listdir(roles)) if os.path.isdir(roles) else []:
            if role.lower() in GT_ROLES:
                return f"test/{test_id}/vis/{condition}/{role} needs ground truth this test does not have"
    return None
