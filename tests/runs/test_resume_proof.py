"""A resume is proven by what the box wrote: the first checkpoint at or beyond the step the attempt was
given, and training past it; read from the usual step keys or the run's own. Before: a checkpoint that
keeps its step as `iter_num` was never checked ("step None"), and a trainer that evaluates and saves again
at the step it resumed from was flagged "Resume broken" and its relaunches stopped."""

import pytest
import torch

from runs.checkpoints import parse_mirror, resume_problem, resume_proven
from runs.validation import check_step_key
from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()


def saved(tmp_path, **top) -> str:
    path = tmp_path / "latest.pth"
    torch.save({"model": torch.nn.Linear(4, 4).state_dict(), **top}, path)
    return str(path)


@pytest.mark.parametrize("key", ["step", "global_step", "iter_num", "iteration", "epoch"])
def test_the_step_is_read_from_each_usual_key(tmp_path, key):
    assert WRAPPER.checkpoint_step(saved(tmp_path, **{key: 1200})) == 1200


def test_a_key_the_run_declares_is_read_first(tmp_path):
    path = saved(tmp_path, train_step=4000, epoch=3)
    assert WRAPPER.checkpoint_step(path, "train_step") == 4000
    assert WRAPPER.checkpoint_step(path) == 3
    assert WRAPPER.checkpoint_step(saved(tmp_path, other=True), "train_step") is None
    assert WRAPPER.checkpoint_step(saved(tmp_path, train_step=True), "train_step") is None  # a bool is no step


@pytest.mark.parametrize("bad", ["a b", "1step", "x" * 41, "step;rm", "é"])
def test_a_declared_key_is_a_plain_name(bad):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        check_step_key(bad)
    assert check_step_key(" iter_num ") == "iter_num"


def mirror(start, first, local=None):
    def checkpoint(step):
        return None if step is None else {"name": "latest.pth", "step": step, "bytes": 1, "at": 1.0}

    return parse_mirror({"start": checkpoint(start), "first_written": checkpoint(first), "local": checkpoint(local)})


def test_saving_again_at_the_step_it_resumed_from_is_a_correct_resume_proven_once_it_trains_past_it():
    assert resume_problem(mirror(5, 5, 5), floor=5) is None
    assert not resume_proven(mirror(5, 5, 5), floor=5)  # not told yet: it has not trained past 5
    assert resume_proven(mirror(5, 5, 6), floor=5)
    assert resume_proven(mirror(5, 6, 9), floor=5)


def test_a_restart_from_the_beginning_is_still_flagged_and_never_proven():
    assert "started again instead of resuming" in resume_problem(mirror(5, 1, 2), floor=5)
    assert not resume_proven(mirror(5, 1, 7), floor=5)
    assert not resume_proven(mirror(None, None, None), floor=5)
    assert not resume_proven(mirror(5, 6, 7), floor=None)
