"""Read settings from the environment; a bad value stops start-up with a clear message."""

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from wrapper.digits import ascii_int

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}
DATABASE_SCHEMES = {"sqlite", "postgres", "postgresql", "pgsql"}


def envbool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None


def envfloat(name: str, default: float, minimum: float | None = 0.0) -> float:
    """A number (seconds, a fraction); negative values are refused unless minimum is None."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")) or (minimum is not None and value < minimum):
        raise ImproperlyConfigured(f"{name}={raw!r} is out of range (a finite number ≥ {minimum})")
    return value


def secret(name: str) -> str | None:
    """A secret from NAME, or from the file NAME_FILE points at (Docker/Kubernetes secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE cannot be read: {exc.strerror}") from None
    return os.environ.get(name)


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def secret_key(var_dir: Path) -> str:
    """SECRET_KEY from the environment, else a key generated once into var/ (never committed)."""
    from_env = secret("SECRET_KEY")
    if from_env:
        return from_env
    key_file = var_dir / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    var_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # O_EXCL: two processes starting together must not write two different keys.
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return key_file.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


def database(var_dir: Path) -> dict:
    """DATABASE_URL (PostgreSQL or SQLite); default a SQLite file under var/."""
    raw = (secret("DATABASE_URL") or "").strip()
    if not raw:
        var_dir.mkdir(parents=True, exist_ok=True)
        config = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(var_dir / "remotegpu.sqlite3")}
    else:
        scheme = raw.split("://", 1)[0].lower() if "://" in raw else ""
        if scheme not in DATABASE_SCHEMES:
            shown = scheme or raw.split("/", 1)[0][:20]
            raise ImproperlyConfigured(
                f"DATABASE_URL has an unsupported scheme {shown!r}: use postgres://user@host:5432/name "
                "or sqlite:////absolute/path.sqlite3"
            )
        try:
            config = dj_database_url.parse(raw)
        except ValueError as exc:
            raise ImproperlyConfigured(f"DATABASE_URL cannot be parsed: {exc}") from None
        if not config.get("NAME"):
            raise ImproperlyConfigured("DATABASE_URL names no database (add /<name> at the end)")
    if config["ENGINE"].endswith("sqlite3"):
        # A file-backed test database lets a real Celery worker process see the test's rows.
        config["TEST"] = {"NAME": str(var_dir / "test.sqlite3")}
        config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    else:
        config["CONN_MAX_AGE"] = envint("DATABASE_CONN_MAX_AGE", 60)
        config["CONN_HEALTH_CHECKS"] = True
    return config


def redis_url() -> str:
    url = (secret("REDIS_URL") or "redis://127.0.0.1:6379/0").strip()
    if not url.startswith(("redis://", "rediss://", "unix://")):
        scheme = url.split("://", 1)[0] if "://" in url else "no scheme"
        raise ImproperlyConfigured(f"REDIS_URL must start with redis://, rediss:// or unix:// (got {scheme!r})")
    return url


def envints(name: str, default: list[int]) -> list[int]:
    """Comma-separated positive integers, largest first (e.g. "72,24,6")."""
    values = []
    for item in envlist(name, [str(value) for value in default]):
        if not ascii_int(item):
            raise ImproperlyConfigured(f"{name}: {item!r} is not a positive whole number")
        values.append(ascii_int(item))
    return sorted(set(values), reverse=True)
