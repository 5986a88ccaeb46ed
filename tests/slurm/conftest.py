"""The Slurm tests' cluster: one real Slurm for the session (tests/slurm_cluster.py), and its login node, a
loopback sshd whose sessions get SLURM_CONF (as a cluster's login node's do): a box of the slurm profile.
Each worker that runs a module here starts its own (tests/scheduling.py): ports and a munge socket of its own."""

import pytest
from django.utils import timezone

from tests import factories
from tests.runs.conftest import *  # noqa: F403 (the project, runs and their sources: its __all__)
from tests.slurm_cluster import SlurmCluster, missing
from tests.sshd import Sshd


def started_cluster(tmp_path_factory, accounting: bool) -> SlurmCluster:
    absent = missing(accounting)
    if absent:  # bin/test and .ci/run install it; a machine without it says so, it does not pass quietly
        pytest.fail(f"Slurm is not installed here (missing: {', '.join(absent)}): run bin/test, which installs it")
    return SlurmCluster(tmp_path_factory.mktemp("slurm"), accounting=accounting).start()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A cluster without an accounting database: sacct reads the completion log."""
    cluster = started_cluster(tmp_path_factory, accounting=False)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def login(slurm, tmp_path_factory):
    """The cluster's login node: sbatch, squeue, sacct and scancel find the cluster through SLURM_CONF."""
    server = Sshd(tmp_path_factory.mktemp("login"), extra_config=(f"SetEnv SLURM_CONF={slurm.conf}",)).start()
    yield server
    server.stop()


@pytest.fixture
def instance(project, login):  # noqa: F811 (this folder's box replaces the runs fixtures' one)
    """The run's box: the cluster's login node (the slurm profile: a run is an sbatch job)."""
    name = f"{project.slug}-cluster-{timezone.localdate():%Y%m%d}"
    return factories.box(name=name, project=project, **{**login.instance_fields(project), "profile_key": "slurm"})


@pytest.fixture(autouse=True)
def no_jobs_left(slurm):
    """Every test starts and ends with an empty queue: a job of another test never holds a node."""
    yield
    slurm.cancel_all()
    slurm.wait(lambda: not slurm.run("squeue", "-h", check=False).strip(), 30, "empty queue")
