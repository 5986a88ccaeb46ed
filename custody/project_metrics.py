"""A project's own metrics: registered by an operator (checked, audited), recomputed by the readback.

The expression evaluator and the registry load numpy: imported where used, since the web and worker
processes load this module (through the URLs) and never need numpy for it.
"""

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from core.audit import record
from core.models import AuditAction
from custody.models import ProjectMetric


def problem(name: str, expression: str, reducer: str) -> str | None:
    from custody import expressions
    from custody.metrics import REGISTRY

    if name.lower() in REGISTRY:
        return f"{name} is a built-in metric: it is recomputed already."
    if reducer not in expressions.REDUCERS:
        return f"Reduce with one of: {', '.join(expressions.REDUCERS)}."
    try:
        expressions.parse(expression)
    except ValueError as exc:
        return f"The expression is refused: {exc}."
    return None


def do_register_metric(project, name: str, direction: str, expression: str, reducer: str, *, actor) -> ProjectMetric:
    if refused := problem(name, expression, reducer):
        raise ValidationError(refused)
    try:
        with transaction.atomic(durable=True):
            metric = ProjectMetric.objects.create(
                project=project,
                name=name,
                direction=direction,
                expression=expression.strip(),
                reducer=reducer,
                created_by=actor,
            )
            text = f"Metric {name} {direction} of {project.name}: {reducer}({metric.expression})"
            record(AuditAction.METRIC_REGISTERED, text, actor=actor, project=project)
    except IntegrityError:
        raise ValidationError(f"{project.name} has a metric named {name} already.") from None
    return metric


def extra_metrics(project) -> dict:
    """The project's metrics as the readback's registry takes them (name → metrics.Metric)."""
    from custody.metrics import Metric

    return {
        metric.name: Metric(metric.name, metric.direction, _compute(metric.expression, metric.reducer))
        for metric in ProjectMetric.objects.filter(project=project)
    }


def _compute(expression: str, reducer: str):
    from custody import expressions

    return lambda columns: expressions.evaluate(expression, columns, reducer)
