"""The top-r eigensolver behind fair-eig and samadi-mw (restarted block Lanczos with a LAPACK
fallback, :func:`fairpca_dist.solvers.stiefel.top_eigenvectors`) against a dense ``eigh``, and
the fair-eig root finder."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from fairpca_dist import GroupMoments, fit_projection
from fairpca_dist.exceptions import InputError
from fairpca_dist.solvers import eigopt, stiefel
from fairpca_dist.solvers.stiefel import krylov_top_eigenpairs, subspace_distance, top_eigenvectors


def covariance_with_spectrum(rng: np.random.Generator, spectrum: np.ndarray) -> np.ndarray:
    """Q diag(spectrum) Qᵀ with Q a random orthogonal matrix (built here, not by the library)."""
    q, _ = np.linalg.qr(rng.standard_normal((spectrum.size, spectrum.size)))
    return (q * spectrum) @ q.T


def spectra(p: int) -> dict[str, np.ndarray]:
    """Top eigenvalues clustered (within 1e-6), exactly repeated, and a decaying (LFW-like) tail;
    λ_5 > λ_6 by 1 % in each, so the top-5 subspace is well defined."""
    tail = 4.0 * 0.97 ** np.arange(p - 5)
    return {
        "clustered": np.concatenate([[10.0, 10.0 - 1e-6, 10.0 - 2e-6, 9.0, 4.04], tail]),
        "degenerate": np.concatenate([[7.0, 7.0, 7.0, 5.0, 5.0], tail * (4.95 / 4.0)]),
        "decaying": np.concatenate([100.0 * 0.5 ** np.arange(5) + 4.04, tail]),
    }


def dense_top(matrix: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    p = matrix.shape[0]
    values, vectors = scipy.linalg.eigh(matrix, subset_by_index=(p - r, p - 1))
    return values[::-1], vectors[:, ::-1]


class CountingMatrix:
    """A symmetric matrix that counts the products M @ X it is asked for."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix, self.shape, self.products = matrix, matrix.shape, 0

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        self.products += 1
        return self.matrix @ other


@pytest.mark.parametrize("p", [40, 400])
@pytest.mark.parametrize("kind", ["clustered", "degenerate", "decaying"])
def test_krylov_matches_dense_eigh(p, kind):
    matrix = covariance_with_spectrum(np.random.default_rng(p), spectra(p)[kind])
    expected_values, expected_vectors = dense_top(matrix, 5)
    values, vectors = krylov_top_eigenpairs(matrix, 5)
    np.testing.assert_allclose(values, expected_values, rtol=1e-10)
    assert subspace_distance(vectors, expected_vectors) < 1e-8
    assert np.abs(vectors.T @ vectors - np.eye(5)).max() < 1e-12


@pytest.mark.parametrize("kind", ["clustered", "degenerate", "decaying"])
def test_top_eigenvectors_takes_krylov_at_large_p_and_agrees(kind, monkeypatch):
    matrix = covariance_with_spectrum(np.random.default_rng(1), spectra(400)[kind])
    expected_values, expected_vectors = dense_top(matrix, 5)
    calls = []
    original = stiefel.krylov_top_eigenpairs
    monkeypatch.setattr(stiefel, "krylov_top_eigenpairs", lambda *a, **k: calls.append(1) or original(*a, **k))
    values, vectors = top_eigenvectors(matrix, 5)
    assert calls  # p = 400 ≥ 200: the iterative path was taken
    np.testing.assert_allclose(values, expected_values, rtol=1e-10)
    assert subspace_distance(vectors, expected_vectors) < 1e-8


def test_warm_start_from_a_nearby_matrix_is_exact_and_cheaper():
    rng = np.random.default_rng(2)
    spectrum = spectra(400)["clustered"]
    base = covariance_with_spectrum(rng, spectrum)
    moved = base + 1e-3 * covariance_with_spectrum(rng, spectrum)  # the next dual / MW matrix
    _, previous = dense_top(base, 5)
    expected_values, expected_vectors = dense_top(moved, 5)
    cold, warm = CountingMatrix(moved), CountingMatrix(moved)
    krylov_top_eigenpairs(cold, 5)
    values, vectors = krylov_top_eigenpairs(warm, 5, start=previous)
    np.testing.assert_allclose(values, expected_values, rtol=1e-10)
    assert subspace_distance(vectors, expected_vectors) < 1e-8
    assert warm.products < cold.products


def test_wider_or_narrower_start_and_bad_start():
    matrix = covariance_with_spectrum(np.random.default_rng(3), spectra(400)["decaying"])
    expected = dense_top(matrix, 3)[0]
    for columns in (1, 30):
        start = np.linalg.qr(np.random.default_rng(columns).standard_normal((400, columns)))[0]
        np.testing.assert_allclose(krylov_top_eigenpairs(matrix, 3, start=start)[0], expected, rtol=1e-10)
    with pytest.raises(InputError, match="start"):
        krylov_top_eigenpairs(matrix, 3, start=np.ones((10, 3)))


def test_dense_fallback_when_krylov_does_not_converge(monkeypatch):
    matrix = covariance_with_spectrum(np.random.default_rng(4), spectra(400)["clustered"])
    assert krylov_top_eigenpairs(matrix, 5, max_blocks=1, max_restarts=0) is None
    monkeypatch.setattr(stiefel, "_KRYLOV_BLOCKS", 1)
    monkeypatch.setattr(stiefel, "_KRYLOV_RESTARTS", 0)
    dense_calls = []
    original = scipy.linalg.eigh
    monkeypatch.setattr(scipy.linalg, "eigh", lambda *a, **k: dense_calls.append(1) or original(*a, **k))
    values, vectors = top_eigenvectors(matrix, 5)
    assert dense_calls  # the LAPACK fallback ran
    expected_values, expected_vectors = dense_top(matrix, 5)
    np.testing.assert_allclose(values, expected_values, rtol=1e-12)
    assert subspace_distance(vectors, expected_vectors) < 1e-10


def test_small_p_stays_dense(monkeypatch):
    matrix = covariance_with_spectrum(np.random.default_rng(5), spectra(60)["decaying"])
    monkeypatch.setattr(stiefel, "krylov_top_eigenpairs", lambda *a, **k: pytest.fail("Krylov below p = 200"))
    values, _ = top_eigenvectors(matrix, 4)
    np.testing.assert_allclose(values, dense_top(matrix, 4)[0], rtol=1e-12)


def two_group_problem(p: int, seed: int) -> GroupMoments:
    rng = np.random.default_rng(seed)
    decay = 0.9 ** np.arange(p)
    x = np.vstack([rng.standard_normal((600, p)) * decay, rng.standard_normal((500, p)) * decay[::-1] ** 0.3])
    return GroupMoments.from_arrays(x, np.array(["a"] * 600 + ["b"] * 500))


@pytest.mark.parametrize("method", ["fair-eig", "samadi-mw"])
@pytest.mark.parametrize("r", [1, 4])
def test_solvers_agree_with_the_dense_eigensolver(method, r, monkeypatch):
    # a near-crossing problem: fair-eig needs its dense steps on a narrow bracket; MW is slow there
    tol = 1e-6 if method == "fair-eig" else 1e-4
    moments = two_group_problem(300, r)
    results = {}
    for mode in ("dense", "auto"):
        monkeypatch.setattr(stiefel, "EIGENSOLVER", mode)
        results[mode] = fit_projection(moments, r, method=method, tol=tol)
    dense, krylov = results["dense"], results["auto"]
    assert krylov.status == dense.status == "converged"
    for bound in ("lower_bound", "upper_bound"):
        np.testing.assert_allclose(krylov.certificate[bound], dense.certificate[bound], rtol=tol)
    gap = krylov.certificate["upper_bound"] - krylov.certificate["lower_bound"]
    assert gap <= tol * krylov.certificate["upper_bound"]
    np.testing.assert_allclose(krylov.group_loss.max(), dense.group_loss.max(), rtol=tol)
    if method == "fair-eig":
        assert subspace_distance(krylov.components, dense.components) < 1e-2


def test_hermite_step_is_exact_for_a_cubic():
    # g(t) = −(t − 0.3)²(t + 1): g'(t) = −(t − 0.3)(3t + 1.7), maximiser t = 0.3 on [0, 1]
    def point(t: float) -> tuple[float, float, float]:
        return t, -((t - 0.3) ** 2) * (t + 1.0), -(t - 0.3) * (3.0 * t + 1.7)

    assert eigopt._hermite_step(point(0.0), point(1.0)) == pytest.approx(0.3, abs=1e-12)
    assert eigopt._hermite_step(point(0.6), point(0.9)) == pytest.approx(0.3, abs=1e-12)  # extrapolated
    assert np.isnan(eigopt._hermite_step((0.0, 0.0, 1.0), (1.0, 1.0, 1.0)))  # a line: no maximiser
