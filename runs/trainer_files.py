"""The no-edit path (docs/contract.md): where an unchanged training script leaves its own files, declared
with the run, so the box's wrapper builds the export from them after the command exits 0.

Parsed and checked here, one rule set for the run form, the API and the CLI. The declaration is
`key: value` lines (a dict in the API); every path is a glob relative to the source directory (the
command's working directory) and stays inside it.
"""

import re
import shlex
from pathlib import PurePosixPath

from django.core.exceptions import ValidationError

KEYS = {
    "checkpoints": "glob of the checkpoint files the script saves and resumes from (out/ckpt.pt, "
    "logs/checkpoints/*.ckpt): they stay in place, so a retry on the same box resumes from them",
    "resume_args": "arguments added to the command when a checkpoint matches (e.g. --init_from=resume)",
    "smoke_args": "arguments added to the command in the CPU smoke, for a script that ignores REMOTEGPU_SMOKE "
    "(e.g. --max_iters=2)",
    "weights": "glob of the file holding the model to export as best.pth (default: the newest checkpoint; of a "
    "folder, its pytorch_model.bin, model.pt or model.pth)",
    "weights_key": "the key holding the state dict inside that file (model, state_dict; dotted for deeper); "
    "empty: the file is the state dict",
    "metrics": "a CSV or JSON-lines file of the rows the script logs: becomes train.csv",
    "log_pattern": "instead of a metrics file: a regular expression matched against each line the command "
    "prints, with a named group `step` and one per metric, e.g. "
    r"iter (?P<step>[0-9]+): loss (?P<train_loss>[0-9.]+)",
    "predictions": "a CSV with sample_id, target, prediction and prob_<class> columns: becomes test/<test_id>/ "
    "(its accuracy and loss recomputed at verification)",
    "test_id": "the name of that test (default val)",
}
PATH_KEYS = ("checkpoints", "weights", "metrics", "predictions")
METRICS_SUFFIXES = (".csv", ".jsonl", ".json")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}(\.[A-Za-z_][A-Za-z0-9_]{0,39}){0,3}\Z")
TEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def parse_text(text: str) -> dict:
    """`key: value` lines (a # starts a comment; blank lines skipped) as the declaration's dict."""
    declared = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, value = line.partition(":")
        if not colon:
            raise ValidationError(f"Line {number}: write key: value (one of {', '.join(KEYS)}).")
        if key.strip() in declared:
            raise ValidationError(f"Line {number}: {key.strip()} is declared twice.")
        declared[key.strip()] = value.strip()
    return check(declared)


def check_any(value) -> dict:
    """A dict, or the `key: value` text (what the CLI's --trainer-file lines and the form send)."""
    return parse_text(value) if isinstance(value, str) else check(value)


def as_text(declared: dict) -> str:
    return "\n".join(f"{key}: {value}" for key, value in declared.items())


def check(declared: dict) -> dict:
    """The declaration, checked (every problem at once), its empty values dropped; {} declares nothing."""
    if not isinstance(declared, dict):
        raise ValidationError("Trainer files: an object of key: value.")
    known = ", ".join(KEYS)
    problems = [f"{key!s:.40} is not a trainer-files key (one of {known})" for key in declared if key not in KEYS]
    values = {key: value for key, value in declared.items() if key in KEYS and value not in ("", None)}
    problems += [f"{key}: a string" for key, value in values.items() if not isinstance(value, str)]
    if problems:
        raise ValidationError("; ".join(problems))
    if not values:
        return {}
    problems += [problem for key in PATH_KEYS if key in values for problem in _path_problems(key, values[key])]
    problems += _shape_problems(values)
    if problems:
        raise ValidationError("; ".join(problems))
    return values


def _path_problems(key: str, value: str) -> list[str]:
    if len(value) > 300 or any(ord(char) < 32 for char in value):
        return [f"{key}: a path of printable characters, at most 300"]
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or value.startswith("~"):
        return [f"{key}: a path relative to the source directory, without '..' ({value})"]
    return []


def _shape_problems(values: dict) -> list[str]:
    problems = []
    if "weights" not in values and "checkpoints" not in values:
        problems.append("declare checkpoints or weights: best.pth is built from them")
    if ("metrics" in values) == ("log_pattern" in values):
        problems.append("declare one of metrics (a file) or log_pattern (printed lines): train.csv is built from it")
    if "metrics" in values and not values["metrics"].endswith(METRICS_SUFFIXES):
        problems.append("metrics: a .csv or a JSON-lines (.jsonl, .json) file")
    if "log_pattern" in values:
        problems += _pattern_problems(values["log_pattern"])
    if "weights_key" in values and not NAME.match(values["weights_key"]):
        problems.append("weights_key: a key (letters, digits, _), dotted for a nested one")
    if "predictions" in values and not values["predictions"].endswith(".csv"):
        problems.append("predictions: a .csv file")
    if "test_id" in values and not TEST_ID.match(values["test_id"]):
        problems.append("test_id: letters, digits, . _ -")
    if "resume_args" in values and "checkpoints" not in values:
        problems.append("resume_args needs checkpoints: they are added only when a checkpoint exists")
    for key in ("resume_args", "smoke_args"):
        if key in values:
            try:
                shlex.split(values[key])
            except ValueError as exc:
                problems.append(f"{key}: {exc}")
    return problems


def _pattern_problems(pattern: str) -> list[str]:
    if len(pattern) > 500:
        return ["log_pattern: at most 500 characters"]
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return [f"log_pattern is not a regular expression: {exc}"]
    if "step" not in compiled.groupindex or len(compiled.groupindex) < 2:
        return ["log_pattern needs a named group (?P<step>…) and one per metric, e.g. (?P<train_loss>[0-9.]+)"]
    return []
