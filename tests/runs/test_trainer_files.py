"""The no-edit path's declaration (runs/trainer_files.py): what the form, the API and the CLI accept, and
every problem named at once for what they refuse."""

import pytest
from django.core.exceptions import ValidationError

from runs.trainer_files import as_text, check, check_any, parse_text

CHARLM = """
# nanoGPT's way
checkpoints: out/ckpt.pt
resume_args: --init_from=resume
weights_key: model
log_pattern: step (?P<step>\\d+): train loss (?P<train_loss>[0-9.]+)
"""


def problems(value) -> str:
    with pytest.raises(ValidationError) as refused:
        check_any(value)
    return " ".join(refused.value.messages)


def test_the_text_form_reads_as_the_dict_and_back():
    declared = parse_text(CHARLM)
    assert declared == {
        "checkpoints": "out/ckpt.pt",
        "resume_args": "--init_from=resume",
        "weights_key": "model",
        "log_pattern": r"step (?P<step>\d+): train loss (?P<train_loss>[0-9.]+)",
    }
    assert parse_text(as_text(declared)) == declared == check_any(declared)
    assert check_any("") == {} == check({"weights": ""})  # nothing declared: the script writes its own export


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"checkpoint": "x.pt", "metrics": "m.csv"}, "checkpoint is not a trainer-files key"),
        ({"checkpoints": "../x.pt", "metrics": "m.csv"}, "relative to the source directory, without '..'"),
        ({"checkpoints": "/x.pt", "metrics": "m.csv"}, "relative to the source directory"),
        ({"checkpoints": "~/x.pt", "metrics": "m.csv"}, "relative to the source directory"),
        ({"checkpoints": "x\n.pt", "metrics": "m.csv"}, "printable characters"),
        ({"metrics": "m.csv"}, "declare checkpoints or weights"),
        ({"checkpoints": "x.pt"}, "declare one of metrics (a file) or log_pattern"),
        ({"checkpoints": "x.pt", "metrics": "m.csv", "log_pattern": r"(?P<step>\d+) (?P<l>\S+)"}, "declare one of"),
        ({"checkpoints": "x.pt", "metrics": "m.txt"}, "a .csv or a JSON-lines"),
        ({"checkpoints": "x.pt", "log_pattern": "loss (?P<loss>\\S+)"}, "a named group (?P<step>"),
        ({"checkpoints": "x.pt", "log_pattern": "(unclosed"}, "is not a regular expression"),
        ({"checkpoints": "x.pt", "metrics": "m.csv", "weights_key": "a b"}, "weights_key: a key"),
        ({"checkpoints": "x.pt", "metrics": "m.csv", "predictions": "p.parquet"}, "predictions: a .csv"),
        ({"checkpoints": "x.pt", "metrics": "m.csv", "test_id": "../up"}, "test_id: letters"),
        ({"checkpoints": "x.pt", "metrics": "m.csv", "test_id": "val\n"}, "test_id: letters"),  # "$" took it
        ({"checkpoints": "x.pt", "metrics": "m.csv", "weights_key": "model\n"}, "weights_key: a key"),
        ({"weights": "w.pt", "metrics": "m.csv", "resume_args": "--resume"}, "resume_args needs checkpoints"),
        ({"checkpoints": "x.pt", "metrics": "m.csv", "smoke_args": "--max 'open"}, "smoke_args: No closing"),
        ({"checkpoints": 3, "metrics": "m.csv"}, "checkpoints: a string"),
        (["checkpoints"], "an object of key: value"),
        ("checkpoints out/ckpt.pt", "Line 1: write key: value"),
        ("metrics: a.csv\nmetrics: b.csv", "Line 2: metrics is declared twice"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_rule(value, named):
    assert named in problems(value)


def test_every_problem_is_named_at_once():
    said = problems({"checkpoints": "../a.pt", "metrics": "m.txt", "test_id": "?"})
    assert "without '..'" in said and "a .csv or a JSON-lines" in said and "test_id: letters" in said
