"""olfat-sdp (Olfat & Aswani 2019, FPCA) against an independent cvxpy model of Eq. (14).

The reference is written here from spec/seed-004.md §1.7 (b), from raw rows with numpy (not
from GroupMoments): lifted 2p × 2p PSD variables whose blocks are pinned by equalities (as the
authors' MOSEK model does), Cholesky factors of ±Q + φI, XᵀX = N·Σ with μ_paper = N·μ.
Tolerances: Clarabel stops at a relative gap of 1e-8 on a problem normalised to tr Σ = 1, so
optimal values agree to ~1e-6 relative; eigenvectors of P* move by ~‖ΔP‖ / eigengap, so subspaces
are compared only where P* has a clear gap (≥ 0.1) and to 1e-3.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from fairpca_dist import GroupMoments, InputError, fit_projection
from fairpca_dist.exceptions import ConvergenceWarning
from fairpca_dist.solvers.stiefel import check_orthonormal, subspace_distance


def two_groups(p: int, seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Rows of two groups with different means and covariances; labels "a" (first) and "b"."""
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(n) < 0.4, "b", "a")
    x = np.empty((n, p))
    for label, shift in (("a", 0.0), ("b", 1.0)):
        mask = labels == label
        x[mask] = rng.normal(size=(mask.sum(), p)) @ rng.normal(size=(p, p)) + shift * rng.normal(size=p)
    return x, labels


def statistics(x: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """Σ (all rows, about the global mean), f = μ_b − μ_a and Q = Σ_b − Σ_a (divisor n_s), by numpy."""
    a, b = x[labels == "a"], x[labels == "b"]
    return {
        "sigma": np.cov(x.T, bias=True),
        "f": b.mean(0) - a.mean(0),
        "q": np.cov(b.T, bias=True) - np.cov(a.T, bias=True),
        "n": len(x),
    }


def reference_eq14(stats: dict, r: int, delta: float, mu: float, phi: float) -> tuple[float, np.ndarray]:
    """Eq. (14): max ⟨XᵀX, P⟩ − μ_N t, tr P ≤ r, 0 ⪯ P ⪯ I, ⟨P, ffᵀ⟩ ≤ δ², and for s = ± the LMI
    Z_s = [[t I, Z12], [Z12ᵀ, I]] ⪰ 0 with Z12 = M_sᵀ P, M_s M_sᵀ = Cholesky(±Q + φI).
    Returns (optimal value / N, P*)."""
    p, n = len(stats["f"]), stats["n"]
    gram = n * stats["sigma"]  # XᵀX of the globally centred rows
    P = cp.Variable((p, p), PSD=True)
    t = cp.Variable()
    constraints = [cp.trace(P) <= r, np.eye(p) - P >> 0, stats["f"] @ P @ stats["f"] <= delta**2]
    for sign in (1.0, -1.0):
        m = np.linalg.cholesky(sign * stats["q"] + phi * np.eye(p))
        z = cp.Variable((2 * p, 2 * p), PSD=True)
        constraints += [z[:p, :p] == t * np.eye(p), z[p:, p:] == np.eye(p), z[:p, p:] == m.T @ P]
    problem = cp.Problem(cp.Maximize(cp.trace(gram @ P) - (n * mu) * t), constraints)
    problem.solve(solver="CLARABEL")
    assert problem.status == "optimal"
    return problem.value / n, P.value


def reference_code(stats: dict, r: int, delta: float, mu: float) -> tuple[float, np.ndarray]:
    """The authors' variant (spec §1.7 b): tr P = r, t_± per LMI, eigen-factors with their own shifts."""
    p = len(stats["f"])
    L, W = np.linalg.eigh(stats["q"])
    factors = [W @ np.diag(np.sqrt(L + max(0, -L.min()))), W @ np.diag(np.sqrt(-L + max(0, L.max())))]
    P = cp.Variable((p, p), PSD=True)
    t = cp.Variable(2)
    mean = stats["f"] @ P @ stats["f"]
    constraints = [cp.trace(P) == r, np.eye(p) - P >> 0, mean == 0 if delta == 0 else mean <= delta**2]
    for j, m in enumerate(factors):
        z = cp.Variable((2 * p, 2 * p), PSD=True)
        constraints += [z[:p, :p] == t[j] * np.eye(p), z[p:, p:] == np.eye(p), z[:p, p:] == m.T @ P]
    problem = cp.Problem(cp.Maximize(cp.trace(stats["sigma"] @ P) - mu * cp.sum(t)), constraints)
    problem.solve(solver="CLARABEL")
    assert problem.status == "optimal"
    return problem.value, P.value


def top(matrix: np.ndarray, r: int) -> tuple[np.ndarray, float]:
    """Top-r eigenvectors and the gap λ_r − λ_{r+1}."""
    values, vectors = np.linalg.eigh(matrix)
    return vectors[:, ::-1][:, :r], values[::-1][r - 1] - values[::-1][r]


def fit(x: np.ndarray, labels: np.ndarray, r: int, **options):
    return fit_projection(GroupMoments.from_arrays(x, labels), r, method="olfat-sdp", **options)


@pytest.mark.parametrize(
    "p, r, seed, delta, mu, phi_factor",
    [
        (4, 1, 0, 0.3, 0.05, 1.0),
        (5, 2, 1, 0.0, 0.1, 1.5),
        (5, 2, 2, 1.0, 0.5, 1.0),
        (6, 3, 3, 0.5, 0.1, 2.0),
    ],
)
def test_paper_formulation_matches_independent_eq14(p, r, seed, delta, mu, phi_factor):
    x, labels = two_groups(p, seed)
    stats = statistics(x, labels)
    phi = phi_factor * np.linalg.norm(stats["q"], 2) * (1 + 1e-9)  # > ‖Q‖₂ so Cholesky exists
    value, reference = reference_eq14(stats, r, delta, mu, phi)
    result = fit(x, labels, r, delta=delta, mu=mu, formulation="paper", phi=phi)
    assert result.status == "converged"
    check_orthonormal(result.components)
    np.testing.assert_allclose(result.certificate["objective"], value, rtol=1e-6)
    expected, gap = top(reference, r)
    assert gap > 0.1, "the fixture needs an eigengap for the subspace to be defined"
    assert subspace_distance(result.components, expected) < 1e-3
    assert abs(result.certificate["eigengap"] - gap) < 1e-4


@pytest.mark.parametrize("p, r, seed, delta, mu", [(4, 2, 4, 0.0, 0.1), (5, 2, 5, 0.5, 0.3), (6, 2, 6, 0.2, 0.05)])
def test_code_formulation_matches_independent_model(p, r, seed, delta, mu):
    x, labels = two_groups(p, seed)
    stats = statistics(x, labels)
    value, reference = reference_code(stats, r, delta, mu)
    result = fit(x, labels, r, delta=delta, mu=mu)
    assert result.status == "converged"
    np.testing.assert_allclose(result.certificate["objective"], value, rtol=1e-6)
    expected, gap = top(reference, r)
    if gap > 0.1:
        assert subspace_distance(result.components, expected) < 1e-3
    # reported values are recomputed from V: check them from the rows
    v = result.components
    np.testing.assert_allclose(result.certificate["mean_gap"], np.sum((v.T @ stats["f"]) ** 2), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(result.certificate["covariance_gap"], np.linalg.norm(v.T @ stats["q"] @ v, 2), rtol=1e-9)


@pytest.mark.parametrize("formulation", ["code", "paper"])
def test_no_penalty_and_loose_mean_constraint_is_pca(formulation):
    x, labels = two_groups(6, 7)
    sigma = statistics(x, labels)["sigma"]
    values, vectors = np.linalg.eigh(sigma)
    result = fit(x, labels, 2, delta=1e6, mu=0.0, formulation=formulation)
    assert subspace_distance(result.components, vectors[:, -2:]) < 1e-5
    np.testing.assert_allclose(result.certificate["objective"], values[-2:].sum(), rtol=1e-7)
    assert result.certificate["leaked_trace"] < 1e-6


@pytest.mark.parametrize("formulation", ["code", "paper"])
def test_zero_delta_removes_the_mean_gap(formulation):
    x, labels = two_groups(5, 8)
    f = statistics(x, labels)["f"]
    plain = fit(x, labels, 2, delta=1e6, mu=0.0, formulation=formulation)
    assert np.sum((plain.components.T @ f) ** 2) > 0.05 * (f @ f)  # PCA does leak the mean gap here
    result = fit(x, labels, 2, delta=0.0, mu=0.0, formulation=formulation)
    assert np.sum((result.components.T @ f) ** 2) < 1e-7 * (f @ f)
    assert result.certificate["mean_gap"] < 1e-7 * (f @ f)


def test_larger_mu_shrinks_the_covariance_gap():
    # Q has a large eigenvalue along a high-variance direction: the penalty trades it away.
    rng = np.random.default_rng(9)
    basis = np.linalg.qr(rng.normal(size=(5, 5)))[0]
    a = rng.normal(size=(400, 5)) * np.array([3.0, 2.5, 2.0, 1.0, 0.5]) @ basis.T
    b = rng.normal(size=(300, 5)) * np.array([5.0, 2.5, 2.0, 1.0, 0.5]) @ basis.T
    x, labels = np.vstack([a, b]), np.array(["a"] * 400 + ["b"] * 300)
    q = statistics(x, labels)["q"]
    gaps, penalties = [], []
    for mu in (0.0, 0.05, 0.2, 1.0):
        result = fit(x, labels, 2, delta=1e6, mu=mu, formulation="paper")
        v = result.components
        gaps.append(np.linalg.norm(v.T @ q @ v, 2))
        penalties.append(result.certificate["covariance_penalty"])
    # the SDP's penalty is non-increasing in μ (exchange argument), up to solver accuracy
    assert all(later <= earlier + 1e-5 * penalties[0] for earlier, later in zip(penalties, penalties[1:], strict=False))
    assert all(later <= earlier + 1e-5 * gaps[0] for earlier, later in zip(gaps, gaps[1:], strict=False))
    assert gaps[-1] < 0.5 * gaps[0]


def test_group_swap_gives_the_same_subspace():
    x, labels = two_groups(5, 12)
    swapped = np.where(labels == "a", "z", "b")  # the first group becomes the second
    for formulation in ("code", "paper"):
        one = fit(x, labels, 2, delta=0.2, mu=0.3, formulation=formulation)
        two = fit(x, swapped, 2, delta=0.2, mu=0.3, formulation=formulation)
        assert one.certificate["eigengap"] > 0.1
        assert subspace_distance(one.components, two.components) < 1e-4
        np.testing.assert_allclose(one.certificate["objective"], two.certificate["objective"], rtol=1e-6)


def test_rotating_the_features_rotates_the_subspace():
    x, labels = two_groups(5, 11)
    rotation = np.linalg.qr(np.random.default_rng(12).normal(size=(5, 5)))[0]
    for formulation in ("code", "paper"):
        one = fit(x, labels, 2, delta=0.2, mu=0.3, formulation=formulation)
        two = fit(x @ rotation.T, labels, 2, delta=0.2, mu=0.3, formulation=formulation)  # x ↦ R x
        assert one.certificate["eigengap"] > 0.1
        assert subspace_distance(rotation @ one.components, two.components) < 1e-4
        np.testing.assert_allclose(one.certificate["objective"], two.certificate["objective"], rtol=1e-6)


def test_scs_agrees_with_clarabel():
    x, labels = two_groups(5, 17)
    clarabel = fit(x, labels, 2, delta=0.3, mu=0.2, solver="CLARABEL")
    scs = fit(x, labels, 2, delta=0.3, mu=0.2, solver="SCS")
    assert clarabel.options["solver"] == "CLARABEL" and scs.options["solver"] == "SCS"
    np.testing.assert_allclose(scs.certificate["objective"], clarabel.certificate["objective"], rtol=1e-5)
    assert clarabel.certificate["eigengap"] > 0.1
    assert subspace_distance(scs.components, clarabel.components) < 1e-3


def test_trace_equality_with_r_equal_p_is_infeasible_and_says_so():
    x, labels = two_groups(4, 13)
    with pytest.warns(ConvergenceWarning, match="infeasible"):
        result = fit(x, labels, 4, delta=0.0, mu=0.1)
    assert result.status == "infeasible" and not result.converged
    assert np.isnan(result.certificate["objective"])
    paper = fit(x, labels, 4, delta=0.0, mu=0.1, formulation="paper")  # tr P ≤ r: P = 0 is feasible
    assert paper.status in ("converged", "inaccurate")


@pytest.mark.parametrize(
    "option, value",
    [
        ("delta", -0.1),
        ("mu", float("nan")),
        ("mu", True),
        ("formulation", "mosek"),
        ("solver", "MOSEK"),
        ("tolerance", 0.0),
        ("phi", 1.0),
    ],
)
def test_bad_options_name_the_option(option, value):
    x, labels = two_groups(4, 14)
    with pytest.raises(InputError, match=option):
        fit(x, labels, 2, **{option: value})


def test_phi_below_the_norm_of_q_is_refused():
    x, labels = two_groups(4, 15)
    with pytest.raises(InputError, match=r"phi=.* must be >= \|\|Q\|\|_2"):
        fit(x, labels, 2, formulation="paper", phi=1e-6)


def test_three_groups_are_refused_naming_them():
    x, labels = two_groups(4, 16)
    labels = labels.copy()
    labels[:30] = "c"
    with pytest.raises(InputError, match=r"exactly two groups, got 3: \['a', 'b', 'c'\]"):
        fit(x, labels, 2)
