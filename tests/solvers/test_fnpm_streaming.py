"""fnpm-streaming: its pass (S_g U) against numpy on the rows, its iterations against plain power
iterations on explicit matrices, its limit against fnpm, and dask (threads, a LocalCluster,
Parquet, any partitioning) against in-memory numpy passes, iteration by iteration."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import GroupMoments, compute_moments, fit_projection
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.engine.passes import table_passes
from fairpca_dist.exceptions import GroupError, InputError
from fairpca_dist.io.datasets import synthetic_group_table
from fairpca_dist.solvers.fnpm_streaming import subspace_change
from fairpca_dist.solvers.stiefel import random_orthonormal, subspace_distance

FEATURES = [f"f{j}" for j in range(8)]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """Two groups, 8 features, column means of 1e3 (centring matters)."""
    frame = synthetic_group_table(3000, n_features=8, seed=34).drop(columns="row_id")
    frame[FEATURES] += 1e3
    return frame


def rows_of(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return frame[FEATURES].to_numpy(), frame["group"].to_numpy()


def fit(frame, passes=None, r=3, **options):
    x, labels = rows_of(frame)
    moments = GroupMoments.from_arrays(x, labels, feature_names=FEATURES)
    passes = ArrayPasses(x, labels, moments.groups) if passes is None else passes
    return fit_projection(moments, r, method="fnpm-streaming", passes=passes, random_state=0, **options)


@pytest.mark.parametrize("weighted", [False, True])
def test_scatter_products_equal_numpy_on_the_rows(weighted):
    x, labels = grouped_data(n_rows=700, n_features=5, n_groups=3, seed=2, offset=1e4)
    weights = np.random.default_rng(1).uniform(0.5, 2.0, size=700) if weighted else None
    moments = GroupMoments.from_arrays(x, labels, weights=weights)
    scale = np.array([1.0, 2.0, 0.5, 3.0, 1.5])
    centers = moments.mean / scale + np.random.default_rng(3).normal(size=(3, 5))  # any centres
    u = np.random.default_rng(4).normal(size=(5, 4))
    passes = ArrayPasses(x, labels, moments.groups, weights=weights).rescaled(scale)
    frame = pd.DataFrame(x, columns=moments.feature_names).assign(group=labels, w=weights if weighted else 1.0)
    on_table = table_passes(
        dd.from_pandas(frame, npartitions=3), moments, sensitive_feature="group", sample_weight="w"
    ).rescaled(scale)
    w = np.ones(700) if weights is None else weights
    for result in (passes.scatter_products(u, centers), on_table.scatter_products(u, centers)):
        for g, label in enumerate(moments.groups):
            y = x[labels == label] / scale - centers[g]
            expected = (y * w[labels == label, None]).T @ (y @ u)
            np.testing.assert_allclose(result.b[g], expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
            assert result.h[g] == pytest.approx(np.trace(u.T @ expected), rel=1e-10)


def top_ritz(block: np.ndarray, matrix: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Rayleigh–Ritz on span(block): the ``count`` Ritz pairs of largest |value|."""
    values, rotations = np.linalg.eigh(block.T @ matrix @ block)
    order = np.argsort(-np.abs(values))[:count]
    return values[order], block @ rotations[:, order]


@pytest.mark.parametrize("oversample", [0, 2])
def test_mean_constraint_iterates_are_power_iterations_on_the_explicit_matrix(table, oversample):
    """The block evaluated by pass t is orth((Π Σ Π)^{t−1} V₀), Π = I − ffᵀ/‖f‖², V₀ the seeded
    random start (3 + s columns) projected off f, and the result after t passes its top-3 Ritz
    vectors: plain numpy on Σ and f from the rows."""
    x, labels = rows_of(table)
    f = x[labels == "g1"].mean(0) - x[labels == "g0"].mean(0)
    shrink = np.eye(8) - np.outer(f, f) / (f @ f)
    sigma = shrink @ np.cov(x.T, bias=True) @ shrink
    block = np.linalg.qr(shrink @ random_orthonormal(np.random.default_rng(0), 8, 3 + oversample))[0]
    for passes in range(2, 6):
        block = np.linalg.qr(sigma @ block)[0]
        model = fit(table, constraint="mean", max_iter=passes, tol=1e-300, oversample=oversample)
        assert model.status == "max_iter" and model.certificate["passes"] == passes == model.n_iter
        assert subspace_distance(model.components, top_ritz(block, sigma, 3)[1]) < 1e-10


@pytest.mark.parametrize("oversample", [0, 3])
def test_covariance_iterates_are_block_power_iterations_on_q(table, oversample):
    """At pass t the unfair directions are the top-2 Ritz vectors of Q on span W_t,
    W_t = orth(Q^{t−1} W₀) (W₀: the first random draw, 2 + s columns): their Ritz values equal
    numpy's on explicit covariances."""
    x, labels = rows_of(table)
    q = np.cov(x[labels == "g1"].T) - np.cov(x[labels == "g0"].T)
    w = random_orthonormal(np.random.default_rng(0), 8, 2 + oversample)
    for passes in range(2, 6):
        w = np.linalg.qr(q @ w)[0]
        model = fit(table, constraint="covariance", n_unfair=2, max_iter=passes, tol=1e-300, oversample=oversample)
        np.testing.assert_allclose(model.details["unfair_eigenvalues"], top_ritz(w, q, 2)[0], rtol=1e-10)


@pytest.mark.parametrize(
    ("constraint", "n_unfair", "r", "tradeoff"),
    [("mean", 2, 3, 1.0), ("covariance", 2, 3, 1.0), ("all", 2, 3, 1.0), ("all", 3, 2, 1.0), ("all", 2, 3, 0.5)],
)
def test_reaches_fnpms_subspace(table, constraint, n_unfair, r, tradeoff):
    options = {"constraint": constraint, "n_unfair": n_unfair, "tradeoff": tradeoff}
    x, labels = rows_of(table)
    closed = fit_projection(GroupMoments.from_arrays(x, labels, feature_names=FEATURES), r, method="fnpm", **options)
    model = fit(table, r=r, tol=1e-10, **options)
    assert model.status == "converged" and model.n_iter < 200
    assert subspace_distance(model.components, closed.components) < 1e-8
    assert model.details["unfair_dimension"] == closed.details["unfair_dimension"]
    np.testing.assert_allclose(model.details["unfair_eigenvalues"], closed.details["unfair_eigenvalues"], rtol=1e-8)
    for key in ("projected_mean_gap", "projected_covariance_gap", "explained_variance_ratio"):
        assert model.certificate[key] == pytest.approx(closed.certificate[key], rel=1e-7, abs=1e-12)
    if tradeoff == 1.0 and constraint != "covariance":
        assert model.certificate["projected_mean_gap"] < 1e-12


def test_zero_eigenvalues_of_q_are_left_out_as_fnpm_does():
    x, labels = grouped_data(n_rows=800, n_features=4, n_groups=2, seed=8)
    x = np.column_stack([x, x[:, 0] + x[:, 1]])  # Q u = 0 for u = e₀ + e₁ − e₄
    moments = GroupMoments.from_arrays(x, labels)
    options = {"constraint": "covariance", "n_unfair": 5}
    closed = fit_projection(moments, 1, method="fnpm", **options)
    model = fit_projection(
        moments, 1, method="fnpm-streaming", passes=ArrayPasses(x, labels, moments.groups), tol=1e-12, **options
    )
    assert closed.details["zero_directions_left_out"] == model.details["zero_directions_left_out"] == 1
    assert subspace_distance(model.components, closed.components) < 1e-8


def test_a_warm_start_at_the_solution_stops_at_once(table):
    """V starts from ``warm_start`` (W always starts at random: the mean constraint has none)."""
    first = fit(table, constraint="mean", tol=1e-10, oversample=0)
    again = fit(table, constraint="mean", tol=1e-10, oversample=0, warm_start=first.components)
    assert first.n_iter > 10 and again.n_iter == 2  # the first pass has nothing to compare with
    assert subspace_distance(again.components, first.components) < 1e-10
    assert again.options["warm_start"] is not None


def _same_run(model, reference) -> None:
    assert model.n_iter == reference.n_iter > 10
    np.testing.assert_allclose(model.objective_history, reference.objective_history, rtol=1e-10)
    np.testing.assert_allclose(model.components, reference.components, atol=1e-10)
    for key in ("unfair_change", "components_change"):
        np.testing.assert_allclose(model.details[key], reference.details[key], rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("n_partitions", [1, 4, 7])
def test_threaded_dask_passes_equal_numpy_per_iteration(table, n_partitions):
    x, labels = rows_of(table)
    moments = GroupMoments.from_arrays(x, labels, feature_names=FEATURES)
    reference = fit(table, tol=1e-9, oversample=1)  # blocks narrower than the space: many passes
    passes = table_passes(dd.from_pandas(table, npartitions=n_partitions), moments, sensitive_feature="group")
    with dask.config.set(scheduler="threads"):
        model = fit(table, passes=passes, tol=1e-9, oversample=1)
    _same_run(model, reference)
    assert model.certificate["passes"] == passes.n_passes == model.n_iter


def test_parquet_passes_on_a_local_cluster_equal_numpy_per_iteration(table, tmp_path, dask_cluster):
    for i, start in enumerate(range(0, len(table), 700)):
        table.iloc[start : start + 700].to_parquet(tmp_path / f"part-{i}.parquet")
    reference = fit(table, tol=1e-9, oversample=1)
    moments = compute_moments(str(tmp_path), sensitive_feature="group", client=dask_cluster)
    passes = table_passes(str(tmp_path), moments, sensitive_feature="group", client=dask_cluster)
    model = fit_projection(moments, 3, method="fnpm-streaming", passes=passes, random_state=0, tol=1e-9, oversample=1)
    _same_run(model, reference)


def test_subspace_change_is_the_sine_of_the_largest_principal_angle():
    rng = np.random.default_rng(0)
    a, b = (random_orthonormal(rng, 9, 3) for _ in range(2))
    assert subspace_change(a, b) == pytest.approx(subspace_distance(a, b), rel=1e-12)
    assert subspace_change(a, a) < 1e-15 and subspace_change(a, b[:, :2]) == 1.0


def test_errors_before_any_pass(table):
    x, labels = rows_of(table)
    moments = GroupMoments.from_arrays(x, labels, feature_names=FEATURES)
    passes = ArrayPasses(x, labels, moments.groups)
    with pytest.raises(InputError, match="'fnpm-streaming' reads the rows at every iteration"):
        fit_projection(moments, 2, method="fnpm-streaming")
    for options, match in [
        ({"max_iter": 1}, "max_iter"),
        ({"tol": 0.0}, "tol"),
        ({"warm_start": np.ones((8, 2))}, "warm_start"),
        ({"warm_start": np.ones((3, 3))}, "warm_start"),
        ({"tradeoff": 2.0}, "tradeoff"),
    ]:
        with pytest.raises(InputError, match=match):
            fit_projection(moments, 3, method="fnpm-streaming", passes=passes, **options)
    with pytest.raises(InputError, match="n_components=8 is more than the 7 directions left"):
        fit_projection(moments, 8, method="fnpm-streaming", passes=passes)
    three, three_labels = grouped_data(n_rows=300, n_features=4, n_groups=3, seed=1)
    moments3 = GroupMoments.from_arrays(three, three_labels)
    with pytest.raises(GroupError, match="fnpm-streaming compares exactly two groups"):
        fit_projection(moments3, 2, method="fnpm-streaming", passes=ArrayPasses(three, three_labels, moments3.groups))
    assert passes.n_passes == 0
