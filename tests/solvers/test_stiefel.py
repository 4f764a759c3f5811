"""Stiefel-manifold helpers used by the Riemannian solvers (dro): retractions, the tangent
projection and the exact geodesic (spec 003 §B.4, T-B7), checked against first principles."""

from __future__ import annotations

import numpy as np
import pytest

from fairpca_dist.exceptions import InputError
from fairpca_dist.solvers.stiefel import (
    geodesic,
    geodesic_root,
    minimize_lbfgs,
    offdiagonal_energy,
    orthonormality_error,
    polar,
    qr_retraction,
    qr_retraction_velocity,
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
    for x, qi in zip(stack, q, strict=True):
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


@pytest.mark.parametrize("seed", range(3))
def test_geodesic_root_stays_orthonormal_and_between_the_two_subspaces(seed):
    """On the Grassmann geodesic between span(A) and span(B): orthonormal, inside span(A) + span(B),
    and at the root of a function that changes sign between the ends (here the weight of the
    basis on e₀, from 0 on span(A) to 1 on span(B)); None when the sign does not change."""
    rng = np.random.default_rng(seed)
    p, r = 9, 3
    first = np.linalg.qr(rng.normal(size=(p, r)) * np.r_[0.0, np.ones(p - 1)][:, None])[0]  # e₀ ⟂ span
    second = np.linalg.qr(np.column_stack([np.eye(p)[:, 0], rng.normal(size=(p, r - 1))]))[0]  # e₀ ∈ span

    def weight(basis: np.ndarray) -> float:
        return float(np.sum(basis[0] ** 2)) - 0.37

    found = geodesic_root(first, second, weight)
    assert found is not None and weight(found) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(found.T @ found, np.eye(r), atol=1e-12)
    both = np.linalg.qr(np.column_stack([first, second]))[0]
    np.testing.assert_allclose(both @ (both.T @ found), found, atol=1e-12)
    assert geodesic_root(first, second, lambda basis: weight(basis) + 1.0) is None
    assert geodesic_root(first, first, weight) is None


def test_offdiagonal_energy_sums_the_squared_offdiagonal_entries_of_every_matrix():
    rng = np.random.default_rng(3)
    stack = rng.normal(size=(3, 4, 4))  # not symmetric: T_g = U⁻¹Σ_gU in the faithful JEVD is not
    literal = sum(stack[g, i, j] ** 2 for g in range(3) for i in range(4) for j in range(4) if i != j)
    assert offdiagonal_energy(stack) == pytest.approx(literal, rel=1e-14)
    assert offdiagonal_energy(stack[1]) == pytest.approx(
        sum(stack[1, i, j] ** 2 for i in range(4) for j in range(4) if i != j), rel=1e-14
    )
    assert offdiagonal_energy(np.stack([np.diag([1e8, -2.0, 3.0])] * 2)) == 0.0  # diagonal: exactly zero
    assert offdiagonal_energy(np.ones((1, 1))) == 0.0


# ------------------------------------------------------------------ Riemannian L-BFGS
def symmetric_with_spectrum(rng: np.random.Generator, eigenvalues: np.ndarray) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((eigenvalues.size, eigenvalues.size)))
    a = (q * eigenvalues) @ q.T
    return (a + a.T) / 2


def brockett(a: np.ndarray, weights: np.ndarray | None = None):
    """f(V) = −tr(VᵀAV) (PCA) or, with weights N, the weighted Brockett cost tr(VᵀAVN);
    Euclidean gradients −2AV and 2AVN."""
    if weights is None:
        return lambda v: (-float(np.sum(v * (a @ v))), -2.0 * a @ v)
    return lambda v: (float(np.sum((v * (a @ v)) * weights)), 2.0 * (a @ v) * weights)


class Recorder:
    """Wraps a cost and keeps every point it was called at."""

    def __init__(self, cost):
        self.cost, self.points = cost, []

    def __call__(self, v):
        self.points.append(v.copy())
        return self.cost(v)


def riemannian_gradient_reference(v: np.ndarray, euclidean: np.ndarray) -> np.ndarray:
    """G − V (VᵀG + GᵀV)/2, written out (the reference for the solver's gradient)."""
    return euclidean - v @ (v.T @ euclidean + euclidean.T @ v) / 2


def q_factor(x: np.ndarray) -> np.ndarray:
    """Householder QR with a positive diagonal of R (the reference retraction)."""
    q, r = np.linalg.qr(x)
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def steepest_descent_iterations(cost, v: np.ndarray, tol: float, max_iter: int = 20_000) -> int:
    """Riemannian steepest descent with Armijo backtracking (c₁ = 10⁻⁴, halving, each search
    starting from twice the last accepted step): the reference the L-BFGS method must beat."""
    value, euclidean = cost(v)
    step = 1.0
    for k in range(max_iter):
        g = riemannian_gradient_reference(v, euclidean)
        squared = float(np.sum(g * g))
        if np.sqrt(squared) <= tol:
            return k
        step *= 2.0
        while True:
            w = q_factor(v - step * g)
            new_value, new_euclidean = cost(w)
            if new_value <= value - 1e-4 * step * squared:
                break
            step /= 2.0
            assert step > 1e-20, "the reference line search failed"
        v, value, euclidean = w, new_value, new_euclidean
    return max_iter


@pytest.mark.parametrize("seed, memory", [(0, 10), (1, 10), (2, 3), (3, 1)])
def test_lbfgs_finds_the_top_eigenspace(seed, memory):
    """Brockett/PCA: min −tr(VᵀAV) is attained at the top-r eigenvectors (Ky Fan), value −Σλ_top."""
    rng = np.random.default_rng(100 + seed)
    p, r = 25, 3
    eigenvalues = np.concatenate([[5.0, 4.5, 4.2], rng.uniform(0.0, 4.0, p - r)])
    a = symmetric_with_spectrum(rng, eigenvalues)
    cost = Recorder(brockett(a))
    start = random_orthonormal(rng, p, r)
    result = minimize_lbfgs(cost, start, gradient_tol=1e-8, memory=memory)
    values, vectors = np.linalg.eigh(a)
    top = vectors[:, -r:]
    assert result.reason == "gradient" and result.converged
    assert result.gradient_norm <= 1e-8
    assert np.linalg.norm(result.point @ result.point.T - top @ top.T, ord=2) <= 1e-6
    assert result.value == pytest.approx(-values[-r:].sum(), rel=1e-12)
    # every point the cost saw (line-search trials too) is orthonormal; all of them counted
    assert max(gram_error(v) for v in cost.points) <= 1e-10
    assert result.n_evaluations == len(cost.points)
    assert len(result.values) == len(result.gradient_norms) == result.n_iter + 1
    np.testing.assert_allclose(cost.points[0], start, atol=1e-14)  # the start, re-orthonormalised
    assert result.values[0] == cost.cost(cost.points[0])[0]
    # non-increasing up to the rounding of f (below 10⁻¹² the line search reads the slope)
    assert np.all(np.diff(result.values) <= 1e-12 * np.abs(result.values).max())
    assert result.values[-1] < result.values[0]


@pytest.mark.parametrize("seed", range(2))
def test_lbfgs_needs_far_fewer_iterations_than_steepest_descent(seed):
    """An ill-conditioned Brockett problem: eigengap 0.005 against a spread of 1."""
    rng = np.random.default_rng(200 + seed)
    p, r = 20, 3
    a = symmetric_with_spectrum(rng, np.concatenate([[1.0, 0.995, 0.99], rng.uniform(0.0, 0.985, p - r)]))
    cost = brockett(a)
    start = random_orthonormal(rng, p, r)
    result = minimize_lbfgs(cost, start, gradient_tol=1e-6, max_iter=1000)
    reference = steepest_descent_iterations(cost, start, 1e-6)
    assert result.reason == "gradient"
    assert 3 * result.n_iter < reference
    # without stored pairs (cautious threshold never met) it is steepest descent: slower
    memoryless = minimize_lbfgs(cost, start, gradient_tol=1e-6, max_iter=1000, cautious=1e12)
    assert memoryless.n_iter > 2 * result.n_iter


@pytest.mark.parametrize("seed", range(3))
def test_lbfgs_weighted_brockett_gives_the_eigenvectors_in_order(seed):
    """min tr(VᵀAVN), N = diag(r, …, 1): column i is the eigenvector of the i-th smallest
    eigenvalue (Brockett 1991), up to sign; value Σ N_ii λ_i."""
    rng = np.random.default_rng(300 + seed)
    p, r = 15, 4
    a = symmetric_with_spectrum(rng, np.concatenate([[0.0, 0.3, 0.7, 1.0], rng.uniform(1.3, 3.0, p - r)]))
    weights = np.arange(r, 0, -1.0)
    result = minimize_lbfgs(brockett(a, weights), random_orthonormal(rng, p, r), gradient_tol=1e-9)
    values, vectors = np.linalg.eigh(a)
    assert result.reason == "gradient"
    alignment = np.abs(np.sum(result.point * vectors[:, :r], axis=0))
    np.testing.assert_allclose(alignment, 1.0, atol=1e-9)
    assert result.value == pytest.approx(float(weights @ values[:r]), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_lbfgs_on_a_quartic_cost_decreases_to_a_stationary_point(seed):
    """f(V) = Σ_i (‖Vᵀx_i‖² − c)², ∇f = 4 Σ_i (‖Vᵀx_i‖² − c) x_i x_iᵀ V: not quadratic, no
    closed form; checked for exact descent (tolerance far above rounding), stationarity and
    the reported gradient."""
    rng = np.random.default_rng(400 + seed)
    n, p, r, c = 30, 10, 3, 1.0
    x = rng.standard_normal((n, p)) * np.linspace(1.5, 0.5, p)

    def quartic(v):
        residual = np.sum((x @ v) ** 2, axis=1) - c
        return float(np.sum(residual**2)), 4.0 * x.T @ (residual[:, None] * (x @ v))

    cost = Recorder(quartic)
    loose = minimize_lbfgs(cost, random_orthonormal(rng, p, r), gradient_tol=1e-4)
    assert loose.reason == "gradient"
    assert np.all(np.diff(loose.values) < 0)  # Armijo/Wolfe: strictly decreasing
    result = minimize_lbfgs(cost, loose.point, gradient_tol=1e-9)
    assert result.reason == "gradient" and result.value <= loose.value
    assert max(gram_error(v) for v in cost.points) <= 1e-10
    # the reported gradient is P_V(∇f) at the returned point, tangent, of the reported norm
    value, euclidean = quartic(result.point)
    gradient = riemannian_gradient_reference(result.point, euclidean)
    assert result.value == value
    np.testing.assert_allclose(result.gradient, gradient, atol=1e-13)
    assert result.gradient_norm == pytest.approx(np.linalg.norm(gradient), rel=1e-6, abs=1e-14)
    assert np.abs(result.point.T @ result.gradient + result.gradient.T @ result.point).max() <= 1e-12
    assert np.linalg.norm(gradient) <= 1e-9
    # deterministic
    again = minimize_lbfgs(quartic, loose.point, gradient_tol=1e-9)
    np.testing.assert_array_equal(again.point, result.point)
    assert again.values == result.values and again.n_evaluations == result.n_evaluations


def test_lbfgs_stopping_reasons():
    rng = np.random.default_rng(5)
    p, r = 12, 2
    a = symmetric_with_spectrum(rng, np.linspace(1.0, 3.0, p))
    start = random_orthonormal(rng, p, r)
    one = minimize_lbfgs(brockett(a), start, gradient_tol=1e-8, max_iter=1)
    assert one.reason == "max_iter" and not one.converged
    assert one.n_iter == 1 and len(one.values) == 2 and one.values[1] < one.values[0]
    # already stationary: no step
    _, vectors = np.linalg.eigh(a)
    done = minimize_lbfgs(brockett(a), vectors[:, -r:], gradient_tol=1e-8)
    assert done.reason == "gradient" and done.n_iter == 0 and done.n_evaluations == 1
    # a gradient pointing uphill: no step decreases the cost
    target = random_orthonormal(rng, p, r)
    wrong = minimize_lbfgs(lambda v: (float(np.sum((v - target) ** 2)), -2.0 * (v - target)), start, gradient_tol=1e-8)
    assert wrong.reason == "no_progress" and wrong.n_iter == 0
    np.testing.assert_allclose(wrong.point, start, atol=1e-15)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"gradient_tol": 0.0}, "gradient_tol"),
        ({"gradient_tol": -1e-6}, "gradient_tol"),
        ({"gradient_tol": float("nan")}, "gradient_tol"),
        ({"gradient_tol": 1e-6, "max_iter": 0}, "max_iter"),
        ({"gradient_tol": 1e-6, "max_iter": 2.0}, "max_iter"),
        ({"gradient_tol": 1e-6, "memory": 0}, "memory"),
        ({"gradient_tol": 1e-6, "cautious": -1.0}, "cautious"),
        ({"gradient_tol": 1e-6, "armijo": 0.95}, "armijo"),
        ({"gradient_tol": 1e-6, "wolfe": 1.0}, "wolfe"),
        ({"gradient_tol": 1e-6, "max_line_search": 0}, "max_line_search"),
    ],
)
def test_lbfgs_rejects_bad_arguments(kwargs, name):
    a = np.diag(np.arange(1.0, 6.0))
    with pytest.raises(InputError, match=name):
        minimize_lbfgs(brockett(a), np.eye(5)[:, :2], **kwargs)


def test_lbfgs_rejects_a_bad_start_or_gradient():
    a = np.diag(np.arange(1.0, 6.0))
    with pytest.raises(InputError, match="start"):
        minimize_lbfgs(brockett(a), 2.0 * np.eye(5)[:, :2], gradient_tol=1e-6)
    with pytest.raises(InputError, match="start"):
        minimize_lbfgs(brockett(a), np.eye(2, 5), gradient_tol=1e-6)  # r > p
    with pytest.raises(InputError, match="gradient of shape"):
        minimize_lbfgs(lambda v: (0.0, v.T), np.eye(5)[:, :2], gradient_tol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_qr_retraction_velocity_is_the_derivative_of_the_retraction_curve(seed):
    rng = np.random.default_rng(500 + seed)
    p, r = 9, 3
    v = random_orthonormal(rng, p, r)
    eta = random_tangent(rng, v)
    np.testing.assert_allclose(qr_retraction_velocity(v, v, eta), eta, atol=1e-14)  # t = 0
    for t in (0.4, 1.5):
        x = v + t * eta
        velocity = qr_retraction_velocity(x, q_factor(x), eta)
        h = 1e-6
        difference = (q_factor(x + h * eta) - q_factor(x - h * eta)) / (2 * h)
        np.testing.assert_allclose(velocity, difference, atol=1e-8)
        q = q_factor(x)
        assert np.abs(q.T @ velocity + velocity.T @ q).max() <= 1e-13  # tangent at R_V(tη)


def test_lbfgs_memory_changes_the_path_and_a_nearly_orthonormal_start_is_cleaned():
    rng = np.random.default_rng(6)
    p, r = 15, 3
    a = symmetric_with_spectrum(rng, np.concatenate([[3.0, 2.8, 2.7], rng.uniform(0.0, 2.5, p - r)]))
    start = random_orthonormal(rng, p, r)
    runs = {m: minimize_lbfgs(brockett(a), start, gradient_tol=1e-7, memory=m) for m in (1, 2, 50)}
    assert all(run.reason == "gradient" for run in runs.values())
    assert runs[1].values != runs[2].values != runs[50].values  # the memory bound is applied
    # a start off the manifold by 10⁻⁹ (accepted, < 10⁻⁸) is re-orthonormalised before use
    cost = Recorder(brockett(a))
    noisy = start + 1e-9 * rng.standard_normal((p, r))
    assert gram_error(noisy) > 1e-10
    minimize_lbfgs(cost, noisy, gradient_tol=1e-6)
    assert max(gram_error(v) for v in cost.points) <= 1e-10


@pytest.mark.parametrize("first_step", [1e-6, 1.0, 1e3])
def test_wolfe_search_meets_both_conditions_along_the_retraction(first_step):
    """The line search (private) from a far too short, a fair and a far too long first trial:
    the accepted t satisfies φ(t) ≤ φ(0) + c₁tφ'(0) and φ'(t) ≥ c₂φ'(0) for
    φ(t) = f(qf(V + tη)), with φ'(t) taken here by central differences."""
    from fairpca_dist.solvers.stiefel import _wolfe_search

    rng = np.random.default_rng(7)
    p, r = 10, 2
    a = symmetric_with_spectrum(rng, np.linspace(0.0, 2.0, p))
    cost = brockett(a)
    v = random_orthonormal(rng, p, r)
    value, euclidean = cost(v)
    eta = -riemannian_gradient_reference(v, euclidean)
    slope = -float(np.sum(eta * eta))
    trial, used = _wolfe_search(cost, v, value, eta, slope, first_step, 1e-4, 0.9, 30)
    assert trial is not None and 1 <= used <= 30

    def phi(t):
        return cost(q_factor(v + t * eta))[0]

    t = trial.step
    assert trial.value == pytest.approx(phi(t), abs=1e-13)
    assert trial.value <= value + 1e-4 * t * slope
    h = 1e-6 * t
    derivative = (phi(t + h) - phi(t - h)) / (2 * h)
    assert trial.slope == pytest.approx(derivative, rel=1e-5, abs=1e-8)
    assert trial.slope >= 0.9 * slope
    if first_step == 1e-6:
        assert t > 1e-6  # it expanded
