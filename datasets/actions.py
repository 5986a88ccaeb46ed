"""Dataset state changes: registering one (hashed on the control host now, or on its box by a task) and
recording what its box answered. Each is one transaction with its audit entry."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from core.paths import OutsideRoots, confined_directory
from datasets import roster as rosters
from datasets.models import Dataset, DatasetSource, DatasetState
from platforms.layout import node_path_problem
from projects.roles import require


def registration_problems(project, name, source_kind, source_path, source_instance, roster) -> dict[str, str]:
    """Field -> why, for everything that can be known without a box: nothing is saved while any remain."""
    problems = {}
    if Dataset.objects.filter(project=project, name=name).exists():
        problems["name"] = f"{project.name} already has a dataset named {name}."
    if source_kind == DatasetSource.CONTROL:
        try:
            confined_directory(source_path, settings.SOURCE_ROOTS)
        except OutsideRoots as exc:
            problems["source_path"] = str(exc)
        if source_instance is not None:
            problems["source_instance"] = "A control-host dataset names no box."
    else:
        problem = node_path_problem(source_path) if source_path else "Give the dataset's directory on the box."
        if problem:
            problems["source_path"] = problem
        if source_instance is None:
            problems["source_instance"] = "Name the box that holds it."
        elif source_instance.project_id != project.pk:
            problems["source_instance"] = f"{source_instance.name} belongs to another project."
        elif not source_instance.profile.is_local and source_instance.pinned_host_key is None:
            problems["source_instance"] = "Confirm this box's host key first (test its connection)."
    if roster is not None:
        try:
            rosters.check(roster)
        except rosters.RosterError as exc:
            problems["roster"] = str(exc)
    return problems


def do_register_dataset(project, name, source_kind, source_path, source_instance=None, roster=None, *, actor):
    """A dataset of project. A control-host directory is hashed here and compared with a roster given;
    a box's is hashed there (`scan_dataset`). ValidationError naming the field, and nothing saved, else."""

    require(actor, "projects.operate", project)
    problems = registration_problems(project, name, source_kind, source_path, source_instance, roster)
    if problems:
        raise ValidationError(problems)
    declared = rosters.check(roster) if roster is not None else None
    dataset = Dataset(project=project, name=name, source_kind=source_kind, source_instance=source_instance)
    dataset.source_path, dataset.created_by = source_path, actor
    if declared is not None:
        dataset.roster = declared  # a box's: what its scan must match
    if source_kind == DatasetSource.CONTROL:
        root = confined_directory(source_path, settings.SOURCE_ROOTS)
        try:
            found = rosters.of_directory(root)
        except (rosters.RosterError, OSError) as exc:
            raise ValidationError({"source_path": str(exc)}) from None
        difference = rosters.first_difference(declared, found) if declared is not None else None
        if difference:
            raise ValidationError({"roster": f"The roster does not match the files: {difference}."})
        dataset.source_path = str(root)
        _set_roster(dataset, found)
    what = (
        f"{dataset.file_count} files, {dataset.roster_sha256[:12]}" if dataset.roster_sha256 else "hashing on its box"
    )
    try:
        with transaction.atomic(durable=True):
            dataset.save()
            record(
                AuditAction.DATASET_REGISTERED,
                f"Dataset {dataset} registered ({what})",
                actor=actor,
                project=project,
                instance=source_instance,
                dataset=name,
                roster_sha256=dataset.roster_sha256,
            )
            if dataset.state == DatasetState.SCANNING:
                after_commit("datasets.tasks.scan_dataset", dataset.pk)
    except IntegrityError:  # the same name, registered by another request since the check above
        raise ValidationError({"name": f"{project.name} already has a dataset named {name}."}) from None
    return dataset


def _set_roster(dataset, found: list[dict]) -> None:
    dataset.roster, dataset.roster_sha256 = found, rosters.identity(found)
    dataset.total_bytes, dataset.file_count = sum(item["bytes"] for item in found), len(found)
    dataset.state, dataset.refusal = DatasetState.READY, ""


def do_record_scan(dataset_pk: int, files, error: str = "") -> Dataset:
    """What the box answered for a dataset being scanned: ready with its roster, or refused with why."""
    with transaction.atomic(durable=True):
        dataset = Dataset.objects.select_for_update().get(pk=dataset_pk)
        if dataset.state != DatasetState.SCANNING:
            return dataset  # a duplicate delivery: the first answer decided
        found = None
        if not error:
            try:
                found = rosters.check(files)
            except rosters.RosterError as exc:
                error = f"the box answered a roster that is not one: {exc}"
        if found is not None and dataset.roster:
            difference = rosters.first_difference(dataset.roster, found)
            error = f"the roster does not match the files: {difference}" if difference else ""
        if error:
            dataset.state, dataset.refusal = DatasetState.REFUSED, error[:2000]
        else:
            _set_roster(dataset, found)
        dataset.save()
        said = dataset.refusal or f"{dataset.file_count} files, {dataset.roster_sha256[:12]}"
        record(
            AuditAction.DATASET_SCANNED,
            f"Dataset {dataset}: {said}",
            project=dataset.project,
            instance=dataset.source_instance,
            dataset=dataset.name,
            roster_sha256=dataset.roster_sha256,
        )
    return dataset
