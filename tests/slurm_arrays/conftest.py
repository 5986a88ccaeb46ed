"""A cluster that keeps accounting (slurmdbd on this machine's MariaDB), where a sweep goes as one job
array; its login node and box as tests/slurm/'s. Its munged listens on munge's default socket (slurmdbd
asks no other), so one module holds it: one worker, one such cluster at a time."""

import pytest

from tests.runs.conftest import *  # noqa: F403 (the project, runs and their sources: its __all__)
from tests.slurm.conftest import instance, login, no_jobs_left, started_cluster  # noqa: F401 (fixtures)


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    cluster = started_cluster(tmp_path_factory, accounting=True)
    yield cluster
    cluster.stop()
