"""Every moment-based metric equals its literal computation from the rows."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import grouped_data

from fairpca_dist import GroupMoments, fit_projection
from fairpca_dist.assessment import metrics
from fairpca_dist.solvers.stiefel import top_eigenvectors


@pytest.fixture(params=[None, "weights"])
def data(request):
    x, labels = grouped_data(n_rows=500, n_features=6, n_groups=3, seed=4, offset=50.0)
    weights = np.random.default_rng(5).uniform(0.2, 3.0, size=500) if request.param else None
    components = np.linalg.qr(np.random.default_rng(6).normal(size=(6, 2)))[0]
    return x, labels, weights, components, GroupMoments.from_arrays(x, labels, weights=weights)


@pytest.mark.parametrize("center", ["group", "global", "origin"])
def test_errors_losses_and_group_variance_match_rows(data, center):
    x, labels, weights, components, moments = data
    np.testing.assert_allclose(
        metrics.group_errors(moments, components, center=center),
        metrics.group_errors_from_rows(x, labels, components, center=center, weights=weights),
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        metrics.group_losses(moments, components, center=center),
        metrics.group_losses_from_rows(x, labels, components, center=center, weights=weights),
        rtol=1e-8,
        atol=1e-9,
    )
    np.testing.assert_allclose(
        metrics.group_explained_variance_ratio(moments, components, center=center),
        metrics.group_explained_variance_ratio_from_rows(x, labels, components, center=center, weights=weights),
        rtol=1e-9,
    )


def test_total_explained_variance_and_mmd_match_rows(data):
    x, labels, weights, components, moments = data
    np.testing.assert_allclose(
        metrics.explained_variance_ratio(moments, components),
        metrics.explained_variance_ratio_from_rows(x, components, weights=weights),
        rtol=1e-9,
    )
    mmd = metrics.mmd2_linear(moments, components)
    np.testing.assert_allclose(
        mmd, metrics.mmd2_linear_from_rows(x, labels, components, weights=weights), rtol=1e-7, atol=1e-9
    )
    assert mmd.shape == (3, 3) and np.allclose(np.diag(mmd), 0) and np.allclose(mmd, mmd.T)


def test_loss_is_zero_at_each_groups_own_optimum(data):
    _, _, _, _, moments = data
    for g in range(moments.n_groups):
        _, own = top_eigenvectors(moments.covariance("group")[g], 2)
        losses = metrics.group_losses(moments, own)
        assert losses[g] == pytest.approx(0.0, abs=1e-10)
        assert np.all(losses >= -1e-10)


def test_explained_variance_matches_numpy_ddof1(data):
    x, labels, weights, components, moments = data
    w = np.ones(len(x)) if weights is None else weights
    projected = (x - w @ x / w.sum()) @ components
    expected = w @ projected**2 / (w.sum() - 1)  # frequency weights: divisor Σw − 1
    np.testing.assert_allclose(metrics.explained_variance(moments, components, ddof=1), expected, rtol=1e-10)
    if weights is None:
        np.testing.assert_allclose(expected, projected.var(axis=0, ddof=1), rtol=1e-12)


def test_bad_components_shape(data):
    *_, moments = data
    with pytest.raises(ValueError, match="components must have shape"):
        metrics.group_errors(moments, np.eye(3))


@pytest.mark.parametrize("center", ["group", "global"])
def test_rank_relaxed_maps_match_rows(data, center):
    """Samadi-style maps E = [√λ*_j u_j] (orthogonal, not unit columns): x ↦ x EEᵀ."""
    x, labels, weights, _, moments = data
    basis = np.linalg.qr(np.random.default_rng(8).normal(size=(6, 3)))[0]
    components = basis * np.sqrt([1.0, 0.6, 0.3])
    for moment_value, row_value in [
        (
            metrics.group_errors(moments, components, center=center),
            metrics.group_errors_from_rows(x, labels, components, center=center, weights=weights),
        ),
        (
            metrics.group_losses(moments, components, n_components=2, center=center),
            metrics.group_losses_from_rows(x, labels, components, n_components=2, center=center, weights=weights),
        ),
        (
            metrics.group_explained_variance_ratio(moments, components, center=center),
            metrics.group_explained_variance_ratio_from_rows(x, labels, components, center=center, weights=weights),
        ),
    ]:
        np.testing.assert_allclose(moment_value, row_value, rtol=1e-8, atol=1e-9)


def test_errors_about_given_points_match_rows(data):
    """err_g about arbitrary points (a training mean applied to other rows) equals the weighted
    mean of ‖(x − c_g) − (x − c_g)VVᵀ‖² over the group's rows; a wrong centre changes it."""
    x, labels, weights, v, _ = data
    w = np.ones(len(x)) if weights is None else weights
    moments = GroupMoments.from_arrays(x + 1e6, labels, weights=weights)
    points = np.random.default_rng(3).standard_normal((moments.n_groups, x.shape[1])) + 1e6
    expected = []
    for g, point in zip(moments.groups, points, strict=True):
        y, wg = x[labels == g] + 1e6 - point, w[labels == g]
        expected.append(wg @ np.sum((y - y @ v @ v.T) ** 2, axis=1) / wg.sum())
    np.testing.assert_allclose(metrics.group_errors_about(moments, v, points), expected, rtol=1e-7)
    shared = metrics.group_errors_about(moments, v, moments.global_mean)
    np.testing.assert_allclose(shared, metrics.group_errors(moments, v, center="global"), rtol=1e-9)
    assert not np.allclose(shared, metrics.group_errors(moments, v, center="group"), rtol=1e-3)


# ---------------------------------------------------------------------- RBF MMD², from the rows
def _dense_rbf_mmd2(x, labels, components, sigma, weights=None):
    """The biased V-statistic literally: weighted means of the N × N kernel matrix per pair."""
    u = x @ components
    kernel = np.exp(-((u[:, None, :] - u[None, :, :]) ** 2).sum(-1) / (2 * sigma**2))
    w = np.ones(len(x)) if weights is None else weights
    groups = sorted(set(labels))
    labels = np.asarray(labels)
    out = np.zeros((len(groups), len(groups)))
    for a, ga in enumerate(groups):
        for b, gb in enumerate(groups):
            wa = np.where(labels == ga, w, 0.0) / w[labels == ga].sum()
            wb = np.where(labels == gb, w, 0.0) / w[labels == gb].sum()
            out[a, b] = wa @ kernel @ wa + wb @ kernel @ wb - 2 * wa @ kernel @ wb
    return out


@pytest.mark.parametrize("block_rows", [7, 64, 4096])
def test_rbf_mmd_exact_equals_the_dense_kernel_matrix(data, block_rows):
    from fairpca_dist.engine.datapasses import ArrayPasses

    x, labels, weights, components, moments = data
    passes = ArrayPasses(x, labels, moments.groups, weights=weights)
    sigma = metrics.rbf_bandwidth(moments, passes, components, max_rows_per_group=10_000)
    got = metrics.mmd2_rbf(moments, passes, components, sigma, block_rows=block_rows)
    np.testing.assert_allclose(got, _dense_rbf_mmd2(x, labels, components, sigma, weights), rtol=1e-9, atol=1e-13)
    assert got.shape == (3, 3) and np.all(got[~np.eye(3, dtype=bool)] > 0)


def test_rbf_bandwidth_is_the_median_heuristic_on_every_row_when_the_sample_holds_them(data):
    from scipy.spatial.distance import pdist

    from fairpca_dist.engine.datapasses import ArrayPasses

    x, labels, _, components, moments = data
    passes = ArrayPasses(x, labels, moments.groups)
    median = np.median(pdist(x @ components, "sqeuclidean"))
    assert metrics.rbf_bandwidth(moments, passes, components, max_rows_per_group=500) == pytest.approx(
        np.sqrt(median / 2)
    )
    assert metrics.rbf_bandwidth(moments, passes, components, mode="paper", max_rows_per_group=500) == pytest.approx(
        np.sqrt(median)
    )


def test_rbf_mmd_random_features_converge_to_exact(data):
    from fairpca_dist.engine.datapasses import ArrayPasses

    x, labels, weights, components, moments = data
    passes = ArrayPasses(x, labels, moments.groups, weights=weights)
    exact = metrics.mmd2_rbf(moments, passes, components, 1.5)
    errors = [
        np.abs(
            metrics.mmd2_rbf(moments, passes, components, 1.5, estimator="rff", n_random_features=d, random_state=3)
            - exact
        ).max()
        for d in (30, 30_000)
    ]
    assert errors[1] < 0.05 * exact[~np.eye(3, dtype=bool)].min() and errors[1] < errors[0]


def test_rbf_mmd_on_a_dask_table_equals_numpy(data):
    import dask.dataframe as dd
    import pandas as pd

    from fairpca_dist.engine.datapasses import ArrayPasses
    from fairpca_dist.engine.passes import table_passes

    x, labels, weights, components, moments = data
    frame = pd.DataFrame(x, columns=list(moments.feature_names)).assign(group=labels)
    if weights is not None:
        frame["w"] = weights
    table = table_passes(
        dd.from_pandas(frame, npartitions=5),
        moments,
        sensitive_feature="group",
        sample_weight="w" if weights is not None else None,
    )
    numpy = ArrayPasses(x, labels, moments.groups, weights=weights)
    for estimator in ("exact", "rff"):
        np.testing.assert_allclose(
            metrics.mmd2_rbf(moments, table, components, 2.0, estimator=estimator),
            metrics.mmd2_rbf(moments, numpy, components, 2.0, estimator=estimator),
            rtol=1e-9,
            atol=1e-12,
        )


def test_rbf_mmd_bad_input(data):
    from fairpca_dist import GroupError, InputError
    from fairpca_dist.engine.datapasses import ArrayPasses

    x, labels, _, components, moments = data
    passes = ArrayPasses(x, labels, moments.groups)
    with pytest.raises(InputError, match="estimator"):
        metrics.mmd2_rbf(moments, passes, components, 1.0, estimator="nystroem")
    with pytest.raises(InputError, match="sigma"):
        metrics.mmd2_rbf(moments, passes, components, 0.0)
    with pytest.raises(InputError, match="n_features"):
        metrics.mmd2_rbf(moments, passes, components, 1.0, estimator="rff", n_random_features=0)
    with pytest.raises(InputError, match="block_rows"):
        metrics.mmd2_rbf(moments, passes, components, 1.0, block_rows=0)
    with pytest.raises(GroupError, match="groups"):
        metrics.mmd2_rbf(moments, ArrayPasses(x, labels, moments.groups[::-1]), components, 1.0)


def _literal_rff_mmd2(x, labels, weights, origin, components, sigma, n_features, seed):
    """RFF MMD² from the rows: features drawn by numpy from a fresh generator for this r."""
    rng = np.random.default_rng(seed)
    omega = rng.normal(scale=1.0 / sigma, size=(components.shape[1], n_features))
    beta = rng.uniform(0.0, 2.0 * np.pi, size=n_features)
    phi = np.sqrt(2.0 / n_features) * np.cos((x - origin) @ components @ omega + beta)
    w = np.ones(len(x)) if weights is None else weights
    means = [w[labels == g] @ phi[labels == g] / w[labels == g].sum() for g in sorted(set(labels))]
    return np.array([[np.sum((a - b) ** 2) for b in means] for a in means])


def test_rbf_mmd_many_equals_one_call_per_projection_in_one_pass(data):
    from fairpca_dist.engine.datapasses import ArrayPasses

    x, labels, weights, components, moments = data
    rng = np.random.default_rng(9)
    projections = [components, np.linalg.qr(rng.normal(size=(6, 1)))[0], np.linalg.qr(rng.normal(size=(6, 2)))[0]]
    passes = ArrayPasses(x, labels, moments.groups, weights=weights)
    many = metrics.mmd2_rbf_many(moments, passes, projections, 1.7, n_random_features=300, random_state=11)
    assert passes.n_passes == 1 and len(many) == 3
    for v, got in zip(projections, many, strict=True):
        np.testing.assert_array_equal(
            got, metrics.mmd2_rbf(moments, passes, v, 1.7, estimator="rff", n_random_features=300, random_state=11)
        )
        literal = _literal_rff_mmd2(x, labels, weights, moments.global_mean, v, 1.7, 300, 11)
        np.testing.assert_allclose(got, literal, rtol=1e-6, atol=1e-12)  # float32 cos/sin by default
        np.testing.assert_allclose(
            metrics.mmd2_rbf_many(
                moments, passes, [v], 1.7, n_random_features=300, random_state=11, precision="double"
            )[0],
            literal,
            rtol=1e-10,
            atol=1e-14,
        )
        assert got.shape == (3, 3) and np.all(got[~np.eye(3, dtype=bool)] > 0)
    np.testing.assert_array_equal(
        metrics.mmd2_rbf_many(moments, passes, projections[2:], 1.7, n_random_features=300, random_state=11)[0], many[2]
    )
    assert passes.n_passes == 8


def test_rbf_mmd_many_on_a_dask_table_is_one_pass_and_equals_numpy(data):
    import dask.dataframe as dd
    import pandas as pd

    from fairpca_dist.engine.datapasses import ArrayPasses
    from fairpca_dist.engine.passes import table_passes

    x, labels, weights, components, moments = data
    frame = pd.DataFrame(x, columns=list(moments.feature_names)).assign(group=labels, w=weights)
    table = table_passes(
        dd.from_pandas(frame, npartitions=4),
        moments,
        sensitive_feature="group",
        sample_weight="w" if weights is not None else None,
    )
    projections = [components, components[:, :1]]
    got = metrics.mmd2_rbf_many(moments, table, projections, 2.0, n_random_features=50, precision="single")
    assert table.n_passes == 1
    want = metrics.mmd2_rbf_many(
        moments,
        ArrayPasses(x, labels, moments.groups, weights=weights),
        projections,
        2.0,
        n_random_features=50,
        precision="single",
    )
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_rbf_mmd_many_bad_input_fails_before_any_pass(data):
    from fairpca_dist import GroupError, InputError
    from fairpca_dist.engine.datapasses import ArrayPasses

    x, labels, _, components, moments = data
    passes = ArrayPasses(x, labels, moments.groups)
    with pytest.raises(InputError, match="non-empty"):
        metrics.mmd2_rbf_many(moments, passes, [], 1.0)
    with pytest.raises(InputError, match="non-empty"):
        metrics.mmd2_rbf_many(moments, passes, components, 1.0)  # one matrix, not a list of them
    with pytest.raises(InputError, match="n_features=6"):
        metrics.mmd2_rbf_many(moments, passes, [components, components[:5]], 1.0)
    with pytest.raises(InputError, match="sigma"):
        metrics.mmd2_rbf_many(moments, passes, [components], -1.0)
    with pytest.raises(InputError, match="n_features"):
        metrics.mmd2_rbf_many(moments, passes, [components], 1.0, n_random_features=0)
    with pytest.raises(InputError, match="precision"):
        metrics.mmd2_rbf_many(moments, passes, [components], 1.0, precision="half")
    with pytest.raises(GroupError, match="groups"):
        metrics.mmd2_rbf_many(moments, ArrayPasses(x, labels, moments.groups[::-1]), [components], 1.0)
    assert passes.n_passes == 0


@pytest.mark.parametrize("p", [30, 400])
def test_best_rank_variance_matches_the_full_spectrum(p):
    # top-r only (Krylov from p = 200 on) against the sum of the full eigvalsh spectrum
    rng = np.random.default_rng(p)
    rows = rng.standard_normal((2, 3 * p, p)) * (0.95 ** np.arange(p))
    covariance = np.einsum("gni,gnj->gij", rows, rows) / (3 * p)
    full = np.linalg.eigvalsh(covariance)
    for r in (1, 5, p):
        np.testing.assert_allclose(metrics.best_rank_variance(covariance, r), full[:, p - r :].sum(axis=1), rtol=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_a_loss_rounding_below_zero_is_zero(seed):
    """At r = p every loss is 0; computed, it is ±1e-15 of the variance. The sign of rounding is
    not shown (a user read −1.8e-15 as a fault); a loss below zero by more would still be."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(200, 5)) * np.array([1e4, 1.0, 1e-3, 30.0, 2.0])
    moments = GroupMoments.from_arrays(x, rng.integers(0, 2, 200))
    for r in (5, 4):
        components = fit_projection(moments, r, method="pca").components
        losses = metrics.group_losses(moments, components, n_components=r)
        assert (losses >= 0.0).all(), losses
    np.testing.assert_array_equal(metrics.group_losses(moments, np.eye(5)), 0.0)
