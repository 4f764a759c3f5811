"""The report speaks each method's language: its headline names the fitted method's own criterion
(with its direction) and gives it for PCA and the method, every other criterion follows side by
side, a plain-words reading says what improved, what it cost and what got worse; groups carry
their column's name (``sex=1``), optionally mapped to names by the user."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import FairPCA, GroupMoments, InputError, fit_projection, load_model, save_model
from fairpca_dist.assessment import metrics
from fairpca_dist.assessment.rendering import number
from fairpca_dist.assessment.report import (
    build_report,
    curve_length,
    report_markdown_summary,
    report_table,
    write_report,
)
from fairpca_dist.assessment.scoring import criterion_named
from fairpca_dist.cli import main
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.exceptions import GroupError
from fairpca_dist.solvers import SOLVERS
from fairpca_dist.wording import group_display_names

FEATURES = [f"x{j}" for j in range(5)]
OPTIONS = {"mmd": {"kernel": "linear", "tau": 1e-2}}
"""Options of the all-methods test (mmd with the linear kernel reads no rows: fast)."""


@pytest.fixture(scope="module")
def data():
    """Two groups, coded 1 and 2 in a column ``sex``, where the fair methods trade one criterion
    for another (seed 14: mm, dro, kleindessner and mmd worsen the largest group loss; jevd its own)."""
    x, labels = grouped_data(n_rows=400, n_features=5, n_groups=2, seed=14)
    sex = np.where(labels == "g0", 1, 2)
    moments = GroupMoments.from_arrays(x, sex, feature_names=FEATURES)
    return x, sex, moments, ArrayPasses(x, sex, moments.groups)


@pytest.fixture(scope="module")
def reports(data):
    """``get(method, rbf_mmd="auto", **options)``: the model (fitted at r = 1 on standardised
    rows, its group column ``sex`` recorded) and its report; each built once per module."""
    _, _, moments, passes = data
    models: dict[str, object] = {}
    built: dict[str, tuple] = {}

    def get(method: str, rbf_mmd: str = "auto", **options):
        rows = passes if SOLVERS[method].reads_rows(options) else None
        fit = json.dumps([method, options], sort_keys=True)
        if fit not in models:
            models[fit] = replace(
                fit_projection(moments, 1, method=method, standardize=True, random_state=0, passes=rows, **options),
                group_columns=("sex",),
            )
        if (fit, rbf_mmd) not in built:
            model = models[fit]
            built[fit, rbf_mmd] = model, build_report(moments, model, max_components=1, passes=rows, rbf_mmd=rbf_mmd)
        return built[fit, rbf_mmd]

    return get


def headline(report: dict) -> str:
    """The headline section of the rendered summary: from the own criterion's sentence to the
    reading's last line (before the per-group table)."""
    text = report_markdown_summary(report)
    start = text.index(f"{report['model']['method']} is judged by its own criterion")
    return text[start : text.index("| group |")].strip()


def shown(value: float, other: float) -> str:
    """A value as the report writes it: 4 significant digits, round-off of 0 as "≈ 0"."""
    return "≈ 0" if value != 0 and abs(value) <= 1e-12 * max(abs(value), abs(other)) else number(value)


def direct(key: str, moments: GroupMoments, projection) -> float:
    """Criterion ``key`` of ``projection`` from its definition (module docstring of
    :mod:`fairpca_dist.assessment.scoring`), through :mod:`fairpca_dist.assessment.metrics`."""
    working = moments.rescaled(projection.scale)
    v, center = projection.components, projection.center
    centres = working.centers(center)
    if key == "max_loss":
        return metrics.group_losses(working, v, n_components=projection.n_components, center=center).max()
    if key == "min_group_variance":
        return metrics.group_variance_about(working, v, centres).min()
    if key == "abdiff":
        errors = metrics.group_errors_about(working, v, centres)
        return errors.max() - errors.min()
    if key == "mmd2_linear":
        return metrics.mmd2_linear(working, v).max()
    assert key == "explained_variance_ratio", key
    return metrics.explained_variance_ratio(working, v).sum()


# ---------------------------------------------------------------------- every registered method
@pytest.mark.parametrize("method", sorted(SOLVERS))
def test_the_headline_names_the_methods_own_criterion_and_shows_it_for_pca_and_the_method(data, reports, method):
    _, _, moments, _ = data
    options = OPTIONS.get(method, {})
    model, report = reports(method, **options)
    key = SOLVERS[method].criterion_of(model.options)
    criterion = criterion_named(key)
    pca = fit_projection(moments, 1, method="pca", center=model.center, standardize=model.scale)
    expected = {"pca": direct(key, moments, pca), "fair": direct(key, moments, model)}
    own = report["criterion"]
    assert (own["key"], own["title"], own["better"]) == (key, criterion.title, criterion.better)
    for arm, value in expected.items():
        assert own[arm] == pytest.approx(value, rel=1e-9, abs=1e-14), arm
    direction = f"{criterion.better} is {'fairer' if criterion.fairness else 'better'}"
    assert headline(report).startswith(
        f"{method} is judged by its own criterion: {criterion.title}, {criterion.meaning}; {direction}. "
        f"PCA {shown(own['pca'], own['fair'])}, {method} {shown(own['fair'], own['pca'])} ("
    )
    table = headline(report).splitlines()
    assert table[table.index("| --- | --- | --- | --- | --- |") + 1].startswith(
        f"| {criterion.title} ({method}'s own) | {criterion.arrow} {criterion.better} | "
    )
    # then every other criterion measured, once, in the scoring's order
    assert [row["key"] for row in report["comparison"]] == [
        k
        for k in (
            "explained_variance_ratio",
            "max_loss",
            "min_group_variance",
            "abdiff",
            "are",
            "mmd2_linear",
            "rbf_mmd2",
        )
        if k != key and (k != "rbf_mmd2" or SOLVERS[method].reads_rows(options))
    ]


# ---------------------------------------------------------------------- golden headlines per family
GOLDEN = {
    "samadi (fair-eig)": (
        "fair-eig",
        {},
        "auto",
        """\
fair-eig is judged by its own criterion: max group loss, the largest over the groups of a group's reconstruction error minus the smallest error any r-dimensional projection gives that group (Samadi et al.'s loss); lower is fairer. PCA 0.1385, fair-eig 0.1333 (3.77 % better).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for fair-eig; the first is fair-eig's own:

| criterion | better | PCA | fair-eig | fair-eig against PCA |
| --- | --- | --- | --- | --- |
| max group loss (fair-eig's own) | ↓ lower | 0.1385 | 0.1333 | 3.77 % better |
| explained variance | ↑ higher | 0.4811 | 0.4806 | 0.105 % worse |
| min group variance | ↑ higher | 1.366 | 1.372 | 0.382 % better |
| ABDiff | ↓ lower | 1.723 | 1.728 | 0.301 % worse |
| ARE | ↓ lower | 2.204 | 2.201 | 0.156 % better |
| linear MMD² | ↓ lower | 0.08886 | 0.06254 | 29.6 % better |

What improved: max group loss from 0.1385 (PCA) to 0.1333 (fair-eig), 3.77 % better.

What it cost: explained variance from 0.4811 (PCA) to 0.4806 (fair-eig), 0.105 % less.

No other fairness criterion got worse than PCA's by more than 1%.""",
    ),
    "mm": (
        "mm",
        {},
        "auto",
        """\
mm is judged by its own criterion: min group variance, the smallest variance the projection keeps of any group (Babu et al.'s max-min criterion); higher is fairer. PCA 1.366, mm 1.505 (10.1 % better).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for mm; the first is mm's own:

| criterion | better | PCA | mm | mm against PCA |
| --- | --- | --- | --- | --- |
| min group variance (mm's own) | ↑ higher | 1.366 | 1.505 | 10.1 % better |
| explained variance | ↑ higher | 0.4811 | 0.4455 | 7.39 % worse |
| max group loss | ↓ lower | 0.1385 | 0.8558 | 518 % worse |
| ABDiff | ↓ lower | 1.723 | 2.584 | 50 % worse |
| ARE | ↓ lower | 2.204 | 2.363 | 7.19 % worse |
| linear MMD² | ↓ lower | 0.08886 | 0.003716 | 95.8 % better |

What improved: min group variance from 1.366 (PCA) to 1.505 (mm), 10.1 % better.

What it cost: explained variance from 0.4811 (PCA) to 0.4455 (mm), 7.39 % less.

What got worse: max group loss (lower is fairer) from 0.1385 (PCA) to 0.8558 (mm), 518 % worse; ABDiff (lower is fairer) from 1.723 (PCA) to 2.584 (mm), 50 % worse.""",
    ),
    "dro": (
        "dro",
        {},
        "auto",
        """\
dro is judged by its own criterion: ABDiff, the largest minus the smallest group reconstruction error (Vu et al.); lower is fairer. PCA 1.723, dro 1.428 (17.1 % better).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for dro; the first is dro's own:

| criterion | better | PCA | dro | dro against PCA |
| --- | --- | --- | --- | --- |
| ABDiff (dro's own) | ↓ lower | 1.723 | 1.428 | 17.1 % better |
| explained variance | ↑ higher | 0.4811 | 0.4701 | 2.29 % worse |
| max group loss | ↓ lower | 0.1385 | 0.3041 | 120 % worse |
| min group variance | ↑ higher | 1.366 | 1.201 | 12.1 % worse |
| ARE | ↓ lower | 2.204 | 2.268 | 2.89 % worse |
| linear MMD² | ↓ lower | 0.08886 | 0.1278 | 43.8 % worse |

What improved: ABDiff from 1.723 (PCA) to 1.428 (dro), 17.1 % better.

What it cost: explained variance from 0.4811 (PCA) to 0.4701 (dro), 2.29 % less.

What got worse: max group loss (lower is fairer) from 0.1385 (PCA) to 0.3041 (dro), 120 % worse; min group variance (higher is fairer) from 1.366 (PCA) to 1.201 (dro), 12.1 % worse; linear MMD² (lower is fairer) from 0.08886 (PCA) to 0.1278 (dro), 43.8 % worse.""",
    ),
    "jevd": (
        "jevd",
        {},
        "auto",
        """\
jevd is judged by its own criterion: max group loss, the largest over the groups of a group's reconstruction error minus the smallest error any r-dimensional projection gives that group (Samadi et al.'s loss); lower is fairer. PCA 0.1385, jevd 0.2673 (93 % worse).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for jevd; the first is jevd's own:

| criterion | better | PCA | jevd | jevd against PCA |
| --- | --- | --- | --- | --- |
| max group loss (jevd's own) | ↓ lower | 0.1385 | 0.2673 | 93 % worse |
| explained variance | ↑ higher | 0.4811 | 0.4739 | 1.49 % worse |
| min group variance | ↑ higher | 1.366 | 1.237 | 9.43 % worse |
| ABDiff | ↓ lower | 1.723 | 1.475 | 14.4 % better |
| ARE | ↓ lower | 2.204 | 2.248 | 1.97 % worse |
| linear MMD² | ↓ lower | 0.08886 | 0.1225 | 37.8 % worse |

It did not improve its own criterion: max group loss from 0.1385 (PCA) to 0.2673 (jevd), 93 % worse.

What it cost: explained variance from 0.4811 (PCA) to 0.4739 (jevd), 1.49 % less.

What got worse: min group variance (higher is fairer) from 1.366 (PCA) to 1.237 (jevd), 9.43 % worse; linear MMD² (lower is fairer) from 0.08886 (PCA) to 0.1225 (jevd), 37.8 % worse.""",
    ),
    "mmd, RBF kernel": (
        "mmd",
        {"tau": 0.01},
        "auto",
        """\
mmd is judged by its own criterion: RBF MMD², the largest RBF-kernel MMD² between the projected groups' distributions; lower is fairer. PCA 0.1007, mmd 0.003536 (96.5 % better).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for mmd; the first is mmd's own:

| criterion | better | PCA | mmd | mmd against PCA |
| --- | --- | --- | --- | --- |
| RBF MMD² (mmd's own) | ↓ lower | 0.1007 | 0.003536 | 96.5 % better |
| explained variance | ↑ higher | 0.4811 | 0.2318 | 51.8 % worse |
| max group loss | ↓ lower | 0.1385 | 3.138 | 2166 % worse |
| min group variance | ↑ higher | 1.366 | 1.075 | 21.3 % worse |
| ABDiff | ↓ lower | 1.723 | 4.436 | 157 % worse |
| ARE | ↓ lower | 2.204 | 3.432 | 55.7 % worse |
| linear MMD² | ↓ lower | 0.08886 | 0.005952 | 93.3 % better |

What improved: RBF MMD² from 0.1007 (PCA) to 0.003536 (mmd), 96.5 % better.

What it cost: explained variance from 0.4811 (PCA) to 0.2318 (mmd), 51.8 % less.

What got worse: max group loss (lower is fairer) from 0.1385 (PCA) to 3.138 (mmd), 2166 % worse; min group variance (higher is fairer) from 1.366 (PCA) to 1.075 (mmd), 21.3 % worse; ABDiff (lower is fairer) from 1.723 (PCA) to 4.436 (mmd), 157 % worse.""",
    ),
    "mmd, RBF kernel, not measured": (
        "mmd",
        {"tau": 0.01},
        "none",
        """\
mmd is judged by its own criterion: RBF MMD², the largest RBF-kernel MMD² between the projected groups' distributions; lower is fairer. Not measured: not asked for (rbf_mmd='none'); it is measured over every row (build_report: passes= and rbf_mmd other than 'none'; `fairpca report`: unless --rbf-mmd none).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for mmd; the first is mmd's own:

| criterion | better | PCA | mmd | mmd against PCA |
| --- | --- | --- | --- | --- |
| RBF MMD² (mmd's own) | ↓ lower | n/a | n/a | not measured |
| explained variance | ↑ higher | 0.4811 | 0.2318 | 51.8 % worse |
| max group loss | ↓ lower | 0.1385 | 3.138 | 2166 % worse |
| min group variance | ↑ higher | 1.366 | 1.075 | 21.3 % worse |
| ABDiff | ↓ lower | 1.723 | 4.436 | 157 % worse |
| ARE | ↓ lower | 2.204 | 3.432 | 55.7 % worse |
| linear MMD² | ↓ lower | 0.08886 | 0.005952 | 93.3 % better |

Its own criterion, RBF MMD², was not measured, so this report cannot say whether mmd made the groups fairer by it.

What it cost: explained variance from 0.4811 (PCA) to 0.2318 (mmd), 51.8 % less.

What got worse: max group loss (lower is fairer) from 0.1385 (PCA) to 3.138 (mmd), 2166 % worse; min group variance (higher is fairer) from 1.366 (PCA) to 1.075 (mmd), 21.3 % worse; ABDiff (lower is fairer) from 1.723 (PCA) to 4.436 (mmd), 157 % worse.""",
    ),
    "olfat/kleindessner (kleindessner)": (
        "kleindessner",
        {},
        "auto",
        """\
kleindessner is judged by its own criterion: linear MMD², the largest squared distance between the projected group means, ‖Vᵀ(μ_a − μ_b)‖²; lower is fairer. PCA 0.08886, kleindessner ≈ 0 (≈ 100 % better).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for kleindessner; the first is kleindessner's own:

| criterion | better | PCA | kleindessner | kleindessner against PCA |
| --- | --- | --- | --- | --- |
| linear MMD² (kleindessner's own) | ↓ lower | 0.08886 | ≈ 0 | ≈ 100 % better |
| explained variance | ↑ higher | 0.4811 | 0.4674 | 2.84 % worse |
| max group loss | ↓ lower | 0.1385 | 0.4165 | 201 % worse |
| min group variance | ↑ higher | 1.366 | 1.442 | 5.53 % better |
| ABDiff | ↓ lower | 1.723 | 2.082 | 20.8 % worse |
| ARE | ↓ lower | 2.204 | 2.252 | 2.19 % worse |

What improved: linear MMD² from 0.08886 (PCA) to ≈ 0 (kleindessner), ≈ 100 % better.

What it cost: explained variance from 0.4811 (PCA) to 0.4674 (kleindessner), 2.84 % less.

What got worse: max group loss (lower is fairer) from 0.1385 (PCA) to 0.4165 (kleindessner), 201 % worse; ABDiff (lower is fairer) from 1.723 (PCA) to 2.082 (kleindessner), 20.8 % worse.""",
    ),
    "pca": (
        "pca",
        {},
        "auto",
        """\
pca is judged by its own criterion: explained variance, the share of the variance of all rows the projection keeps; higher is better. PCA 0.4811, pca 0.4811 (unchanged).

Every criterion at r = 1, in sample (on the rows the model was fitted on), for PCA refitted with the model's centring and scale and for pca; the first is pca's own:

| criterion | better | PCA | pca | pca against PCA |
| --- | --- | --- | --- | --- |
| explained variance (pca's own) | ↑ higher | 0.4811 | 0.4811 | unchanged |
| max group loss | ↓ lower | 0.1385 | 0.1385 | unchanged |
| min group variance | ↑ higher | 1.366 | 1.366 | unchanged |
| ABDiff | ↓ lower | 1.723 | 1.723 | unchanged |
| ARE | ↓ lower | 2.204 | 2.204 | unchanged |
| linear MMD² | ↓ lower | 0.08886 | 0.08886 | unchanged |

Its own criterion did not change: explained variance is 0.4811 for PCA and 0.4811 for pca.

No other fairness criterion got worse than PCA's by more than 1%.""",
    ),
}
"""Family -> (method, options, rbf_mmd, the headline section of its report on :func:`data`),
generated once and read through by hand."""


@pytest.mark.parametrize("family", sorted(GOLDEN))
def test_golden_headline_of_each_method_family(reports, family):
    method, options, rbf_mmd, golden = GOLDEN[family]
    _, report = reports(method, rbf_mmd=rbf_mmd, **options)
    assert headline(report) == golden


# ---------------------------------------------------------------------- the reading's other cases
def test_the_loss_is_defined_in_words_in_the_document(reports, tmp_path):
    _, report = reports("fair-eig")
    text = write_report(report, tmp_path / "report").markdown.read_text()
    assert (
        "loss is that error minus the smallest error any projection to the same number of dimensions could "
        "give the group"
    ) in text
    assert "error is the group's average squared reconstruction error" in text
    # the curves table follows the method's own criterion too
    assert "| r | max group loss (PCA) | max group loss (fair-eig) | EVR (PCA) | EVR (fair-eig) |" in text


def test_a_degenerate_classifier_is_not_compared_downstream(data, reports):
    """A target the features say nothing about: both classifiers predict the majority class for
    every row; their accuracy and parity are marked, and never read as better or worse."""
    x, sex, moments, _ = data
    model, _ = reports("mm")
    rng = np.random.default_rng(0)
    sample = pd.DataFrame(x, columns=FEATURES).assign(sex=sex, y=(rng.random(len(x)) < 0.1).astype(int))
    report = build_report(moments, model, max_components=1, sample=sample, target="y")
    assert report["downstream"]["sensitive"] == ["sex"]  # the model's group column, not "every other column"
    rows = {row["key"]: row for row in report["comparison"]}
    for key in ("accuracy", "dp_difference"):
        assert set(rows[key]["degenerate"]) == {"pca", "fair"}
    text = headline(report)
    assert (
        "| DP difference | ↓ lower | 0 | 0 | not comparable: PCA's classifier constant, mm's classifier constant |"
    ) in text
    assert "DP difference (lower is fairer)" not in text


# ---------------------------------------------------------------------- group names
def test_group_display_names():
    assert group_display_names([1, 2], ["sex"]) == ["sex=1", "sex=2"]
    assert group_display_names([1.0, 2.0], ["sex"], {"1": "female", 2: "male"}) == ["sex=female", "sex=male"]
    assert group_display_names([0.0, 1.5]) == ["0", "1.5"]  # no column known: the bare values
    assert group_display_names([(1, "a"), (2, "a")], ["sex", "race"], {"race=a": "asian", "sex=2": "male"}) == [
        "sex=1 & race=asian",
        "sex=male & race=asian",
    ]
    assert group_display_names([(0.0, 1.0)]) == ["0 & 1"]
    with pytest.raises(InputError, match=r"group_names '3', 'sex=4' name no value of the groups \(1, 2 by sex\)"):
        group_display_names([1, 2], ["sex"], {"3": "x", "sex=4": "y", "1": "female"})
    with pytest.raises(InputError, match="group_names must map values to non-empty text; not so for 1"):
        group_display_names([1, 2], ["sex"], {1: 7})


def test_groups_carry_their_column_and_the_users_names(data, reports, tmp_path):
    _, _, moments, _ = data
    model, report = reports("fair-eig")
    assert [g["name"] for g in report["data"]["groups"]] == ["sex=1", "sex=2"]
    named = build_report(moments, model, max_components=1, group_names={1: "female", "sex=2": "male"})
    assert named["data"]["group_columns"] == ["sex"] and named["data"]["group_names"] == {
        "1": "female",
        "sex=2": "male",
    }
    assert [g["name"] for g in named["data"]["groups"]] == ["sex=female", "sex=male"]
    assert [g["label"] for g in named["data"]["groups"]] == [1, 2]
    assert [row["group"] for row in report_table(named)] == ["sex=female", "sex=male"]
    text = write_report(named, tmp_path / "named").markdown.read_text()
    assert "2 groups by sex." in text and "| sex=female | " in text and "| sex=female | sex=male |" in text
    # a model that does not know its columns (an older model.json): the bare labels
    assert [
        g["name"] for g in build_report(moments, replace(model, group_columns=()), max_components=1)["data"]["groups"]
    ] == ["1", "2"]
    with pytest.raises(GroupError, match=r"group column\(s\) \['sex', 'race'\] do not match the group label\(s\) 1, 2"):
        build_report(moments, replace(model, group_columns=("sex", "race")), max_components=1)


def test_the_estimator_records_the_group_columns(data):
    x, sex, _, _ = data
    frame = pd.DataFrame(x, columns=FEATURES).assign(sex=sex)
    assert FairPCA(n_components=1).fit(frame, sensitive_features="sex").projection_.group_columns == ("sex",)
    assert FairPCA(n_components=1).fit(x, sensitive_features=frame["sex"]).projection_.group_columns == ("sex",)
    both = frame.assign(race=np.arange(len(x)) % 2)
    assert FairPCA(n_components=1).fit(both, sensitive_features=["sex", "race"]).projection_.group_columns == (
        "sex",
        "race",
    )
    assert FairPCA(n_components=1).fit(x, sensitive_features=sex).projection_.group_columns == ()


def test_model_json_keeps_the_group_columns_and_older_files_still_load(data, reports, tmp_path):
    model, _ = reports("fair-eig")
    folder = save_model(model, tmp_path / "model")
    record = json.loads((folder / "model.json").read_text())
    assert record["group_columns"] == ["sex"] and load_model(folder).group_columns == ("sex",)
    del record["group_columns"]  # as written before the field existed
    (folder / "model.json").write_text(json.dumps(record))
    assert load_model(folder).group_columns == ()
    record["group_columns"] = ["sex", "race"]
    (folder / "model.json").write_text(json.dumps(record))
    with pytest.raises(
        InputError,
        match=r"model\.json: group_columns \['sex', 'race'\] do not match the group "
        r"labels \(of 1 part\(s\) each\)",
    ):
        load_model(folder)
    record["group_columns"] = "sex"
    (folder / "model.json").write_text(json.dumps(record))
    with pytest.raises(InputError, match="field 'group_columns' is 'sex', expected a list of column names"):
        load_model(folder)


def test_the_command_line_report_names_groups_by_column_and_by_the_users_names(data, tmp_path, capsys):
    x, sex, _, _ = data
    source = tmp_path / "source.csv"
    pd.DataFrame(x, columns=FEATURES).assign(sex=sex).to_csv(source, index=False)
    t, m = tmp_path / "table", tmp_path / "model"
    assert main(["ingest", str(source), str(t), "--sensitive-feature", "sex"]) == 0
    assert main(["fit", str(t), str(m), "--method", "mm", "--n-components", "1", "--standardize"]) == 0
    assert json.loads((m / "model.json").read_text())["group_columns"] == ["sex"]
    capsys.readouterr()
    assert (
        main(
            [
                "report",
                str(m),
                str(t),
                str(tmp_path / "report"),
                "--max-components",
                "1",
                "--rbf-mmd",
                "none",
                "--group-name",
                "1=female",
                "--group-name",
                "sex=2=male",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "mm is judged by its own criterion: min group variance, " in out and "higher is fairer. PCA " in out
    assert "| sex=female | " in out and "| sex=male | " in out
    # an older model.json without the columns: the table's schema names them
    record = json.loads((m / "model.json").read_text())
    del record["group_columns"]
    (m / "model.json").write_text(json.dumps(record))
    assert main(["report", str(m), str(t), str(tmp_path / "old"), "--max-components", "1", "--rbf-mmd", "none"]) == 0
    assert "| sex=1 | " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["report", str(m), str(t), str(tmp_path / "bad"), "--group-name", "female"])
    assert "expected VALUE=NAME or COLUMN=VALUE=NAME (e.g. 1=female), got 'female'" in capsys.readouterr().err
    assert main(["report", str(m), str(t), str(tmp_path / "bad"), "--group-name", "3=other"]) == 2
    assert "group_names '3' name no value of the groups (1, 2 by sex)" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


# ---------------------------------------------------------------------- progress
def test_the_rbf_mmd_pass_shows_a_progress_bar(data, reports, monkeypatch):
    """The RBF-kernel MMD² over every pair of rows, the report's longest step on a long table,
    draws a bar (one tick per arm), as the curves' refits do (one per r)."""
    import io

    from fairpca_dist.assessment import report as report_module
    from fairpca_dist.engine.progress import progress_bar

    _, _, moments, passes = data
    model, _ = reports("fair-eig")
    bars = []

    def recorded(label, **options):
        bar = progress_bar(label, file=io.StringIO(), disable=False)
        bars.append(bar)
        return bar

    monkeypatch.setattr(report_module, "progress_bar", recorded)
    build_report(moments, model, max_components=2, passes=passes)
    assert [(bar.desc.strip(), bar.n, bar.total) for bar in bars] == [
        ("report: pca and fair-eig at r = 1..2", 2, 2),
        ("report: RBF-kernel MMD² of pca and fair-eig over 400 rows (every pair of rows)", 2, 2),
    ]
    build_report(moments, reports("pca")[0], max_components=2, rbf_mmd="none")
    assert bars[-1].desc.strip() == "report: pca at r = 1..2"  # a pca model: pca once


# ---------------------------------------------------------------------- curves of a method slow to refit
def test_a_method_slow_to_refit_draws_its_curves_up_to_its_own_r_by_default(data, reports, tmp_path):
    _, _, moments, _ = data
    for method, options in (("mmd", {"tau": 0.01}), ("mmd", OPTIONS["mmd"]), ("mm-robust", {})):
        model, _ = reports(method, **options)
        assert curve_length(None, moments.n_features, model) == 1, method
        assert curve_length(3, moments.n_features, model) == 3, method
    assert curve_length(None, moments.n_features, reports("mm")[0]) == moments.n_features
    _, report = reports("mmd", tau=0.01)
    text = write_report(report, tmp_path / "report").markdown.read_text()
    assert (
        "They stop at the model's r = 1: mmd is slow to refit (it can take minutes per r on a few thousand "
        "rows), so by default the report does not refit it beyond its own r"
    ) in text
