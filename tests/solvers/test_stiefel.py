"""Stiefel-manifold helpers used by the Riemannian solvers (dro): retractions, the tangent
projection and the exact geodesic (spec 003 §B.4, T-B7), checked against first principles."""

from __future__ import annotations

import numpy as np
import pytest

from fairpca_dist.solvers.stiefel import (
    geodesic,
    offdiagonal_energy,
    orthonormality_error,
    polar,
    qr_retraction,
    random_orthonormal,
    tangent_projection,
)


def gram_error(v: np.ndarray) -> float:
    """max |VᵀV − I|, computed here (the reference for orthonormality_error)."""
    return float(np.abs(v.T @ v - np.eye(v.shape[1])).max())


def random_tangent(rng: np.random.Generator, v: np.ndarray, horizontal: bool = False) -> np.ndarray:
    """A random tangent vector at V (VᵀΔ skew), of unit Frobenius norm, built without the
    library: Δ = VΩ + (I − VVᵀ)B with Ω skew (Ω = 0 for a horizontal one, VᵀΔ = 0)."""
    p, r = v.shape
    b = rng.standard_normal((p, r))
    delta = b - v @ (v.T @ b)
    if not horizontal:
        a = rng.standard_normal((r, r))
        delta = delta + v @ (a - a.T)
    return delta / np.linalg.norm(delta)


def inverse_sqrt(a: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(a)
    return (vectors / np.sqrt(values)) @ vectors.T


# ------------------------------------------------------------------ primitives
@pytest.mark.parametrize("seed", range(3))
def test_orthonormality_error_and_tangent_projection(seed):
    rng = np.random.default_rng(seed)
    p, r = 8, 3
    x = rng.standard_normal((p, r))
    assert orthonormality_error(x) == pytest.approx(gram_error(x), rel=1e-14)
    v = random_orthonormal(rng, p, r)
    assert orthonormality_error(v) <= 1e-14
    d = rng.standard_normal((p, r))
    xi = tangent_projection(v, d)
    inner = v.T @ d
    np.testing.assert_allclose(xi, d - v @ ((inner + inner.T) / 2), atol=1e-14)
    assert np.abs(v.T @ xi + xi.T @ v).max() <= 1e-13  # tangent
    np.testing.assert_allclose(tangent_projection(v, xi), xi, atol=1e-14)  # a projection
    # orthogonal: the removed part V sym(VᵀD) is normal (⟨VS, ξ⟩ = 0 for tangent ξ)
    assert abs(np.sum((d - xi) * xi)) <= 1e-12 * np.linalg.norm(d) ** 2


@pytest.mark.parametrize("seed", range(3))
def test_qr_retraction_is_the_q_factor_with_a_nonnegative_diagonal(seed):
    rng = np.random.default_rng(seed)
    stack = rng.standard_normal((4, 7, 3))
    # a column whose Householder reflection gives a negative diagonal entry in numpy's QR
    stack[0, :, 0] = -np.abs(stack[0, :, 0])
    q = qr_retraction(stack)
    assert q.shape == stack.shape
    for x, qi in zip(stack, q):
        assert gram_error(qi) <= 1e-13
        r_factor = qi.T @ x
        assert np.abs(np.tril(r_factor, -1)).max() <= 1e-12  # upper triangular
        assert np.all(np.diag(r_factor) > 0)
        np.testing.assert_allclose(qi @ r_factor, x, atol=1e-12)
        np.testing.assert_allclose(qr_retraction(x), qi, atol=1e-13)  # stack = one at a time
    v = random_orthonormal(rng, 7, 3)
    np.testing.assert_allclose(qr_retraction(v), v, atol=1e-14)  # a retraction: R_V(0) = V


@pytest.mark.parametrize("seed", range(3))
def test_qr_retraction_of_an_ill_conditioned_matrix(seed):
    """Nearly dependent columns (κ ~ 1e9), where a Gram/Cholesky shortcut loses
    orthonormality: still the Q factor with a positive diagonal, orthonormal to rounding."""
    rng = np.random.default_rng(30 + seed)
    x = rng.standard_normal((7, 3))
    x[:, 1] = x[:, 0] + 1e-9 * rng.standard_normal(7)
    x[:, 0] *= -1.0 if seed % 2 else 1.0
    q = qr_retraction(x)
    assert gram_error(q) <= 1e-12
    r_factor = q.T @ x
    assert np.abs(np.tril(r_factor, -1)).max() <= 1e-12
    assert np.all(np.diag(r_factor) > 0)
    np.testing.assert_allclose(q @ r_factor, x, atol=1e-12)


# ------------------------------------------------------------------ T-B7 long runs
@pytest.mark.parametrize("name", ["qr", "polar"])
def test_retractions_stay_orthonormal_over_ten_thousand_steps(name):
    rng = np.random.default_rng(7)
    p, r = 10, 3
    retract = qr_retraction if name == "qr" else (lambda x: polar(x)[0])
    v = random_orthonormal(rng, p, r)
    start = v.copy()
    for _ in range(10_000):
        step = tangent_projection(v, rng.standard_normal((p, r)))
        v = retract(v + 0.3 * step / np.linalg.norm(step))
    assert gram_error(v) <= 1e-10
    assert orthonormality_error(v) <= 1e-10
    assert np.linalg.norm(v - start) > 0.1  # it did move


def literal_polar_descent(c: np.ndarray, u: np.ndarray, gamma: float, steps: int, retraction: str) -> list[float]:
    """Riemannian descent on f(U) = ⟨UUᵀ, C⟩ with grad f = (I − UUᵀ)2CU and step −γ grad f.

    ``retraction="formula8"`` is the paper's (U + Δ)(I + ΔᵀΔ)^{-1/2}; it presumes UᵀU = I and
    UᵀΔ = 0 exactly. With rounding, UᵀU = I + E gives UᵀΔ = −E·UᵀCU·2γ (not 0), so
    E_{t+1} ≈ E − 2γ(E K + K E) with K = UᵀCU: an indefinite C (the (6c) matrix when λ > p̂_a')
    makes the error grow geometrically. ``"polar"`` is the SVD polar factor of U + Δ, the same
    map in exact arithmetic, which re-orthonormalises at every step.
    """
    errors = []
    for _ in range(steps):
        d = 2.0 * c @ u
        delta = -gamma * (d - u @ (u.T @ d))
        if retraction == "formula8":
            u = (u + delta) @ inverse_sqrt(np.eye(u.shape[1]) + delta.T @ delta)
        else:
            u = polar(u + delta)[0]
        errors.append(gram_error(u))
    return errors


@pytest.mark.parametrize("seed", range(4))
def test_the_papers_literal_polar_formula_drifts_and_the_svd_polar_does_not(seed):
    """Why "polar" means polar(U + Δ) by SVD and not formula (8) (spec B.4, T-B7): at the
    paper's step size γ = 1/√(τ+1), τ = 1000, and a first step γ‖Δ₀‖ = 0.8 (the paper's
    toy range 0.3–0.8), formula (8) loses orthonormality within 100 steps."""
    rng = np.random.default_rng(seed)
    d, k = 10, 3
    halves = [rng.normal(size=(d, d)) * rng.uniform(0.2, 2.0, size=d) for _ in range(2)]
    m0, m1 = (h @ h.T / d for h in halves)
    shares, lam = (0.3, 0.7), 1.5
    c = (shares[0] + lam) * m0 + (shares[1] - lam) * m1  # (6c), indefinite for λ > p̂_1
    assert np.linalg.eigvalsh(c)[0] < 0
    gamma = 1.0 / np.sqrt(1001.0)
    u = random_orthonormal(rng, d, d - k)
    first = 2.0 * c @ u
    c = c * 0.8 / (gamma * np.linalg.norm(first - u @ (u.T @ first)))
    literal = literal_polar_descent(c, u, gamma, 100, "formula8")
    svd = literal_polar_descent(c, u, gamma, 100, "polar")
    assert literal[0] <= 1e-12  # one step is fine: the drift is accumulated rounding
    assert literal[-1] > 1e-6
    assert max(svd) <= 1e-12


# ------------------------------------------------------------------ geodesic
def geodesic_reference(v: np.ndarray, delta: np.ndarray, t: float) -> np.ndarray:
    """Edelman et al. (1998) eq. (2.7)–(2.8), embedded metric, any tangent Δ:
    Y(t) = [V, Δ] expm(t [[A, −S], [I, A]]) [I; 0] expm(−tA), A = VᵀΔ, S = ΔᵀΔ."""
    from scipy.linalg import expm

    r = v.shape[1]
    a, s = v.T @ delta, delta.T @ delta
    block = np.block([[a, -s], [np.eye(r), a]])
    return np.hstack([v, delta]) @ expm(t * block)[:, :r] @ expm(-t * a)


@pytest.mark.parametrize("seed", range(3))
def test_geodesic_for_a_horizontal_direction(seed):
    rng = np.random.default_rng(seed)
    p, r = 9, 3
    v = random_orthonormal(rng, p, r)
    delta = 1.7 * random_tangent(rng, v, horizontal=True)
    np.testing.assert_allclose(geodesic(v, delta, 0.0), v, atol=1e-14)
    for t in (0.3, 1.0, 2.5, 7.0):
        y = geodesic(v, delta, t)
        assert orthonormality_error(y) <= 1e-12
        np.testing.assert_allclose(y, geodesic_reference(v, delta, t), atol=1e-10)
    h = 1e-5
    velocity = (geodesic(v, delta, h) - geodesic(v, delta, -h)) / (2 * h)
    np.testing.assert_allclose(velocity, delta, atol=1e-8)
    # the geodesic equation Ÿ + Y(ẎᵀẎ) = 0 at an interior time, by finite differences
    t, h = 0.8, 1e-4
    y0, yp, ym = geodesic(v, delta, t), geodesic(v, delta, t + h), geodesic(v, delta, t - h)
    ydot, yddot = (yp - ym) / (2 * h), (yp - 2 * y0 + ym) / h**2
    np.testing.assert_allclose(yddot + y0 @ (ydot.T @ ydot), 0.0, atol=1e-5)
    # constant speed
    assert np.linalg.norm(ydot) == pytest.approx(np.linalg.norm(delta), rel=1e-7)


@pytest.mark.parametrize("seed", range(3))
def test_geodesic_for_a_general_tangent_direction_stays_on_the_manifold(seed):
    """The contract says "along tangent direction": for a non-horizontal Δ (VᵀΔ skew ≠ 0) the
    curve must still start at V with velocity Δ and stay on the manifold."""
    rng = np.random.default_rng(10 + seed)
    p, r = 8, 3
    v = random_orthonormal(rng, p, r)
    delta = random_tangent(rng, v, horizontal=False)
    assert np.abs(v.T @ delta).max() > 1e-2
    np.testing.assert_allclose(geodesic(v, delta, 0.0), v, atol=1e-14)
    for t in (0.2, 1.0, 3.0):
        assert orthonormality_error(geodesic(v, delta, t)) <= 1e-12
    h = 1e-5
    velocity = (geodesic(v, delta, h) - geodesic(v, delta, -h)) / (2 * h)
    np.testing.assert_allclose(velocity, delta, atol=1e-8)


def test_offdiagonal_energy_sums_the_squared_offdiagonal_entries_of_every_matrix():
    rng = np.random.default_rng(3)
    stack = rng.normal(size=(3, 4, 4))  # not symmetric: T_g = U⁻¹Σ_gU in the faithful JEVD is not
    literal = sum(stack[g, i, j] ** 2 for g in range(3) for i in range(4) for j in range(4) if i != j)
    assert offdiagonal_energy(stack) == pytest.approx(literal, rel=1e-14)
    assert offdiagonal_energy(stack[1]) == pytest.approx(
        sum(stack[1, i, j] ** 2 for i in range(4) for j in range(4) if i != j), rel=1e-14)
    assert offdiagonal_energy(np.stack([np.diag([1e8, -2.0, 3.0])] * 2)) == 0.0  # diagonal: exactly zero
    assert offdiagonal_energy(np.ones((1, 1))) == 0.0
