"""Seeds and variance: replicates of one configuration are grouped, each recomputed metric is summarised
over its seeds, and each pair of configurations is labelled effect, noise or unknown by a written rule,
checked here against hand computations. Everything but the seed that differs is listed as a variable."""

import math

import pytest
from django.urls import reverse

from console import stats
from console.compare import compare
from custody.reproducibility import reproducibility
from runs import sweeps
from tests import factories


def test_student_t_and_the_interval_of_a_mean_by_hand():
    assert stats.t975(2) == 4.303 and stats.t975(30) == 2.042
    assert stats.t975(2.5) == pytest.approx((4.303 + 3.182) / 2)
    assert 1.96 < stats.t975(1000) < 1.97
    # [1, 2, 3]: mean 2, sd 1, half-width t(2) · 1 / √3 = 4.303 / 1.732 = 2.4843.
    three = stats.summary([1.0, 2.0, 3.0, math.nan])
    assert (three.n, three.mean, three.sd) == (3, 2.0, 1.0) and three.half == pytest.approx(2.48434, abs=1e-5)
    one = stats.summary([0.5])
    assert (one.n, one.sd, one.half) == (1, None, None)
    assert stats.summary([]) is None


def test_effect_noise_and_unknown_by_hand():
    a, b = stats.summary([0.90, 0.91, 0.92]), stats.summary([0.95, 0.96, 0.97])
    # sd 0.01 each: se = √(2 · 0.0001 / 3) = 0.0081650; Welch df = 4, t = 2.776: half = 0.022666 < Δ 0.05.
    effect = stats.verdict(a, b, "↑")
    assert effect.label == "effect" and effect.delta == pytest.approx(0.05) and effect.better is True
    assert effect.half == pytest.approx(2.776 * math.sqrt(2 * 0.0001 / 3), rel=1e-6)
    c, d = stats.summary([0.90, 0.95, 1.00]), stats.summary([0.91, 0.96, 1.01])
    # sd 0.05 each: se = 0.040825, half = 0.11333 > Δ 0.01.
    noise = stats.verdict(c, d, "↓")
    assert noise.label == "noise" and noise.better is False and noise.half == pytest.approx(0.113331, abs=1e-5)
    assert stats.verdict(a, stats.summary([0.99]), "↑").label == "unknown"
    assert stats.verdict(stats.summary([1, 1]), stats.summary([1, 1]), None).label == "noise"
    assert stats.verdict(stats.summary([1, 1]), stats.summary([2, 2]), None).label == "effect"


def test_a_sweep_asks_for_seeds_per_cell():
    base = {"seed": 7, "lr": 0.01}
    cells = sweeps.replicate([{"lr": 0.1}, {"lr": 0.01}], 3, base)
    assert cells == [
        {"lr": 0.1, "seed": 7},
        {"lr": 0.1, "seed": 8},
        {"lr": 0.1, "seed": 9},
        {"lr": 0.01, "seed": 7},
        {"lr": 0.01, "seed": 8},
        {"lr": 0.01, "seed": 9},
    ]
    assert sweeps.replicate([{"lr": 0.1}], 1, base) == [{"lr": 0.1}]
    for cells, seeds, config, refusal in [
        ([{"seed": 3}], 2, base, "Cell 1 sets seed"),
        ([{"lr": 0.1}], 2, {"lr": 0.01}, "need an integer seed"),
        ([{"lr": 0.1}], 21, base, "Between 1 and 20"),
        ([{"lr": x} for x in range(70)], 3, base, "At most 200 runs"),
    ]:
        with pytest.raises(sweeps.SweepError, match=refusal):
            sweeps.replicate(cells, seeds, config)


def test_run_json_says_its_seeds_and_determinism_or_a_warning_says_it_does_not():
    full = {
        "seed": 7,
        "seeds": {"torch": 7, "data": 3},
        "determinism": {
            "cudnn_deterministic": True,
            "cudnn_benchmark": False,
            "use_deterministic_algorithms": True,
            "cublas_workspace_config": ":4096:8",
        },
    }
    identity, warnings = reproducibility(full)
    assert identity["seeds"] == {"seed": 7, "torch": 7, "data": 3} and warnings == []
    assert identity["determinism"]["cublas_workspace_config"] == ":4096:8"
    _, warnings = reproducibility({})
    assert any("no seed" in w for w in warnings) and any("no determinism settings" in w for w in warnings)
    _, warnings = reproducibility({"seed": True, "deterministic": True})  # a bool is not a seed
    assert any("no seed" in w for w in warnings) and any("without its settings" in w for w in warnings)
    _, warnings = reproducibility(
        {"seed": 1, "determinism": {"cudnn_benchmark": True, "use_deterministic_algorithms": True}}
    )
    assert any("cudnn.benchmark was on" in w for w in warnings) and any(
        "CUBLAS_WORKSPACE_CONFIG" in w for w in warnings
    )


FAIR = {"test population": "synthetic:ab12", "selection": "cd34", "evaluation code": "undeclared", "budget": "12"}


def verified(run, tmp_path, accuracy: float, config: dict, fairness: dict | None = None) -> None:
    """A verified custody record as the readback leaves one: its config copy and recomputed metric."""
    copy = tmp_path / run.run_id
    copy.mkdir()
    (copy / "config.yaml").write_text("".join(f"{key}: {value}\n" for key, value in config.items()))
    metric = {"test": "synthetic", "name": "accuracy", "recomputed": accuracy, "direction": "↑"}
    evidence = {"metrics": [metric], "reproducibility": {"seeds": {"seed": config["seed"]}, "determinism": {}}}
    evidence["fairness"] = fairness or FAIR
    factories.verified_record(run, uri=str(copy), evidence=evidence)


@pytest.mark.django_db
def test_compare_groups_seeds_and_labels_each_pair(client, bob, make_run, tmp_path):
    accuracies = {0.01: [0.90, 0.91, 0.92], 0.1: [0.95, 0.96, 0.97]}
    runs = []
    for lr, values in accuracies.items():
        for offset, accuracy in enumerate(values):
            run = make_run(title=f"lr {lr} seed {7 + offset}")
            verified(run, tmp_path, accuracy, {"seed": 7 + offset, "lr": lr, "epochs": 12})
            runs.append(run)
    lone = make_run(title="lr 1.0, one seed")
    verified(lone, tmp_path, 0.99, {"seed": 7, "lr": 1.0, "epochs": 12})
    result = compare([*runs, lone])
    assert [len(group["runs"]) for group in result["groups"]] == [3, 3, 1]
    assert [row["name"] for row in result["varying"]] == ["config lr"]
    assert not any("Not a one-variable comparison" in note for note in result["notes"])
    row = result["stats"][0]
    assert row["name"] == "synthetic/accuracy" and row["summaries"][0].mean == pytest.approx(0.91)
    labels = {(pair["a"], pair["b"]): pair["label"] for pair in row["pairs"]}
    assert labels == {("A", "B"): "effect", ("A", "C"): "unknown", ("B", "C"): "unknown"}

    client.force_login(bob)
    page = client.get(reverse("run-compare"), {"run": [run.run_id for run in [*runs, lone]]}).content.decode()
    pair = page.split('data-pair="synthetic/accuracy B-A"', 1)[1].split("</tr>", 1)[0]
    assert "effect" in pair and "0.0500 ± 0.0227" in pair and "(B better)" in pair
    assert "unknown" in page.split('data-pair="synthetic/accuracy C-A"', 1)[1].split("</tr>", 1)[0]
    cell = page.split('data-metric="synthetic/accuracy"', 1)[1].split("</tr>", 1)[0]
    assert "0.9100" in cell and "± 0.0100" in cell and "[0.8852, 0.9348]" in cell and "(3)" in cell
    assert stats.RULE in page.replace("&#x27;", "'")


@pytest.mark.django_db
def test_two_runs_on_different_boxes_list_what_was_measured_not_the_box(make_run, project, tmp_path):
    other = factories.box(project, state="running", gpu_description="1× A100 80GB")
    first = make_run(env_identity={"python": "3.11.7", "torch": "2.13.0", "cuda": "12.4", "gpu_names": ["NVIDIA H100"]})
    second = make_run(instance=other, env_identity={"python": "3.11.7", "torch": "2.13.0", "cuda": "12.1"})
    for run in (first, second):
        verified(run, tmp_path, 0.9, {"seed": 7, "lr": 0.01})
    result = compare([first, second])
    varying = {row["name"]: row["values"] for row in result["varying"]}
    assert set(varying) == {"GPU model", "CUDA"}
    assert varying["GPU model"] == ["NVIDIA H100", "1× A100 80GB (declared, not measured)"]
    assert any("Not a one-variable comparison: besides the seed, 2 variables differ" in n for n in result["notes"])


@pytest.mark.django_db
def test_seeds_spread_over_boxes_with_the_same_measured_gpu_and_environment_are_one_group(make_run, project, tmp_path):
    """A sweep spreads a cell's seeds round-robin over its boxes: before, three seeds on three boxes made
    three one-run groups and every pair read "unknown"."""
    env = {"python": "3.11.7", "torch": "2.13.0", "cuda": "12.4", "gpu_names": ["NVIDIA H100"]}
    runs = []
    for lr, accuracies in ((0.01, [0.90, 0.91, 0.92]), (0.1, [0.95, 0.96, 0.97])):
        for offset, accuracy in enumerate(accuracies):
            box = factories.box(project, state="running", gpu_description=f"box {offset}")
            run = make_run(instance=box, env_identity=env)
            verified(run, tmp_path, accuracy, {"seed": 7 + offset, "lr": lr})
            runs.append(run)
    result = compare(runs)
    assert [len(group["runs"]) for group in result["groups"]] == [3, 3]
    assert [row["name"] for row in result["varying"]] == ["config lr"]
    pairs = {(pair["a"], pair["b"]): pair["label"] for pair in result["stats"][0]["pairs"]}
    assert pairs == {("A", "B"): "effect"}


@pytest.mark.django_db
def test_a_pair_that_differs_in_its_selection_or_test_set_is_unfair_and_says_which(make_run, tmp_path):
    runs = []
    for lr, accuracies, fairness in [
        (0.01, [0.90, 0.91, 0.92], FAIR),
        (0.1, [0.95, 0.96, 0.97], {**FAIR, "selection": "ee99", "test population": "synthetic:0000"}),
    ]:
        for offset, accuracy in enumerate(accuracies):
            run = make_run()
            verified(run, tmp_path, accuracy, {"seed": 7 + offset, "lr": lr}, fairness)
            runs.append(run)
    pair = compare(runs)["stats"][0]["pairs"][0]
    assert pair["verdict"].label == "effect" and pair["label"] == "unfair"
    assert pair["unfair"] == ["test population", "selection"]


@pytest.mark.django_db
def test_the_comparison_as_json_and_as_a_printable_report(client, bob, make_run, tmp_path):
    runs = []
    for lr, values in {0.01: [0.90, 0.91, 0.92], 0.1: [0.95, 0.96, 0.97]}.items():
        for offset, accuracy in enumerate(values):
            run = make_run()
            verified(run, tmp_path, accuracy, {"seed": 7 + offset, "lr": lr})
            runs.append(run)
    client.force_login(bob)
    query = {"run": [run.run_id for run in runs]}
    data = client.get(reverse("run-compare"), {**query, "format": "json"}).json()
    assert [len(group["runs"]) for group in data["groups"]] == [3, 3] and data["rule"] == stats.RULE
    pair = data["metrics"][0]["pairs"][0]
    assert (pair["label"], round(pair["delta"], 6), round(pair["half"], 5)) == ("effect", 0.05, 0.02267)
    report = client.get(reverse("run-compare"), {**query, "report": "1"}).content.decode()
    assert "<script" not in report and "Comparison report: 2 configuration(s), 6 runs" in report
    assert "effect" in report.split('id="report-stats"', 1)[1]
