"""An environment was not an identity: python, torch and CUDA versions only, so two boxes with the same
torch and another numpy compared as one environment. The run's interpreter now reports every installed
distribution as one hash (what `pip freeze` would list) and the source's lock file's hash; both are
part of the run's identities, of compare's variables and of what a move must keep (or a person
confirms). Measured here with this machine's interpreter and a second venv that has one more package."""

import subprocess
import sys

import pytest

from console.compare import variables_of
from runs.environment import identity
from runs.models import RunState
from runs.tasks import preflight_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    (standin_source / "uv.lock").write_text("version = 1\n[[package]]\nname = 'numpy'\nversion = '2.1.0'\n")
    return standin_source


def test_a_box_report_that_lies_is_kept_out_of_the_identity():
    report = {"python": "3.11.9", "packages_sha256": "not a hash", "packages": True, "lock_file": "x" * 500}
    found = identity(report)
    assert found["packages_sha256"] is None and found["packages"] is None and len(found["lock_file"]) == 60


def test_the_installed_distributions_and_the_lock_file_bind_the_run(project, make_run, no_worker, tmp_path):
    run = make_run(state=RunState.PREFLIGHT, command=[sys.executable, "train.py"])
    preflight_run(run.pk)
    run.refresh_from_db()
    env = run.env_identity
    assert run.state == RunState.SMOKE, run.preflight_report.get("problems")
    assert len(env["packages_sha256"]) == 64 and env["packages"] > 10
    assert env["lock_file"] == "uv.lock" and len(env["lock_sha256"]) == 64

    # Two more environments of this python: bare venvs, one holding numpy 2.1.0 and one 2.1.1 (their
    # metadata, as pip leaves it). Same versions of python, torch and CUDA; not the same environment.
    found = [preflighted(make_run, bare_venv(tmp_path / f"env-{version}", version)) for version in ("2.1.0", "2.1.1")]
    one, two = (other.env_identity for other in found)
    assert one["packages"] == two["packages"] == 1 and one["packages_sha256"] != two["packages_sha256"]
    assert (one["python"], one["torch"]) == (two["python"], two["torch"])
    first, second = (variables_of(other, {}) for other in found)
    assert first["packages"] != second["packages"] and first["lock file"] == second["lock file"]


def bare_venv(path, numpy: str):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    dist = site / f"numpy-{numpy}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: numpy\nVersion: {numpy}\n")
    return path / "bin" / "python"


def preflighted(make_run, python):
    run = make_run(state=RunState.PREFLIGHT, command=[str(python), "train.py"])
    preflight_run(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.SMOKE, run.preflight_report.get("problems")
    return run
