"""A number read from text nobody here wrote is ASCII digits, bounded (wrapper/digits.py): "²".isdigit() is
true and int("²") raises (a 500 on a page, a crashed watcher tick), int("٤٢") is 42 (a job id stored from a
hostile sbatch), and a 40-digit restart count was attempt 10^40. The walk below finds any other reading."""

import ast
import re

import pytest

from node import slurm
from tests import factories
from tests.conftest import REPO
from wrapper.digits import ascii_int

pytestmark = pytest.mark.django_db

HOSTILE = ["²", "٤٢", "４２", " 42", "42\n", "4_2", "+4", "1" * 19, "", "0x2a"]

# Everything the product runs or ships (the example trainer a team copies too); tests are not read.
PRODUCT = [
    path
    for path in sorted(REPO.rglob("*.py"))
    if not ({".venv", "tests", "node_modules", "var"} & set(path.relative_to(REPO).parts))
]


def test_only_ascii_digits_are_a_number():
    assert [ascii_int(text) for text in HOSTILE] == [None] * len(HOSTILE)
    assert ascii_int("42") == 42 and ascii_int("0") == 0 and ascii_int("9" * 18) == int("9" * 18)
    assert ascii_int("300", most=255) is None and ascii_int("255", most=255) == 255
    assert ascii_int("-9", signed=True) == -9 and ascii_int("-9") is None and ascii_int("-", signed=True) is None
    assert ascii_int(42) is None and ascii_int(None) is None


def digit_readings(path, root=REPO) -> list[str]:
    """Each str.isdigit/isdecimal/isnumeric call and each \\d in a string (a regex's Unicode digit) in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in ("isdigit", "isdecimal", "isnumeric"):
            found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")  # a call, or filter(str.isdigit)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"\\d", node.value):
            found.append(f"{path.relative_to(root)}:{node.lineno} \\d")
    return found


def test_no_file_reads_a_digit_any_other_way():
    assert len(PRODUCT) > 300  # the walk sees the tree (a wrong root would pass with nothing found)
    assert [found for path in PRODUCT for found in digit_readings(path)] == []


def test_the_walk_finds_a_reading(tmp_path):
    """The check can fail: a guard, a regex and a page's parameter of the old shape are each found."""
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        'import re\nN = re.compile(r"(\\d+)")\ndef f(t):\n    return int(t) if t.isdigit() else 0\n'
        "P = filter(str.isnumeric, [])\n"
    )
    found = ["sneaky.py:2 \\d", "sneaky.py:4 .isdigit", "sneaky.py:5 .isnumeric"]
    assert sorted(digit_readings(sneaky, tmp_path)) == found


@pytest.mark.parametrize("count", ["²", "٤", "1" * 40])
def test_a_hostile_restart_count_is_refused_and_named(count):
    line = f"2026-12-05T10:00:00\n77|RUNNING|None|{count}|9:00|n1|N/A|"
    with pytest.raises(slurm.MalformedAnswer, match="restart count that is not one"):
        slurm.read_squeue("77", line)
    assert slurm.read_squeue("77", "2026-12-05T10:00:00\n77|RUNNING|None|3|9:00|n1|N/A|").restarts == 3


@pytest.mark.parametrize("code", ["²", "٣", "99999"])
def test_a_hostile_exit_code_is_refused_and_named(code):
    with pytest.raises(slurm.MalformedAnswer, match="exit code that is not one"):
        slurm.read_sacct("9", f"9|FAILED|{code}:0\n")
    assert slurm.read_sacct("9", "9|FAILED|3:0\n").exit_code == 3


@pytest.mark.parametrize("printed", ["٤٢", "４２", "42;clüster"])
def test_sbatch_answering_other_digits_is_no_job_id(printed):
    assert slurm.submitted_job(printed) is None and slurm.submitted_job("42") == "42"


class LoginNode:
    """A login node's transport that answers squeue as given (the answer is the attack, the reading is real)."""

    def __init__(self, squeue: str):
        self.squeue = squeue

    def run_script(self, script, timeout):
        return type("Result", (), {"exit_code": 0, "stdout": self.squeue, "stderr": ""})()


def test_the_watcher_notes_a_refused_answer_instead_of_crashing():
    from fleet import slurm_jobs

    run = type("Run", (), {"slurm_job": "77", "run_id": "r-77", "slurm_base_attempt": 1})()
    hostile = LoginNode("2026-12-05T10:00:00\n77|RUNNING|None|²|9:00|n1|N/A|")
    merged = slurm_jobs.with_scheduler(hostile, [run], {"r-77": {"attempt": 1}})
    assert merged["r-77"]["error"].startswith("the login node's answer was refused: squeue gave job 77 a restart")


@pytest.mark.parametrize("value", ["²", "٤٢", "1" * 40])
def test_unicode_digits_on_pages_are_ignored_not_a_500(client, alice, bob, value):
    project = factories.project(alice, bob)
    box = factories.box(project)
    client.force_login(alice)
    assert client.get("/audit/", {"before": value}).status_code == 200
    assert client.get("/audit/", {"request": value}).status_code == 200
    assert client.get("/audit/", {"request": value, "format": "csv"}).status_code == 200
    assert client.get(box.get_absolute_url(), {"waste": value}).status_code == 200
