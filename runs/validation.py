"""The rules a run's fields obey: one set, used by the run form, the API and sweeps.

Each `check_*` takes a typed value (what the model stores) and returns it, or raises
ValidationError with the message a person reads. `relation_problems` checks fields against each
other and the world (the instance's project and host key, the source on the control host).
Adding a run field means the model and, if it has a rule, one function here.
"""

import re
import shlex
from pathlib import PurePosixPath

import yaml
from django.core.exceptions import ValidationError

from datasets.models import Dataset, DatasetState
from fleet.control_host import runs_here_problem
from fleet.credentials import grant_problems, secrets_named
from fleet.models import Instance
from platforms.layout import node_path_problem
from runs import sources, sweeps
from runs.models import SourceKind

CONTROL_CHARS = "".join(chr(code) for code in range(32))
MAX_GPU = 63


def _has_control(text: str) -> bool:
    return any(char in CONTROL_CHARS for char in text)


def parse_command(text: str) -> list[str]:
    """A command line as typed in the form, split as a shell would (no shell ever runs it)."""
    if _has_control(text):
        raise ValidationError("The command may not contain control characters or newlines.")
    try:
        return check_command(shlex.split(text))
    except ValueError as exc:
        raise ValidationError(f"The command cannot be parsed: {exc}.") from None


def check_command(argv: list[str]) -> list[str]:
    if not argv:
        raise ValidationError("Give a command.")
    if any(_has_control(arg) for arg in argv):
        raise ValidationError("The command may not contain control characters or newlines.")
    return argv


def check_config_path(path: str) -> str:
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or _has_control(path):
        raise ValidationError("The config path is relative to the source directory, without '..'.")
    return path


def check_data_paths(paths: list[str]) -> list[str]:
    paths = [path.strip() for path in paths if path.strip()]
    problems = [problem for problem in map(node_path_problem, paths) if problem]
    if problems:
        raise ValidationError(problems)
    return paths


STEP_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}\Z")


def check_step_key(value: str) -> str:
    value = value.strip()
    if value and not STEP_KEY.match(value):
        raise ValidationError("A checkpoint's top-level key: letters, digits and _, e.g. train_step.")
    return value


def check_environment(value: str) -> str:
    value = value.strip()
    if value and (_has_control(value) or ".." in PurePosixPath(value).parts or value.startswith("-")):
        raise ValidationError("An interpreter path, a venv directory or a conda env name, without '..'.")
    return value


def check_manifest_path(path: str) -> str:
    path = path.strip()
    problem = node_path_problem(path) if path else None
    if problem:
        raise ValidationError(problem)
    return path


def parse_gpus(text: str) -> list[int]:
    text = text.strip()
    if not text:
        return []
    try:
        gpus = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValidationError("GPUs are comma-separated indices such as 0,1.") from None
    return check_gpus(gpus)


def check_gpus(gpus: list[int]) -> list[int]:
    if any(gpu < 0 or gpu > MAX_GPU for gpu in gpus) or len(set(gpus)) != len(gpus):
        raise ValidationError(f"GPU indices are distinct numbers from 0 to {MAX_GPU}.")
    return gpus


SECRET_NAME = re.compile(r"[-a-zA-Z0-9_]{1,60}")
MAX_SECRETS = 20


def parse_secret_names(text: str) -> list[str]:
    """Run secrets as typed in the form: names separated by commas, spaces or lines."""
    return check_secret_names([name for name in re.split(r"[\s,]+", text) if name])


def check_secret_names(names: list[str]) -> list[str]:
    return _check_names(names, "run secret")


def check_dataset_names(names: list[str]) -> list[str]:
    return _check_names(names, "dataset")


def _check_names(names: list[str], what: str) -> list[str]:
    bad = [name for name in names if not SECRET_NAME.fullmatch(name)]
    if bad:
        raise ValidationError(f"{bad[0][:60]!r} is not a {what}'s name (letters, digits, '-' and '_').")
    if len(names) > MAX_SECRETS or len(set(names)) != len(names):
        raise ValidationError(f"At most {MAX_SECRETS} {what}s, each named once.")
    return names


def secret_problem(names: list[str], project) -> str | None:
    """Each named run secret is registered and granted to the project (its value is read only at launch)."""
    problems = grant_problems(secrets_named(names), project)
    return problems[0] if problems else None


def parse_dataset_names(text: str) -> list[str]:
    """Datasets as typed in the form: names separated by commas, spaces or lines."""
    return check_dataset_names([name for name in re.split(r"[\s,]+", text) if name])


def dataset_problem(names: list[str], project) -> str | None:
    """Each named dataset is the project's and ready (hashed): its roster is what preflight stages."""
    known = {d.name: d for d in Dataset.objects.filter(project=project, name__in=names)}
    for name in names:
        if name not in known:
            return f"{project.name} has no dataset named {name} (register it on the project's Datasets page)."
        if known[name].state != DatasetState.READY:
            return f"Dataset {name} is {known[name].get_state_display()}: it can be bound once it is ready."
    return None


def parse_box_names(value: str) -> list[str]:
    """Box names, comma-separated, in the order given, each once."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    check_box_names(names)
    return list(dict.fromkeys(names))


def check_box_names(names: list[str]) -> list[str]:
    if len(names) > 20 or any(len(name) > 100 for name in names):
        raise ValidationError("At most 20 boxes, each name at most 100 characters.")
    return names


def candidate_problem(names: list[str], project, instance) -> str | None:
    """Boxes a run may continue on by itself: the project's own, live, none of them the run's box or the
    control host (no person is there to be an administrator when it happens)."""
    boxes = {box.name: box for box in Instance.objects.filter(project=project, name__in=names)}
    unknown = [name for name in names if name not in boxes]
    if unknown:
        return f"Not a box of {project.name}: {', '.join(unknown)}."
    for box in boxes.values():
        if instance is not None and box.pk == instance.pk:
            return f"{box.name} is the run's own box: list the boxes it may continue on instead."
        if box.profile.is_local:
            return f"{box.name} is the control host: a run never moves there by itself."
        if box.state == "released":
            return f"{box.name} is released."
    return None


def box_problem(box, user) -> str | None:
    """Why a run may not be made on box, as its own box or as another box of it (a node of a run over
    several boxes), or None: one rule for both (a released peer box, or one whose host key nobody
    confirmed, was once accepted through the API)."""
    if box.state == "released":
        return f"{box.name} is released: there is no box left to run on."
    if box.profile.is_local:
        return runs_here_problem(user)
    if box.pinned_host_key is None:
        return f"Confirm this instance's host key first (test its connection): {box.name}."
    return None


def relation_problems(data: dict, user) -> dict[str, str]:
    """Field -> problem for rules across fields (user: who makes the run); resolves a git source's commit."""
    problems = {}
    project, instance, kind = data.get("project"), data.get("instance"), data.get("source_kind")
    if project and instance and instance.project_id != project.pk:
        problems["instance"] = f"{instance.name} belongs to another project."
    elif instance and (refused := box_problem(instance, user)):
        problems["instance"] = refused
    if project and data.get("secrets") and (refused := secret_problem(data["secrets"], project)):
        problems["secrets"] = refused
    if project and data.get("datasets") and (refused := dataset_problem(data["datasets"], project)):
        problems["datasets"] = refused
    if (
        project
        and data.get("move_candidates")
        and (refused := candidate_problem(data["move_candidates"], project, instance))
    ):
        problems["move_candidates"] = refused
    path = data.get("source_path", "")
    if kind in (SourceKind.LOCAL_DIR, SourceKind.GIT) and path:
        try:
            root = sources.confined_source(path)
            if kind == SourceKind.GIT:
                data["source_commit"] = sources.resolve_commit(root, data.get("source_commit") or "HEAD")
        except sources.SourceError as exc:
            problems["source_path"] = str(exc)
    elif kind == SourceKind.NODE_PATH and path:
        problem = node_path_problem(path)
        if problem:
            problems["source_path"] = problem
    return problems


def check_config_overrides(value, source_kind: str, source_path: str, config_path: str) -> dict:
    """Overrides of the run's config (a run "like" another with lr changed): the merged config is
    shipped in the source tarball, so its config hash is its own; keys must be in the base config."""
    if not value:
        return {}
    if source_kind != SourceKind.LOCAL_DIR:
        raise ValidationError("Config overrides need a source directory on the control host (merged into its tarball).")
    try:
        text = (sources.confined_source(source_path) / config_path).read_text()
        base = yaml.safe_load(text)
    except (OSError, yaml.YAMLError, sources.SourceError) as exc:
        raise ValidationError(f"The base config cannot be read: {exc}") from None
    if not isinstance(base, dict):
        raise ValidationError("The base config is not a mapping of keys to values.")
    try:
        overrides = sweeps.parse_overrides(value, base)
        sweeps.merged_config(text, overrides)  # refused here, not at launch: a block value, say
    except sweeps.SweepError as exc:
        raise ValidationError(str(exc)) from None
    return overrides
