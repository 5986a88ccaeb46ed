"""Judging the environment a run resolved to on its node (the wrapper's preflight report)."""

import re

ALTERNATIVES_HINT = "create or pick a named environment (conda create -n <name> …, or python -m venv <dir>)"


def environment_problems(report: dict, persistent: bool) -> list[str]:
    """Reasons to refuse the launch; the environment is part of the run's identity."""
    if not report:
        return ["The node did not report the run's environment."]
    if report.get("error"):
        available = report.get("available") or {}
        return [
            f"Environment: {report['error']}. On this box: conda {available.get('conda') or 'none'}, "
            f"venvs {available.get('venvs') or 'none'}."
        ]
    if report.get("conda_base") and persistent:
        available = report.get("available") or {}
        named = [name for name in available.get("conda", []) if name != "base"] + available.get("venvs", [])
        choices = ", ".join(named) if named else ALTERNATIVES_HINT
        return [
            f"Refusing deep-learning work in conda base ({report['interpreter']}) on a persistent machine: "
            f"base is shared by everything on the box. Use a named environment instead: {choices}."
        ]
    return []


def environment_warnings(report: dict, persistent: bool) -> list[str]:
    pin, torch = report.get("torch_pin"), report.get("torch")
    if pin and not persistent and torch and torch.split("+")[0] not in pin:
        return [
            f"requirements.txt asks for {pin!r} but the image's environment has torch {torch}: installing it "
            "would replace the image's torch build (and its CUDA match). Keep the image's torch on a rental."
        ]
    return []


SHA256 = re.compile(r"^[0-9a-f]{64}\Z")


def identity(report: dict) -> dict:
    keys = ("requested", "interpreter", "sys_executable", "python", "torch", "cuda", "conda_base")
    found = {key: report.get(key) for key in keys}
    # What is installed, as one hash (every distribution and its version), and the run's lock file:
    # two environments with the same torch but another numpy are not the same environment.
    for key in ("packages_sha256", "lock_sha256"):
        value = report.get(key)
        found[key] = value if isinstance(value, str) and SHA256.match(value) else None
    count = report.get("packages")
    found["packages"] = count if isinstance(count, int) and not isinstance(count, bool) and 0 <= count < 10**6 else None
    lock = report.get("lock_file")
    found["lock_file"] = lock[:60] if isinstance(lock, str) else None
    # The GPU models torch sees (a comparison lists a different model as a variable), bounded: box input.
    names = report.get("gpu_names")
    if isinstance(names, list):
        found["gpu_names"] = [str(name)[:100] for name in names[:64] if isinstance(name, str)]
    return found
