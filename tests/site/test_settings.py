"""Settings from the environment: bad values stop start-up with one clear line."""

import stat
import subprocess
import sys

import pytest

from tests.conftest import REPO, subprocess_env


def manage(*args, **env):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://root@127.0.0.1/remotegpu", "DATABASE_URL has an unsupported scheme 'mysql'"),
        ("postgres://127.0.0.1:5432", "DATABASE_URL names no database"),
        ("not a url", "DATABASE_URL has an unsupported scheme"),
    ],
)
def test_bad_database_url_fails_at_start_with_a_clear_message(url, message):
    result = manage("check", DATABASE_URL=url)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_database_stops_runstack_with_a_clear_message(tmp_path):
    closed_port = "postgres://nobody@127.0.0.1:1/remotegpu"
    result = manage("runstack", DATABASE_URL=closed_port, REMOTEGPU_VAR_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "The database in DATABASE_URL is unreachable" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_boolean_is_refused():
    result = manage("check", DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_secret_key_is_generated_once_into_var_and_private(tmp_path):
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = manage("shell", "--no-imports", "-c", code, REMOTEGPU_VAR_DIR=str(tmp_path), SECRET_KEY="")
    second = manage("shell", "--no-imports", "-c", code, REMOTEGPU_VAR_DIR=str(tmp_path), SECRET_KEY="")
    assert first.returncode == 0, first.stderr
    key_file = tmp_path / "secret_key"
    assert first.stdout.strip() == second.stdout.strip() == key_file.read_text().strip()
    assert len(key_file.read_text().strip()) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_default_database_is_sqlite_under_var(tmp_path):
    code = "from django.conf import settings; print(settings.DATABASES['default']['NAME'])"
    result = manage("shell", "--no-imports", "-c", code, REMOTEGPU_VAR_DIR=str(tmp_path), DATABASE_URL="")
    assert result.stdout.strip() == str(tmp_path / "remotegpu.sqlite3")


def test_secret_key_file_is_not_tracked_by_git():
    ignored = subprocess.run(["git", "check-ignore", "var/secret_key"], cwd=REPO, capture_output=True, text=True)
    assert ignored.returncode == 0


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SSH_COMMAND_TIMEOUT", "thirty", "SSH_COMMAND_TIMEOUT='thirty' is not a number"),
        ("WATCH_TICK_SECONDS", "-1", "WATCH_TICK_SECONDS='-1' is out of range"),
        ("HEALTH_INTERVAL", "nan", "HEALTH_INTERVAL='nan' is out of range"),
        ("WATCH_DB_CONNECTIONS", "0", "WATCH_DB_CONNECTIONS must be at least 1"),
        ("WATCH_DB_CONNECTIONS", "many", "WATCH_DB_CONNECTIONS='many' is not an integer"),
        ("CELERY_WORKER_CONCURRENCY", "-4", "CELERY_WORKER_CONCURRENCY must be at least 1"),
    ],
)
def test_a_bad_number_names_its_variable(name, value, message):
    result = manage("check", **{name: value})
    assert result.returncode != 0 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_secrets_may_come_from_files(tmp_path):
    key_file = tmp_path / "secret_key"
    key_file.write_text("from-a-mounted-secret-file-0123456789-abcdefghijklmnopqrstuvwxyz\n")
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    result = manage("shell", "--no-imports", "-c", code, SECRET_KEY="", SECRET_KEY_FILE=str(key_file))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from-a-mounted-secret-file-0123456789-abcdefghijklmnopqrstuvwxyz"
    missing = manage("check", SECRET_KEY_FILE=str(tmp_path / "absent"))
    assert missing.returncode != 0 and "SECRET_KEY_FILE cannot be read" in missing.stderr


def test_an_adapters_base_is_written_once_and_a_deployment_only_overrides_it():
    """The documented bases live in the adapters; the settings carry a deployment's overrides and shadow
    none by default (before, each base was written twice, and a stale copy in settings won over the adapter)."""
    from providers import ADAPTERS

    text = (REPO / "remotegpu_site" / "settings.py").read_text()
    bases = {url for adapter in ADAPTERS.values() for url in adapter.bases.values()}
    assert [url for url in bases if url in text] == []
    names = {key for adapter in ADAPTERS.values() for key in adapter.bases}
    from remotegpu_site.settings import BASE_VARIABLES

    assert set(BASE_VARIABLES) == names  # every base can be pointed elsewhere, none is invented
