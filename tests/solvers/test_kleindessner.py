"""Kleindessner et al.'s fair PCA against an independent re-derivation from the rows (the
authors' algorithm written out here: standardise, null space of zᵀX, eigenproblems), brute force
on a tiny problem, and the mean-equality it promises for any number of groups."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from fairpca_dist import GroupMoments, InputError, fit_projection
from fairpca_dist.solvers.stiefel import subspace_distance


def two_groups(n: int = 400, p: int = 7, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = (rng.random(n) < 0.35).astype(int)
    x = rng.normal(size=(n, p)) @ rng.normal(size=(p, p)) + np.outer(z, rng.normal(size=p) * 2)
    x[z == 1] = x[z == 1] @ np.diag(rng.uniform(0.5, 2.0, size=p))  # the covariances differ too
    return x * rng.uniform(1, 100, size=p), z


def standardised(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / x.std(axis=0)


def reference(x: np.ndarray, z: np.ndarray, r: int, n_directions: int | None = None) -> np.ndarray:
    """The authors' FairPCA / FairPCAEqualizeCovariance fit, from the rows."""
    xs = standardised(x)
    basis = scipy.linalg.null_space((z - z.mean())[None, :] @ xs)
    h = basis.T @ xs.T @ xs @ basis
    if n_directions is not None:
        t = basis.T @ (np.cov(xs[z == 0].T) - np.cov(xs[z == 1].T)) @ basis
        values, vectors = np.linalg.eigh(t)
        kept = max(r, min(t.shape[0], n_directions))
        basis = basis @ vectors[:, np.argsort(np.abs(values))[:kept]]
        h = basis.T @ xs.T @ xs @ basis
    return basis @ np.linalg.eigh(h)[1][:, ::-1][:, :r]


def fit(x, z, r, method="kleindessner", **options):
    return fit_projection(GroupMoments.from_arrays(x, z), r, method=method, standardize=True, **options)


@pytest.mark.parametrize("r", [1, 3])
def test_equals_the_authors_algorithm_on_rows(r):
    x, z = two_groups()
    assert subspace_distance(fit(x, z, r).components, reference(x, z, r)) <= 1e-8


@pytest.mark.parametrize("n_directions", [2, 4, 6, 50])
def test_covariance_variant_equals_the_authors_algorithm_on_rows(n_directions):
    x, z = two_groups(seed=1)
    model = fit(x, z, 2, "kleindessner-cov", n_directions=n_directions)
    assert subspace_distance(model.components, reference(x, z, 2, n_directions)) <= 1e-8
    assert model.certificate["n_directions"] == max(2, min(6, n_directions))


def test_covariance_variant_with_every_direction_is_the_mean_only_method():
    x, z = two_groups(seed=2)
    assert subspace_distance(fit(x, z, 2, "kleindessner-cov", n_directions=6).components,
                             fit(x, z, 2).components) <= 1e-10


def test_fewer_directions_bring_the_projected_covariances_closer():
    x, z = two_groups(n=3000, seed=3)
    gaps = [fit(x, z, 2, "kleindessner-cov", n_directions=l).certificate["max_covariance_gap"] for l in (2, 6)]
    assert gaps[0] < gaps[1]


def test_brute_force_on_a_tiny_problem():
    """p = 3, r = 1: the best unit vector orthogonal to the mean difference, found on a fine
    grid of the circle it lives on."""
    x, z = two_groups(n=200, p=3, seed=4)
    model = fit(x, z, 1)
    xs = standardised(x)
    d = xs[z == 1].mean(axis=0) - xs[z == 0].mean(axis=0)
    plane = scipy.linalg.null_space(d[None, :])
    angles = np.linspace(0, np.pi, 200_001)
    candidates = plane @ np.vstack([np.cos(angles), np.sin(angles)])
    best = np.max(np.sum(candidates * (np.cov(xs.T, bias=True) @ candidates), axis=0))
    v = model.components[:, 0]
    assert v @ np.cov(xs.T, bias=True) @ v == pytest.approx(best, rel=1e-9)
    assert abs(v @ d) < 1e-12


@pytest.mark.parametrize("method", ["kleindessner", "kleindessner-cov"])
def test_every_projected_group_has_the_same_mean_for_k_groups(method):
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 4, size=800)
    x = rng.normal(size=(800, 9)) + rng.normal(size=(4, 9))[labels] * 3
    model = fit(x, labels, 3, method)
    projected = standardised(x) @ model.components
    means = np.array([projected[labels == g].mean(axis=0) for g in range(4)])
    np.testing.assert_allclose(means, 0.0, atol=1e-12)
    assert model.certificate["max_projected_mean_gap"] <= 1e-12


def test_bad_input():
    x, z = two_groups(p=4)
    with pytest.raises(InputError, match="more than the 3 directions left"):
        fit(x, z, 4)
    with pytest.raises(InputError, match="n_directions"):
        fit(x, z, 2, "kleindessner-cov", n_directions=0)
