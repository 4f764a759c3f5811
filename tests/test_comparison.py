"""The comparison of every method (``fairpca compare``; issue 15).

References are computed here from the rows with numpy: each method fitted alone (on all rows,
and on the training cells' rows found with ``HashCells.assign``) and its criteria from the
projected rows; the passes over the rows are counted at ``run_graph``, where every pass goes.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import GroupMoments, HashCells, fit_projection
from fairpca_dist.assessment.comparison import pareto_front
from fairpca_dist.assessment.metrics import mmd2_rbf
from fairpca_dist.assessment.table_comparison import compare_table
from fairpca_dist.engine import passes as passes_module
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.exceptions import GroupError, InputError, SchemaError, SolverError
from fairpca_dist.io.ingest import ingest_table

FEATURES = list("abcd")


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    x, labels = grouped_data(n_rows=800, n_features=4, n_groups=2, seed=3)
    y = (x[:, 0] + np.random.default_rng(4).normal(size=800) > np.median(x[:, 0])).astype(int)
    return pd.DataFrame(x, columns=FEATURES).assign(id=np.arange(800), sex=labels, label=y)


@pytest.fixture()
def table(frame, tmp_path):
    ingest_table(frame, tmp_path / "table", sensitive_feature=["sex"], key_columns=["id"], pass_through=["label"])
    return tmp_path / "table"


@pytest.fixture()
def count_passes(monkeypatch):
    """Every pass over the rows goes through passes.run_graph: count them."""
    calls = []
    real = passes_module.run_graph

    def counting(*args, **kwargs):
        calls.append(kwargs.get("label"))
        return real(*args, **kwargs)

    monkeypatch.setattr(passes_module, "run_graph", counting)
    return calls


def standardised(rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return rows / scale


def scores_from_rows(z_fit, g_fit, z, g, v):
    """Criteria of V from the rows: errors about the fitting rows' group means (center="group"),
    kept variance per group, explained-variance ratio about the scored rows' mean, linear MMD².
    Kept variance is zᵀMz with M = 2P − P², P = VVᵀ (= P for orthonormal V; the rank-relaxed
    maps of mm-sparse are scored so, as metrics documents)."""
    p = v @ v.T
    kept = 2 * p - p @ p

    def variance(rows):
        return np.sum((rows @ kept) * rows, axis=1)

    groups = sorted(set(g))
    error, group_variance, means = [], [], []
    for label in groups:
        rows = z[g == label] - z_fit[g_fit == label].mean(axis=0)
        error.append(np.mean(np.sum(rows**2, axis=1) - variance(rows)))
        group_variance.append(np.mean(variance(rows)))
        means.append(z[g == label].mean(axis=0))
    centred = z - z.mean(axis=0)
    return {
        "abdiff": max(error) - min(error),
        "min_group_variance": min(group_variance),
        "explained_variance_ratio": np.sum(variance(centred)) / np.sum(centred**2),
        "mmd2_linear": float(np.sum(((means[0] - means[1]) @ v) ** 2)),
    }


@pytest.mark.filterwarnings("ignore::fairpca_dist.exceptions.ConvergenceWarning")
def test_each_method_equals_the_method_fitted_alone_and_scored_from_rows(frame, table, tmp_path):
    methods = {
        "pca": {},
        "kleindessner": {},
        "mm-sparse": {"penalty": [0.01, 0.05]},
        "mm-robust": {"max_iter": 30, "tol": 1e-7},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = compare_table(table, tmp_path / "out", n_components=2, methods=methods, target="label")
    x, g = frame[FEATURES].to_numpy(), frame["sex"].to_numpy()
    cell = HashCells(("id",), 10).assign(frame[["id"]])
    train = np.isin(cell, comparison.split.train)
    assert 0 < train.sum() < len(frame)
    total = GroupMoments.from_arrays(x, g, feature_names=FEATURES)
    train_moments = GroupMoments.from_arrays(x[train], g[train], feature_names=FEATURES)
    assert len(comparison.candidates) == 5
    for candidate in comparison.candidates:
        assert candidate.ok, candidate.message
        options = {**candidate.params, **({"max_iter": 30, "tol": 1e-7} if candidate.method == "mm-robust" else {})}
        reads = candidate.method == "mm-robust"
        alone = fit_projection(
            total,
            2,
            method=candidate.method,
            standardize=True,
            random_state=0,
            passes=ArrayPasses(x, g, total.groups) if reads else None,
            **options,
        )
        np.testing.assert_allclose(candidate.model.components, alone.components, atol=1e-7, err_msg=candidate.label)
        z = standardised(x, alone.scale)
        expected = scores_from_rows(z, g, z, g, alone.components)
        for key, value in expected.items():
            assert candidate.value(key) == pytest.approx(value, rel=1e-6, abs=1e-9), (candidate.label, key)
        held = fit_projection(
            train_moments,
            2,
            method=candidate.method,
            standardize=True,
            random_state=0,
            passes=ArrayPasses(x[train], g[train], total.groups) if reads else None,
            **options,
        )
        zt = standardised(x, held.scale)
        expected = scores_from_rows(zt[train], g[train], zt[~train], g[~train], held.components)
        for key, value in expected.items():
            assert candidate.value(key, "test") == pytest.approx(value, rel=1e-6, abs=1e-9), (candidate.label, key)
        assert (candidate.passes > 0) == reads
        sigma = comparison.settings["sigma"]["2"]
        rbf = mmd2_rbf(
            total.rescaled(alone.scale),
            ArrayPasses(x, g, total.groups, scale=alone.scale),
            candidate.model.components,
            sigma,
            estimator="rff",
            random_state=0,
        )
        assert candidate.rbf_mmd2 == pytest.approx(float(rbf.max()), rel=1e-5)  # float32 cos/sin in compare
        assert 0.0 <= candidate.value("accuracy") <= 1.0 and candidate.value("dp_difference") is not None
    files = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"comparison.md", "comparison.html", "comparison.json", "comparison.csv"} <= files
    assert "pareto_r2_max_loss.png" in files and "pareto_r2_dp_difference.png" in files
    text = (tmp_path / "out" / "comparison.md").read_text()
    assert "★" in text and "Passes over the rows" in text and "the front is" in text
    document = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert len(document["candidates"]) == 5


def test_moment_methods_read_the_rows_once(table, tmp_path, count_passes):
    methods = ["pca", "fair-eig", "kleindessner-cov", "jevd-orthogonal", "mm"]
    comparison = compare_table(table, tmp_path / "out", n_components=[1, 2], methods=methods, rbf_mmd=False)
    assert len(count_passes) == 1, count_passes
    assert comparison.passes["cell moments"] == 1 and sum(comparison.passes.values()) == 1
    assert all(c.passes == 0 for c in comparison.candidates)
    assert (tmp_path / "out" / "group_error_vs_r.png").is_file()
    count_passes.clear()
    again = compare_table(table, tmp_path / "again", n_components=[1, 2], methods=methods, rbf_mmd=False)
    assert count_passes == [] and again.passes["cell moments"] == 0  # the cell moments are cached


def test_passes_of_row_reading_methods_and_rbf_are_counted(table, tmp_path, count_passes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = compare_table(
            table, tmp_path / "out", n_components=2, methods={"pca": {}, "mm-robust": {"max_iter": 5}}
        )
    robust = next(c for c in comparison.candidates if c.method == "mm-robust")
    assert robust.reads_rows and robust.passes >= 2  # one per iteration, on all rows and on the training cells
    assert sum(comparison.passes.values()) == len(count_passes)
    assert comparison.passes["random-feature sums"] == 1  # every fit's RBF MMD² in one pass


def broken(moments, n_components, *, random_state=None, center="group"):
    raise SolverError("this solver always fails")


def test_a_failing_or_unconverged_method_keeps_its_row(table, tmp_path):
    comparison = compare_table(
        table,
        tmp_path / "out",
        n_components=2,
        rbf_mmd=False,
        methods={"pca": {}, broken: {}, "samadi-mw": {"max_iter": 1}},
    )
    by_method = {c.method: c for c in comparison.candidates}
    assert by_method["broken"].status == "failed" and "always fails" in by_method["broken"].message
    assert not by_method["samadi-mw"].converged and by_method["samadi-mw"].ok
    assert all(by_method["samadi-mw"] not in comparison.front(2, key) for key in ("max_loss", "abdiff"))
    assert any("Did not converge" in line and "samadi-mw" in line for line in comparison.reading(2))
    text = (tmp_path / "out" / "comparison.md").read_text()
    assert "broken" in text and "always fails" in text and "Failed: broken" in text


@pytest.mark.parametrize(
    ("settings", "error", "words"),
    [
        ({"methods": ["pca", "nope"]}, InputError, "unknown method 'nope'"),
        ({"methods": {"dro": {"lam": []}}}, InputError, "gives no value"),
        ({"methods": {"pca": {"tol": 1}}}, InputError, "unknown option"),
        ({"n_components": 9}, InputError, "n_components"),
        ({"n_components": []}, InputError, "no rank"),
        ({"target": "income"}, SchemaError, "target column 'income'"),
        ({"train_fraction": 0.75}, InputError, "whole number"),
    ],
)
def test_bad_settings_fail_before_any_pass(table, tmp_path, count_passes, settings, error, words):
    arguments = {"n_components": 2, "methods": ["pca"], **settings}
    with pytest.raises(error, match=words):
        compare_table(table, tmp_path / "out", **arguments)
    assert count_passes == [] and not (tmp_path / "out").exists()


def test_a_table_with_one_group_fails_before_any_pass(frame, tmp_path, count_passes):
    ingest_table(frame.assign(sex="all"), tmp_path / "table", sensitive_feature=["sex"], key_columns=["id"])
    count_passes.clear()
    with pytest.raises(GroupError, match="1 group"):
        compare_table(tmp_path / "table", tmp_path / "out", n_components=2)
    assert count_passes == []


def test_pareto_front_against_brute_force():
    rng = np.random.default_rng(0)
    points = [tuple(p) for p in rng.random((40, 2))]
    for better, sign in (("lower", 1), ("higher", -1)):
        front = set(pareto_front(points, better))
        for i, (c, v) in enumerate(points):
            beaten = any(sign * c2 <= sign * c and v2 >= v and (c2, v2) != (c, v) for c2, v2 in points)
            assert (i not in front) == beaten


def test_compare_on_a_frame_equals_compare_on_its_ingested_table(frame, table, tmp_path):
    from fairpca_dist import compare, write_comparison

    methods = {"pca": {}, "fair-eig": {}, "mm-robust": {"max_iter": 5}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = compare(
            frame, sensitive_feature="sex", n_components=2, methods=methods, target="label", key_columns=["id"]
        )
        ingested = compare_table(table, tmp_path / "out", n_components=2, methods=methods, target="label")
    columns = [c for c in direct.table().columns if c != "seconds"]
    pd.testing.assert_frame_equal(direct.table()[columns], ingested.table()[columns], rtol=1e-9)
    assert direct.passes == ingested.passes
    write_comparison(direct, tmp_path / "frame")
    assert (tmp_path / "frame" / "comparison.html").is_file()
    assert direct.group_names == ingested.group_names == [f"sex={group}" for group in direct.groups]
    assert f"groups {direct.group_names[0]} (" in (tmp_path / "frame" / "comparison.md").read_text()
    with pytest.raises(SchemaError, match="target column 'income'"):
        compare(frame, sensitive_feature="sex", n_components=2, target="income", key_columns=["id"])
