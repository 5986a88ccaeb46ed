"""The metric registry, completed: NMSE, mAP, SSIM and LPIPS recomputed from saved predictions (checked
against hand computations and a textbook SSIM property), every metric with its direction; a project
registers its own metric without code (an expression, refused when it is anything but arithmetic over
columns), and the readback recomputes and compares it."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from core.models import AuditEntry
from custody import expressions
from custody.metrics import DOWN, REGISTRY, UP, average_precision, lookup, recompute, ssim_of
from custody.models import ProjectMetric
from custody.project_metrics import do_register_metric, extra_metrics


def test_every_metric_says_its_direction():
    assert {
        name: metric.direction for name, metric in REGISTRY.items() if name in ("nmse", "map", "ssim", "lpips")
    } == {
        "nmse": DOWN,
        "map": UP,
        "ssim": UP,
        "lpips": DOWN,
    }
    assert lookup("mAP") is REGISTRY["map"] and lookup("PSNR") is REGISTRY["psnr"] and lookup("f1_macro") is None


def test_nmse_and_map_by_hand(tmp_path):
    path = tmp_path / "regression.parquet"
    pq.write_table(pa.table({"target": [1.0, 2.0, 2.0], "prediction": [1.0, 1.0, 3.0]}), path)
    # NMSE = (0 + 1 + 1) / (1 + 4 + 4) = 2/9.
    rows, warnings = recompute(path, {"nmse": 2 / 9}, 1e-9)
    assert warnings == [] and rows[0].within_tolerance and rows[0].direction == DOWN
    # AP of scores [0.9, 0.8, 0.7, 0.6] for positives [1, 0, 1, 0]: (1/1 + 2/3) / 2 = 0.8333.
    assert average_precision(np.array([0.9, 0.8, 0.7, 0.6]), np.array([1, 0, 1, 0], bool)) == pytest.approx(5 / 6)
    classes = tmp_path / "classes.parquet"
    table = {"target": [0, 1, 0, 1], "prob_0": [0.9, 0.8, 0.7, 0.6], "prob_1": [0.1, 0.2, 0.3, 0.4]}
    pq.write_table(pa.table(table), classes)
    # class 0: positives at ranks 1, 3 → (1 + 2/3)/2 = 5/6; class 1 (scores 0.4, 0.3, 0.2, 0.1): positives
    # at ranks 1 and 3 → 5/6 too. mAP = 5/6.
    rows, _ = recompute(classes, {"map": 5 / 6, "mAP": 0.5}, 1e-9)
    assert [row.within_tolerance for row in rows] == [False, True]  # sorted by name: mAP (claimed 0.5), map


def test_ssim_is_one_for_equal_images_and_falls_with_noise(tmp_path):
    rng = np.random.default_rng(3)
    image = rng.random((16, 16))
    assert ssim_of(image, image) == pytest.approx(1.0)
    noisy = np.clip(image + rng.normal(0, 0.2, image.shape), 0, 1)
    assert 0 < ssim_of(image, noisy) < 0.9
    path = tmp_path / "images.parquet"
    flat = pa.list_(pa.float64())
    columns = {
        "target": pa.array([image.ravel().tolist()] * 2, flat),
        "prediction": pa.array([image.ravel().tolist(), noisy.ravel().tolist()], flat),
        "lpips": [0.0, 0.3],
    }
    pq.write_table(pa.table(columns), path)
    expected = (1.0 + ssim_of(image, noisy)) / 2
    rows, warnings = recompute(path, {"ssim": expected, "lpips": 0.15}, 1e-9)
    assert warnings == [] and all(row.within_tolerance for row in rows)
    rows, warnings = recompute(path, {"ssim": expected, "lpips": 0.1}, 1e-9)
    assert [row.name for row in rows if not row.within_tolerance] == ["lpips"]
    scalar = tmp_path / "scalars.parquet"
    pq.write_table(pa.table({"target": [1.0], "prediction": [1.0]}), scalar)
    _, warnings = recompute(scalar, {"ssim": 1.0, "lpips": 0.0}, 1e-9)
    assert any("ssim: cannot recompute" in w for w in warnings) and any(
        "per-sample lpips column" in w for w in warnings
    )


@pytest.mark.parametrize(
    ("expression", "refusal"),
    [
        ("__import__('os').system('x')", "functions allowed"),
        ("prediction.real", "Attribute is not allowed"),
        ("target[0]", "Subscript is not allowed"),
        ("'a' * 3", "only numbers"),
        ("lambda: 1", "Lambda is not allowed"),
        ("1 < target < 3", "one comparison at a time"),
        ("abs(target, key=1)", "functions allowed"),
        ("x" * 301, "1 to 300 characters"),
        ("target +", "not an expression"),
    ],
)
def test_an_expression_is_arithmetic_over_columns_or_refused(expression, refusal):
    with pytest.raises(ValueError, match=refusal):
        expressions.parse(expression)


def test_an_expression_is_evaluated_over_the_columns():
    columns = {"prediction": np.array([1.0, 2.0, 4.0]), "target": np.array([1.0, 4.0, 4.0])}
    assert expressions.evaluate("abs(prediction - target) / abs(target)", columns, "mean") == pytest.approx(0.5 / 3)
    assert expressions.evaluate("prediction == target", columns, "sum") == 2.0
    assert expressions.evaluate("prediction - target", columns, "rms") == pytest.approx(math.sqrt(4 / 3))
    assert expressions.columns_of("sqrt(square(prediction)) - target") == {"prediction", "target"}
    with pytest.raises(KeyError):
        expressions.evaluate("missing_column + 1", columns, "mean")


@pytest.mark.django_db
def test_a_project_registers_its_own_metric_and_the_readback_recomputes_it(client, bob, carol, project, tmp_path):
    url = reverse("project-metrics", args=[project.slug])
    client.force_login(carol)  # a member without the operator role sees the page, registers nothing
    assert client.get(url).status_code == 200
    form = {
        "name": "rel_error",
        "direction": "↓",
        "expression": "abs(prediction - target) / abs(target)",
        "reducer": "mean",
    }
    assert client.post(url, form).status_code == 403
    client.force_login(bob)
    refused = client.post(url, {**form, "expression": "open('/etc/passwd')"})
    assert refused.status_code == 200 and "The expression is refused" in refused.content.decode()
    built_in = client.post(url, {**form, "name": "accuracy"})
    assert "accuracy is a built-in metric" in built_in.content.decode()
    assert not ProjectMetric.objects.exists()
    page = client.post(url, form, follow=True).content.decode()
    assert 'data-metric="rel_error"' in page and "mean(abs(prediction - target) / abs(target))" in page
    assert AuditEntry.objects.filter(action="metric_registered", project=project).count() == 1
    with pytest.raises(ValidationError, match="has a metric named rel_error already"):
        do_register_metric(project, "rel_error", "↓", "target", "mean", actor=bob)

    path = tmp_path / "results.parquet"
    pq.write_table(pa.table({"target": [1.0, 4.0, 4.0], "prediction": [1.0, 2.0, 4.0]}), path)
    claimed = json.loads(json.dumps({"rel_error": 0.5 / 3}))
    rows, warnings = recompute(path, claimed, 1e-9, extra_metrics(project))
    assert warnings == [] and rows[0].within_tolerance and rows[0].direction == DOWN
    rows, _ = recompute(path, {"rel_error": 0.01}, 1e-9, extra_metrics(project))
    assert not rows[0].within_tolerance and rows[0].recomputed == pytest.approx(0.5 / 3)


def test_the_form_offers_every_reducer_the_evaluator_knows():
    from custody.forms import REDUCER_NAMES

    assert set(REDUCER_NAMES) == set(expressions.REDUCERS)
