"""Run secrets and platform hooks on the loopback box, with a real worker.

The secrets canary: a value set only in the workers' environment reaches the training child (its
SHA-256 is in the run's output), and nowhere else: not a table (pg_dump), not Redis (every key, the
queues included), not the worker's log, not a page, not the box after the attempt, and the child's own
print of it is masked before the log is stored. The hooks: a real proxy hook file on the box exports a
variable the child sees and the wrapper does not; HF_HOME sits under the project's cache/; the
instance's interpreter runs both the wrapper and the command.
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from fleet.models import Credential, CredentialKind
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.models import LogChunk, RunState
from tests.conftest import ARTIFACTS, RUN_SECRET_ENV, RUN_SECRET_VALUE
from tests.runs.conftest import SETTLED, edit_train, set_config, wait_state

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


# What the child reports: the secret's hash, the secret itself (to be masked), the hook's variable,
# whether its parent (the wrapper) holds either, where HF_HOME points, and which python runs it.
REPORT = """
def report_environment():
    import hashlib
    token = os.environ.get("CANARY_TOKEN", "")
    parent = open(f"/proc/{os.getppid()}/environ", "rb").read().decode(errors="replace")
    print("secret_sha256=" + hashlib.sha256(token.encode()).hexdigest(), flush=True)
    print("secret_printed=" + token, flush=True)
    print("proxy_seen=" + os.environ.get("RGPU_TEST_PROXY", "none"), flush=True)
    print("wrapper_has_proxy=" + str("RGPU_TEST_PROXY=" in parent), flush=True)
    print("wrapper_has_secret=" + str(bool(token) and token in parent), flush=True)
    print("hf_home=" + os.environ.get("HF_HOME", ""), flush=True)
    print("python=" + sys.executable, flush=True)


def train(config, config_path, smoke):
    if not smoke:
        report_environment()
        if os.environ.get("FAIL_FIRST_ATTEMPT") and os.environ.get("REMOTEGPU_ATTEMPT") == "1":
            return 1
"""


@pytest.fixture
def canary(project):
    credential = Credential.objects.create(
        name=f"canary-{project.slug}",
        kind=CredentialKind.RUN_SECRET,
        reference=f"env:{RUN_SECRET_ENV}",
        export_as="CANARY_TOKEN",
    )
    credential.projects.add(project)
    return credential


@pytest.fixture
def hooked(instance, tmp_path):
    """The box gets a real proxy hook file and an interpreter of the instance's own (which logs its use)."""
    hook = tmp_path / "network_turbo"
    hook.write_text("export RGPU_TEST_PROXY=http://127.0.0.1:9/\n")
    used = tmp_path / "python-used.log"
    python = tmp_path / "bin" / "python-custom"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\necho "$*" >> {used}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    instance.hooks = {
        "proxy": {"source": str(hook), "exports": {}, "unset": ["RGPU_TEST_PROXY"], "note": "the test's proxy"},
        "interpreter": str(python),
    }
    instance.save()
    return {"python": python, "used": used}


def lines_of(run) -> str:
    return "".join(LogChunk.objects.filter(run=run).order_by("attempt", "start").values_list("text", flat=True))


def value_in_redis(value: str) -> list[str]:
    """Every key of this test process's Redis database (cache, channel layer, broker queues) holding value."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    readers = {
        b"string": client.get,
        b"list": lambda key: b"".join(client.lrange(key, 0, -1)),
        b"hash": lambda key: b"".join(k + v for k, v in client.hgetall(key).items()),
        b"set": lambda key: b"".join(client.smembers(key)),
        b"zset": lambda key: b"".join(client.zrange(key, 0, -1)),
    }
    found = []
    for key in client.scan_iter(count=1000):
        reader = readers.get(client.type(key))
        if reader and value.encode() in (reader(key) or b""):
            found.append(key.decode(errors="replace"))
    return found


def database_dump() -> bytes:
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        return Path(config["NAME"]).read_bytes()
    argv = ["pg_dump", "-h", config.get("HOST") or "127.0.0.1", "-U", config.get("USER") or "postgres", config["NAME"]]
    return subprocess.run(argv, stdout=subprocess.PIPE, check=True, timeout=120).stdout


def files_holding(value: str, *roots: Path, since: Path) -> list[str]:
    """Files under roots written after `since` (a file touched when the test began) that hold value. Only
    those can: a grep of all /tmp read every clone and venv a developer keeps there (timed out at 120 s)."""
    found = subprocess.run(
        [
            "find",
            *(str(root) for root in roots if root.exists()),
            "-xdev",
            "-type",
            "f",
            "-newer",
            str(since),
            "-print0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        timeout=120,
    ).stdout
    if not found:
        return []
    argv = ["xargs", "-0", "grep", "-lF", "--", value]
    return (
        subprocess.run(argv, input=found, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
        .stdout.decode()
        .split()
    )


def test_the_secret_reaches_the_child_only_and_the_hooks_apply(
    bob, client, make_run, source, node, canary, hooked, celery_worker_process, tmp_path
):
    began = tmp_path / "began"
    began.touch()  # what the run writes is newer than this
    edit_train(source, "def train(config, config_path, smoke):\n", REPORT)
    set_config(source, epochs=2)
    run = make_run(secrets=[canary.name], command=["python3", "train.py", "--config", "config.yaml"])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, {RunState.EXPORTED, *SETTLED} - {RunState.RUNNING}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, list(run.events.values_list("message", flat=True))

    log = lines_of(run)
    assert f"secret_sha256={hashlib.sha256(RUN_SECRET_VALUE.encode()).hexdigest()}" in log
    assert "secret_printed=[secret masked]" in log  # the child printed it; the log never held it
    assert "wrapper_has_secret=False" in log
    # The proxy hook: sourced for the child, never in the wrapper's environment.
    assert "proxy_seen=http://127.0.0.1:9/" in log and "wrapper_has_proxy=False" in log
    cache = node.root / "cache"
    assert f"hf_home={cache / 'huggingface'}" in log and (cache / "huggingface").is_dir()
    # The instance's interpreter ran the wrapper and, as the run's default, the command.
    used = hooked["used"].read_text()
    assert "wrapper-" in used and " run " in f" {used} " and "train.py" in used
    assert run.env_identity["ran"]["argv0"] == str(hooked["python"])
    assert run.env_identity["ran"]["secrets"] == ["CANARY_TOKEN"]
    assert run.env_identity["ran"]["hooks"]["proxy"]["exported"] == ["RGPU_TEST_PROXY"]
    # The hooks that ran are the run's recorded identity, and its page shows them.
    assert run.hooks["proxy"] == {
        "source": str(Path(hooked["used"]).parent / "network_turbo"),
        "found": True,
        "exported": ["RGPU_TEST_PROXY"],
        "unset": ["RGPU_TEST_PROXY"],
    }
    assert run.hooks["interpreter_found"] is True and len(run.hooks_sha256) == 64

    # Nowhere else: pages, tables, Redis, the worker's log, the box after the attempt.
    client.force_login(bob)
    for url in (run.get_absolute_url(), f"/runs/{run.run_id}/live.json", f"/runs/{run.run_id}/log/", "/api/runs/"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert RUN_SECRET_VALUE not in page.content.decode(), url
    page = client.get(run.get_absolute_url()).content.decode()
    assert "CANARY_TOKEN" in page and "RGPU_TEST_PROXY" in page and hooked["python"].name in page
    assert RUN_SECRET_VALUE.encode() not in database_dump()
    assert value_in_redis(RUN_SECRET_VALUE) == []
    assert RUN_SECRET_VALUE not in (ARTIFACTS / "celery-worker.log").read_text(errors="replace")
    assert files_holding("secret_sha256=", node.root, since=began)  # the search sees what the run wrote
    assert files_holding(RUN_SECRET_VALUE, node.root, Path("/tmp"), Path("/dev/shm"), since=began) == []


def test_a_revoked_grant_stops_the_next_launch(bob, make_run, source, canary, celery_worker_process):
    edit_train(source, "def train(config, config_path, smoke):\n", REPORT)
    set_config(source, epochs=1)
    (source / "train.py").write_text(
        (source / "train.py").read_text().replace('os.environ.get("FAIL_FIRST_ATTEMPT")', "True")
    )
    run = make_run(secrets=[canary.name])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(
        run, {RunState.QUARANTINED, RunState.EXPORTED, RunState.FAILED_PREFLIGHT}, timeout=180, refresh=True
    )
    assert run.state == RunState.QUARANTINED, list(run.events.values_list("message", flat=True))
    canary.projects.clear()
    do_retry_run(run.pk, actor=bob)
    run = wait_state(run, {RunState.FAILED_LAUNCH, RunState.RUNNING, RunState.EXPORTED}, timeout=120)
    assert run.state == RunState.FAILED_LAUNCH
    message = run.events.filter(to_state="failed_launch").get().message
    assert canary.name in message and "not granted" in message
    assert RUN_SECRET_VALUE not in json.dumps(list(run.events.values_list("message", "data")))


# The child writes the value past the masker on its stdout: appended to its attempt's own log.txt, and
# as a train.csv column name. Both reached runs_logchunk, runs_run, the pages and the box's log.txt.
WRITES_ITSELF = """
def leak_past_the_masker():
    token = os.environ.get("CANARY_TOKEN", "")
    active = os.path.dirname(os.environ["REMOTEGPU_CHECKPOINT_DIR"])
    attempt = os.path.join(active, "attempt-" + os.environ["REMOTEGPU_ATTEMPT"])
    with open(os.path.join(attempt, "log.txt"), "a") as log:
        log.write("appended=" + token + "\\n")


def train(config, config_path, smoke):
    if not smoke:
        leak_past_the_masker()
"""


def test_a_secret_the_child_writes_itself_is_masked_on_the_way_in(
    bob, client, make_run, source, node, canary, celery_worker_process
):
    edit_train(source, "def train(config, config_path, smoke):\n", WRITES_ITSELF)
    edit_train(
        source,
        "fieldnames=list(rows[0])",
        'fieldnames=list(rows[0]) + ["col_" + os.environ.get("CANARY_TOKEN", "")]',
    )
    set_config(source, epochs=2)
    run = make_run(secrets=[canary.name])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, {RunState.EXPORTED, *SETTLED} - {RunState.RUNNING}, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, (
        list(run.events.values_list("message", flat=True)),
        run.smoke_output[-2000:],
    )

    log = lines_of(run)
    assert "appended=" in log and RUN_SECRET_VALUE not in log
    assert "col_[secret masked]" in json.dumps(run.last_status)
    assert RUN_SECRET_VALUE not in json.dumps([run.last_status, run.curve, run.last_metrics])
    client.force_login(bob)
    for url in (run.get_absolute_url(), f"/runs/{run.run_id}/live.json", f"/runs/{run.run_id}/log/"):
        assert RUN_SECRET_VALUE not in client.get(url).content.decode(), url
    assert RUN_SECRET_VALUE not in json.dumps(client.get(f"/api/runs/{run.run_id}/log/").json())
    assert RUN_SECRET_VALUE.encode() not in database_dump()
    # The box's own log after the attempt: masked in place by the wrapper (its export's train.csv is the
    # run's own output and keeps what the child wrote).
    attempt_log = next(node.root.glob(f"active/{run.run_id}/attempt-*/log.txt"), None) or next(
        node.root.glob(f"quarantine/{run.run_id}--*/log.txt"), None
    )
    assert attempt_log is not None, sorted(str(p) for p in node.root.rglob("log.txt"))
    text = attempt_log.read_text(errors="replace")
    assert RUN_SECRET_VALUE not in text and "appended=*" in text
