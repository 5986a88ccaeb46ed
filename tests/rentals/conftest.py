"""Rent tests share the runs tests' project (its members in their persona roles), and, for a rent that
proves its run first, their loopback box, draft runs and the stand-in trainer."""

import sys

import pytest

from tests.runs.conftest import (  # noqa: F401
    instance,
    make_run,
    node,
    project,
    standin_checkpoints,
    standin_source,
)


@pytest.fixture
def source(standin_source):  # noqa: F811
    """What a rent's run trains is not tested here: the stand-in keeps tinyfit's contract without torch."""
    return standin_source


@pytest.fixture
def draft(project, instance, source, bob):  # noqa: F811
    """A draft run created as a person creates one (its box's rollups counted), on the loopback box."""
    from runs.actions.lifecycle import do_create_run
    from runs.models import Run

    def make(actor=bob, **fields) -> Run:
        defaults = {"command": [sys.executable, "train.py", "--config", "config.yaml"], "config_path": "config.yaml"}
        run = Run(project=project, instance=instance, source_path=str(source), expected_minutes=9)
        for key, value in {**defaults, **fields}.items():
            setattr(run, key, value)
        return do_create_run(run, actor=actor)

    return make
