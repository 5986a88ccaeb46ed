"""The one settings module. Every value comes from the environment; see docs/configuration.md."""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from remotegpu_site import env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("REMOTEGPU_VAR_DIR", BASE_DIR / "var"))

DEBUG = env.envbool("DEBUG", default=False)
SECRET_KEY = env.secret_key(VAR_DIR)
ALLOWED_HOSTS = env.envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "core",
    "accounts",
    "projects",
    "notifications",
    "runs",
    "watching",
    "fleet",
    "datasets",
    "custody",
    "delivery",
    "rentals",
    "console",
    "rest_framework",
    "drf_spectacular",
    "api",
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["api.errors.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "api.errors.handle",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "RemoteGPU API",
    "DESCRIPTION": "Runs, sweeps, custody and teardown requests. Approval of a teardown request stays human.\n\n"
    "**Authentication.** Send `Authorization: Token <token>` with every call; make a token on the dashboard's "
    "API tokens page (it acts as its person, with their roles and projects) and revoke it there. A signed-in "
    "browser session works too. `python -m remotegpu` reads the token from `REMOTEGPU_TOKEN`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "api.schema.add_error_responses"],
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "core.middleware.ContentSecurityPolicyMiddleware",
    "core.middleware.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "accounts.middleware.PasswordDutyMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "remotegpu_site.urls"
ASGI_APPLICATION = "remotegpu_site.asgi.application"
WSGI_APPLICATION = "remotegpu_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "builtins": ["core.when", "core.verdict"],
        },
    },
]

# Node transport: short connections, every wait bounded.
SSH_CONNECT_TIMEOUT = env.envfloat("SSH_CONNECT_TIMEOUT", 10)
SSH_KEEPALIVE = env.envint("SSH_KEEPALIVE", 15)
SSH_COMMAND_TIMEOUT = env.envfloat("SSH_COMMAND_TIMEOUT", 30)
AUDIT_TIMEOUT = env.envfloat("AUDIT_TIMEOUT", 90)
# The most a command's answer from a box may be (a probe of many runs is ~140 KiB a run); past it the
# command is ended and its answer is a node error. Pulls and the follow stream have bounds of their own.
NODE_ANSWER_MAX_BYTES = env.envint("NODE_ANSWER_MAX_MIB", 8) * 1024**2
if NODE_ANSWER_MAX_BYTES <= 0:
    raise ImproperlyConfigured("NODE_ANSWER_MAX_MIB must be a positive number of MiB")
LOW_FREE_BYTES = env.envint("LOW_FREE_GIB", 20) * 1024**3
LIGHT_PROBE_INTERVAL = env.envint("LIGHT_PROBE_INTERVAL", 300)
# Runs: control-side source directories may only come from these roots (colon-separated).
DEFAULT_SOURCE_ROOTS = f"{BASE_DIR / 'examples'}:{VAR_DIR / 'sources'}"
SOURCE_ROOTS = [Path(p) for p in os.environ.get("REMOTEGPU_SOURCE_ROOTS", DEFAULT_SOURCE_ROOTS).split(":") if p]
STORAGE_MARGIN_FRACTION = env.envfloat("STORAGE_MARGIN_FRACTION", 0.10)
STORAGE_MARGIN_MIN_BYTES = env.envint("STORAGE_MARGIN_MIN_MIB", 512) * 1024**2
SMOKE_TIMEOUT = env.envint("SMOKE_TIMEOUT", 600)
# The most a run's shipped source may be (the tarball): code and configs, never data (register a dataset).
SOURCE_MAX_BYTES = env.envint("SOURCE_MAX_BYTES", 256 * 1024**2)
# Staging a run's datasets onto its box (part of preflight): how long it may take, how fast it may go
# (bytes/s, 0: as fast as the link), and the authorized_keys file a source box's sshd reads.
STAGE_TIMEOUT = env.envint("STAGE_TIMEOUT", 3000)
STAGE_BYTES_PER_SECOND = env.envint("STAGE_BYTES_PER_SECOND", 0)
# A dataset staged before is hashed again whole at each preflight up to this size (a size check above it).
STAGE_REHASH_MAX_BYTES = env.envint("STAGE_REHASH_MAX_MIB", 4096) * 1024**2
NODE_AUTHORIZED_KEYS = os.environ.get("NODE_AUTHORIZED_KEYS", "~/.ssh/authorized_keys")
RUN_HEARTBEAT_SECONDS = env.envint("RUN_HEARTBEAT_SECONDS", 10)
# A person's Stop: the command gets SIGTERM and this long to checkpoint before SIGKILL. A
# stop the box could not be told of (unreachable) is re-sent by the reconciler until this deadline, then
# expires with its reason; the run goes on.
RUN_STOP_GRACE_SECONDS = env.envint("RUN_STOP_GRACE_SECONDS", 30)
RUN_STOP_DEADLINE_SECONDS = env.envint("RUN_STOP_DEADLINE_SECONDS", 1800)
if not 0 <= RUN_STOP_GRACE_SECONDS <= 3600:
    raise ImproperlyConfigured("RUN_STOP_GRACE_SECONDS must be between 0 and 3600")
# Checkpoints mirrored during the run (the wrapper's ckpt_mirror): how often it looks at ckpt/, and how
# long a newer checkpoint may wait uncopied before the lag alert where the run has no cadence of its own.
CKPT_MIRROR_POLL_SECONDS = env.envfloat("CKPT_MIRROR_POLL_SECONDS", 5)
CKPT_LAG_SECONDS = env.envint("CKPT_LAG_SECONDS", 900)
# Without a durable tier: the least time a held checkpoint stays on the box for the control host's pull.
CKPT_HOLD_SECONDS = env.envfloat("CKPT_HOLD_SECONDS", 60)
# Where a box has no durable tier, the newest checkpoint is pulled to the control host instead (at most
# CUSTODY_PULL_MAX_RATE); a pull asked for and not done by the deadline is asked for again, a failed one
# after the retry wait.
CKPT_CONTROL_ROOT = Path(os.environ.get("REMOTEGPU_CKPT_ROOT", VAR_DIR / "checkpoints"))
CKPT_PULL_DEADLINE_SECONDS = env.envint("CKPT_PULL_DEADLINE_SECONDS", 1800)
CKPT_PULL_RETRY_SECONDS = env.envint("CKPT_PULL_RETRY_SECONDS", 60)
LOG_KEEP_BYTES = env.envint("LOG_KEEP_MIB", 64) * 1024**2  # per attempt; the rest stays on the node
NODE_PYTHON = os.environ.get("NODE_PYTHON", "python3")
# Custody: where canonical copies of sealed exports live on the control side.
CUSTODY_ROOT = Path(os.environ.get("REMOTEGPU_CUSTODY_ROOT", VAR_DIR / "custody"))
METRIC_TOLERANCE = env.envfloat("METRIC_TOLERANCE", 1e-6)
# Bytes per second one pull may take from a node (0: as fast as it goes); spares a shared uplink.
CUSTODY_PULL_MAX_RATE = env.envint("CUSTODY_PULL_MAX_RATE", 0)
CUSTODY_MIRROR_TIMEOUT = env.envint("CUSTODY_MIRROR_TIMEOUT", 3600)

# DELIVER: teardown requests.
TEARDOWN_APPROVAL_HOURS = env.envint("TEARDOWN_APPROVAL_HOURS", 24)
# A run over its project's cost envelope waits this long for an approver, then must be started again.
SPEND_APPROVAL_HOURS = env.envint("SPEND_APPROVAL_HOURS", 24)
# Renting (rentals/): a create task with no progress is re-driven after RENT_CREATE_SECONDS, at most
# RENT_MAX_REDRIVES times; a created box that does not run with an SSH endpoint within RENT_BOOT_SECONDS
# fails the rent (the provider's list keeps showing it as drift); a booting box is asked every RENT_POLL_SECONDS.
RENT_CREATE_SECONDS = env.envint("RENT_CREATE_SECONDS", 300)
RENT_MAX_REDRIVES = env.envint("RENT_MAX_REDRIVES", 2)
RENT_BOOT_SECONDS = env.envint("RENT_BOOT_SECONDS", 900)
RENT_POLL_SECONDS = env.envfloat("RENT_POLL_SECONDS", 10.0)
# A rent asked for a run proves the run first on a box where no GPU bills (rentals/proving.py): a proof
# with no answer is taken again by another worker after RENT_PROVE_SECONDS, and failed at twice that.
RENT_PROVE_SECONDS = env.envint("RENT_PROVE_SECONDS", SMOKE_TIMEOUT + 420)
# A Slurm job requeued (a preemption, a node failure) waits ~120 s before it may run again: released at
# once (StartTime=now+3) unless a deployment prefers the cluster's own pace.
SLURM_RELEASE_REQUEUE_HOLD = env.envbool("SLURM_RELEASE_REQUEUE_HOLD", default=True)
# A Slurm run's preflight asks one compute node (srun --immediate): given up when none is free this long.
SLURM_PREFLIGHT_SECONDS = env.envint("SLURM_PREFLIGHT_SECONDS", 60)
# How long a sweep's cell, ready on a cluster, waits for its siblings to go as one job array before it
# goes as its own job (under RECONCILE_LAUNCH_SECONDS: the launch deadline's re-drive sends it).
SLURM_ARRAY_GATHER_SECONDS = env.envint("SLURM_ARRAY_GATHER_SECONDS", 240)
TEARDOWN_OFFLINE_WAIT = env.envint("TEARDOWN_OFFLINE_WAIT", 120)  # seconds to see a box go offline, or gone
TEARDOWN_GONE_POLL_SECONDS = env.envfloat("TEARDOWN_GONE_POLL_SECONDS", 2)  # how often a release asks the provider
# Gone means gone on two reads this far apart (a provider's 404 once, then the pod listed again), per
# provider: TEARDOWN_GONE_CONFIRM_SECONDS_RUNPOD, …_VASTAI, …_LAMBDA, …_PAPERSPACE.
TEARDOWN_GONE_CONFIRM_SECONDS = env.envfloat("TEARDOWN_GONE_CONFIRM_SECONDS", 10)
TEARDOWN_GONE_CONFIRM_BY_PROVIDER = {
    key: env.envfloat(f"TEARDOWN_GONE_CONFIRM_SECONDS_{key.upper()}", TEARDOWN_GONE_CONFIRM_SECONDS)
    for key in ("runpod", "vastai", "lambda", "paperspace")
}
# A release done by API is read again this long after: a box listed again re-opens it as still billing.
TEARDOWN_RELEASE_RECHECK_SECONDS = env.envint("TEARDOWN_RELEASE_RECHECK_SECONDS", 30)
# The hard limit of one execution (provider call + offline check), and the lease after which an
# execution whose worker vanished goes to "needs a person": always longer than the limit.
TEARDOWN_EXECUTION_TIME_LIMIT = env.envint("TEARDOWN_EXECUTION_TIME_LIMIT", 660)
TEARDOWN_EXECUTION_LEASE = env.envint("TEARDOWN_EXECUTION_LEASE", TEARDOWN_EXECUTION_TIME_LIMIT + 240)
TEARDOWN_BUSY_RETRY_SECONDS = env.envint("TEARDOWN_BUSY_RETRY_SECONDS", 10)  # another consequence executes
# An approved consequence whose box could not be measured before executing (it did not answer) is tried
# again this many times, TEARDOWN_BUSY_RETRY_SECONDS apart, then failed saying so (custody did not change).
TEARDOWN_UNCONFIRMED_RETRIES = env.envint("TEARDOWN_UNCONFIRMED_RETRIES", 6)
# An approved request no worker took (its enqueue failed: a broker outage) is enqueued again this long
# after its approval or last re-drive, at most TEARDOWN_MAX_REDRIVES times; then it fails, to be retried
# or cancelled by a person. An approved spend's lost continuation is re-driven the same way.
TEARDOWN_REDRIVE_SECONDS = env.envint("TEARDOWN_REDRIVE_SECONDS", 300)
TEARDOWN_MAX_REDRIVES = env.envint("TEARDOWN_MAX_REDRIVES", 3)
# A filed request's deep proofs (the idle scan, re-hashing copies where they live) are gathered by a task:
# it stops after this long, and a request still checking then is proved once more, then refused.
TEARDOWN_PROOF_SECONDS = env.envint("TEARDOWN_PROOF_SECONDS", CUSTODY_MIRROR_TIMEOUT + 300)
# The proof task must start within this (else its enqueue was lost: a broker outage) and is re-driven;
# once started, a box's proofs have its last proofs' time × TEARDOWN_PROOF_MARGIN (at least
# TEARDOWN_PROOF_MIN_SECONDS; TEARDOWN_PROOF_SECONDS on a box never proved) before they are re-driven.
TEARDOWN_PROOF_START_SECONDS = env.envint("TEARDOWN_PROOF_START_SECONDS", 60)
TEARDOWN_PROOF_MARGIN = env.envfloat("TEARDOWN_PROOF_MARGIN", 3.0)
TEARDOWN_PROOF_MIN_SECONDS = env.envint("TEARDOWN_PROOF_MIN_SECONDS", 120)
if TEARDOWN_PROOF_SECONDS < 60:
    raise ImproperlyConfigured("TEARDOWN_PROOF_SECONDS must leave a box at least a minute to answer")
if TEARDOWN_EXECUTION_LEASE <= TEARDOWN_EXECUTION_TIME_LIMIT:
    raise ImproperlyConfigured("TEARDOWN_EXECUTION_LEASE must be longer than TEARDOWN_EXECUTION_TIME_LIMIT")
PROVIDER_API_TIMEOUT = env.envint("PROVIDER_API_TIMEOUT", 30)
# 429 and 5xx answers are retried this many times, waiting Retry-After (capped) or a doubling backoff.
PROVIDER_API_RETRIES = env.envint("PROVIDER_API_RETRIES", 2)
PROVIDER_API_RETRY_SECONDS = env.envfloat("PROVIDER_API_RETRY_SECONDS", 1.0)
PROVIDER_API_RETRY_MAX_SECONDS = env.envfloat("PROVIDER_API_RETRY_MAX_SECONDS", 10.0)
# A provider's API base where the deployment points it elsewhere (a proxy, a stand-in); each adapter writes
# its own documented base once (providers/<name>/__init__.py), which applies where none is set here.
BASE_VARIABLES = {
    "runpod": "RUNPOD_API_BASE",
    "vastai": "VASTAI_API_BASE",
    "lambda": "LAMBDA_API_BASE",
    "paperspace": "PAPERSPACE_API_BASE",
    "runpod-graphql": "RUNPOD_GRAPHQL_BASE",  # the balance, GraphQL only
}
PROVIDER_API_BASES = {key: os.environ[name] for key, name in BASE_VARIABLES.items() if os.environ.get(name)}
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "remotegpu@localhost")
# Project webhooks: https to public addresses only, unless the deployment allows more (notifications/webhooks.py).
WEBHOOK_ALLOW_HTTP = env.envbool("WEBHOOK_ALLOW_HTTP", default=False)
WEBHOOK_ALLOW_PRIVATE = env.envbool("WEBHOOK_ALLOW_PRIVATE", default=False)
# The control host as a node (the `local` profile): for the one-person `make run` only. Its commands
# run beside the database and every secret, so a team deployment leaves it off; LOCAL_NODE_USER
# names an unprivileged OS account they run as (the worker must be able to switch to it).
LOCAL_NODE = env.envbool("REMOTEGPU_LOCAL_NODE", default=False)
LOCAL_NODE_USER = os.environ.get("REMOTEGPU_LOCAL_NODE_USER", "")
PROFILES_DIR = Path(os.environ.get("REMOTEGPU_PROFILES_DIR", BASE_DIR / "platforms" / "profiles"))

DATABASES = {"default": env.database(VAR_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.redis_url()
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "remotegpu",
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
}
# channels_redis blocks in BZPOPMIN for 5 s per receive; redis-py 8 defaults every read to a 5 s
# socket timeout, so an idle live page lost its socket every few seconds ("Timeout reading from
# …"). The read timeout must exceed the blocking receive; connecting stays bounded.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "socket_connect_timeout": 2}],
            "prefix": "remotegpu",
            "expiry": 60,
        },
    }
}

# Celery: Redis for broker and results, JSON only, late acks, bounded tasks.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Each box with live runs holds one worker thread for its watcher's life (WATCH_LIFETIME_SECONDS):
# a worker is a thread pool with room for many boxes and the other tasks. The prefork pool of two
# processes `make run` started held every launch and custody pull behind two watchers.
CELERY_WORKER_POOL = os.environ.get("CELERY_WORKER_POOL", "threads")
CELERY_WORKER_CONCURRENCY = env.envint("CELERY_WORKER_CONCURRENCY", 32)
if CELERY_WORKER_CONCURRENCY < 1:
    raise ImproperlyConfigured("CELERY_WORKER_CONCURRENCY must be at least 1")
CELERY_TASK_SOFT_TIME_LIMIT = env.envint("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = env.envint("CELERY_TASK_TIME_LIMIT", 360)
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# An unacked message (its worker died) is redelivered after this long. It must exceed the longest
# task (verify_custody: hard limit 3660 s), or a pull still running would be delivered twice; the
# reconciler (runs/reconcile.py) recovers stranded states much sooner than this.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.envint("CELERY_VISIBILITY_TIMEOUT", 3900)}
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "remotegpu")
CELERY_BEAT_SCHEDULE = {
    "light-probe-running-instances": {
        "task": "fleet.tasks.probe_running_instances",
        "schedule": float(LIGHT_PROBE_INTERVAL),
    },
}
# Watchers: one per instance with live runs, a combined probe per tick, bounded life, beat re-arms.
WATCH_TICK_SECONDS = env.envfloat("WATCH_TICK_SECONDS", 5)
WATCH_LEASE_SECONDS = env.envfloat("WATCH_LEASE_SECONDS", max(15.0, 4 * WATCH_TICK_SECONDS))
WATCH_LIFETIME_SECONDS = env.envfloat("WATCH_LIFETIME_SECONDS", 120)
# Node-side push: the wrapper's follow stream per box, polled on the node this often;
# off (WATCH_PUSH=0), pages update at each tick. Figures: docs/benchmarks.md.
WATCH_PUSH = env.envbool("WATCH_PUSH", default=True)
WATCH_PUSH_POLL = env.envfloat("WATCH_PUSH_POLL", 0.2)
# Database connections the watchers of one worker process use at once (they wait on boxes, and
# touch the database in short bursts): a worker's share of max_connections, however many boxes.
WATCH_DB_CONNECTIONS = env.envint("WATCH_DB_CONNECTIONS", 8)
if WATCH_DB_CONNECTIONS < 1:
    raise ImproperlyConfigured("WATCH_DB_CONNECTIONS must be at least 1")
# A probe must end (on the box as well) well inside the lease, or a successor starts while a hung
# probe is still out; its answer is then applied only if the lease is still held.
WATCH_PROBE_TIMEOUT = env.envfloat("WATCH_PROBE_TIMEOUT", min(30.0, WATCH_LEASE_SECONDS / 2))
if WATCH_PROBE_TIMEOUT >= WATCH_LEASE_SECONDS:
    raise ImproperlyConfigured("WATCH_PROBE_TIMEOUT must be shorter than WATCH_LEASE_SECONDS")
PRESSURE_MIN_FREE_BYTES = env.envint("PRESSURE_MIN_FREE_GIB", 2) * 1024**3
PRESSURE_MIN_FREE_FRACTION = env.envfloat("PRESSURE_MIN_FREE_FRACTION", 0.03)
CELERY_BEAT_SCHEDULE["arm-watchers"] = {
    "task": "watching.tasks.arm_watchers",
    "schedule": env.envfloat("WATCH_ARM_INTERVAL", 10),
}
# Every state that waits on a task has a deadline (runs/reconcile.py); beat re-drives or fails it.
RECONCILE_INTERVAL = env.envfloat("RECONCILE_INTERVAL", 60)
RECONCILE_PREFLIGHT_SECONDS = env.envint("RECONCILE_PREFLIGHT_SECONDS", 900)
RECONCILE_SMOKE_SECONDS = env.envint("RECONCILE_SMOKE_SECONDS", SMOKE_TIMEOUT + 240)
RECONCILE_LAUNCH_SECONDS = env.envint("RECONCILE_LAUNCH_SECONDS", 300)
RECONCILE_EXITED_SECONDS = env.envint("RECONCILE_EXITED_SECONDS", 900)
RECONCILE_CUSTODY_SECONDS = env.envint("RECONCILE_CUSTODY_SECONDS", 3900)
RECONCILE_MAX_REDRIVES = env.envint("RECONCILE_MAX_REDRIVES", 2)
CELERY_BEAT_SCHEDULE["reconcile"] = {"task": "runs.tasks.reconcile_runs", "schedule": RECONCILE_INTERVAL}
CELERY_BEAT_SCHEDULE["reconcile-custody"] = {"task": "custody.tasks.reconcile_custody", "schedule": RECONCILE_INTERVAL}
# Danger clocks alarm the project this many hours before they fire (and once when they have).
CLOCK_ALARM_HOURS = env.envints("CLOCK_ALARM_HOURS", [72, 24, 6])
CELERY_BEAT_SCHEDULE["raise-clock-alarms"] = {
    "task": "fleet.tasks.raise_clock_alarms",
    "schedule": env.envfloat("CLOCK_ALARM_INTERVAL", 300),
}
# A box that bills for nothing (idle, verified, stopped but billing) alarms after each of these many
# minutes of it (delivery/waste.py): the first is "running with no live run for more than N minutes".
WASTE_ALARM_MINUTES = env.envints("WASTE_ALARM_MINUTES", [30, 360, 1440])
# The watcher keeps what nvidia-smi says of a live run's GPUs at most this often (the run page's plot).
GPU_SAMPLE_SECONDS = env.envfloat("GPU_SAMPLE_SECONDS", 60)
CELERY_BEAT_SCHEDULE["raise-waste-alarms"] = {
    "task": "delivery.tasks.raise_waste_alarms",
    "schedule": env.envfloat("WASTE_ALARM_INTERVAL", 300),
}
# What each API platform lists under the team's keys, against the dashboard (fleet/drift.py).
CELERY_BEAT_SCHEDULE["reconcile-providers"] = {
    "task": "fleet.tasks.reconcile_providers",
    "schedule": env.envfloat("PROVIDER_RECONCILE_INTERVAL", 600),
}
# Notifications (notifications/): an outbox delivered after commit, re-driven by beat until every
# target took it or NOTIFY_MAX_ATTEMPTS ran out. Apprise channels name a variable with this prefix.
# Links in notifications start with this (e.g. https://gpu.example.org); empty: site-relative paths.
SITE_URL = os.environ.get("SITE_URL", "").rstrip("/")
NOTIFY_URL_ENV_PREFIX = os.environ.get("NOTIFY_URL_ENV_PREFIX", "REMOTEGPU_NOTIFY_")
NOTIFY_TIMEOUT = env.envfloat("NOTIFY_TIMEOUT", 10)
NOTIFY_MAX_ATTEMPTS = env.envint("NOTIFY_MAX_ATTEMPTS", 5)
NOTIFY_RETRY_SECONDS = env.envint("NOTIFY_RETRY_SECONDS", 60)
NOTIFY_CLAIM_SECONDS = env.envint("NOTIFY_CLAIM_SECONDS", 300)
CELERY_BEAT_SCHEDULE["redeliver-notifications"] = {
    "task": "notifications.tasks.redeliver_notifications",
    "schedule": env.envfloat("NOTIFY_REDRIVE_INTERVAL", 60),
}
CELERY_BEAT_SCHEDULE["warn-budget-forecasts"] = {
    "task": "runs.tasks.warn_budget_forecasts",
    "schedule": env.envfloat("BUDGET_WARN_INTERVAL", 600),
}
CELERY_BEAT_SCHEDULE["reconcile-rentals"] = {"task": "rentals.tasks.reconcile_rentals", "schedule": RECONCILE_INTERVAL}
CELERY_BEAT_SCHEDULE["expire-spend-requests"] = {"task": "runs.tasks.expire_spend_requests", "schedule": 300.0}
CELERY_BEAT_SCHEDULE["expire-teardown-requests"] = {
    "task": "delivery.tasks.expire_teardown_requests",
    "schedule": 300.0,
}
CELERY_BEAT_SCHEDULE["flag-stuck-teardowns"] = {
    "task": "delivery.tasks.flag_stuck_teardowns",
    "schedule": float(max(5, min(60, TEARDOWN_EXECUTION_LEASE // 4))),
}
HEALTH_PING_TIMEOUT = env.envfloat("HEALTH_PING_TIMEOUT", 1.0)
# An open live socket re-checks its user's session and access this often (seconds) before sending.
LIVE_REAUTH_SECONDS = env.envfloat("LIVE_REAUTH_SECONDS", 5)
# Health is measured out of band by a worker every HEALTH_INTERVAL s; pages show the last result.
HEALTH_INTERVAL = env.envfloat("HEALTH_INTERVAL", 5)
HEALTH_STALE_SECONDS = env.envfloat("HEALTH_STALE_SECONDS", 4 * HEALTH_INTERVAL + HEALTH_PING_TIMEOUT)
CELERY_BEAT_SCHEDULE["record-health"] = {
    "task": "runs.tasks.record_health",
    "schedule": HEALTH_INTERVAL,
    "options": {"expires": HEALTH_INTERVAL},
}

# Sign-in as Django's ModelBackend does it; roles are per project (projects.roles): has_perm(perm,
# project) asks the membership, and no global group or user permission grants a role any more.
AUTHENTICATION_BACKENDS = ["projects.roles.ProjectRoleBackend"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
LOGIN_FAILURE_LIMIT = env.envint("LOGIN_FAILURE_LIMIT", 5)
LOGIN_ADDRESS_FAILURE_LIMIT = env.envint("LOGIN_ADDRESS_FAILURE_LIMIT", 4 * LOGIN_FAILURE_LIMIT)
LOGIN_FAILURE_WINDOW = env.envint("LOGIN_FAILURE_WINDOW", 300)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns when it is missing
# Serve straight from the finders: no collectstatic step in the two-command setup.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Security headers. The CSP allows no inline script on any page, in every mode.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
CSRF_FAILURE_VIEW = "core.views.csrf_failure"  # JSON under /api/, like every other API error
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
if not DEBUG:
    # Behind TLS in production; set SECURE_COOKIES=0 only for plain-HTTP loopback use.
    SESSION_COOKIE_SECURE = env.envbool("SECURE_COOKIES", default=True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
    SECURE_HSTS_SECONDS = env.envint("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"refusals": {"()": "core.logs.RefusalsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        # An expected 403 or 404 is one line (who was refused what), never a traceback.
        "django.request": {"filters": ["refusals"]},
    },
}
