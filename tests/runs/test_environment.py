"""Environment selection on the loopback node: resolution, identity read back, conda base refused."""

import sys
from pathlib import Path

import pytest

from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.runs.conftest import SETTLED, set_config, wait_state

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


def test_a_named_venv_is_resolved_recorded_and_what_ran_is_read_back(bob, make_run, source, celery_worker_process):
    venv = Path(sys.prefix)  # the project's own venv: it has torch
    set_config(source, epochs=2)
    run = make_run(environment=str(venv), command=["python3", "train.py", "--config", "config.yaml"])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, {RunState.EXPORTED, RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE}, refresh=True)
    assert run.state == RunState.EXPORTED, list(run.events.values_list("message", flat=True))
    identity = run.env_identity
    assert identity["sys_executable"] == str(venv / "bin" / "python") and identity["torch"]
    assert identity["ran"]["argv0"] == identity["sys_executable"]  # what actually ran, read back
    assert identity["ran"]["exe"] == str(Path(identity["sys_executable"]).resolve())
    assert identity["conda_base"] is False


@pytest.fixture
def conda_base(tmp_path):
    base = tmp_path / "miniconda3"
    (base / "conda-meta").mkdir(parents=True)
    (base / "bin").mkdir()
    (base / "bin" / "python").symlink_to(sys.executable)
    return base


def test_generic_ssh_refuses_conda_base(bob, make_run, conda_base, celery_worker_process):
    run = make_run(environment=str(conda_base / "bin" / "python"))
    assert run.instance.profile.data["identity"]["persistent"]
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.FAILED_PREFLIGHT
    message = run.events.filter(to_state="failed_preflight").get().message
    assert "Refusing deep-learning work in conda base" in message and "Use a named environment instead" in message


def test_an_unknown_environment_is_a_clear_preflight_failure(bob, make_run, celery_worker_process):
    run = make_run(environment="no-such-env")
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.FAILED_PREFLIGHT
    assert (
        "no interpreter for environment 'no-such-env'" in run.events.filter(to_state="failed_preflight").get().message
    )
