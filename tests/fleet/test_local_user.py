"""The control host as a node runs only where the deployment turns it on, and then, where
a user is named, as that unprivileged OS user: a run's command or symlink reads nothing of the worker's."""

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.node_client import transport_for
from node.transport import CredentialError, LocalTransport
from tests import factories

USER = "rgpu-node-test"
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None, reason="switching users needs root and useradd"
)


@pytest.fixture(scope="module")
def node_user():
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", USER], check=True)
    home = Path(pwd.getpwnam(USER).pw_dir)
    yield USER
    shutil.rmtree(home / "node", ignore_errors=True)


@pytest.fixture
def worker_secret(tmp_path, monkeypatch):
    """A file only the worker may read, and a secret in the worker's environment."""
    secret = tmp_path / "secret_key"
    secret.write_text("canary-worker-secret")
    secret.chmod(0o600)
    monkeypatch.setenv("SECRET_KEY", "canary-env-secret")
    return secret


@needs_root
def test_commands_and_streams_run_as_the_named_user(node_user, worker_secret):
    with LocalTransport(user=node_user) as local:
        assert local.run(["id", "-un"], timeout=10).stdout.strip() == node_user
        assert local.run(["sh", "-c", "echo $HOME"], timeout=10).stdout.strip() == pwd.getpwnam(node_user).pw_dir
        env = local.run(["env"], timeout=10).stdout
        assert "canary" not in env
        refused = local.run(["cat", str(worker_secret)], timeout=10)
        assert refused.exit_code != 0 and "canary" not in refused.stdout
        with local.stream(["id", "-un"]) as out:
            assert out.read().decode().strip() == node_user


@needs_root
def test_file_operations_use_the_users_rights_not_the_workers(node_user, worker_secret, tmp_path):
    home = Path(pwd.getpwnam(node_user).pw_dir)
    with LocalTransport(user=node_user) as local:
        local.run(["mkdir", "-p", f"{home}/node/run"], timeout=10)
        payload = tmp_path / "payload.bin"
        payload.write_bytes(bytes(range(256)) * 40)
        local.upload(payload, "$HOME/node/run/payload.bin")
        assert (home / "node/run/payload.bin").read_bytes() == payload.read_bytes()
        assert (home / "node/run/payload.bin").stat().st_uid == pwd.getpwnam(node_user).pw_uid
        found = local.stat("$HOME/node/run/payload.bin")
        assert (found.size, found.is_dir) == (10240, False)
        assert [entry.path for entry in local.listdir("$HOME/node/run")] == ["payload.bin"]
        with local.reader("$HOME/node/run/payload.bin", offset=256) as handle:
            assert handle.read() == payload.read_bytes()[256:]
        # A run's symlink to the worker's secret: followed with the user's rights, it reads nothing.
        local.run(["ln", "-s", str(worker_secret), f"{home}/node/run/log.txt"], timeout=10)
        with pytest.raises(Exception, match="tail ended with"), local.reader("$HOME/node/run/log.txt") as handle:
            assert b"canary" not in handle.read()
        with pytest.raises(Exception, match="cat ended with"):
            local.download("$HOME/node/run/log.txt", tmp_path / "stolen")
        assert not (tmp_path / "stolen").exists() or b"canary" not in (tmp_path / "stolen").read_bytes()


@pytest.mark.django_db
def test_a_deployment_without_the_local_node_runs_nothing_on_the_control_host(settings):
    project = factories.project(name="Desk", slug="desk")
    desk = factories.box(project, "local", name="desk-box-20261130")
    settings.LOCAL_NODE = False
    with pytest.raises(CredentialError, match="does not run commands on the control host"):
        transport_for(desk)
    settings.LOCAL_NODE, settings.LOCAL_NODE_USER = True, "nobody"
    assert transport_for(desk).user == "nobody"


@pytest.mark.django_db
def test_the_workers_own_user_runs_commands_only_while_the_admin_is_alone(settings, admin_user, django_user_model):
    """With REMOTEGPU_LOCAL_NODE_USER unset, an operator's run on a local box ran as the
    worker and read /proc/<worker>/environ. Without a separate OS user the control host runs commands
    only in the one-person mode, measured at each use: the only active account is the admin."""
    project = factories.project(name="Desk", slug="desk")
    desk = factories.box(project, "local", name="desk-box-20261130")
    settings.LOCAL_NODE, settings.LOCAL_NODE_USER = True, ""
    assert transport_for(desk).user is None  # the admin alone: as the worker, as `make run` has it
    operator = django_user_model.objects.create_user("opal", password="opal-pass-1234")
    with pytest.raises(CredentialError, match="only account.*REMOTEGPU_LOCAL_NODE_USER"):
        transport_for(desk)
    operator.is_active = False
    operator.save()
    assert transport_for(desk).user is None  # a deactivated account is no one
    admin_user.is_superuser = False
    admin_user.save()
    with pytest.raises(CredentialError, match="only account"):
        transport_for(desk)  # a lone account that is not an admin is not the one-person mode


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["root", pwd.getpwuid(os.geteuid()).pw_name, "no-such-account-28"])
def test_the_node_user_is_never_root_the_worker_or_missing(settings, name):
    project = factories.project(name="Desk", slug="desk")
    desk = factories.box(project, "local", name="desk-box-20261130")
    settings.LOCAL_NODE, settings.LOCAL_NODE_USER = True, name
    with pytest.raises(CredentialError, match="REMOTEGPU_LOCAL_NODE_USER"):
        transport_for(desk)


@pytest.mark.django_db
def test_the_local_platform_is_not_offered_where_the_deployment_has_it_off(client, admin_user, settings):
    client.force_login(admin_user)
    settings.LOCAL_NODE = False
    assert 'value="local"' not in client.get("/instances/new/").content.decode()
    settings.LOCAL_NODE = True
    assert 'value="local"' in client.get("/instances/new/").content.decode()
