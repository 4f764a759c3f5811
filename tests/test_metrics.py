"""Every moment-based metric equals its literal computation from the rows."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import grouped_data
from fairpca_dist import GroupMoments, metrics
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
        rtol=1e-8, atol=1e-9,
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
    np.testing.assert_allclose(mmd, metrics.mmd2_linear_from_rows(x, labels, components, weights=weights), rtol=1e-7, atol=1e-9)
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
        (metrics.group_errors(moments, components, center=center),
         metrics.group_errors_from_rows(x, labels, components, center=center, weights=weights)),
        (metrics.group_losses(moments, components, n_components=2, center=center),
         metrics.group_losses_from_rows(x, labels, components, n_components=2, center=center, weights=weights)),
        (metrics.group_explained_variance_ratio(moments, components, center=center),
         metrics.group_explained_variance_ratio_from_rows(x, labels, components, center=center, weights=weights)),
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
    for g, point in zip(moments.groups, points):
        y, wg = x[labels == g] + 1e6 - point, w[labels == g]
        expected.append(wg @ np.sum((y - y @ v @ v.T) ** 2, axis=1) / wg.sum())
    np.testing.assert_allclose(metrics.group_errors_about(moments, v, points), expected, rtol=1e-7)
    shared = metrics.group_errors_about(moments, v, moments.global_mean)
    np.testing.assert_allclose(shared, metrics.group_errors(moments, v, center="global"), rtol=1e-9)
    assert not np.allclose(shared, metrics.group_errors(moments, v, center="group"), rtol=1e-3)
