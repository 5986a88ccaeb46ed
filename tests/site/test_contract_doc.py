"""docs/contract.md against the code that enforces it: every variable the wrapper and the control side
give the command, every file rule of the seal, every checkpoint name rule, every run.json key the
readback judges and every metric it recomputes is named on the page. A rule added to the code and not
to the page fails here."""

import re

from custody.metrics import REGISTRY
from custody.run_schema import INVENTORY_KEYS, RECOMMENDED
from tests.box_specs import spec_with
from tests.conftest import REPO
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()
PAGE = (REPO / "docs" / "contract.md").read_text()
# Where the command's environment is made: the wrapper (run_env), the cadence and the staged datasets.
SOURCES = ("wrapper/attempts.py", "runs/cadence.py", "runs/box_spec.py")


def unnamed(names, page: str = PAGE) -> set[str]:
    """The names the page never writes as code (`name`, or `name…` for a prefix)."""
    return {name for name in names if not re.search(rf"`{re.escape(name)}", page)}


def variables_given() -> set[str]:
    code = "".join((REPO / path).read_text() for path in SOURCES)
    named = set(re.findall(r"REMOTEGPU_[A-Z_]+", code))
    spec = spec_with(
        WRAPPER, **{"run_id": "r", "attempt": 1, "active": "/a", "ckpt": "/a/ckpt", "output": "/a/output", "gpus": [0]}
    )
    for smoke in (True, False):  # what run_env sets beyond the box's own environment, both ways
        named |= {key for key in WRAPPER.run_env(spec, smoke, hooks={}) if key not in WRAPPER.os.environ}
    return named


def test_every_variable_the_command_gets_is_on_the_page():
    given = variables_given()
    assert {"REMOTEGPU_SMOKE", "REMOTEGPU_OUTPUT_DIR", "REMOTEGPU_DATASET_", "CUDA_VISIBLE_DEVICES"} <= given
    assert unnamed(given) == set()


def test_every_file_rule_of_the_seal_is_on_the_page():
    rules = {*WRAPPER.REQUIRED_EXPORT, *WRAPPER.FORBIDDEN_EXPORT, *WRAPPER.FORBIDDEN_TOP}
    assert unnamed(rules) == set()
    assert WRAPPER.CONTRACT in PAGE  # the words a contract failure starts with


def test_every_checkpoint_rule_is_on_the_page():
    assert unnamed({*WRAPPER.TEMPORARY, *WRAPPER.STEP_KEYS, *WRAPPER.CHECKPOINT_SUFFIXES}) == set()
    assert "No checkpoint where RemoteGPU looks" in PAGE


def test_every_run_json_key_the_readback_judges_and_every_recomputed_metric_is_on_the_page():
    assert unnamed({*RECOMMENDED, *INVENTORY_KEYS, "checkpoints", "selection", "architecture", "splits"}) == set()
    assert unnamed(REGISTRY) == set()


def test_the_helpers_calls_are_on_the_page():
    from wrapper.run_helper import remotegpu_run

    calls = {name for name, value in vars(remotegpu_run).items() if callable(value) and not name.startswith("_")}
    calls -= {"log"}  # `rg.log(` is checked below with its arguments
    assert {"resume", "due", "save", "export", "predictions", "build_declared"} <= calls
    assert unnamed({f"rg.{name}(" for name in calls}) == set() and "`rg.log(step, **metrics)`" in PAGE


def test_every_trainer_files_key_is_on_the_page():
    from runs.trainer_files import KEYS

    assert {"checkpoints", "resume_args", "log_pattern", "predictions"} <= set(KEYS)
    assert unnamed(KEYS) == set()


def test_each_declaration_on_the_page_is_one_the_run_form_accepts():
    """The page's declarations (code blocks starting `checkpoints:`) as a user pastes them into the form."""
    from runs.trainer_files import parse_text

    blocks = re.findall(r"```\n(checkpoints: .*?)```", PAGE, re.S)
    assert len(blocks) == 3
    for block in blocks:
        assert parse_text(block)["checkpoints"] == block.splitlines()[0].split(": ", 1)[1]


def test_the_check_sees_a_rule_the_page_lost():
    page = PAGE.replace("`latest.pth`", "the rolling checkpoint")
    assert unnamed(WRAPPER.FORBIDDEN_EXPORT, page) == {"latest.pth"}
