"""A run on a Slurm box asks for its job's partition, time limit, gres and checkpoint signal: the form and
the API check them by one rule (node/slurm.py) before they reach a batch script, refuse them for another
box, and the run page shows them, with a warning where no time limit was set."""

import json
import sys

import pytest
from django.urls import reverse

from api.models import ApiToken
from runs.models import Run
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(project, box_row):
    """A Slurm login node's row (its key confirmed, as box_row's): forms and answers, never reached."""
    kept = ("credential", "host", "port", "user", "state", "data_root_override")
    kept += ("host_key_type", "host_key_base64", "host_key_confirmed_at")
    return factories.box(project, "slurm", **{name: getattr(box_row, name) for name in kept})


@pytest.fixture
def form(project, source):
    return {
        "project": project.pk,
        "title": "on the cluster",
        "source_kind": "local_dir",
        "source_path": str(source),
        "command_line": f"{sys.executable} train.py --config config.yaml",
        "config_path": "config.yaml",
        "expected_minutes": "30",
        "checkpoint_mib": "100",
        "checkpoints_retained": "2",
        "scratch_mib": "0",
        "expected_files": "1000",
    }


def test_the_form_keeps_a_slurm_boxs_options_and_the_page_shows_them(client, bob, form, cluster):
    client.force_login(bob)
    options = {
        "slurm_partition": "gpu-a100",
        "slurm_time_minutes": "90",
        "slurm_gres": "gpu:1",
        "slurm_signal_seconds": "120",
    }
    response = client.post(reverse("run-create"), {**form, "instance": cluster.pk, **options})
    run = Run.objects.get()
    assert response.status_code == 302, response.content.decode()[:2000]
    assert run.scheduler == {
        "options": {"partition": "gpu-a100", "time_minutes": 90, "gres": "gpu:1", "signal_seconds": 120}
    }
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="slurm-job"' in page and "partition gpu-a100" in page and "SIGUSR1 120 s before it" in page
    assert 'id="slurm-no-limit"' not in page


def test_bad_options_are_form_errors_and_no_limit_is_warned(client, bob, form, cluster, box_row):
    client.force_login(bob)
    bad = {"slurm_partition": "low; rm -rf /", "slurm_gres": "gpu:1 --uid=0", "slurm_time_minutes": "1"}
    bad["slurm_signal_seconds"] = "60"
    page = client.post(reverse("run-create"), {**form, "instance": cluster.pk, **bad}).content.decode()
    assert "partition: letters, digits" in page and "gres: as Slurm writes it" in page
    assert "it must come before the time limit" in page and not Run.objects.exists()
    indices = client.post(reverse("run-create"), {**form, "instance": cluster.pk, "gpus_text": "0"}).content.decode()
    assert "asked with gres" in indices and not Run.objects.exists()
    other = client.post(reverse("run-create"), {**form, "instance": box_row.pk, "slurm_partition": "low"})
    assert "Only a run on a Slurm box" in other.content.decode() and not Run.objects.exists()
    client.post(reverse("run-create"), {**form, "instance": cluster.pk})
    run = Run.objects.get()
    assert run.scheduler == {"options": {}}
    assert 'id="slurm-no-limit"' in client.get(run.get_absolute_url()).content.decode()


def test_the_api_takes_the_same_options_by_the_same_rule(bob, project, cluster, box_row, source):
    _, token = ApiToken.objects.issue(bob, "test")
    body = {
        "project": project.slug,
        "instance": cluster.name,
        "source_kind": "local_dir",
        "source_path": str(source),
        "command": ["python3", "train.py"],
        "config_path": "config.yaml",
    }

    def post(extra):
        from django.test import Client

        client = Client(HTTP_AUTHORIZATION=f"Token {token}")
        return client.post("/api/runs/", data=json.dumps({**body, **extra}), content_type="application/json")

    refused = post({"slurm_options": {"partition": "a b", "time_minutes": 0, "uid": 0}})
    assert refused.status_code == 400, refused.content
    said = json.dumps(refused.json())
    assert "uid: not a Slurm option" in said and "partition:" in said and "time limit:" in said
    assert post({"instance": box_row.name, "slurm_options": {"partition": "low"}}).status_code == 400
    assert "asked with gres" in json.dumps(post({"gpus": [0]}).json())
    created = post({"slurm_options": {"partition": "low", "time_minutes": 30}})
    assert created.status_code == 201, created.content
    options = {"partition": "low", "time_minutes": 30}
    assert created.json()["scheduler"] == {"options": options} and not Run.objects.filter(scheduler={}).exists()


def test_a_multi_node_run_is_asked_on_the_form_and_shown_with_its_rendezvous(client, bob, form, cluster):
    client.force_login(bob)
    options = {"slurm_nodes": "2", "slurm_tasks_per_node": "1", "slurm_collective_timeout_seconds": "120"}
    bad = {**options, "slurm_nodes": "0", "slurm_ifname": "eth0; reboot", "slurm_collective_timeout_seconds": "5"}
    page = client.post(reverse("run-create"), {**form, "instance": cluster.pk, **bad}).content.decode()
    assert "nodes: a whole number from 1 to 64" in page and "network interface: a Linux interface name" in page
    assert "collective timeout: 10 to 86400 seconds" in page and not Run.objects.exists()
    # torchrun starts a script: a command that is not `python script.py` is refused on a multi-node run.
    shell = client.post(
        reverse("run-create"), {**form, "instance": cluster.pk, "command_line": "bash go.sh", **options}
    )
    assert "torchrun starts that script" in shell.content.decode() and not Run.objects.exists()
    response = client.post(reverse("run-create"), {**form, "instance": cluster.pk, **options, "slurm_ifname": "ib0"})
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.scheduler["options"] == {
        "nodes": 2,
        "tasks_per_node": 1,
        "collective_timeout_seconds": 120,
        "ifname": "ib0",
    }
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="slurm-distributed"' in page and "2 node(s) × 1 process(es)" in page
    assert "collectives time out after 120 s" in page and "interface ib0" in page


def test_the_api_refuses_a_multi_node_run_whose_command_torchrun_cannot_start(bob, project, cluster, source):
    from django.test import Client

    _, token = ApiToken.objects.issue(bob, "test")
    body = {"project": project.slug, "instance": cluster.name, "source_kind": "local_dir"}
    body |= {"source_path": str(source), "config_path": "config.yaml", "slurm_options": {"nodes": 2}}
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")

    def post(command):
        return client.post("/api/runs/", data=json.dumps({**body, "command": command}), content_type="application/json")

    refused = post(["bash", "go.sh"])
    assert refused.status_code == 400 and "torchrun starts that script" in json.dumps(refused.json())
    created = post(["python3", "train.py", "--config", "config.yaml"])
    assert created.status_code == 201, created.content
    assert created.json()["scheduler"] == {"options": {"nodes": 2}}


def test_cpus_per_process_is_one_option_from_the_form_to_the_batch_script_and_each_ranks_threads(
    client, bob, form, cluster
):
    """The proof of the typed spec: a new run option touches the form, its rule and one spec field. Each
    process's CPUs: checked by the option rule, asked of Slurm for the node's torchrun task (processes ×
    CPUs), and each rank's OMP threads on the box (before: one thread, always; a data loader starved)."""
    from node import slurm
    from tests.box_specs import spec_with
    from tests.runs.conftest import load_wrapper

    client.force_login(bob)
    options = {"slurm_nodes": "2", "slurm_tasks_per_node": "4"}
    page = client.post(reverse("run-create"), {**form, "instance": cluster.pk, **options, "slurm_cpus_per_task": "0"})
    assert "CPUs per process: a whole number from 1 to 256" in page.content.decode() and not Run.objects.exists()
    response = client.post(
        reverse("run-create"), {**form, "instance": cluster.pk, **options, "slurm_cpus_per_task": "2"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.scheduler["options"] == {"nodes": 2, "tasks_per_node": 4, "cpus_per_task": 2}
    assert "2 CPU(s) per process" in client.get(run.get_absolute_url()).content.decode()
    job = slurm.JobOptions.of(run.scheduler["options"])
    assert "--cpus-per-task=8" in slurm.asked(job) and "cpus_per_task" in slurm.OPTION_KEYS
    wrapper = load_wrapper()
    told = spec_with(wrapper, distributed=job.distributed_spec())
    assert told.distributed.cpus_per_task == 2 and wrapper.distributed_env(told)["OMP_NUM_THREADS"] == "2"
    alone = spec_with(wrapper, distributed=slurm.JobOptions.of({"nodes": 2}).distributed_spec())
    assert wrapper.distributed_env(alone)["OMP_NUM_THREADS"] == "1" and "--cpus-per-task" not in " ".join(
        slurm.asked(slurm.JobOptions.of({"nodes": 2}))
    )
