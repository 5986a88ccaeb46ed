"""A box's hooks: its platform's, with the instance's overrides over them (pure).

An instance may override any hook: `proxy` and `interpreter` replace the platform's (null removes
it), `env` is merged name by name (a null value removes that name). What the wrapper measured when it
applied them (a proxy file found or not, what it exported) is the run's record; its SHA-256 over the
canonical JSON is the run's hooks identity.
"""

import hashlib
import json
import re

import yaml

from platforms.schema import HOOKS, PROXY_HOOK, MapOf, Optional, ProfileError, validate

OVERRIDE_KEYS = ("proxy", "env", "interpreter")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
HOOK_LIMIT = 4096  # the overrides' YAML at most


class HookError(ValueError):
    """An instance's hook overrides are not what the hooks schema allows; the message names the field."""


def parse_overrides(text: str) -> dict:
    """An operator's YAML of overrides, checked: {} for nothing; HookError naming the field otherwise."""
    if not text.strip():
        return {}
    if len(text) > HOOK_LIMIT:
        raise HookError(f"Hook overrides are at most {HOOK_LIMIT} characters.")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HookError(f"Not YAML: {exc}") from None
    return check_overrides(value)


def check_overrides(value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HookError("Hook overrides are a mapping of proxy, env and interpreter.")
    unknown = sorted(set(value) - set(OVERRIDE_KEYS))
    if unknown:
        raise HookError(f"{unknown[0]}: not a hook (proxy, env, interpreter).")
    spec = {"proxy": Optional(PROXY_HOOK), "env": MapOf(Optional(str)), "interpreter": Optional(str)}
    for key, item in value.items():
        try:
            validate(item, spec[key], "instance hooks", key)
        except ProfileError as exc:
            raise HookError(f"{exc.field}: {exc.problem}") from None
    for name in value.get("env") or {}:
        if not ENV_NAME.fullmatch(str(name)) or str(name).startswith("REMOTEGPU_"):
            raise HookError(f"env.{name}: an environment variable name (letters, digits, _), not REMOTEGPU_*.")
    interpreter = value.get("interpreter")
    if interpreter and (not interpreter.startswith(("/", "$HOME/", "~/")) or ".." in interpreter.split("/")):
        raise HookError("interpreter: an absolute path on the box (or under $HOME/), without '..'.")
    return value


def effective(platform: dict, overrides: dict) -> dict:
    """The hooks a box applies: the platform's, each overridden where the instance says."""
    hooks = {"proxy": platform["proxy"], "env": dict(platform["env"]), "interpreter": platform["interpreter"]}
    for key in ("proxy", "interpreter"):
        if key in overrides:
            hooks[key] = overrides[key]
    for name, value in (overrides.get("env") or {}).items():
        if value is None:
            hooks["env"].pop(name, None)
        else:
            hooks["env"][name] = value
    validate(hooks, HOOKS, "effective hooks")
    return hooks


def identity(record: dict) -> str:
    """SHA-256 of what ran (canonical JSON): two runs with different hooks have different identities."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
