"""Every criterion of :func:`score_projection` equals its literal computation from the rows,
in sample and out of sample (centres from the fitting rows)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import grouped_data

from fairpca_dist import GroupMoments, InputError, fit_projection
from fairpca_dist.assessment.scoring import score_projection


@pytest.mark.parametrize("center", ["group", "global"])
@pytest.mark.parametrize(
    "method, options", [("fair-eig", {}), ("samadi-sdp", {"skip_lp": True})], ids=["orthonormal", "rank-relaxed"]
)
def test_scores_equal_the_rows(center, method, options):
    x, labels = grouped_data(n_rows=600, n_features=5, n_groups=2, seed=7, offset=20.0)
    labels = np.asarray(labels)
    train, test = np.arange(600) < 400, np.arange(600) >= 400
    fitted_on = GroupMoments.from_arrays(x[train], labels[train])
    model = fit_projection(fitted_on, 2, method=method, center=center, standardize=True, **options)
    assert (model.components.shape[1] > 2) == bool(options)  # the relaxed solution, every direction kept
    scores = score_projection(model, fitted_on, GroupMoments.from_arrays(x[test], labels[test]))

    p = model.components @ model.components.T
    keep = 2 * p - p @ p  # ⟨·, 2P − P²⟩ for rank-relaxed maps; P for orthonormal V
    z_train, z_test = x[train] / model.scale, x[test] / model.scale
    errors, within, variance = [], [], []
    for g in fitted_on.groups:
        rows = z_test[labels[test] == g]
        centre = z_train[labels[train] == g].mean(0) if center == "group" else z_train.mean(0)
        for about, out in ((centre, errors), (rows.mean(0), within)):
            y = rows - about
            out.append(np.mean(np.sum(y * y, 1) - np.einsum("ij,jk,ik->i", y, keep, y)))
        y = rows - centre
        variance.append(np.mean(np.einsum("ij,jk,ik->i", y, keep, y)))
    np.testing.assert_allclose(scores.group_error, errors, rtol=1e-10)
    np.testing.assert_allclose(scores.group_error_within, within, rtol=1e-10)
    np.testing.assert_allclose(scores.group_variance, variance, rtol=1e-10)
    share = np.array([np.mean(labels[test] == g) for g in fitted_on.groups])
    assert scores.are == pytest.approx(share @ errors, rel=1e-10)
    assert scores.abdiff == pytest.approx(max(errors) - min(errors), rel=1e-9)
    assert scores.min_group_variance == pytest.approx(min(variance), rel=1e-10)
    assert scores.as_dict()["max_loss"] == scores.max_loss and scores.n_components == 2


def test_in_sample_by_default_and_mismatched_rows():
    x, labels = grouped_data(n_rows=300, n_features=4, n_groups=3, seed=8)
    moments = GroupMoments.from_arrays(x, labels)
    model = fit_projection(moments, 2, method="pca")
    assert score_projection(model, moments).as_dict() == score_projection(model, moments, moments).as_dict()
    np.testing.assert_allclose(
        score_projection(model, moments).group_error, score_projection(model, moments).group_error_within, rtol=1e-12
    )
    other = GroupMoments.from_arrays(x[:, :3], labels)
    with pytest.raises(InputError, match="features"):
        score_projection(model, moments, other)
