"""Registered credentials: an env-var name or a key-file path on the workers, never the secret.

The value is read on the worker at the moment of use and goes straight to paramiko (or into one
provider request's Authorization header). An instance uses a credential only while it is granted to
the instance's project: checked here, at every use, not only when the instance was saved.
"""

import io
import os
import re
from pathlib import Path

import paramiko

from node.transport import CredentialError

ENV_REFERENCE = re.compile(r"env:([A-Za-z_][A-Za-z0-9_]*)")
# The control plane's own secrets are never a box's credential, whoever registers them.
CONTROL_PLANE_ENV = re.compile(
    r"(DJANGO_)?SECRET_KEY|DATABASE_URL|REDIS_URL|CHANNEL_REDIS_URL|CELERY_\w*|EMAIL_HOST_PASSWORD|REMOTEGPU_\w*"
)
KEY_MATERIAL = re.compile(  # MULTILINE: key material on any line of what was pasted
    r"-----BEGIN|PRIVATE KEY|^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-)\s|^[A-Za-z0-9+/=]{60,}$", re.MULTILINE
)
PUBLIC_KEY_TYPE = re.compile(r"ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)")
PUBLIC_KEY_DATA = re.compile(r"[A-Za-z0-9+/]{40,16384}={0,2}")
PASTED_KEY = (
    "This looks like key material. Never paste a key: give env:NAME (an environment variable "
    "set on the workers) or the absolute path of a key file on the workers."
)


def reference_problem(reference: str) -> str | None:
    """Why reference is not an acceptable credential reference, or None."""
    text = reference.strip()
    if KEY_MATERIAL.search(text) or "\n" in reference:
        return PASTED_KEY
    match = ENV_REFERENCE.fullmatch(text)
    if match and CONTROL_PLANE_ENV.fullmatch(match.group(1)):
        return f"{match.group(1)} is one of RemoteGPU's own settings, not a credential for a box."
    if match:
        return None
    if text.startswith(("/", "~/")) and not re.search(r"[\s\x00-\x1f]", text):
        return None
    return (
        "Use env:NAME (an environment variable on the workers) or an absolute key-file path such as ~/.ssh/id_ed25519."
    )


def _key_from_text(text: str) -> paramiko.PKey:
    for key_class in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return key_class.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    raise CredentialError("the referenced environment variable holds no private key paramiko can read")


def resolve_auth(reference: str) -> dict:
    """paramiko connect() arguments for a reference: {"pkey": …} or {"key_filename": …}."""
    text = reference.strip()
    match = ENV_REFERENCE.fullmatch(text)
    where = f"key file {Path(text).expanduser()}"
    if match:
        value = os.environ.get(match.group(1))
        if not value:
            raise CredentialError(f"environment variable {match.group(1)} is not set on this worker")
        if "PRIVATE KEY" in value:
            return {"pkey": _key_from_text(value)}
        # Never echo a variable's value: it may be any secret of the worker (DATABASE_URL, …).
        text, where = value.strip(), f"the key path in environment variable {match.group(1)}"
    path = Path(text).expanduser()
    if not path.is_file():
        raise CredentialError(f"{where} does not exist on this worker")
    return {"key_filename": str(path)}


def public_key_of(credential) -> str:
    """The SSH key's public half ("ssh-ed25519 AAAA…"), given to a provider so a rented box lets us in.
    From the private key where paramiko reads it, else from the key file's `.pub` beside it (a key with
    a passphrase). CredentialError when neither is there: never the key's bytes in what it says."""
    auth = resolve_auth(credential.reference)
    key = auth.get("pkey")
    if key is None:
        path = Path(auth["key_filename"])
        try:
            key = paramiko.PKey.from_path(path)
        except (paramiko.SSHException, ValueError, TypeError, OSError):  # TypeError: it has a passphrase
            public = Path(f"{path}.pub")
            line = public.read_text(errors="replace").split() if public.is_file() else []
            if len(line) >= 2 and PUBLIC_KEY_TYPE.fullmatch(line[0]) and PUBLIC_KEY_DATA.fullmatch(line[1]):
                return f"{line[0]} {line[1]}"
            raise CredentialError(
                f"the public half of SSH key {credential.name} cannot be read on this worker "
                "(a key with a passphrase needs its .pub file beside it)"
            ) from None
    return f"{key.get_name()} {key.get_base64()}"


def _granted(instance, credential, what: str):
    if credential is None:
        raise CredentialError(f"no {what} is chosen for instance {instance.name}")
    if not credential.granted_to(instance.project_id):
        raise CredentialError(
            f"credential {credential.name} is no longer granted to this instance's project; "
            "an administrator grants it on the Credentials page, or choose another"
        )
    return credential


def ssh_auth(instance) -> dict:
    """paramiko connect() arguments for the SSH key the instance's project may use."""
    return resolve_auth(_granted(instance, instance.credential, "SSH key").reference)


def provider_key(instance) -> str:
    """The provider API key's value, read from the worker's environment at the moment of use."""
    return api_key_of(_granted(instance, instance.api_credential, "provider API key"))


def api_key_of(credential) -> str:
    """A provider credential's key, read from the worker's environment (reconciliation lists by key)."""
    match = ENV_REFERENCE.fullmatch(credential.reference)
    value = os.environ.get(match.group(1)) if match else None
    if not value:
        raise CredentialError(f"the API key of credential {credential.name} is not set on this worker")
    return value


SECRET_MIN_LENGTH = 8  # a shorter value would mask ordinary words out of every log line


def export_name(credential) -> str:
    """The variable a run secret is given to the command as: its `export_as`, else env:NAME's NAME."""
    match = ENV_REFERENCE.fullmatch(credential.reference.strip())
    return credential.export_as or (match.group(1) if match else credential.name.upper().replace("-", "_"))


def secrets_named(names: list[str]) -> list:
    """The run secrets of these names as registered credentials, in order; a name nobody registered stays a name."""
    # Here, not at the top: the SSH side of this module is used where no Django is set up (bench/).
    from fleet.models import Credential, CredentialKind

    named = {c.name: c for c in Credential.objects.filter(kind=CredentialKind.RUN_SECRET, name__in=names)}
    return [named.get(name) or name for name in names]


def secret_names(run) -> list[str]:
    """The variables the run's secrets are exported as (names only: what a spec may hold)."""
    return sorted(export_name(c) for c in secrets_named(run.secrets) if not isinstance(c, str))


def grant_problems(credentials: list, project) -> list[str]:
    """Why these secrets may not be named by a run of project: not registered, or not granted to it."""
    problems = []
    for credential in credentials:
        if isinstance(credential, str):
            problems.append(
                f"No run secret named {credential} is registered (an administrator registers it on the "
                "Credentials page)."
            )
        elif not credential.granted_to(project.pk):
            problems.append(
                f"Run secret {credential.name} is not granted to {project.name}; an administrator grants it."
            )
    return problems


def _value(credential) -> str:
    return os.environ.get(ENV_REFERENCE.fullmatch(credential.reference.strip()).group(1), "")


def secret_value_of(credential) -> str:
    """A run secret's value as this worker reads it, whatever its grants ("" when unset): for masking
    what a run sends back, never for giving it to a run (run_secret_values checks the grants)."""
    match = ENV_REFERENCE.fullmatch(credential.reference.strip())
    return os.environ.get(match.group(1), "") if match else ""


def _problems(credentials: list, project) -> list[str]:
    problems = grant_problems(credentials, project)
    for credential in credentials if not problems else []:
        value = _value(credential)
        if not value:
            problems.append(f"run secret {credential.name} is not set on this worker ({credential.reference})")
        elif len(value) < SECRET_MIN_LENGTH:
            problems.append(f"run secret {credential.name} is shorter than {SECRET_MIN_LENGTH} characters")
    return problems


def secret_problems(run) -> list[str]:
    """Why the run's secrets cannot be given to it now (unknown, not granted, not set on this worker)."""
    return _problems(secrets_named(run.secrets), run.project)


def run_secret_values(run) -> dict[str, str]:
    """{exported name: value}, read from the worker's environment at the moment of use; CredentialError
    naming the first secret that is unknown, no longer granted or unset. Never put in a message."""
    credentials = secrets_named(run.secrets)
    problems = _problems(credentials, run.project)
    if problems:
        raise CredentialError(problems[0])
    return {export_name(credential): _value(credential) for credential in credentials}
