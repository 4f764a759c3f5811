"""Distributionally robust fairness-aware PCA (Vu et al., ICLR 2022; spec 003 §B, method "dro").

Every check compares the library with references written here from the spec, not from the
library: the worst-case expectation φ of Prop. 3.3 against distributions sampled in the
Gelbrich ball, the exact objective F_exact (B.3, B.6) and the paper's closed form (6b)/(B.6),
Theorem 3.2's conditions, the Riemannian gradient by finite differences, Remark 3.4 (PCA),
the DRO ≥ empirical bound (T-B4), invariances, the printed Theorem B.2 (E4), retractions and
parametrisations reaching the same objective, and option validation; and the certified
two-group algorithm ("frontier") against brute force over the Stiefel manifold, an exact
polygon minimum (diagonal moments), Algorithm 1 and random projections.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.spatial

from fairpca_dist import ConvergenceWarning, GroupMoments, InputError, ModelWarning, fit_projection
from fairpca_dist.solvers import dro
from fairpca_dist.solvers.stiefel import polar, random_orthonormal, subspace_distance, top_eigenvectors


# ================================================================== builders
def group_moments(
    matrices: np.ndarray,
    counts: list[int] | np.ndarray,
    weights: list[float] | np.ndarray | None = None,
    names: tuple[str, ...] | None = None,
) -> GroupMoments:
    """Zero-mean groups whose per-unit-weight second moments are ``matrices`` (m, p, p):
    ``covariance(c)`` returns ``matrices`` for every centre c (all means are 0)."""
    m, p = len(matrices), matrices[0].shape[0]
    count = np.asarray(counts, dtype=np.int64)
    weight = count.astype(float) if weights is None else np.asarray(weights, dtype=float)
    return GroupMoments(
        groups=names or tuple(f"g{g}" for g in range(m)),
        count=count,
        weight=weight,
        mean_offset=np.zeros((m, p)),
        scatter=np.stack([w * np.asarray(mat, dtype=float) for w, mat in zip(weight, matrices, strict=True)]),
        feature_names=tuple(f"x{j}" for j in range(p)),
    )


def random_matrices(rng: np.random.Generator, p: int, m: int, scale: float = 1.0) -> np.ndarray:
    """m random positive definite p × p matrices with uneven spectra."""
    halves = [rng.normal(size=(p, p)) * rng.uniform(0.2, 2.0, size=p) for _ in range(m)]
    return np.array([scale * (h @ h.T / p + 0.05 * np.eye(p)) for h in halves])


def make_problem(matrices, shares, radii, lam) -> dro.DROProblem:
    return dro.DROProblem(
        second=np.asarray(matrices, dtype=float),
        shares=np.asarray(shares, dtype=float),
        radii=np.asarray(radii, dtype=float),
        lam=float(lam),
    )


def smallest_sum(matrix: np.ndarray, count: int) -> float:
    """Σ of the ``count`` smallest eigenvalues (Ky Fan: min over V of L(V))."""
    return float(np.linalg.eigvalsh(matrix)[:count].sum())


def fit(moments: GroupMoments, r: int, **options):
    """The paper's Algorithm 1 unless the test names another algorithm."""
    options.setdefault("algorithm", "subgradient")
    return fit_projection(moments, r, method="dro", center="global", **options)


# ================================================================== references (from the spec)
def phi(upsilon, loss, radius):
    """Prop. 3.3: υ(√L + √ε)² for υ ≥ 0, υ·max(√L − √ε, 0)² for υ < 0."""
    upsilon, loss, radius = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (upsilon, loss, radius)))
    root_l, root_e = np.sqrt(loss), np.sqrt(radius)
    return np.where(upsilon >= 0, upsilon * (root_l + root_e) ** 2, upsilon * np.maximum(root_l - root_e, 0.0) ** 2)


def phi_slope(upsilon: float, loss: float, radius: float) -> float:
    """dφ/dL (away from the kink L = ε of the υ < 0 branch)."""
    if upsilon >= 0:
        return upsilon * (1 + np.sqrt(radius / loss))
    if loss >= radius:
        return upsilon * (1 - np.sqrt(radius / loss))
    return 0.0


def ref_losses(matrices: np.ndarray, v: np.ndarray) -> np.ndarray:
    """L_b(V) = ⟨I − VVᵀ, M_b⟩."""
    p = v.shape[0]
    projector = np.eye(p) - v @ v.T
    return np.array([np.sum(projector * mat) for mat in matrices])


def weights_of_pair(shares, lam, a, a2) -> np.ndarray:
    """υ_b = p̂_b + λ[b = a] − λ[b = a']."""
    upsilon = np.array(shares, dtype=float)
    upsilon[a] += lam
    upsilon[a2] -= lam
    return upsilon


def pairs(m: int):
    return [(a, a2) for a, a2 in itertools.permutations(range(m), 2)]


def ref_pieces(matrices, shares, radii, lam, v) -> dict:
    """Σ_b φ(υ_b^{(a,a')}, L_b, ε_b) for every ordered pair a ≠ a' (B.6, exact)."""
    losses = ref_losses(matrices, v)
    return {
        (a, a2): float(phi(weights_of_pair(shares, lam, a, a2), losses, radii).sum()) for a, a2 in pairs(len(matrices))
    }


def ref_exact(matrices, shares, radii, lam, v) -> float:
    return max(ref_pieces(matrices, shares, radii, lam, v).values())


def ref_paper(matrices, shares, radii, lam, v) -> float:
    """B.6 corrected closed form G(V)."""
    shares, radii = np.asarray(shares, float), np.asarray(radii, float)
    losses = ref_losses(matrices, v)
    base = float(np.sum(shares * (losses + radii)))
    best = -np.inf
    for a, a2 in pairs(len(matrices)):
        c = shares.copy()
        c[a] = shares[a] + lam
        c[a2] = abs(shares[a2] - lam)
        piece = np.sum(2 * c * np.sqrt(radii * losses)) + lam * (losses[a] - losses[a2]) + lam * (radii[a] - radii[a2])
        best = max(best, float(piece))
    return base + best


def ref_paper_pieces(matrices, shares, radii, lam, v) -> dict:
    """The pieces of G: Σ_b [υ_b(L_b + ε_b) + 2|υ_b|√(ε_b L_b)], the (6b) expansion of φ."""
    losses = ref_losses(matrices, v)
    out = {}
    for a, a2 in pairs(len(matrices)):
        u = weights_of_pair(shares, lam, a, a2)
        out[(a, a2)] = float(np.sum(u * (losses + radii) + 2 * np.abs(u) * np.sqrt(np.asarray(radii) * losses)))
    return out


def ref_printed_b2(matrices, shares, radii, lam, v) -> float:
    """Theorem B.2 as printed: G without Σ_b p̂_b(L_b + ε_b) (spec E4)."""
    shares, radii = np.asarray(shares, float), np.asarray(radii, float)
    return ref_paper(matrices, shares, radii, lam, v) - float(np.sum(shares * (ref_losses(matrices, v) + radii)))


def ref_two_group_exact(matrices, shares, radii, lam, v) -> float:
    """B.3: F_exact = max_a φ(p̂_a + λ, L_a, ε_a) + φ(p̂_a' − λ, L_a', ε_a')."""
    l0, l1 = ref_losses(matrices, v)
    (p0, p1), (e0, e1) = shares, radii
    j0 = phi(p0 + lam, l0, e0) + phi(p1 - lam, l1, e1)
    j1 = phi(p1 + lam, l1, e1) + phi(p0 - lam, l0, e0)
    return float(max(j0, j1))


def ref_6b(matrices, shares, radii, lam, v) -> float:
    """Theorem 3.2 (6a)–(6c): max_a κ_a + θ_a√L_a + ϑ_a'√L_a' + ⟨I − VVᵀ, C_a⟩."""
    p = v.shape[0]
    projector = np.eye(p) - v @ v.T
    losses = ref_losses(matrices, v)
    values = []
    for a, a2 in ((0, 1), (1, 0)):
        kappa = (shares[a] + lam) * radii[a] + (shares[a2] - lam) * radii[a2]
        theta = 2 * abs(shares[a] + lam) * np.sqrt(radii[a])
        vartheta = 2 * abs(shares[a2] - lam) * np.sqrt(radii[a2])
        c = (shares[a] + lam) * matrices[a] + (shares[a2] - lam) * matrices[a2]
        values.append(kappa + theta * np.sqrt(losses[a]) + vartheta * np.sqrt(losses[a2]) + np.sum(projector * c))
    return float(max(values))


def ref_gradient(matrices, shares, radii, lam, v) -> np.ndarray:
    """Riemannian gradient of the active exact piece: (I − VVᵀ) Σ_b φ'_b · (−2 M_b V)."""
    pieces = ref_pieces(matrices, shares, radii, lam, v)
    a, a2 = max(pieces, key=pieces.get)
    upsilon = weights_of_pair(shares, lam, a, a2)
    losses = ref_losses(matrices, v)
    euclidean = sum(
        -2 * phi_slope(u, ell, e) * (mat @ v) for u, ell, e, mat in zip(upsilon, losses, radii, matrices, strict=True)
    )
    return euclidean - v @ (v.T @ euclidean)


def ref_empirical(matrices, shares, lam, v) -> float:
    """E_P̂[ℓ] + λ max_{a,a'} |L_a − L_a'| (T-B4)."""
    losses = ref_losses(matrices, v)
    return float(np.sum(np.asarray(shares) * losses) + lam * (losses.max() - losses.min()))


def psd_sqrt(a: np.ndarray) -> np.ndarray:
    """Symmetric PSD square root by eigh (scipy.linalg.sqrtm warns, and loses digits, on the
    singular moments of the υ < 0, L < ε pushforward); checked against sqrtm below."""
    values, vectors = np.linalg.eigh((a + a.T) / 2)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def gelbrich(mean1, cov1, mean2, cov2) -> float:
    """Def. 3.1: ‖μ₁ − μ₂‖² + tr(Σ₁ + Σ₂ − 2(Σ₂^{1/2} Σ₁ Σ₂^{1/2})^{1/2})."""
    root2 = psd_sqrt(cov2)
    cross = psd_sqrt(root2 @ cov1 @ root2)
    return float(np.sum((mean1 - mean2) ** 2) + np.trace(cov1 + cov2 - 2 * cross))


def moments_of(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = rows.mean(axis=0)
    centred = rows - mean
    return mean, centred.T @ centred / rows.shape[0]


def random_tangent(rng, v):
    b = rng.standard_normal(v.shape)
    xi = b - v @ (v.T @ b)
    return xi / np.linalg.norm(xi)


def feasible_instance(rng, m, p, r, lam_kind):
    """Random (M, p̂, ε, λ) for which Theorem 3.2's conditions hold for every group:
    ``"small"`` λ ≤ min p̂ (condition (i)); ``"large"`` λ = 1.5 with ε_b below the Ky Fan
    bound Σ_{j ≤ p−r} σ_j(M_b) (condition (ii))."""
    matrices = random_matrices(rng, p, m)
    counts = rng.integers(20, 200, size=m)
    shares = counts / counts.sum()
    if lam_kind == "small":
        lam = float(rng.uniform(0.0, shares.min()))
        radii = rng.uniform(0.01, 0.6, size=m)
    else:
        lam = 1.5
        radii = np.array([rng.uniform(0.1, 0.9) * smallest_sum(mat, p - r) for mat in matrices])
    return matrices, counts, shares, radii, lam


# ================================================================== T-B1: Prop. 3.3
def test_worst_case_matches_the_closed_form_and_broadcasts():
    upsilon = np.array([-1.3, -0.2, 0.0, 0.4, 2.0])[:, None, None]
    loss = np.array([0.0, 0.05, 0.3, 1.0, 4.0])[None, :, None]
    radius = np.array([0.0, 0.1, 0.3, 2.5])[None, None, :]
    values = np.asarray(dro.worst_case(upsilon, loss, radius))
    assert values.shape == (5, 5, 4)
    np.testing.assert_allclose(values, phi(upsilon, loss, radius), rtol=1e-13, atol=1e-15)
    # the three branches by hand
    assert float(dro.worst_case(0.5, 4.0, 1.0)) == pytest.approx(0.5 * 9.0, rel=1e-14)
    assert float(dro.worst_case(-0.5, 4.0, 1.0)) == pytest.approx(-0.5 * 1.0, rel=1e-14)
    assert float(dro.worst_case(-0.5, 1.0, 4.0)) == 0.0
    assert float(dro.worst_case(-0.5, 1.0, 1.0)) == 0.0
    assert float(dro.worst_case(0.7, 0.0, 0.2)) == pytest.approx(0.7 * 0.2, rel=1e-14)
    # ε = 0: no ambiguity, φ = υL
    u, ell = np.meshgrid([-2.0, -0.3, 0.0, 0.6, 1.7], [0.0, 0.2, 3.0])
    np.testing.assert_allclose(dro.worst_case(u, ell, 0.0), u * ell, rtol=1e-14, atol=0)


def sample_data(rng, n=40, p=5):
    mixing = rng.normal(size=(p, p)) * rng.uniform(0.3, 1.5, size=p)
    return rng.normal(size=(n, p)) @ mixing + rng.normal(size=p)


def worst_map_scale(upsilon, loss, radius) -> float:
    """c with X' = (I + cP)X the worst case: √(ε/L) (υ ≥ 0), −√(ε/L) (υ < 0, L ≥ ε), −1 (else)."""
    if upsilon >= 0:
        return np.sqrt(radius / loss)
    return -min(np.sqrt(radius / loss), 1.0)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("ratio", [0.1, 0.7, 1.6])
@pytest.mark.parametrize("upsilon", [0.8, -0.6])
def test_worst_case_bounds_every_distribution_in_the_gelbrich_ball(seed, ratio, upsilon):
    rng = np.random.default_rng(seed)
    p, r = 5, 2
    x = sample_data(rng, p=p)
    mean, cov = moments_of(x)
    v = random_orthonormal(rng, p, r)
    projector = np.eye(p) - v @ v.T
    loss = float(np.sum(projector * (cov + np.outer(mean, mean))))
    radius = ratio * loss
    bound = float(dro.worst_case(upsilon, loss, radius))
    assert bound == pytest.approx(float(phi(upsilon, loss, radius)), rel=1e-13, abs=1e-15)
    c_star = worst_map_scale(upsilon, loss, radius)
    root_cov = psd_sqrt(cov)
    kept, best = 0, -np.inf
    for trial in range(160):
        if trial % 2 == 0:
            # a random affine perturbation of the rows, of random size
            size = rng.uniform(0.0, 1.5) * np.sqrt(radius / loss)
            e = rng.normal(size=(p, p))
            t = np.eye(p) + size * e / np.linalg.norm(e)
            mean_q = t @ mean + size * np.sqrt(loss) * rng.normal(size=p) / np.sqrt(p)
            extra = rng.normal(size=(p, p)) * size * 0.3
            cov_q = t @ cov @ t.T + extra @ extra.T * np.trace(cov) / p
        else:
            # near the worst case: (I + c P) with c ≈ c*, plus a small symmetric wobble
            e = rng.normal(size=(p, p))
            wobble = rng.uniform(0.0, 0.05) * abs(c_star) * (e + e.T) / np.linalg.norm(e + e.T)
            t = np.eye(p) + c_star * rng.uniform(0.9, 1.02) * projector + wobble
            mean_q = t @ mean
            cov_q = root_cov @ t @ t.T @ root_cov if trial % 4 == 1 else t @ cov @ t.T
        if gelbrich(mean_q, cov_q, mean, cov) > radius:
            continue
        kept += 1
        value = upsilon * float(np.sum(projector * (cov_q + np.outer(mean_q, mean_q))))
        assert value <= bound + 1e-10 * max(abs(bound), loss)
        best = max(best, value)
    assert kept >= 30
    # the samples come close to the bound: it is not loose
    assert best >= bound - 0.1 * max(abs(bound), upsilon * loss if upsilon > 0 else 0.05 * loss)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("ratio", [0.05, 0.7, 1.6])
@pytest.mark.parametrize("upsilon", [1.3, -0.4])
def test_worst_case_is_attained_by_the_pushforward(seed, ratio, upsilon):
    rng = np.random.default_rng(20 + seed)
    p, r = 6, 2
    x = sample_data(rng, n=50, p=p)
    mean, cov = moments_of(x)
    v = random_orthonormal(rng, p, r)
    projector = np.eye(p) - v @ v.T
    loss = float(np.mean(np.sum((x @ projector) ** 2, axis=1)))  # E‖PX‖² = ⟨P, M̂⟩
    radius = ratio * loss
    c = worst_map_scale(upsilon, loss, radius)
    moved = x @ (np.eye(p) + c * projector)  # (I + cP) is symmetric
    moved_mean, moved_cov = moments_of(moved)
    # transport cost of this coupling and the Gelbrich distance of the moments
    cost = float(np.mean(np.sum((moved - x) ** 2, axis=1)))
    assert cost == pytest.approx(min(radius, loss) if c == -1.0 else radius, rel=1e-10)
    distance = gelbrich(moved_mean, moved_cov, mean, cov)
    if c > -1.0:  # both moments non-singular: the eigh root agrees with scipy's sqrtm
        np.testing.assert_allclose(psd_sqrt(moved_cov), np.real(scipy.linalg.sqrtm(moved_cov)), atol=1e-10)
    assert distance <= radius * (1 + 1e-8)
    assert distance == pytest.approx(cost, rel=1e-7, abs=1e-12)  # the linear map is optimal
    attained = float(np.mean(np.sum((moved @ projector) ** 2, axis=1)))
    if upsilon >= 0:
        assert attained == pytest.approx((np.sqrt(loss) + np.sqrt(radius)) ** 2, rel=1e-10)
    else:
        assert attained == pytest.approx(max(np.sqrt(loss) - np.sqrt(radius), 0.0) ** 2, rel=1e-10, abs=1e-12 * loss)
    expected = float(dro.worst_case(upsilon, loss, radius))
    assert upsilon * attained == pytest.approx(expected, rel=1e-10, abs=1e-12 * loss)


# ================================================================== DROProblem construction
def test_problem_from_moments_uses_global_second_moments_weights_and_counts():
    rng = np.random.default_rng(3)
    p, n = 4, 120
    labels = np.array(["b", "a", "c"])[rng.integers(0, 3, size=n)]
    x = rng.normal(size=(n, p)) * [1.0, 2.0, 0.5, 1.5] + np.where(labels[:, None] == "a", 3.0, -1.0)
    moments = GroupMoments.from_arrays(x, labels)
    problem = dro.DROProblem.from_moments(moments, alpha=0.3, lam=0.7, center="global")
    centred = x - x.mean(axis=0)
    for b, g in enumerate(moments.groups):
        rows = centred[labels == g]
        np.testing.assert_allclose(problem.second[b], rows.T @ rows / len(rows), rtol=1e-12, atol=1e-12)
        assert problem.shares[b] == pytest.approx(len(rows) / n, rel=1e-14)
        assert problem.radii[b] == pytest.approx(0.3 / np.sqrt(len(rows)), rel=1e-14)
    assert problem.lam == 0.7
    origin = dro.DROProblem.from_moments(moments, alpha=0.3, lam=0.7, center="origin")
    for b, g in enumerate(moments.groups):
        rows = x[labels == g]
        np.testing.assert_allclose(origin.second[b], rows.T @ rows / len(rows), rtol=1e-12, atol=1e-12)
    # shares come from the weights, radii from the row counts
    weighted = group_moments(random_matrices(rng, p, 2), counts=[10, 40], weights=[30.0, 10.0])
    problem = dro.DROProblem.from_moments(weighted, alpha=0.5, lam=0.1)
    np.testing.assert_allclose(problem.shares, [0.75, 0.25], rtol=1e-14)
    np.testing.assert_allclose(problem.radii, [0.5 / np.sqrt(10), 0.5 / np.sqrt(40)], rtol=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_methods_accept_a_single_basis_or_a_stack(seed):
    rng = np.random.default_rng(seed)
    m, p, r = 2 + seed, 6, 2
    matrices, _, shares, radii, lam = feasible_instance(rng, m, p, r, "small")
    problem = make_problem(matrices, shares, radii, lam)
    stack = np.stack([random_orthonormal(rng, p, r) for _ in range(4)])
    losses, values, papers, grads = (
        np.asarray(problem.losses(stack)),
        np.asarray(problem.value(stack)),
        np.asarray(problem.paper_value(stack)),
        np.asarray(problem.gradient(stack)),
    )
    assert losses.shape == (4, m) and values.shape == (4,) and papers.shape == (4,) and grads.shape == (4, p, r)
    for i, v in enumerate(stack):
        np.testing.assert_allclose(problem.losses(v), ref_losses(matrices, v), rtol=1e-12)
        np.testing.assert_allclose(losses[i], ref_losses(matrices, v), rtol=1e-12)
        assert float(problem.value(v)) == pytest.approx(ref_exact(matrices, shares, radii, lam, v), rel=1e-12)
        assert values[i] == pytest.approx(ref_exact(matrices, shares, radii, lam, v), rel=1e-12)
        assert papers[i] == pytest.approx(ref_paper(matrices, shares, radii, lam, v), rel=1e-12)
        np.testing.assert_allclose(grads[i], problem.gradient(v), rtol=1e-10, atol=1e-12)


# ================================================================== T-B2: Theorem 3.2
@pytest.mark.parametrize("seed", range(8))
def test_paper_form_equals_the_exact_objective_when_the_conditions_hold(seed):
    rng = np.random.default_rng(40 + seed)
    m, p, r = 2 + seed % 3, 6, 1 + seed % 3
    matrices, _, shares, radii, lam = feasible_instance(rng, m, p, r, "small" if seed % 2 == 0 else "large")
    problem = make_problem(matrices, shares, radii, lam)
    assert np.asarray(problem.conditions(r)).tolist() == [True] * m
    for _ in range(20):
        v = random_orthonormal(rng, p, r)
        exact, paper = float(problem.value(v)), float(problem.paper_value(v))
        assert exact == pytest.approx(ref_exact(matrices, shares, radii, lam, v), rel=1e-12)
        assert paper == pytest.approx(ref_paper(matrices, shares, radii, lam, v), rel=1e-12)
        assert paper == pytest.approx(exact, rel=1e-12)


def violating_instance():
    """Two groups, p̂ = (0.3, 0.7), λ = 1.5 > both shares, group 0 with a tiny M so that
    L_0(V) < ε_0 for every V (conditions fail for group 0, (ii) holds for group 1)."""
    rng = np.random.default_rng(5)
    p, r = 5, 2
    m0 = 1e-3 * random_matrices(rng, p, 1)[0]
    m1 = random_matrices(rng, p, 1)[0] + np.eye(p)
    return np.array([m0, m1]), [30, 70], 1.0, 1.5, p, r


def test_paper_form_differs_where_the_conditions_fail():
    matrices, counts, alpha, lam, p, r = violating_instance()
    moments = group_moments(matrices, counts)
    problem = dro.DROProblem.from_moments(moments, alpha=alpha, lam=lam, center="global")
    shares, radii = np.array([0.3, 0.7]), alpha / np.sqrt(counts)
    assert np.trace(matrices[0]) < radii[0] and smallest_sum(matrices[1], p - r) >= radii[1]
    assert np.asarray(problem.conditions(r)).tolist() == [False, True]
    rng = np.random.default_rng(0)
    for _ in range(10):
        v = random_orthonormal(rng, p, r)
        exact, paper = float(problem.value(v)), float(problem.paper_value(v))
        assert exact == pytest.approx(ref_exact(matrices, shares, radii, lam, v), rel=1e-12)
        assert paper == pytest.approx(ref_paper(matrices, shares, radii, lam, v), rel=1e-12)
        assert exact - paper > 1e-3  # the (6b) expansion of φ is wrong on the zero branch
    with pytest.warns(
        ModelWarning,
        match=rf"dro at r = {r}: .* group\(s\) \['g0'\] .*the sum of their {p - r} smallest "
        rf"eigenvalues, the variance r = {r} discards, is below ε",
    ):  # T-B2: naming the group
        result = fit(moments, r, alpha=alpha, lam=lam, n_iter=30, n_restarts=1, random_state=0)
    assert result.certificate["conditions_hold"] == 0.0 and result.details["formula"] == "exact"
    np.testing.assert_allclose(result.details["radii"], radii, rtol=1e-15)


def test_conditions_use_the_smallest_eigenvalues_and_the_target_dimension():
    spectrum = np.diag([3.0, 2.0, 1.0, 0.3, 0.2])
    # group 0: λ ≤ p̂_0 (i); group 1: Σ of the p − r smallest = 1.5 (r = 2) or 0.5 (r = 3) vs ε = 1
    problem = make_problem([spectrum, spectrum], shares=[0.9, 0.1], radii=[1.0, 1.0], lam=0.9)
    assert np.asarray(problem.conditions(2)).tolist() == [True, True]
    assert np.asarray(problem.conditions(3)).tolist() == [True, False]
    # the boundary cases of (i) and (ii) hold
    assert np.asarray(make_problem([spectrum] * 2, [0.5, 0.5], [1.0, 0.5], 0.5).conditions(3)).tolist() == [True, True]
    assert np.asarray(make_problem([spectrum] * 2, [0.2, 0.8], [0.5, 0.6], 0.9).conditions(3)).tolist() == [True, False]
    assert np.asarray(make_problem([spectrum] * 2, [0.2, 0.8], [1e9, 1e9], 0.0).conditions(1)).tolist() == [True, True]


@pytest.mark.parametrize("lam_kind", ["small", "large"])
def test_certificate_reports_the_conditions_when_they_hold(lam_kind):
    rng = np.random.default_rng(8)
    m, p, r = 3, 6, 2
    matrices = random_matrices(rng, p, m)
    counts = np.array([40, 90, 150])
    # α small enough that ε_b = α/√n_b is below every Ky Fan bound: (ii) holds for each group
    alpha = 0.5 * min(smallest_sum(mat, p - r) * np.sqrt(n) for mat, n in zip(matrices, counts, strict=True))
    lam = 0.1 if lam_kind == "small" else 2.0
    result = fit(group_moments(matrices, counts), r, alpha=alpha, lam=lam, n_iter=50, n_restarts=2, random_state=1)
    assert result.certificate["conditions_hold"] == 1.0 and result.details["formula"] == "6b"
    shares, radii = counts / counts.sum(), alpha / np.sqrt(counts)
    np.testing.assert_allclose(result.details["radii"], radii, rtol=1e-15)
    check = result.components
    assert np.abs(check.T @ check - np.eye(r)).max() <= 1e-10
    assert result.certificate["objective"] == pytest.approx(ref_exact(matrices, shares, radii, lam, check), rel=1e-10)


# ================================================================== T-B6: gradient
def check_gradient(problem, matrices, shares, radii, lam, rng, p, r) -> int:
    """Tangent, horizontal, equal to the reference and to central differences of ``value``
    along tangent directions on the curve polar(V + tξ); returns how many V were checked."""
    checked = 0
    for _ in range(6):
        v = random_orthonormal(rng, p, r)
        top = sorted(ref_pieces(matrices, shares, radii, lam, v).values())
        losses = ref_losses(matrices, v)
        if top[-1] - top[-2] <= 1e-6 or np.min(np.abs(losses - radii)) <= 1e-6:
            continue  # at a kink (two pieces, or L_b = ε_b) the gradient is ambiguous
        grad = np.asarray(problem.gradient(v))
        assert grad.shape == (p, r)
        scale = max(1.0, float(np.linalg.norm(grad)))
        assert np.abs(v.T @ grad + grad.T @ v).max() <= 1e-12 * scale  # tangent
        # F depends on VVᵀ only, so the gradient has no VΩ component: VᵀG = 0
        assert np.abs(v.T @ grad).max() <= 1e-12 * scale
        np.testing.assert_allclose(grad, ref_gradient(matrices, shares, radii, lam, v), rtol=1e-10, atol=1e-12 * scale)
        directions = [random_tangent(rng, v) for _ in range(3)] + [grad / np.linalg.norm(grad)]
        h = 1e-5
        for xi in directions:
            forward = float(problem.value(polar(v + h * xi)[0]))
            backward = float(problem.value(polar(v - h * xi)[0]))
            numeric = (forward - backward) / (2 * h)
            assert numeric == pytest.approx(float(np.sum(grad * xi)), rel=1e-6, abs=1e-8 * scale)
        checked += 1
    return checked


@pytest.mark.parametrize("seed", range(8))
def test_gradient_is_tangent_and_matches_finite_differences(seed):
    rng = np.random.default_rng(60 + seed)
    m, p, r = 2 + seed % 2, 6, 1 + seed % 3
    matrices, _, shares, radii, lam = feasible_instance(rng, m, p, r, "small" if seed < 5 else "large")
    problem = make_problem(matrices, shares, radii, lam)
    assert check_gradient(problem, matrices, shares, radii, lam, rng, p, r) >= 3


@pytest.mark.parametrize("seed", range(3))
def test_gradient_on_the_zero_branch_where_the_conditions_fail(seed):
    """υ_0 = p̂_0 − λ < 0 and L_0 < ε_0: φ = 0 there, so group 0 drops out of the gradient."""
    matrices, counts, alpha, lam, p, r = violating_instance()
    shares, radii = np.array([0.3, 0.7]), alpha / np.sqrt(counts)
    problem = make_problem(matrices, shares, radii, lam)
    assert check_gradient(problem, matrices, shares, radii, lam, np.random.default_rng(seed), p, r) >= 3


# ================================================================== T-B3: Remark 3.4
@pytest.mark.parametrize("seed", range(3))
def test_no_fairness_and_no_ambiguity_is_pca(seed):
    rng = np.random.default_rng(80 + seed)
    m, p, r = 2 + seed % 2, 6, 2
    common = random_orthonormal(rng, p, r)
    matrices = random_matrices(rng, p, m) + 3.0 * common @ common.T  # a clear eigengap at r
    counts = rng.integers(30, 120, size=m)
    shares = counts / counts.sum()
    pooled = np.einsum("b,bij->ij", shares, matrices)
    eigenvalues = np.linalg.eigvalsh(pooled)
    assert eigenvalues[p - r] - eigenvalues[p - r - 1] > 0.5
    result = fit(group_moments(matrices, counts), r, lam=0.0, alpha=0.0, random_state=seed, n_restarts=3, n_iter=300)
    _, top = top_eigenvectors(pooled, r)
    assert subspace_distance(result.components, top) <= 1e-6
    optimum = float(eigenvalues[: p - r].sum())
    assert result.certificate["objective"] == pytest.approx(optimum, rel=1e-10)
    assert ref_exact(matrices, shares, np.zeros(m), 0.0, result.components) == pytest.approx(optimum, rel=1e-10)


# ================================================================== T-B5: invariances
@pytest.mark.parametrize("seed", range(4))
def test_value_depends_on_the_subspace_only(seed):
    rng = np.random.default_rng(100 + seed)
    m, p, r = 2 + seed % 3, 7, 3
    matrices, _, shares, radii, lam = feasible_instance(rng, m, p, r, "small" if seed % 2 else "large")
    lam = lam if seed < 2 else 2.5  # also where the conditions may fail
    problem = make_problem(matrices, shares, radii, lam)
    for _ in range(5):
        v = random_orthonormal(rng, p, r)
        rotation = random_orthonormal(rng, r, r)
        for method in ("value", "paper_value"):
            assert float(getattr(problem, method)(v @ rotation)) == pytest.approx(
                float(getattr(problem, method)(v)), rel=1e-12
            )
        np.testing.assert_allclose(problem.losses(v @ rotation), problem.losses(v), rtol=1e-12)
        top = sorted(ref_pieces(matrices, shares, radii, lam, v).values())
        if top[-1] - top[-2] > 1e-6:  # gradients rotate with the basis
            np.testing.assert_allclose(
                problem.gradient(v @ rotation), np.asarray(problem.gradient(v)) @ rotation, rtol=1e-9, atol=1e-12
            )


@pytest.mark.parametrize("seed", range(3))
def test_group_order_does_not_matter(seed):
    rng = np.random.default_rng(120 + seed)
    m, p, r = 2 + seed % 2, 6, 2
    matrices = random_matrices(rng, p, m)
    counts = rng.integers(30, 150, size=m)
    order = np.arange(m)[::-1]
    swapped = group_moments(matrices[order], counts[order], names=tuple(f"g{g}" for g in order))
    original = group_moments(matrices, counts)
    a = dro.DROProblem.from_moments(original, alpha=0.15, lam=0.5)
    b = dro.DROProblem.from_moments(swapped, alpha=0.15, lam=0.5)
    for _ in range(5):
        v = random_orthonormal(rng, p, r)
        assert float(b.value(v)) == pytest.approx(float(a.value(v)), rel=1e-12)
        assert float(b.paper_value(v)) == pytest.approx(float(a.paper_value(v)), rel=1e-12)
        np.testing.assert_allclose(np.asarray(b.losses(v)), np.asarray(a.losses(v))[order], rtol=1e-12)
    options = dict(alpha=0.15, lam=0.5, random_state=3, n_restarts=0, n_iter=300)
    first, second = fit(original, r, **options), fit(swapped, r, **options)
    assert second.certificate["objective"] == pytest.approx(first.certificate["objective"], rel=1e-8)
    assert subspace_distance(first.components, second.components) <= 1e-6


# ================================================================== T-B11: multi-group, m = 2
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lam", [0.0, 0.2, 0.5, 1.5])
def test_two_groups_reduce_to_the_binary_formulas(seed, lam):
    rng = np.random.default_rng(140 + seed)
    p, r = 6, 1 + seed % 3
    matrices = random_matrices(rng, p, 2)
    counts = rng.integers(20, 100, size=2)
    shares = counts / counts.sum()
    radii = rng.uniform(0.0, 1.5, size=2) * np.trace(matrices[0]) / p  # sometimes L_b < ε_b
    problem = make_problem(matrices, shares, radii, lam)
    for _ in range(15):
        v = random_orthonormal(rng, p, r)
        assert float(problem.value(v)) == pytest.approx(ref_two_group_exact(matrices, shares, radii, lam, v), rel=1e-12)
        # B.6's corrected closed form is (6a)-(6c) for m = 2, whatever λ
        assert float(problem.paper_value(v)) == pytest.approx(ref_6b(matrices, shares, radii, lam, v), rel=1e-12)


def test_printed_theorem_b2_objective_is_identically_zero_without_fairness_or_ambiguity():
    """E4: Theorem B.2 drops Σ_b p̂_b(L_b + ε_b), which depends on V; at λ = 0, ε = 0 the
    printed objective is 0 for every V while the true one (PCA loss) is not constant."""
    rng = np.random.default_rng(9)
    m, p, r = 3, 6, 2
    matrices = random_matrices(rng, p, m)
    shares, radii = np.array([0.2, 0.3, 0.5]), np.zeros(m)
    problem = make_problem(matrices, shares, radii, 0.0)
    values = []
    for _ in range(10):
        v = random_orthonormal(rng, p, r)
        assert ref_printed_b2(matrices, shares, radii, 0.0, v) == 0.0
        values.append(float(problem.value(v)))
        pooled_loss = float(np.sum(shares * ref_losses(matrices, v)))
        assert values[-1] == pytest.approx(pooled_loss, rel=1e-12)
        assert float(problem.paper_value(v)) == pytest.approx(pooled_loss, rel=1e-12)
    assert np.ptp(values) > 0.1


# ================================================================== T-B4: DRO ≥ empirical
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lam", [0.0, 0.3, 1.5])
def test_robust_objective_bounds_the_empirical_one_and_grows_with_the_radius(seed, lam):
    rng = np.random.default_rng(160 + seed)
    m, p, r = 2 + seed % 2, 6, 2
    matrices = random_matrices(rng, p, m)
    counts = rng.integers(20, 200, size=m)
    moments = group_moments(matrices, counts)
    shares = counts / counts.sum()
    alphas = [0.0, 0.05, 0.15, 0.5, 2.0, 10.0]
    problems = [dro.DROProblem.from_moments(moments, alpha=alpha, lam=lam) for alpha in alphas]
    for _ in range(15):
        v = random_orthonormal(rng, p, r)
        empirical = ref_empirical(matrices, shares, lam, v)
        values = [float(problem.value(v)) for problem in problems]
        assert values[0] == pytest.approx(empirical, rel=1e-12)
        assert all(value >= empirical - 1e-12 * abs(empirical) for value in values)
        assert all(b >= a - 1e-12 * abs(a) for a, b in zip(values, values[1:], strict=False))
        assert values[-1] > empirical


# ================================================================== T-B7: retractions and forms agree
def smooth_instance():
    """λ = 0.1 < min p̂: the optimum lies inside one piece (checked below), where descent
    converges linearly and every retraction / parametrisation reaches the same minimiser."""
    rng = np.random.default_rng(11)
    p = 6
    return group_moments(random_matrices(rng, p, 2), [60, 140]), p, 2


@pytest.mark.parametrize(("retraction", "form"), [("polar", "V"), ("geodesic", "V"), ("qr", "U"), ("polar", "U")])
def test_retractions_and_parametrisations_reach_the_same_objective(retraction, form):
    moments, p, r = smooth_instance()
    options = dict(alpha=0.15, lam=0.1, n_restarts=0, n_iter=2000, random_state=0)
    base = fit(moments, r, retraction="qr", form="V", **options)
    other = fit(moments, r, retraction=retraction, form=form, **options)
    assert other.options["retraction"] == retraction and other.options["form"] == form
    matrices = moments.covariance("global")
    shares, radii = np.array([0.3, 0.7]), 0.15 / np.sqrt([60, 140])
    top = sorted(ref_pieces(matrices, shares, radii, 0.1, base.components).values())
    assert top[-1] - top[-2] > 1e-3  # not at a kink
    assert other.certificate["objective"] == pytest.approx(base.certificate["objective"], rel=1e-6)
    assert subspace_distance(other.components, base.components) <= 1e-3
    for result in (base, other):
        assert np.abs(result.components.T @ result.components - np.eye(r)).max() <= 1e-10
        assert result.certificate["objective"] == pytest.approx(
            ref_exact(matrices, shares, radii, 0.1, result.components), rel=1e-10
        )


# ================================================================== outputs and objectives
@pytest.mark.parametrize("seed", range(3))
def test_best_iterate_is_no_worse_than_the_last(seed):
    rng = np.random.default_rng(180 + seed)
    m, p, r = 2 + seed % 2, 6, 2
    matrices = random_matrices(rng, p, m)
    counts = rng.integers(20, 200, size=m)
    moments = group_moments(matrices, counts)
    options = dict(alpha=0.15, lam=0.5, n_restarts=3, n_iter=200, random_state=seed)
    best, last = fit(moments, r, output="best", **options), fit(moments, r, output="last", **options)
    assert best.options["output"] == "best" and last.options["output"] == "last"
    assert best.certificate["objective"] <= last.certificate["objective"] + 1e-12 * abs(last.certificate["objective"])
    shares, radii = counts / counts.sum(), 0.15 / np.sqrt(counts)
    for result in (best, last):
        assert np.abs(result.components.T @ result.components - np.eye(r)).max() <= 1e-10
        assert result.certificate["objective"] == pytest.approx(
            ref_exact(matrices, shares, radii, 0.5, result.components), rel=1e-10
        )
        history = np.asarray(result.objective_history)
        assert history.size >= 1 and np.all(np.isfinite(history))
    assert best.options["alpha"] == 0.15 and best.options["lam"] == 0.5
    assert best.options["objective"] == "exact" and best.options["retraction"] == "qr" and best.options["form"] == "V"


def test_paper_objective_matches_exact_where_the_conditions_hold():
    moments, p, r = smooth_instance()
    options = dict(alpha=0.15, lam=0.1, n_restarts=0, n_iter=2000, random_state=0)
    exact, paper = fit(moments, r, objective="exact", **options), fit(moments, r, objective="paper", **options)
    assert paper.options["objective"] == "paper"
    assert paper.certificate["objective"] == pytest.approx(exact.certificate["objective"], rel=1e-8)


# ================================================================== Algorithm 1, step by step
def geodesic_step(point: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Embedded-metric geodesic from V with velocity Δ at t = 1 (Edelman et al. 1998, (2.7)):
    [V, Δ] expm([[A, −S], [I, A]]) [I; 0] expm(−A), A = VᵀΔ, S = ΔᵀΔ."""
    r = point.shape[1]
    a, s = point.T @ delta, delta.T @ delta
    block = np.block([[a, -s], [np.eye(r), a]])
    return np.hstack([point, delta]) @ scipy.linalg.expm(block)[:, :r] @ scipy.linalg.expm(-a)


def reference_descent(matrices, shares, radii, lam, start, n_iter, form, retraction, objective="exact"):
    """Algorithm 1 written from the spec (B.4, B.6): constant step γ = 1/√(τ + 1) along the
    gradient of the active piece, then the retraction. V-form: V ← R(V − γ grad F(V));
    U-form (U spans the complement, L_b = ⟨UUᵀ, M_b⟩): U ← R(U − γ (I − UUᵀ) Σ_b 2F'_b M_bU),
    F'_b = dφ/dL (exact) or υ_b + |υ_b|√(ε_b/L_b) (the (6b) expansion, ``objective="paper"``).
    Returns the iterates' values F(V_t), t = 0..τ, and the last V."""
    gamma = 1.0 / np.sqrt(n_iter + 1.0)
    point, values = start, []
    for t in range(n_iter + 1):
        v = point if form == "V" else scipy.linalg.null_space(point.T)
        pieces = (ref_pieces if objective == "exact" else ref_paper_pieces)(matrices, shares, radii, lam, v)
        ranked = sorted(pieces.values())
        assert ranked[-1] - ranked[-2] > 1e-8  # the active piece is unambiguous
        values.append(max(ranked))
        if t == n_iter:
            return np.array(values), v
        a, a2 = max(pieces, key=pieces.get)
        upsilon = weights_of_pair(shares, lam, a, a2)
        losses = ref_losses(matrices, v)
        if objective == "exact":
            slopes = [phi_slope(u, ell, e) for u, ell, e in zip(upsilon, losses, radii, strict=True)]
        else:
            slopes = [u + abs(u) * np.sqrt(e / ell) for u, ell, e in zip(upsilon, losses, radii, strict=True)]
        sign = -1.0 if form == "V" else 1.0  # dL_b/dV = −2M_bV, dL_b/dU = 2M_bU
        euclidean = sum(sign * 2 * slope * (mat @ point) for slope, mat in zip(slopes, matrices, strict=True))
        grad = euclidean - point @ (point.T @ euclidean)
        if objective == "exact" and form == "V":
            np.testing.assert_allclose(grad, ref_gradient(matrices, shares, radii, lam, point), atol=1e-12)
        moved = point - gamma * grad
        if retraction == "qr":
            q, r_factor = np.linalg.qr(moved)
            point = q * np.where(np.diag(r_factor) < 0, -1.0, 1.0)
        elif retraction == "polar":
            left, _, right_t = np.linalg.svd(moved, full_matrices=False)
            point = left @ right_t
        else:
            point = geodesic_step(point, -gamma * grad)


@pytest.mark.parametrize("retraction", ["qr", "polar", "geodesic"])
@pytest.mark.parametrize("form", ["V", "U"])
@pytest.mark.parametrize("seed", range(2))
def test_few_steps_follow_algorithm_1(form, retraction, seed):
    """The returned subspace after τ = 6 steps from the PCA start is the reference's (QR and
    polar give the same subspaces, so the two are one algorithm on span V; the geodesic
    step differs: tan vs identity on the principal angles)."""
    rng = np.random.default_rng(200 + seed)
    m, p, r = 2 + seed, 6, 2
    matrices = random_matrices(rng, p, m, scale=0.5)
    counts = rng.integers(30, 150, size=m)
    moments = group_moments(matrices, counts)
    shares, radii, lam, n_iter = counts / counts.sum(), 0.15 / np.sqrt(counts), 0.5, 6
    _, start = top_eigenvectors(np.einsum("b,bij->ij", shares, matrices), r)  # the PCA start
    start = start if form == "V" else scipy.linalg.null_space(start.T)
    values, last = reference_descent(matrices, shares, radii, lam, start, n_iter, form, retraction)
    options = dict(alpha=0.15, lam=lam, n_iter=n_iter, n_restarts=0, form=form, retraction=retraction)
    paper = fit(moments, r, output="last", **options)
    assert subspace_distance(paper.components, last) <= 1e-9
    assert paper.certificate["objective"] == pytest.approx(values[-1], rel=1e-10)
    best = fit(moments, r, output="best", **options)
    assert best.certificate["objective"] == pytest.approx(values.min(), rel=1e-10)


@pytest.mark.parametrize("form", ["V", "U"])
def test_paper_objective_descends_the_closed_form_where_the_conditions_fail(form):
    """``objective="paper"`` follows (6b)'s pieces and slopes, which differ from F_exact on
    the violating instance (exact: group 0 on the zero branch)."""
    matrices, counts, alpha, lam, p, r = violating_instance()
    moments = group_moments(matrices, counts)
    shares, radii, n_iter = np.array([0.3, 0.7]), alpha / np.sqrt(counts), 6
    _, start = top_eigenvectors(np.einsum("b,bij->ij", shares, matrices), r)
    start = start if form == "V" else scipy.linalg.null_space(start.T)
    options = dict(alpha=alpha, lam=lam, n_iter=n_iter, n_restarts=0, form=form, output="last")
    subspaces = {}
    for objective in ("exact", "paper"):
        _, last = reference_descent(matrices, shares, radii, lam, start, n_iter, form, "qr", objective)
        with pytest.warns(ModelWarning):
            result = fit(moments, r, objective=objective, **options)
        assert subspace_distance(result.components, last) <= 1e-9
        subspaces[objective] = last
    assert subspace_distance(subspaces["exact"], subspaces["paper"]) > 1e-3


def stop_step(best: np.ndarray, patience: int, rtol: float) -> int:
    """The step at which the early-stop rule, written here from its definition, stops a start
    whose best-so-far values are ``best`` (t = 0, 1, ...): ``patience`` steps after the last
    step that lowered the best value by more than rtol × |the best value at the previous
    such step|; the last step if that never happens."""
    reference, last = best[0], 0
    for t in range(1, len(best)):
        if best[t] < reference - rtol * abs(reference):
            reference, last = best[t], t
        if t - last >= patience:
            return t
    return len(best) - 1


@pytest.mark.parametrize("output", ["best", "last"])
def test_patience_stops_each_start_where_the_rule_says(output):
    """The opt-in early stop changes nothing but where each start stops: every start's
    history is a prefix of its full run (then flat), it stops at the step the rule gives on
    its full run's best-so-far values, and the kept point is the full run's at that step."""
    moments, p, r = smooth_instance()
    problem = dro.DROProblem.from_moments(moments, alpha=0.15, lam=0.1, center="global")
    rng = np.random.default_rng(4)
    starts = np.stack([random_orthonormal(rng, p, r) for _ in range(4)])
    n_iter, patience, rtol = 3000, 25, 1e-9
    full_best, _, _ = dro._descend(problem, starts, "V", n_iter, "qr", "best", "exact")
    full_last, last_points, _ = dro._descend(problem, starts, "V", n_iter, "qr", "last", "exact")
    history, kept, kept_values = dro._descend(problem, starts, "V", n_iter, "qr", output, "exact", patience, rtol)
    stops = [stop_step(full_best[:, j], patience, rtol) for j in range(len(starts))]
    assert max(stops) < n_iter and min(stops) < max(stops)  # starts leave at different steps
    assert len(history) == max(stops) + 1
    full = full_best if output == "best" else full_last
    for j, t in enumerate(stops):
        np.testing.assert_allclose(history[: t + 1, j], full[: t + 1, j], rtol=1e-13)
        assert np.all(history[t:, j] == history[t, j])  # flat once stopped
        assert kept_values[j] == pytest.approx(full[t, j], rel=1e-13)
        assert float(problem.value(kept[j])) == pytest.approx(kept_values[j], rel=1e-12)
    assert np.all(np.diff(history[:, 0]) <= 0) or output == "last"


def test_patience_is_opt_in_and_reported():
    moments, p, r = smooth_instance()
    options = dict(alpha=0.15, lam=0.1, n_restarts=3, n_iter=3000, random_state=0)
    full = fit(moments, r, **options)
    assert full.n_iter == 3000 and full.objective_history.size == 3001 and full.options["patience"] is None
    early = fit(moments, r, patience=25, patience_rtol=1e-9, **options)
    assert early.options["patience"] == 25 and early.options["patience_rtol"] == 1e-9
    assert early.n_iter < 3000 and early.objective_history.size == early.n_iter + 1
    assert early.certificate["objective"] == pytest.approx(full.certificate["objective"], rel=1e-6)
    if early.certificate["best_start"] == full.certificate["best_start"]:
        np.testing.assert_allclose(early.objective_history, full.objective_history[: early.n_iter + 1], rtol=1e-12)


@pytest.mark.parametrize("output", ["best", "last"])
def test_restarts_never_do_worse_than_the_pca_start_alone(output):
    """Start 0 is the deterministic PCA start whatever n_restarts, and the start with the
    smallest kept objective wins, so adding restarts cannot raise the objective."""
    rng = np.random.default_rng(13)
    m, p, r = 3, 7, 2
    matrices = random_matrices(rng, p, m)
    moments = group_moments(matrices, rng.integers(20, 200, size=m))
    options = dict(alpha=0.15, lam=1.5, n_iter=60, output=output, random_state=2)
    alone = fit(moments, r, n_restarts=0, **options).certificate["objective"]
    values = [fit(moments, r, n_restarts=k, **options).certificate["objective"] for k in (1, 4, 8)]
    assert all(value <= alone * (1 + 1e-12) for value in values)
    assert min(values) < alone - 1e-6  # some random start does better here (else the test is vacuous)


@pytest.mark.parametrize("center", ["global", "group", "origin"])
def test_fit_uses_the_second_moments_about_the_requested_centre(center):
    rng = np.random.default_rng(21)
    labels = np.repeat(["a", "b", "c"], [30, 50, 70])
    x = rng.normal(size=(150, 5)) * [1.0, 0.5, 2.0, 1.0, 0.7] + np.where(labels[:, None] == "a", 1.5, -0.5) + 0.3
    moments = GroupMoments.from_arrays(x, labels)
    if center == "global":
        centres = {g: x.mean(axis=0) for g in "abc"}
    elif center == "group":
        centres = {g: x[labels == g].mean(axis=0) for g in "abc"}
    else:
        centres = {g: np.zeros(5) for g in "abc"}
    matrices = np.array(
        [(x[labels == g] - centres[g]).T @ (x[labels == g] - centres[g]) / np.sum(labels == g) for g in "abc"]
    )
    counts = np.array([30, 50, 70])
    shares, radii = counts / 150, 0.2 / np.sqrt(counts)
    options = dict(alpha=0.2, lam=0.5, n_iter=100, n_restarts=2, random_state=0)
    result = fit_projection(moments, 2, method="dro", center=center, **options)
    assert result.center == center
    assert result.certificate["objective"] == pytest.approx(
        ref_exact(matrices, shares, radii, 0.5, result.components), rel=1e-10
    )
    again = fit_projection(moments, 2, method="dro", center=center, **options)  # reproducible
    np.testing.assert_array_equal(again.components, result.components)


def test_solve_dro_centres_as_every_solver_does_by_default():
    """Like every solver, solve_dro defaults to center="group" (fit_projection passes its own
    center anyway); the paper's M̂_b = E[XXᵀ | A = b] of globally centred data is
    center="global", which differs here because the group means differ."""
    rng = np.random.default_rng(4)
    labels = np.repeat(["a", "b"], [40, 60])
    x = rng.normal(size=(100, 4)) + np.where(labels[:, None] == "a", 2.0, -1.0)
    moments = GroupMoments.from_arrays(x, labels)
    options = dict(random_state=0)
    default = dro.solve_dro(moments, 2, **options)
    grouped = dro.solve_dro(moments, 2, center="group", **options)
    paper = dro.solve_dro(moments, 2, center="global", **options)
    assert default.center == "group"
    assert default.certificate["objective"] == pytest.approx(grouped.certificate["objective"], rel=1e-12)
    assert abs(paper.certificate["objective"] - default.certificate["objective"]) > 1e-3


# ================================================================== errors
BAD_OPTIONS = [
    ({"alpha": -0.1}, "alpha"),
    ({"lam": -0.5}, "lam"),
    ({"n_iter": 0}, "n_iter"),
    ({"n_restarts": -1}, "n_restarts"),
    ({"retraction": "cayley"}, "retraction"),
    ({"form": "W"}, "form"),
    ({"output": "mean"}, "output"),
    ({"objective": "robust"}, "objective"),
    ({"patience": 0}, "patience"),
    ({"patience": 2.5}, "patience"),
    ({"patience": 5, "patience_rtol": -1e-3}, "patience_rtol"),
    ({"algorithm": "newton"}, "algorithm"),
    ({"algorithm": "frontier", "tol": 0.0}, "tol"),
    ({"algorithm": "frontier", "max_iter": 3}, "max_iter"),
]


@pytest.mark.parametrize(("options", "name"), BAD_OPTIONS)
def test_bad_options_raise_before_any_work(options, name, monkeypatch):
    moments = group_moments(random_matrices(np.random.default_rng(0), 5, 2), [30, 50])

    def no_work(*args, **kwargs):
        raise AssertionError("the solver started working before checking its options")

    monkeypatch.setattr(dro.DROProblem, "from_moments", classmethod(no_work))
    monkeypatch.setattr(GroupMoments, "covariance", no_work)
    monkeypatch.setattr(GroupMoments, "scatter_about", no_work)
    with pytest.raises(InputError, match=name):
        fit(moments, 2, **options)
    with pytest.raises(InputError, match=name):
        dro.solve_dro(moments, 2, **options)


# ================================================================== algorithm="frontier"
def frontier_fit(moments: GroupMoments, r: int, **options):
    return fit_projection(moments, r, method="dro", center="global", algorithm="frontier", **options)


def brute_force_minimum(objective, p: int, r: int, rng: np.random.Generator, samples: int = 4000) -> float:
    """min of ``objective`` over orthonormal p × r V: the best of random bases, each of the 8
    best polished by Nelder–Mead on the QR factor of V + (p × r free entries)."""
    values, bases = [], []
    for _ in range(samples):
        v = random_orthonormal(rng, p, r)
        values.append(objective(v))
        bases.append(v)
    best = float(min(values))
    for index in np.argsort(values)[:8]:
        start = bases[index]

        def shifted(entries, start=start):
            return objective(np.linalg.qr(start + entries.reshape(p, r))[0])

        found = scipy.optimize.minimize(
            shifted, np.zeros(p * r), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 4000}
        )
        best = min(best, float(found.fun))
    return best


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("lam", "objective"), [(0.2, "exact"), (1.5, "exact"), (1.5, "paper")])
@pytest.mark.parametrize(("p", "r"), [(3, 1), (4, 2)])
def test_frontier_certifies_the_brute_force_minimum(seed, lam, objective, p, r):
    """The certified interval holds the minimum found by brute force over the Stiefel manifold
    (random bases polished by Nelder–Mead), with the spec's objective written in this file."""
    rng = np.random.default_rng(seed)
    matrices = random_matrices(rng, p, 2)
    counts = [30, 70]
    moments = group_moments(matrices, counts)
    shares, radii = np.array(counts) / 100, 0.15 / np.sqrt(counts)
    reference = ref_exact if objective == "exact" else ref_paper

    def value(v):
        return reference(matrices, shares, radii, lam, v)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        result = frontier_fit(moments, r, alpha=0.15, lam=lam, objective=objective, tol=1e-10)
    brute = brute_force_minimum(value, p, r, rng)
    cert = result.certificate
    assert result.status == "converged"
    assert value(result.components) == pytest.approx(cert["objective"], rel=1e-12)
    assert cert["lower_bound"] <= brute + 1e-9 * abs(brute)
    assert cert["upper_bound"] <= brute + 1e-8 * abs(brute)
    assert cert["upper_bound"] - cert["lower_bound"] <= 1e-10 * cert["upper_bound"]


def subset_losses(diagonals: np.ndarray, r: int) -> np.ndarray:
    """(L_0, L_1) of every projection on r coordinate axes: the vertices whose convex hull is
    the Fantope's image when the M_b are diagonal (Schur–Horn)."""
    totals = diagonals.sum(axis=1)
    return np.array(
        [totals - diagonals[:, list(kept)].sum(axis=1) for kept in itertools.combinations(range(diagonals.shape[1]), r)]
    )


def polygon_minimum(points: np.ndarray, pieces) -> tuple[float, float]:
    """(min over the convex hull's boundary, min over its vertices) of max_k pieces(L)_k: on each
    hull edge at its ends and where the largest piece changes (the minimum of concave pieces
    growing along (1, 1) is on the boundary, and on an edge at an end or such a crossing)."""
    spread = points - points.mean(axis=0)
    if np.linalg.matrix_rank(spread, tol=1e-12 * np.abs(points).max()) < 2:  # a segment (or a point)
        along = spread @ np.linalg.svd(spread)[2][0]
        vertices = points[[along.argmin(), along.argmax()]]
    else:
        vertices = points[scipy.spatial.ConvexHull(points).vertices]
    at_vertices = float(pieces(vertices).max(axis=1).min())
    best = at_vertices
    steps = np.linspace(0.0, 1.0, 2001)
    for a, b in zip(vertices, np.roll(vertices, -1, axis=0), strict=True):
        values = pieces(a + steps[:, None] * (b - a))
        top = values.argmax(axis=1)
        for i in np.flatnonzero(top[1:] != top[:-1]):
            j, k = top[i], top[i + 1]
            s = scipy.optimize.brentq(
                lambda s, a=a, b=b, k=k, j=j: float(np.diff(pieces((a + s * (b - a))[None])[0, [k, j]])[0]),
                steps[i],
                steps[i + 1],
                xtol=1e-16,
            )
            best = min(best, float(pieces((a + s * (b - a))[None]).max()))
    return best, at_vertices


@pytest.mark.parametrize("seed", range(6))
def test_frontier_reaches_an_edge_of_a_polygonal_loss_region(seed):
    """Diagonal M_b: the losses of rank-r projections fill the polygon spanned by the coordinate
    subsets, every boundary arc is a segment, and the optimum generally lies inside an edge where
    the two pieces cross; only a rotation between the two subsets' bases reaches it."""
    rng = np.random.default_rng(100 + seed)
    p, r, counts, lam = 6, 3, [40, 60], 1.0
    diagonals = rng.uniform(0.2, 3.0, size=(2, p))
    moments = group_moments(np.array([np.diag(d) for d in diagonals]), counts)
    shares, radii = np.array(counts) / 100, 0.15 / np.sqrt(counts)

    def pieces(losses):
        return np.array(
            [
                [float(phi(weights_of_pair(shares, lam, a, a2), row, radii).sum()) for a, a2 in pairs(2)]
                for row in losses
            ]
        )

    exact, at_vertices = polygon_minimum(subset_losses(diagonals, r), pieces)
    result = frontier_fit(moments, r, alpha=0.15, lam=lam, tol=1e-10)
    value = ref_exact(np.array([np.diag(d) for d in diagonals]), shares, radii, lam, result.components)
    assert value == pytest.approx(exact, rel=1e-8)
    assert result.certificate["lower_bound"] <= exact * (1 + 1e-9)
    assert result.status == "converged"
    if at_vertices > exact * (1 + 1e-6):  # the optimum is inside an edge: the pair rotation found it
        assert np.sum(np.abs(result.components) > 1e-6) > r


def tied_instances() -> list[np.ndarray]:
    """Diagonal M_b with exactly tied entries (discrete features): boundary segments whose end
    bases differ in two directions or more, as in diag(1, 1, 0, 0) against diag(0, 0, 1, 1)."""
    rng = np.random.default_rng(5)
    return [np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])] + [
        rng.integers(0, 4, size=(2, int(rng.integers(4, 7)))).astype(float) for _ in range(20)
    ]


@pytest.mark.parametrize("diagonals", tied_instances())
@pytest.mark.parametrize(("lam", "alpha"), [(0.5, 0.0), (1.0, 0.15)])
def test_frontier_reaches_the_optimum_on_segments_of_tied_eigenvalues(diagonals, lam, alpha):
    """Ties of any multiplicity: the projection at the pieces' crossing lies on the Grassmann
    geodesic between the segment's end bases (both top-r eigenspaces of the same W_θ)."""
    counts, r = [50, 50], 2
    shares, radii = np.array(counts) / 100, alpha / np.sqrt(counts)

    def pieces(losses):
        return np.array(
            [
                [float(phi(weights_of_pair(shares, lam, a, a2), row, radii).sum()) for a, a2 in pairs(2)]
                for row in losses
            ]
        )

    matrices = np.array([np.diag(d) for d in diagonals])
    exact, _ = polygon_minimum(subset_losses(diagonals, r), pieces)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        result = frontier_fit(group_moments(matrices, counts), r, alpha=alpha, lam=lam, tol=1e-10)
    assert ref_exact(matrices, shares, radii, lam, result.components) == pytest.approx(exact, rel=1e-8, abs=1e-12)
    assert result.certificate["lower_bound"] <= exact + 1e-12
    assert result.status == "converged"
    assert result.objective_history[-1] == result.certificate["objective"]


def test_frontier_says_why_it_stopped_short(monkeypatch):
    """max_iter reached, or a boundary segment where no projection at the crossing is found
    (here: the geodesic search disabled): a ConvergenceWarning, the status says which, and the
    bounds still hold (the optimum of this instance is F = 1 at L = (1, 1))."""
    from fairpca_dist.solvers import frontier

    moments = group_moments(np.array([np.diag([1.0, 1, 0, 0]), np.diag([0.0, 0, 1, 1])]), [50, 50])
    with pytest.warns(ConvergenceWarning, match="certified gap"):
        short = frontier_fit(moments, 2, alpha=0.0, lam=0.5, max_iter=4)
    monkeypatch.setattr(frontier, "geodesic_root", lambda first, second, difference: None)
    with pytest.warns(ConvergenceWarning, match="flat stretch"):
        stuck = frontier_fit(moments, 2, alpha=0.0, lam=0.5)
    assert short.status == "max_iter" and short.n_iter == 4
    assert stuck.status == "flat_segment" and stuck.n_iter < 100
    for result in (short, stuck):
        assert result.certificate["lower_bound"] <= 1.0 + 1e-12 < result.certificate["upper_bound"]
        assert result.converged is False


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("objective", ["exact", "paper"])
def test_frontier_lower_bound_holds_where_the_optimal_losses_are_zero(seed, objective):
    """Both groups inside one r-dimensional subspace: the optimum is F at L = (0, 0), where the
    losses' rounding (~1e-15) is magnified by the √L terms; the bound stays below it."""
    rng = np.random.default_rng(seed)
    p, r = 8, 3
    basis = np.linalg.qr(rng.normal(size=(p, p)))[0][:, :r]
    matrices = np.array([basis @ np.diag(rng.uniform(0.5, 3.0, r)) @ basis.T for _ in range(2)])
    counts = [int(rng.integers(20, 200)), int(rng.integers(20, 2000))]
    lam, alpha = float(rng.uniform(0.0, 2.0)), float(rng.uniform(0.05, 1.0))
    shares, radii = np.array(counts) / sum(counts), alpha / np.sqrt(counts)
    reference = ref_exact if objective == "exact" else ref_paper
    optimum = reference(np.zeros_like(matrices), shares, radii, lam, basis)  # F at L = (0, 0) exactly
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        result = frontier_fit(group_moments(matrices, counts), r, alpha=alpha, lam=lam, objective=objective, tol=1e-10)
    assert result.certificate["lower_bound"] <= optimum
    assert result.certificate["upper_bound"] == pytest.approx(optimum, rel=1e-6)


def test_frontier_case_needs_an_edge():
    """The polygon test above is not vacuous: some of its instances have the optimum inside an edge."""
    inside = 0
    shares, radii = np.array([0.4, 0.6]), 0.15 / np.sqrt([40, 60])
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        diagonals = rng.uniform(0.2, 3.0, size=(2, 6))

        def pieces(losses):
            return np.array(
                [
                    [float(phi(weights_of_pair(shares, 1.0, a, a2), row, radii).sum()) for a, a2 in pairs(2)]
                    for row in losses
                ]
            )

        exact, at_vertices = polygon_minimum(subset_losses(diagonals, 3), pieces)
        inside += at_vertices > exact * (1 + 1e-6)
    assert inside >= 2


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("lam", [0.0, 0.5, 2.0])
def test_frontier_is_no_worse_than_algorithm_1_and_bounds_it(seed, lam):
    """Algorithm 1 with restarts is a local method on the same objective: its value is at least
    the frontier's certified lower bound, and the frontier's value at most its own."""
    rng = np.random.default_rng(seed)
    p, r = 12, 3
    moments = group_moments(random_matrices(rng, p, 2), [25, 75])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        frontier = frontier_fit(moments, r, alpha=0.1, lam=lam)
        descent = fit(moments, r, alpha=0.1, lam=lam, n_restarts=10, n_iter=3000, random_state=seed)
    lower, upper = frontier.certificate["lower_bound"], frontier.certificate["upper_bound"]
    assert lower <= descent.certificate["objective"] * (1 + 1e-9)
    assert upper <= descent.certificate["objective"] * (1 + 1e-8)
    assert frontier.n_iter <= 40


@pytest.mark.parametrize("seed", [20, 27, 36, 38])
def test_frontier_converges_where_the_groups_scales_differ_by_orders_of_magnitude(seed):
    """A 3-row group whose columns span 1e-3..1e4 against a unit-scale group: the interesting
    part of the frontier is a sliver of θ (within 1e-5 of π/2), where the secant steps, held a
    tenth of the arc from its ends, crept by tenths and stopped at max_iter up to 32 % above
    the optimum. With r = p − 1 the losses are uᵀM_b u for the unit complement u, so the
    reference is a minimum over u ∈ S³ (sampled in feature-rescaled coordinates and polished
    by Nelder–Mead), with the spec's objective written in this file."""
    rng = np.random.default_rng(seed)
    x = np.vstack(
        [rng.normal(size=(3, 4)) * np.array([1e-3, 1e4, 1e4, 1e-3]), rng.normal(size=(8, 4)) @ rng.normal(size=(4, 4))]
    )
    groups = [x[:3], x[3:]]
    matrices = np.array([(g - x.mean(axis=0)).T @ (g - x.mean(axis=0)) / len(g) for g in groups])
    shares, radii, lam = np.array([3, 8]) / 11, 0.15 / np.sqrt([3, 8]), 0.9
    rescale = 1.0 / np.sqrt(np.diag(matrices.sum(axis=0)))

    def value(z):  # (..., 4) -> (...)
        u = z * rescale / np.linalg.norm(z * rescale, axis=-1, keepdims=True)
        losses = np.einsum("...i,bij,...j->...b", u, matrices, u)
        return np.max(
            [phi(weights_of_pair(shares, lam, a, a2), losses, radii).sum(axis=-1) for a, a2 in pairs(2)], axis=0
        )

    starts = np.random.default_rng(1).normal(size=(4000, 4))
    reference = min(
        scipy.optimize.minimize(
            value, starts[i], method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 2000}
        ).fun
        for i in np.argsort(value(starts))[:10]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        result = fit_projection(
            GroupMoments.from_arrays(x, np.repeat(["a", "b"], [3, 8])),
            3,
            method="dro",
            alpha=0.15,
            lam=lam,
            center="global",
        )
    assert result.status == "converged" and result.n_iter <= 60
    assert result.certificate["lower_bound"] <= reference * (1 + 1e-9)
    assert result.certificate["upper_bound"] <= reference * (1 + 1e-6)


def test_frontier_lower_bound_is_below_every_random_projection():
    rng = np.random.default_rng(7)
    p, r, counts = 8, 2, [50, 50]
    matrices = random_matrices(rng, p, 2)
    result = frontier_fit(group_moments(matrices, counts), r, alpha=0.15, lam=0.3)
    shares, radii = np.array(counts) / 100, 0.15 / np.sqrt(counts)
    values = [ref_exact(matrices, shares, radii, 0.3, random_orthonormal(rng, p, r)) for _ in range(3000)]
    assert result.certificate["lower_bound"] <= min(values)


def test_frontier_krylov_path_agrees_with_lapack(monkeypatch):
    """From p = 200 the eigenvectors come from block Lanczos, warm-started across directions,
    and W_θ is indefinite for θ outside [0, π/2]: the same certified optimum as LAPACK's."""
    from fairpca_dist.solvers import stiefel

    rng = np.random.default_rng(3)
    p, r = 240, 4
    factors = [rng.normal(size=(p, 30)) * rng.uniform(0.5, 3.0, size=30) for _ in range(2)]
    matrices = np.array([f @ f.T / 30 + 0.01 * np.eye(p) for f in factors])
    moments = group_moments(matrices, [300, 500])
    found = {}
    for mode in ("krylov", "dense"):
        monkeypatch.setattr(stiefel, "EIGENSOLVER", mode)
        found[mode] = frontier_fit(moments, r, alpha=0.15, lam=1.0, tol=1e-8)
    values = [f.certificate["upper_bound"] for f in found.values()]
    assert values[0] == pytest.approx(values[1], rel=1e-7)
    assert all(f.status == "converged" for f in found.values())
    assert found["krylov"].certificate["lower_bound"] <= values[1] * (1 + 1e-9)


def test_auto_is_the_frontier_for_two_groups_and_algorithm_1_for_more():
    rng = np.random.default_rng(0)
    two = fit_projection(group_moments(random_matrices(rng, 5, 2), [30, 50]), 2, method="dro")
    three = fit_projection(
        group_moments(random_matrices(rng, 5, 3), [30, 50, 40]),
        2,
        method="dro",
        n_restarts=2,
        n_iter=50,
        random_state=0,
    )
    assert two.options["algorithm"] == "frontier" and "lower_bound" in two.certificate
    assert three.options["algorithm"] == "subgradient" and three.status == "fixed_steps"


def test_options_of_the_other_algorithm_are_refused():
    rng = np.random.default_rng(0)
    two = group_moments(random_matrices(rng, 5, 2), [30, 50])
    with pytest.raises(InputError, match=r"n_iter.*algorithm='subgradient'"):
        fit_projection(two, 2, method="dro", n_iter=50)
    with pytest.raises(InputError, match=r"tol.*algorithm='frontier'"):
        fit_projection(two, 2, method="dro", algorithm="subgradient", tol=1e-4)
    with pytest.raises(InputError, match=r"two-group.*3 groups"):
        fit_projection(group_moments(random_matrices(rng, 5, 3), [30, 50, 40]), 2, method="dro", algorithm="frontier")
