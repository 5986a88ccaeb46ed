"""A hardware capsule's model run, measured against what custody holds of it (not what the capsule says).

The capsule binds a closed model run of the same task by id and SHA-256 (of its sealed run.json) and the
best.pth it applied by SHA-256. Where that run is a run of the capsule's project, its latest verified
custody record must hold both byte for byte: a run never verified, or one whose verified files differ,
fails the capsule closed. A model run from elsewhere cannot be checked here: a warning says so.
"""

from custody.copies import latest_verified
from runs.models import Run


def model_run_gates(run: Run, capsule: dict | None) -> tuple[list[str], list[str]]:
    """(failures, warnings) of the capsule's model-run binding."""
    if not capsule:
        return [], []
    binding = capsule["model_run"]
    model = Run.objects.filter(project_id=run.project_id, run_id=binding["id"]).first()
    if model is None:
        return [], [f"the model run {binding['id']} is not a run of this project: its binding is not checked here"]
    record = latest_verified(model)
    if record is None:
        return [f"the model run {binding['id']} is not verified in custody: verify it before its capsule"], []
    held = dict(record.artifacts.filter(path__in=["run.json", "best.pth"]).values_list("path", "sha256"))
    failures = []
    for path, bound in (("run.json", binding["sha256"]), ("best.pth", binding["best_pth_sha256"])):
        if held.get(path) != bound:
            failures.append(
                f"the capsule binds the model run's {path} to {bound[:12]}…, custody #{record.pk} holds"
                f" {str(held.get(path))[:12]}…"
            )
    return failures, []
