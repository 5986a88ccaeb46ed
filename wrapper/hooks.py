"""A platform's hooks on the box: the proxy hook, its environment and its interpreter, for the child only.

The spec's `hooks` say what the platform (and the instance) want; this measures what they give here: a
proxy file that is not there is reported as not found, never assumed. The proxy hook is sourced in a
throw-away shell whose resulting environment is compared with the one it started from: what it added is
given to the training child (and the smoke), never to the wrapper, and the variables it names under
`unset` are removed from the wrapper's own environment, so closeout and every other step run without it.
"""

import os
import shutil
import subprocess

from .files import expand

# Variables a shell sets for itself, never what a hook exports.
SHELL_OWN = {"_", "SHLVL", "PWD", "OLDPWD", "PS1", "PS2", "PS4", "IFS", "OPTIND"}


def hook_value(value, spec):
    """$CACHE (the project's cache/ on this node) and $HOME are the only names a hook value may use."""
    if value == "$CACHE" or value.startswith("$CACHE/"):
        return os.path.join(spec.cache, value[len("$CACHE/") :]) if value != "$CACHE" else spec.cache
    if value == "$HOME" or value.startswith(("$HOME/", "~/")):
        return expand(value)
    return value


def sourced(path, base_env):
    """What sourcing `path` in a shell adds or changes (the path is an argument, not code): the shell's
    environment just before and just after, so what the shell itself sets (PATH, PWD) is not counted."""
    shell = shutil.which("bash") or "/bin/sh"
    script = 'env -0; printf "\\0%s\\0" "--remotegpu-hook--"; . "$1" >/dev/null 2>&1; env -0'
    try:
        done = subprocess.run([shell, "-c", script, "hook", path], env=base_env, stdout=subprocess.PIPE, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    before, sep, after = done.stdout.partition(b"\0--remotegpu-hook--\0")
    if not sep:
        return None
    before, after = _environment(before), _environment(after)
    return {name: value for name, value in after.items() if before.get(name) != value and name not in SHELL_OWN}


def _environment(data):
    pairs = (item.decode(errors="replace").partition("=") for item in data.split(b"\0"))
    return {name: value for name, sep, value in pairs if sep}


def hook_env(spec, base_env):
    """(what the child's environment gains, the report of what ran) for the spec's hooks on this box."""
    hooks = spec.hooks or {}
    interpreter = hooks.get("interpreter")
    report = {"proxy": None, "env": {}, "interpreter": interpreter}
    if interpreter:
        report["interpreter_found"] = os.path.isfile(expand(interpreter))
    added = {}
    proxy = hooks.get("proxy")
    if proxy:
        exports = {name: hook_value(value, spec) for name, value in (proxy.get("exports") or {}).items()}
        found = None
        if proxy.get("source"):
            path = expand(proxy["source"])
            gained = sourced(path, base_env) if os.path.isfile(path) else None
            found = gained is not None
            exports.update(gained or {})
        added.update(exports)
        # Names only: a proxy URL may carry a password.
        report["proxy"] = {"source": proxy.get("source"), "found": found, "exported": sorted(exports)}
    for name, value in (hooks.get("env") or {}).items():
        added[name] = report["env"][name] = hook_value(value, spec)
    return added, report


def drop_proxy_from_wrapper(spec):
    """The proxy's variables are the child's: the wrapper and what it runs after the child go without them."""
    proxy = (spec.hooks or {}).get("proxy") or {}
    for name in proxy.get("unset") or []:
        os.environ.pop(name, None)


def hook_interpreter(spec):
    """The platform's (or instance's) interpreter when this box has it, else None."""
    path = (spec.hooks or {}).get("interpreter")
    return expand(path) if path and os.path.isfile(expand(path)) else None


def make_cache(spec):
    """The project's cache/ and the directories the hooks point into it (HF_HOME, PIP_CACHE_DIR, …)."""
    if not spec.cache:
        return
    os.makedirs(spec.cache, exist_ok=True)
    for value in ((spec.hooks or {}).get("env") or {}).values():
        path = hook_value(value, spec)
        if path.startswith(spec.cache + os.sep):
            os.makedirs(path, exist_ok=True)
