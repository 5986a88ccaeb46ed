"""The CLI over the API on the loopback node: launch from a directory → follow → verify → custody."""

import json
import subprocess
import sys

import pytest

from api.models import ApiToken
from tests.conftest import REPO, subprocess_env
from tests.runs.conftest import set_config
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """Most of these tests are about the CLI around a run: tinyfit's contract without torch."""
    return standin_source


def cli(live_server, token, *args, timeout=240) -> subprocess.CompletedProcess:
    env = subprocess_env(REMOTEGPU_URL=live_server.url, REMOTEGPU_TOKEN=token)
    command = [sys.executable, "-m", "remotegpu", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def launch_in(source, project, instance) -> list[str]:
    """The CLI's launch verb for the source directory onto the project's loopback box."""
    return ["launch", str(source), "--project", project.slug, "--instance", instance.name]


def test_launch_follow_and_custody_through_the_cli(
    live_server, bob, project, instance, tinyfit_source, celery_worker_process
):
    source = tinyfit_source  # custody recomputes its metrics: the real example
    set_config(source, epochs=3)
    _, token = ApiToken.objects.issue(bob, "cli")
    launched = cli(
        live_server,
        token,
        *launch_in(source, project, instance),
        "--expected-minutes",
        "1",
        "--no-follow",
        "--",
        sys.executable,
        "train.py",
        "--config",
        "config.yaml",
    )
    assert launched.returncode == 0, launched.stdout + launched.stderr
    run_id = launched.stdout.split("created ", 1)[1].split()[0]

    # `logs -f` starts before the training does and prints its log as it grows, until the run settles:
    # every epoch line once, in order, and the last line.
    followed = cli(live_server, token, "logs", run_id, "-f")
    assert followed.returncode == 0, followed.stderr
    epochs = [line for line in followed.stdout.splitlines() if line.startswith("epoch ")]
    assert [line.split()[1] for line in epochs] == ["1/3", "2/3", "3/3"], followed.stdout
    assert followed.stdout.rstrip().splitlines()[-1].startswith("done: best epoch")
    assert cli(live_server, token, "logs", run_id).stdout == followed.stdout  # the kept log, read again
    settled = cli(live_server, token, "follow", run_id)
    assert f"{run_id}: exported" in settled.stdout and "Preflight passed" in settled.stdout

    assert cli(live_server, token, "verify", run_id).returncode == 0
    shown = lambda: json.loads(cli(live_server, token, "custody", run_id).stdout)  # noqa: E731
    record = wait_until(lambda: (seen := shown())["status"] in ("verified", "failed") and seen, 120, 1)
    assert record["status"] == "verified", record["failure"]
    assert any(metric["name"] == "accuracy" for metric in record["evidence"]["metrics"])

    refused = cli(live_server, "rgpu_wrong", "custody", run_id)
    assert refused.returncode == 2 and "401" in refused.stderr


def test_the_cli_overrides_the_config_and_says_why_a_run_failed(
    live_server, bob, project, instance, source, celery_worker_process
):
    """--config-override and --environment reach the run; a failed smoke prints its
    reason, the tail of its output and the run's URL, not only an exit code."""
    set_config(source, epochs=3)
    _, token = ApiToken.objects.issue(bob, "cli")
    failing = "import sys; print('Traceback (most recent call last):'); print('KeyError: lr'); sys.exit(3)"
    launched = cli(
        live_server,
        token,
        *launch_in(source, project, instance),
        "--config-override",
        "epochs=1",
        "--environment",
        sys.executable,
        "--",
        sys.executable,
        "-c",
        failing,
    )
    assert launched.returncode == 1, launched.stdout + launched.stderr
    run_id = launched.stdout.split("created ", 1)[1].split()[0]
    assert f"{live_server.url}/runs/{run_id}/" in launched.stdout and f"{run_id}: failed_smoke" in launched.stdout
    assert "KeyError: lr" in launched.stderr and f"see {live_server.url}/runs/{run_id}/" in launched.stderr
    from runs.models import Run

    run = Run.objects.get(run_id=run_id)
    assert run.config_overrides == {"epochs": 1} and run.environment == sys.executable

    refused = cli(live_server, token, *launch_in(source, project, instance), "--config-override", "nosuchkey=1")
    assert refused.returncode == 2 and "unknown config key(s) nosuchkey" in refused.stderr
    # What a run binds, as the form and the API bind it: the CLI sends datasets and secrets by name.
    unbound = cli(live_server, token, *launch_in(source, project, instance), "--dataset", "points-v9")
    assert unbound.returncode == 2 and f"{project.name} has no dataset named points-v9" in unbound.stderr
    ungranted = cli(live_server, token, *launch_in(source, project, instance), "--secret", "hf-token")
    assert ungranted.returncode == 2 and "hf-token" in ungranted.stderr, ungranted.stderr
    assert Run.objects.filter(project=project).count() == 1  # nothing half-made by a refusal


def test_stop_and_retry_through_the_cli(live_server, bob, project, instance, source, gate, celery_worker_process):
    """`stop` stops a running run (quarantined "stopped by"), `follow` prints why, `retry`
    resumes it to an export; stopping it again once it has ended is refused with its state."""
    from runs.models import Run, RunState
    from tests.runs.conftest import wait_state

    set_config(source, epochs=25, hold_file=gate.hold(at=2).path)  # held at epoch 2 until stopped
    _, token = ApiToken.objects.issue(bob, "cli")
    command = ["--", sys.executable, "train.py", "--config", "config.yaml"]
    launched = cli(live_server, token, *launch_in(source, project, instance), "--no-follow", *command)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    run_id = launched.stdout.split("created ", 1)[1].split()[0]
    run = wait_state(Run.objects.get(run_id=run_id), {RunState.RUNNING}, timeout=120)
    wait_until(lambda: run.refresh_from_db() or len(run.curve) >= 2, 60, 0.2, what="two epochs on the run's curve")

    stopped = cli(live_server, token, "stop", run_id)
    assert stopped.returncode == 0 and f"{run_id}: stop asked" in stopped.stdout, stopped.stderr
    settled = cli(live_server, token, "follow", run_id)
    assert f"{run_id}: quarantined" in settled.stdout and "stopped by bob" in settled.stdout, settled.stdout
    assert settled.returncode == 1 and "failure: stopped" in settled.stderr
    again = cli(live_server, token, "stop", run_id)
    assert again.returncode == 2 and "Closed: quarantined" in again.stderr

    gate.release()
    assert cli(live_server, token, "retry", run_id).returncode == 0
    assert f"{run_id}: exported" in cli(live_server, token, "follow", run_id).stdout
    assert Run.objects.get(run_id=run_id).attempt == 2


def test_edit_teardown_and_sweeps_through_the_cli(
    live_server, bob, project, instance, make_run, source, celery_worker_process
):
    """`edit` patches a draft, `teardown` requests (never approves) a consequence, `sweep`
    creates one, `sweeps` lists it and `follow-sweep` follows its cells until each has settled."""
    set_config(source, epochs=1)
    base = make_run()
    _, token = ApiToken.objects.issue(bob, "cli")
    edited = cli(live_server, token, "edit", base.run_id, "title=renamed", "expected_minutes=2")
    assert edited.returncode == 0 and "changed title, expected_minutes" in edited.stdout, edited.stderr
    refused = cli(live_server, token, "edit", base.run_id, "gpus=oops")
    assert refused.returncode == 2 and "gpus" in refused.stderr

    requested = cli(live_server, token, "teardown", instance.name, "shutdown", "--reason", "done for today")
    assert requested.returncode == 0 and "request #" in requested.stdout, requested.stderr

    made = cli(
        live_server,
        token,
        "sweep",
        base.run_id,
        "--name",
        "lr",
        "--cells",
        '[{"lr": 0.1}, {"lr": 0.05}]',
        "--instance",
        instance.name,
        "--one-at-a-time",
    )
    assert made.returncode == 0 and "2 cells" in made.stdout, made.stderr
    sweep_id = made.stdout.split()[1]
    listed = cli(live_server, token, "sweeps")
    assert listed.stdout.startswith(f"{sweep_id}\tlr\t{project.slug}\t2 cells")
    followed = cli(live_server, token, "follow-sweep", sweep_id)
    assert followed.returncode == 0 and f"sweep {sweep_id}: 2 exported, 0 not" in followed.stdout, followed.stdout
