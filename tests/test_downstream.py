"""Degenerate and fragile downstream results (issue 31): a classifier that predicts one class
for everyone, or scores no better than the base rate, is marked and never called the best or
the fairest; the base rate is shown; groups with few test rows carry a warning; a fair method
that worsens a criterion next to PCA is said so in words.

The classifiers are built to be degenerate: a projection onto a column of pure noise, with 14 %
positives, predicts "negative" for every row; a target drawn independently of the features
gives every classifier the accuracy of a coin.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fairpca_dist import GroupMoments, fit_projection
from fairpca_dist.assessment.comparison import compare_methods
from fairpca_dist.assessment.comparison_report import write_comparison
from fairpca_dist.assessment.downstream import downstream_blocks, downstream_parity
from fairpca_dist.assessment.rendering import markdown
from fairpca_dist.engine.cells import CellMoments
from fairpca_dist.exceptions import SolverError
from fairpca_dist.solvers.result import make_projection

FEATURES = list("abcd")


def skewed_frame(n_rows: int = 1000, *, small_group: int = 0, seed: int = 0) -> pd.DataFrame:
    """Columns a and b share a signal s (so PCA's first direction carries it), c and d are
    noise; the target is 1 for the 14 % of rows with the largest noisy s. The first
    ``small_group`` rows form a third group "x"."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n_rows)
    x = np.column_stack(
        [
            s + 0.3 * rng.normal(size=n_rows),
            s + 0.3 * rng.normal(size=n_rows),
            rng.normal(size=n_rows),
            rng.normal(size=n_rows),
        ]
    )
    groups = np.where(rng.random(n_rows) < 0.5, "f", "m").astype(object)
    groups[:small_group] = "x"
    score = s + 0.3 * rng.normal(size=n_rows)
    target = (score > np.quantile(score, 0.86)).astype(int)
    return pd.DataFrame(x, columns=FEATURES).assign(group=groups, y=target)


def coin_frame(n_rows: int = 600, seed: int = 1) -> pd.DataFrame:
    """A target drawn independently of the features: no classifier beats the base rate."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 4))
    x[:, 1] += 0.8 * x[:, 0]
    groups = np.where(rng.random(n_rows) < 0.5, "f", "m")
    return pd.DataFrame(x, columns=FEATURES).assign(group=groups, y=rng.integers(0, 2, n_rows))


def noise_only(moments, n_components, *, random_state=None, center="group"):
    """A projection onto column d alone: orthogonal to every signal of :func:`skewed_frame`."""
    components = np.zeros((moments.n_features, n_components))
    components[3, 0] = 1.0
    return make_projection(
        moments,
        components,
        method="noise_only",
        n_components=n_components,
        center=center,
        objective_history=[0.0],
        n_iter=1,
        status="closed_form",
    )


def cells_of(frame: pd.DataFrame) -> CellMoments:
    return CellMoments.from_arrays(
        frame[FEATURES].to_numpy(), np.arange(len(frame)) % 10, frame["group"].to_numpy(), feature_names=FEATURES
    )


def compared(frame: pd.DataFrame, methods) -> object:
    return compare_methods(cells_of(frame), 1, methods, sample=frame, target="y", sensitive="group", rbf_mmd=False)


def moments_of(frame: pd.DataFrame) -> GroupMoments:
    return GroupMoments.from_arrays(frame[FEATURES].to_numpy(), frame["group"].to_numpy(), feature_names=FEATURES)


# ---------------------------------------------------------------------- downstream_parity
def test_a_constant_classifier_is_flagged_with_the_base_rate():
    frame = skewed_frame()
    moments = moments_of(frame)
    models = {
        "pca": fit_projection(moments, 1, method="pca", standardize=True),
        "fair": fit_projection(moments, 1, method=noise_only, standardize=True),
    }
    result = downstream_parity(frame, features=FEATURES, sensitive="group", target="y", models=models)
    assert result["base_rate"] == pytest.approx(0.14, abs=0.005)
    assert result["majority_accuracy"] == pytest.approx(1 - result["base_rate"])
    fair, pca = result["models"]["fair"], result["models"]["pca"]
    assert fair["predicted_positive_share"] == 0.0
    assert fair["accuracy"] == pytest.approx(result["majority_accuracy"])  # the share of negatives
    assert fair["demographic_parity_difference"] == 0.0
    assert fair["degenerate"] == "constant: predicts one class for every row"
    assert pca["degenerate"] is None and result["reference"]["degenerate"] is None
    assert sum(result["group_test_counts"].values()) == result["n_test"] and result["groups_too_small"] == {}

    text = markdown(downstream_blocks(result, {"pca": "PCA", "fair": "noise_only"}))
    assert "| noise_only | 1 | 0.86 | 0 | n/a | constant: predicts one class for every row |" in text
    assert "Base rate: 1 is 14.0 % of the 300 test rows" in text and "accuracy 0.86" in text
    assert "noise_only's classifier is degenerate (constant: predicts one class for every row)" in text
    assert "selects more evenly" not in text  # its DP difference of 0 is not read as fairness


def test_an_accuracy_at_the_base_rate_is_flagged():
    frame = coin_frame()
    moments = moments_of(frame)
    result = downstream_parity(
        frame,
        features=FEATURES,
        sensitive="group",
        target="y",
        models={"pca": fit_projection(moments, 1, method="pca", standardize=True)},
    )
    for scores in (result["reference"], result["models"]["pca"]):
        assert 0.05 < scores["predicted_positive_share"] < 0.95  # not constant: its predictions vary
        noise = 2 * np.sqrt(result["majority_accuracy"] * (1 - result["majority_accuracy"]) / result["n_test"])
        assert scores["accuracy"] <= result["majority_accuracy"] + noise
        assert scores["degenerate"].startswith("≈ base rate: accuracy")
    text = markdown(downstream_blocks(result, {"pca": "PCA"}))
    assert re.search(r"\| PCA \| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ≈ base rate: ", text)


def test_groups_with_few_test_rows_carry_a_warning_with_their_counts():
    frame = skewed_frame(small_group=60)
    moments = moments_of(frame)
    result = downstream_parity(
        frame,
        features=FEATURES,
        sensitive="group",
        target="y",
        models={"pca": fit_projection(moments, 1, method="pca", standardize=True)},
    )
    n_small = result["group_test_counts"]["group=x"]
    assert 0 < n_small < 30 and result["groups_too_small"] == {"group=x": n_small}
    assert result["group_test_counts"]["group=f"] >= 30 and "group=f" not in result["groups_too_small"]
    text = markdown(downstream_blocks(result, {"pca": "PCA"}))
    assert f"Warning: 1 group(s) have fewer than 30 test rows (group=x: {n_small})" in text
    assert f"| group=x | {n_small} |" in text  # the selection-rate table shows the test rows per group


def test_the_report_says_when_the_fair_method_selects_less_evenly_than_pca():
    frame = skewed_frame()
    moments = moments_of(frame)
    models = {
        "pca": fit_projection(moments, 1, method="mm", standardize=True),  # roles swapped: PCA is the
        "fair": fit_projection(moments, 1, method="pca", standardize=True),
    }  # more even of the two here
    result = downstream_parity(frame, features=FEATURES, sensitive="group", target="y", models=models)
    ours, theirs = (result["models"][name] for name in ("fair", "pca"))
    assert ours["demographic_parity_difference"] > theirs["demographic_parity_difference"]
    text = markdown(downstream_blocks(result, {"pca": "PCA", "fair": "mm"}))
    assert (
        f"mm's classifier selects less evenly across groups than PCA's: DP difference "
        f"{ours['demographic_parity_difference']:.4g} against {theirs['demographic_parity_difference']:.4g}, "
        f"accuracy {ours['accuracy']:.4g} against {theirs['accuracy']:.4g}."
    ) in text


# ---------------------------------------------------------------------- compare
def test_compare_never_stars_a_constant_classifier_nor_calls_it_fairest(tmp_path):
    comparison = compared(skewed_frame(), ["pca", "mm", noise_only])
    by_label = {c.label: c for c in comparison.candidates}
    constant = by_label["noise_only"]
    assert constant.degenerate == "constant: predicts one class for every row"
    assert constant.value("dp_difference") == 0.0  # the lowest: the old comparison starred it
    for key in ("accuracy", "dp_difference"):
        assert constant not in comparison.best(1, key) and comparison.best(1, key)
        assert constant not in comparison.front(1, key)
    reading = comparison.reading(1)
    assert not any("fairest is noise_only" in line for line in reading if "DP difference" in line)
    assert any(
        line.startswith("Base rate: 1 is 14.0 % of the 300 test rows") and "accuracy 0.86." in line
        for line in comparison.summary()
    )
    assert (
        "Degenerate downstream classifiers (marked, never ★, left out of the fronts) — constant: noise_only." in reading
    )
    assert comparison.table().set_index("label").loc["noise_only", "downstream_degenerate"] == constant.degenerate
    assert comparison.to_dict()["downstream"]["base_rate"] == pytest.approx(0.14, abs=0.005)

    write_comparison(comparison, tmp_path / "out")
    text = (tmp_path / "out" / "comparison.md").read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line == "### In sample")
    header, row = (
        cells(line) for line in (lines[at + 2], next(line for line in lines[at:] if line.startswith("| noise_only |")))
    )
    shown = dict(zip(header, row, strict=True))
    assert shown["downstream accuracy (↑)"] == "0.86 (constant)" and shown["DP difference (↓)"] == "0 (constant)"
    assert "Base rate: 1 is 14.0 % of the 300 test rows" in text


def test_compare_stars_no_classifier_at_the_base_rate():
    comparison = compared(coin_frame(), ["pca", "mm"])
    assert all(c.degenerate.startswith("≈ base rate") for c in comparison.candidates)
    assert comparison.best(1, "accuracy") == () and comparison.best(1, "dp_difference") == ()
    assert comparison.front(1, "dp_difference") == ()
    reading = comparison.reading(1)
    assert not any(line.startswith("For DP difference") for line in reading)
    assert any(
        line.startswith("Even the classifier on the raw features is degenerate") for line in comparison.summary()
    )


def test_compare_warns_about_groups_with_few_test_rows():
    comparison = compared(skewed_frame(small_group=60), ["pca"])
    n_small = comparison.downstream["groups_too_small"]["group=x"]
    assert any(
        line.startswith(f"Warning: 1 group(s) have fewer than 30 test rows (group=x: {n_small})")
        for line in comparison.summary()
    )
    assert not any("test rows" in line for line in comparison.reading(1))  # said once, not per r


def test_compare_says_when_a_fair_method_worsens_a_criterion():
    comparison = compared(skewed_frame(), ["pca", "mm"])
    pca, mm = (next(c for c in comparison.candidates if c.method == m) for m in ("pca", "mm"))
    assert mm.value("min_group_variance") > pca.value("min_group_variance")  # mm's own criterion, improved
    assert mm.value("max_loss") > 2 * pca.value("max_loss")  # at the cost of Samadi's loss
    sentence = next(line for line in comparison.reading(1) if line.startswith("mm "))
    assert sentence.startswith(
        f"mm raises the min group variance (its own criterion) from "
        f"{pca.value('min_group_variance'):.4g} to {mm.value('min_group_variance'):.4g} but "
        f"raises the max group loss from {pca.value('max_loss'):.4g} to "
        f"{mm.value('max_loss'):.4g}"
    )
    assert sentence.endswith("next to PCA.")


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def broken(moments, n_components, *, random_state=None, center="group"):
    raise SolverError("SDP solver CLARABEL failed\n   on the relaxation; " + "details " * 60)


def test_a_failed_method_shows_its_reason(tmp_path):
    comparison = compare_methods(cells_of(skewed_frame()), 1, ["pca", broken], rbf_mmd=False)
    failed = next(line for line in comparison.summary() if line.startswith("Failed:"))
    assert failed.startswith("Failed: broken (SDP solver CLARABEL failed on the relaxation; details")
    assert "see their status" not in failed and "\n" not in failed and len(failed) < 200
    assert failed.endswith("details…).")  # cut at a word boundary
    write_comparison(comparison, tmp_path / "out")
    text = (tmp_path / "out" / "comparison.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| broken | failed |"))
    assert "SDP solver CLARABEL failed on the relaxation; details" in row and row.rstrip().endswith("… |")


# ---------------------------------------------------------------------- compare's reading, in short
LONG_REASON = (
    "SDP solver CLARABEL failed on the relaxation: the problem is infeasible with two groups of very "
    "different sizes; merge groups into two (e.g. one against the rest) or give another solver"
)


def crowded_comparison():
    """A comparison of pca, mm and a constant classifier, with six "dro" grid points cloned from
    mm (every one's classifier ≈ base rate) and four "olfat-sdp" grid points failing with one
    long reason: the shape of a default comparison on a table with a rare target."""
    comparison = compared(skewed_frame(), ["pca", "mm", noise_only])
    mm = next(c for c in comparison.candidates if c.method == "mm")
    grid = [{"alpha": alpha, "lam": lam} for alpha in (0.05, 0.15) for lam in (0.0, 1.0, 2.5)]
    reason = (
        f"≈ base rate: accuracy {mm.downstream['accuracy']:.4g}, not above the majority class's 0.86 by more "
        "than 2 standard errors (0.04)"
    )
    dro = [
        replace(mm, method="dro", params=params, downstream={**mm.downstream, "degenerate": reason}) for params in grid
    ]
    olfat = [
        replace(
            mm,
            method="olfat-sdp",
            params={"delta": delta, "mu": mu},
            status="failed",
            message=LONG_REASON,
            converged=False,
            in_sample=None,
            out_of_sample=None,
            downstream=None,
            model=None,
        )
        for delta in (0.0, 0.1)
        for mu in (0.1, 1.0)
    ]
    return replace(comparison, candidates=(*comparison.candidates, *dro, *olfat))


def test_compare_says_each_reason_and_rule_once_in_a_bounded_reading():
    comparison = crowded_comparison()
    lines = [*comparison.summary(), *comparison.reading(1)]
    text = "\n".join(lines)
    assert text.count("merge groups into two") == 1 and text.count("standard errors") == 1
    failed = next(line for line in lines if line.startswith("Failed:"))
    assert failed.startswith("Failed: olfat-sdp (all 4 grid points) (SDP solver CLARABEL failed")
    assert failed.endswith("(e.g. one against the…).")  # cut at a word boundary, not mid-word
    assert "[" not in text  # no Python list
    degenerate = next(line for line in lines if line.startswith("Degenerate downstream classifiers"))
    assert degenerate.endswith("— constant: noise_only; ≈ base rate: dro (all 6 grid points).")
    own = [line for line in lines if line.startswith("dro ")]
    assert len(own) == 1 and own[0].startswith("dro (all 6 grid points) ")  # one sentence for the six fits
    assert len(lines) <= 12 and len(text) <= 3000


def test_compare_says_its_own_criterion_when_a_method_worsens_it():
    comparison = compared(skewed_frame(), ["pca", "mm"])
    pca, mm = (next(c for c in comparison.candidates if c.method == m) for m in ("pca", "mm"))
    assert mm.value("max_loss") > 2 * pca.value("max_loss")  # mm's fit worsens the Samadi family's criterion
    samadi = replace(mm, method="samadi-mw", params={"eta": 0.1})
    comparison = replace(comparison, candidates=(pca, samadi))
    sentence = next(line for line in comparison.reading(1) if line.startswith("samadi-mw "))
    assert sentence.startswith(
        f"samadi-mw (eta=0.1) raises the max group loss (its own criterion) from "
        f"{pca.value('max_loss'):.4g} to {mm.value('max_loss'):.4g}"
    )
    assert "min group variance (its own criterion)" not in sentence  # mm's own criterion is not samadi-mw's
