"""PCA from moments equals scikit-learn's PCA on rows."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import grouped_data
from sklearn.decomposition import PCA

from fairpca_dist import GroupMoments, compute_moments, fit_projection
from fairpca_dist.solvers.stiefel import check_orthonormal, subspace_distance


@pytest.mark.parametrize("n_components", [1, 2, 5, 10, 20])
def test_matches_sklearn_on_credit(credit_standardized, n_components):
    x, labels = credit_standardized
    moments = compute_moments(x, sensitive_feature=labels, chunk_rows=7000)
    ours = fit_projection(moments, n_components, method="pca")
    reference = PCA(n_components=n_components, svd_solver="full").fit(x)
    assert subspace_distance(ours.components, reference.components_.T) < 1e-8
    check_orthonormal(ours.components)
    np.testing.assert_allclose(
        ours.objective_history[-1] * len(x) / (len(x) - 1), reference.explained_variance_.sum(), rtol=1e-10
    )


def test_matches_sklearn_with_standardize_on_raw_credit(credit_frame):
    raw = credit_frame.drop(columns="education").to_numpy()
    moments = compute_moments(raw, sensitive_feature=credit_frame["education"].to_numpy())
    ours = fit_projection(moments, 3, standardize=True, ddof=1)
    z = (raw - raw.mean(0)) / raw.std(0, ddof=1)
    reference = PCA(n_components=3, svd_solver="full").fit(z)
    assert subspace_distance(ours.components, reference.components_.T) < 1e-8
    np.testing.assert_allclose(ours.transform(raw[:5]), z[:5] @ ours.components, atol=1e-10)


def test_rotation_and_duplication_invariance():
    x, labels = grouped_data(n_rows=400, n_features=6)
    rotation = np.linalg.qr(np.random.default_rng(9).normal(size=(6, 6)))[0]
    base = fit_projection(GroupMoments.from_arrays(x, labels), 2)
    rotated = fit_projection(GroupMoments.from_arrays(x @ rotation, labels), 2)
    doubled = fit_projection(GroupMoments.from_arrays(np.vstack([x, x]), np.r_[labels, labels]), 2)
    assert subspace_distance(rotation.T @ base.components, rotated.components) < 1e-10
    assert subspace_distance(base.components, doubled.components) < 1e-10
    np.testing.assert_allclose(base.group_loss, doubled.group_loss, rtol=1e-10)
    np.testing.assert_allclose(base.group_loss, rotated.group_loss, rtol=1e-8, atol=1e-12)
