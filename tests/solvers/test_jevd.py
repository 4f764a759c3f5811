"""JEVD fair PCA (Rathore & Manwani; spec seeds-000-001.md part B, methods "jevd" and
"jevd-orthogonal").

The checks are the algorithm's true invariants (spec B.5), built here from the spec, not from
the library: shifts by multiples of I and the paper's r-dependent M_g(r) give the same U,
diagonal and commuting inputs, identical groups (= PCA), feature permutations, group sizes,
the stuck zero-denominator case and its fallback, the faithful and orthogonal variants
against each other, and fixture F1, which documents that the paper's Theorem 4.1 is false.
Fairness is reported, never asserted.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import grouped_data

from fairpca_dist import GroupMoments, InputError, fit_projection
from fairpca_dist.exceptions import ConvergenceWarning
from fairpca_dist.solvers import jevd
from fairpca_dist.solvers.stiefel import check_orthonormal, subspace_distance

PINNED_SEEDS = list(range(10))  # faithful and Jacobi agree to < 1e-11 relative on these


# ================================================================== builders
def group_moments(matrices, counts=None) -> GroupMoments:
    """Zero-mean groups whose per-unit-weight second moments are ``matrices`` (k, p, p)."""
    matrices = np.asarray(matrices, dtype=float)
    k, p = matrices.shape[:2]
    count = np.asarray(counts if counts is not None else [100] * k, dtype=np.int64)
    weight = count.astype(float)
    return GroupMoments(
        groups=tuple(f"g{g}" for g in range(k)),
        count=count,
        weight=weight,
        mean_offset=np.zeros((k, p)),
        scatter=np.stack([w * m for w, m in zip(weight, matrices, strict=True)]),
        feature_names=tuple(f"x{j}" for j in range(p)),
    )


def random_spd(rng: np.random.Generator, p: int) -> np.ndarray:
    half = rng.normal(size=(p, p)) * rng.uniform(0.2, 2.0, size=p)
    return half @ half.T / p + 0.05 * np.eye(p)


def random_pair(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = (5, 8, 10)[seed % 3]
    return np.stack([random_spd(rng, p), random_spd(rng, p)])


def offdiag_energy(matrices: np.ndarray, basis: np.ndarray) -> float:
    """Σ_s ‖offdiag(QᵀΣ_sQ)‖², written out."""
    total = 0.0
    for matrix in matrices:
        t = basis.T @ matrix @ basis
        total += sum(t[i, j] ** 2 for i in range(len(t)) for j in range(len(t)) if i != j)
    return float(total)


def unit_columns(basis: np.ndarray) -> np.ndarray:
    return basis / np.linalg.norm(basis, axis=0)


def sign_free(basis: np.ndarray) -> np.ndarray:
    """Columns with their largest-magnitude entry positive (column sign is arbitrary)."""
    rows = np.argmax(np.abs(basis), axis=0)
    return basis * np.sign(basis[rows, np.arange(basis.shape[1])])


def losses(matrices: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Samadi loss_g = β_g(r) − tr(VᵀΣ_gV), from the definition."""
    r = v.shape[1]
    best = np.array([np.sort(np.linalg.eigvalsh(m))[::-1][:r].sum() for m in matrices])
    return best - np.array([np.trace(v.T @ m @ v) for m in matrices])


# ================================================================== invariants (B.5)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shift_by_multiples_of_identity_gives_the_same_u(seed):
    matrices = random_pair(seed)
    shifts = np.random.default_rng(100 + seed).uniform(-3, 5, size=2)
    shifted = matrices + shifts[:, None, None] * np.eye(matrices.shape[1])
    for run in (jevd.faithful_jevd, jevd.jacobi_jd):
        base, moved = run(matrices), run(shifted)
        np.testing.assert_allclose(unit_columns(moved.basis), unit_columns(base.basis), atol=1e-9)
    a = fit_projection(group_moments(matrices), 3, method="jevd").components
    b = fit_projection(group_moments(shifted), 3, method="jevd").components
    assert subspace_distance(a, b) < 1e-9


def test_u_is_independent_of_r_and_selected_columns_nest():
    matrices = random_pair(4)
    p = matrices.shape[1]
    base = unit_columns(jevd.faithful_jevd(matrices).basis)
    for r in range(1, p):  # the paper's M_g(r) = Σ_g − (β_g(r)/r) I
        beta = np.array([np.sort(np.linalg.eigvalsh(m))[::-1][:r].sum() for m in matrices])
        m_r = matrices - (beta / r)[:, None, None] * np.eye(p)
        np.testing.assert_allclose(unit_columns(jevd.faithful_jevd(m_r).basis), base, atol=1e-9)
    moments = group_moments(matrices)
    for method in ("jevd", "jevd-orthogonal"):
        previous = None
        for r in range(1, p + 1):
            components = fit_projection(moments, r, method=method).components
            if previous is not None:
                np.testing.assert_allclose(components[:, : r - 1], previous, atol=1e-12)
            previous = components


def test_diagonal_inputs_give_coordinate_axes():
    matrices = np.stack([np.diag([4.0, 3.0, 2.0, 1.0]), np.diag([1.0, 5.0, 0.5, 2.0])])
    found = jevd.faithful_jevd(matrices)
    assert found.n_iter == 0 and found.history == [0.0]
    np.testing.assert_array_equal(found.basis, np.eye(4))
    result = fit_projection(group_moments(matrices), 2, method="jevd")
    # sum scores 5, 8, 2.5, 3 -> axes 1 then 0
    np.testing.assert_array_equal(np.abs(result.components), np.eye(4)[:, [1, 0]])
    assert result.n_iter == 0 and result.status == "converged"
    ortho = fit_projection(group_moments(matrices), 2, method="jevd-orthogonal")
    np.testing.assert_array_equal(np.abs(ortho.components), np.eye(4)[:, [1, 0]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_commuting_inputs_recover_the_shared_eigenvectors(seed):
    rng = np.random.default_rng(seed)
    p = 6
    q = np.linalg.qr(rng.normal(size=(p, p)))[0]
    diagonals = rng.uniform(0.5, 5.0, size=(2, p))  # distinct joint eigenvalue pairs
    matrices = np.stack([q @ np.diag(d) @ q.T for d in diagonals])
    for found in (jevd.faithful_jevd(matrices), jevd.jacobi_jd(matrices)):
        cosines = np.abs(unit_columns(found.basis).T @ q)
        assert np.all(cosines.max(axis=1) >= 1 - 1e-8)
        assert sorted(np.argmax(cosines, axis=1)) == list(range(p))  # a permutation of Q's columns
        # C ≈ 0: below the default ε = 1e-12·C_0 scale
        assert offdiag_energy(matrices, unit_columns(found.basis)) <= 1e-12 * np.sum(matrices**2)


def test_identical_groups_give_pca_with_zero_losses():
    matrix = random_spd(np.random.default_rng(5), 7)
    moments = group_moments(np.stack([matrix, matrix]), counts=[50, 300])
    for method in ("jevd", "jevd-orthogonal"):
        for r in (1, 3, 6):
            result = fit_projection(moments, r, method=method)
            top = np.linalg.eigh(matrix)[1][:, ::-1][:, :r]
            assert subspace_distance(result.components, top) < 1e-8
            np.testing.assert_allclose(result.group_loss, 0.0, atol=1e-10)


@pytest.mark.parametrize("seed", [1, 2])
def test_feature_permutation_equivariance(seed):
    matrices = random_pair(seed)
    p = matrices.shape[1]
    perm = np.random.default_rng(seed).permutation(p)
    pi = np.eye(p)[perm]  # (Πx)_i = x_perm[i]
    permuted = pi @ matrices @ pi.T
    # faithful: identity start and V-formula are equivariant, so U' = Π U Πᵀ exactly
    expected = sign_free(pi @ unit_columns(jevd.faithful_jevd(matrices).basis) @ pi.T)
    np.testing.assert_allclose(sign_free(unit_columns(jevd.faithful_jevd(permuted).basis)), expected, atol=1e-8)
    # Jacobi: the sweep order depends on the feature order, so only the set of columns is equivariant
    expected = pi @ jevd.jacobi_jd(matrices).basis
    cosines = np.abs(jevd.jacobi_jd(permuted).basis.T @ expected)
    assert np.all(cosines.max(axis=0) >= 1 - 1e-8)
    a = fit_projection(group_moments(matrices), 3, method="jevd").components
    b = fit_projection(group_moments(permuted), 3, method="jevd").components
    assert subspace_distance(pi @ a, b) < 1e-8


def test_group_size_independence():
    x, labels = grouped_data(n_rows=300, n_features=6, n_groups=2, seed=3)
    first = labels == labels[0]
    x_dup = np.concatenate([x, x[first], x[first]])
    labels_dup = np.concatenate([labels, labels[first], labels[first]])
    for method in ("jevd", "jevd-orthogonal"):
        a = fit_projection(GroupMoments.from_arrays(x, labels), 2, method=method)
        b = fit_projection(GroupMoments.from_arrays(x_dup, labels_dup), 2, method=method)
        np.testing.assert_allclose(b.components, a.components, atol=1e-8)
    scaled = fit_projection(group_moments(random_pair(0), counts=[10, 10_000]), 2, method="jevd")
    base = fit_projection(group_moments(random_pair(0), counts=[500, 500]), 2, method="jevd")
    np.testing.assert_allclose(scaled.components, base.components, atol=1e-12)


def test_stationarity_and_orthogonality_at_convergence():
    for seed in PINNED_SEEDS:
        matrices = random_pair(seed)
        found = jevd.faithful_jevd(matrices)
        assert found.converged
        unit = unit_columns(found.basis)
        assert np.abs(unit.T @ unit - np.eye(unit.shape[1])).max() <= 1e-8
        t = np.linalg.solve(found.basis, matrices @ found.basis)
        diagonal = np.diagonal(t, axis1=1, axis2=2)
        delta = diagonal[:, :, None] - diagonal[:, None, :]
        numerator = np.sum(t * delta, axis=0)  # off-diagonal entries only matter
        np.fill_diagonal(numerator, 0.0)
        assert np.abs(numerator).max() <= 1e-8 * np.sum(matrices**2)


# ================================================================== faithful vs orthogonal
@pytest.mark.parametrize("seed", PINNED_SEEDS)
def test_faithful_and_orthogonal_reach_the_same_orthogonal_criterion(seed):
    matrices = random_pair(seed)
    faithful = offdiag_energy(matrices, unit_columns(jevd.faithful_jevd(matrices).basis))
    jacobi = offdiag_energy(matrices, jevd.jacobi_jd(matrices).basis)
    assert abs(faithful - jacobi) <= 1e-6 * jacobi
    moments = group_moments(matrices)
    a = fit_projection(moments, 2, method="jevd")
    b = fit_projection(moments, 2, method="jevd-orthogonal")
    assert abs(a.certificate["orthogonal_criterion"] - b.certificate["orthogonal_criterion"]) <= 1e-6 * jacobi


def test_jacobi_criterion_is_non_increasing_and_faithful_history_is_recorded():
    matrices = random_pair(2)
    history = np.array(jevd.jacobi_jd(matrices).history)
    assert np.all(np.diff(history) <= 1e-12 * history[0])
    found = jevd.faithful_jevd(matrices)
    assert len(found.history) == found.n_iter + 1  # C per iteration; C is not monotone: not asserted
    result = fit_projection(group_moments(matrices), 2, method="jevd")
    np.testing.assert_allclose(result.objective_history, found.history, rtol=1e-6)  # moments round-trip rounding


def cyclic_jacobi(matrices: np.ndarray, sweeps: int) -> np.ndarray:
    """Cardoso & Souloumiac's Jacobi in the plain cyclic order, pair by pair (the reference)."""
    a = np.array(matrices, dtype=np.float64)
    d = a.shape[1]
    q = np.eye(d)
    for _ in range(sweeps):
        for p in range(d - 1):
            for r in range(p + 1, d):
                g = np.stack([a[:, p, p] - a[:, r, r], a[:, p, r] + a[:, r, p]])
                gg = g @ g.T
                ton, toff = gg[0, 0] - gg[1, 1], gg[0, 1] + gg[1, 0]
                theta = 0.5 * np.arctan2(toff, ton + np.hypot(ton, toff))
                rotation = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
                q[:, [p, r]] = q[:, [p, r]] @ rotation
                a[:, [p, r], :] = np.einsum("ji,gjk->gik", rotation, a[:, [p, r], :])
                a[:, :, [p, r]] = a[:, :, [p, r]] @ rotation
    return q


@pytest.mark.parametrize("d", [7, 12])  # odd: one index sits out each round
def test_parallel_order_jacobi_reaches_the_cyclic_criterion_and_stops_on_stagnation(d):
    matrices = correlation_pair(d, 1)
    reference = offdiag_energy(matrices, cyclic_jacobi(matrices, 60))
    default = jevd.jacobi_jd(matrices)
    exhaustive = jevd.jacobi_jd(matrices, stall_tol=0.0)  # to |sin θ| < 1e-12 or no decrease at all
    assert default.reason == "stagnation" and default.n_iter < exhaustive.n_iter
    for found in (default, exhaustive):
        check_orthonormal(found.basis)
        assert abs(offdiag_energy(matrices, found.basis) - reference) <= 1e-9 * reference
        assert abs(found.history[-1] - offdiag_energy(matrices, found.basis)) <= 1e-10 * reference


# ================================================================== zero denominators (B.5 item 9)
STUCK = np.array([[[1.0, 0.5], [0.5, 1.0]], [[1.0, 0.2], [0.2, 1.0]]])


def test_stuck_case_without_fallback_stays_at_identity_without_nan():
    found = jevd.faithful_jevd(STUCK, fallback=False)
    np.testing.assert_array_equal(found.basis, np.eye(2))
    assert found.history == [pytest.approx(0.58)]
    result = fit_projection(group_moments(STUCK), 1, method="jevd", fallback=False)
    assert np.all(np.isfinite(result.components)) and np.all(np.isfinite(result.group_loss))
    assert result.details["init_used"] == "identity" and result.certificate["fallback_eig_sum"] == 0.0


def test_stuck_case_falls_back_to_eig_sum_and_reaches_zero():
    result = fit_projection(group_moments(STUCK), 1, method="jevd")
    assert result.options["init"] == "identity" and result.details["init_used"] == "eig_sum"
    assert result.certificate["fallback_eig_sum"] == 1.0
    assert result.certificate["criterion"] <= 1e-28
    assert np.all(np.isfinite(result.components))
    diagonal = np.array([1.0, 1.0]) / np.sqrt(2)
    assert abs(abs(result.components[:, 0] @ diagonal) - 1) <= 1e-12  # the 45° rotation
    explicit = fit_projection(group_moments(STUCK), 1, method="jevd", init="eig_sum")
    assert explicit.certificate["fallback_eig_sum"] == 0.0 and explicit.certificate["criterion"] <= 1e-28


def test_correlation_matrices_reach_the_orthogonal_criterion_of_jacobi():
    rng = np.random.default_rng(8)
    matrices = []
    for _ in range(2):
        c = random_spd(rng, 5)
        s = 1 / np.sqrt(np.diag(c))
        matrices.append(c * s[:, None] * s[None, :])  # unit diagonal in both groups: stuck at I
    matrices = np.stack(matrices)
    moments = group_moments(matrices)
    faithful = fit_projection(moments, 2, method="jevd")
    assert faithful.details["init_used"] == "eig_sum"
    ortho = fit_projection(moments, 2, method="jevd-orthogonal")
    np.testing.assert_allclose(
        faithful.certificate["orthogonal_criterion"], ortho.certificate["orthogonal_criterion"], rtol=1e-6
    )


def test_singular_group_covariance_gives_no_nan():
    rng = np.random.default_rng(4)
    low_rank = rng.normal(size=(6, 2))
    matrices = np.stack([low_rank @ low_rank.T, np.diag([1.0, 0.0, 2.0, 0.0, 3.0, 0.5])])  # both singular
    for method in ("jevd", "jevd-orthogonal"):
        result = fit_projection(group_moments(matrices), 3, method=method)
        check_orthonormal(result.components)
        assert np.all(np.isfinite(result.group_loss)) and np.all(np.isfinite(result.objective_history))


# ================================================================== divergence of the identity start
def correlation_pair(p: int, seed: int) -> np.ndarray:
    """Two correlation matrices with diagonals jittered by ±0.1: off-diagonal entries large
    against the diagonal gaps, where the paper's first-order step is not valid."""
    rng = np.random.default_rng(seed)
    matrices = []
    for _ in range(2):
        half = rng.normal(size=(p, p))
        c = half @ half.T
        s = 1 / np.sqrt(np.diag(c))
        matrices.append(c * s[:, None] * s[None, :] + np.diag(rng.uniform(-0.1, 0.1, p)))
    return np.stack(matrices)


def test_diverging_identity_start_is_reported_and_falls_back_to_eig_sum():
    matrices = correlation_pair(10, 0)
    paper = jevd.faithful_jevd(matrices, fallback=False)
    assert paper.init_used == "identity" and paper.diverged and not paper.converged
    # the unit columns diagonalise worse than U = I did, by the scale-free criterion (written out)
    assert offdiag_energy(matrices, unit_columns(paper.basis)) > 2 * offdiag_energy(matrices, np.eye(10))
    moments = group_moments(matrices)
    with pytest.warns(ConvergenceWarning, match="diverged"):
        as_paper = fit_projection(moments, 3, method="jevd", fallback=False)
    assert as_paper.status == "inaccurate" and not as_paper.converged
    assert np.all(np.isfinite(as_paper.components)) and np.all(np.isfinite(as_paper.group_loss))
    check_orthonormal(as_paper.components)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = fit_projection(moments, 3, method="jevd")
    assert default.status == "converged" and default.certificate["fallback_eig_sum"] == 1.0
    assert default.details["init_used"] == "eig_sum" and default.details["fallback_reason"] == "diverged"
    jacobi = offdiag_energy(matrices, jevd.jacobi_jd(matrices).basis)
    assert abs(default.certificate["orthogonal_criterion"] - jacobi) <= 1e-6 * jacobi
    assert as_paper.certificate["orthogonal_criterion"] > 10 * jacobi


def test_singular_step_stops_at_the_last_finite_iterate():
    # the solver's input, bit for bit: the divergence is chaotic, so a pair that reaches a singular
    # step in few iterations (10 here) keeps reaching it under changes of rounding
    moments = group_moments(correlation_pair(10, 3))
    matrices = moments.covariance("group")
    paper = jevd.faithful_jevd(matrices, fallback=False)
    assert paper.reason == "singular_step" and paper.diverged
    assert np.all(np.isfinite(paper.basis)) and np.isfinite(paper.history).all()
    assert len(paper.history) == paper.n_iter + 1
    with pytest.warns(ConvergenceWarning, match="singular step"):
        result = fit_projection(moments, 2, method="jevd", fallback=False)
    assert result.status == "inaccurate" and result.details["stop_reason"] == "singular_step"
    assert fit_projection(moments, 2, method="jevd").details["fallback_reason"] == "diverged"


def test_when_both_starts_diverge_the_default_gives_back_the_better_start():
    """Correlation pairs at d = 40 where the eig_sum start diverges too (as LFW at p ≥ 500):
    the paper's last iterate has collinear columns; the default returns the start."""
    for seed in (3, 8):
        matrices = correlation_pair(40, seed)
        paper = jevd.faithful_jevd(matrices, init="eig_sum", fallback=False)
        assert paper.diverged and not paper.start_kept
        assert paper.orthogonal_criterion(matrices) > 10 * paper.history[0]
        kept = jevd.faithful_jevd(matrices)  # identity diverges, eig_sum diverges: the better start
        start = jevd._eig_sum_start(matrices)
        assert kept.diverged and kept.start_kept and kept.init_used == "eig_sum"
        np.testing.assert_array_equal(kept.basis, start)
        assert kept.criterion == kept.history[0] == pytest.approx(offdiag_energy(matrices, start), rel=1e-10)
        assert kept.orthogonal_criterion(matrices) <= offdiag_energy(matrices, np.eye(40))
        moments = group_moments(matrices)
        with pytest.warns(ConvergenceWarning, match="columns returned are its start's"):
            result = fit_projection(moments, 3, method="jevd")
        assert result.status == "inaccurate" and result.certificate["start_kept"] == 1.0
        check_orthonormal(result.components)
        assert result.certificate["max_column_cosine"] <= 1e-12
        with pytest.warns(ConvergenceWarning, match="not a joint diagonaliser"):
            as_paper = fit_projection(moments, 3, method="jevd", fallback=False)
        assert as_paper.certificate["start_kept"] == 0.0
        assert as_paper.certificate["max_column_cosine"] > 0.5  # where the paper's iteration ends


# ================================================================== fixture F1: Theorem 4.1 is false
def test_f1_theorem_4_1_is_false():
    """Σ_A = diag(1, 0), Σ_B = diag(0, 1), r = 1 (spec §C, F1; B.6 item 1).

    U = I diagonalises both exactly (C = 0), which is Theorem 4.1's hypothesis, yet the JEVD
    projection has losses (0, 1): max loss 1.0, where the min-max optimum (fair-eig) is 0.5.
    DO NOT "fix" this test into an equal-loss assertion: unequal losses are the documented
    behaviour of the paper's method, and the equal-loss claim below is asserted to FAIL.
    """
    matrices = np.stack([np.diag([1.0, 0.0]), np.diag([0.0, 1.0])])
    moments = group_moments(matrices)
    for method in ("jevd", "jevd-orthogonal"):
        result = fit_projection(moments, 1, method=method)
        assert result.certificate["criterion"] == 0.0
        np.testing.assert_allclose(np.sort(result.group_loss), [0.0, 1.0], atol=1e-12)
        np.testing.assert_allclose(losses(matrices, result.components), result.group_loss, atol=1e-12)
        with pytest.raises(AssertionError):  # the paper's Theorem 4.1: equal losses
            np.testing.assert_allclose(result.group_loss[0], result.group_loss[1], atol=1e-3)
    fair = fit_projection(moments, 1, method="fair-eig")
    np.testing.assert_allclose(fair.group_loss.max(), 0.5, atol=1e-8)
    assert fit_projection(moments, 1, method="jevd").group_loss.max() == pytest.approx(1.0)


def test_reported_metrics_on_random_data():
    x, labels = grouped_data(n_rows=400, n_features=6, n_groups=2, seed=21)
    moments = GroupMoments.from_arrays(x, labels)
    fair = fit_projection(moments, 2, method="fair-eig").group_loss.max()
    for method in ("jevd", "jevd-orthogonal"):
        result = fit_projection(moments, 2, method=method)
        assert result.group_loss.max() >= fair - 1e-8  # fair-eig is optimal: report, don't assert fairness
        assert result.certificate["mmd2_linear"] >= 0.0


# ================================================================== column rules, groups, options
def test_column_rules():
    matrices = random_pair(1)
    moments = group_moments(matrices)
    found = jevd.faithful_jevd(matrices)
    unit = unit_columns(found.basis)
    for rule in jevd.COLUMN_RULES:
        result = fit_projection(moments, 3, method="jevd", columns=rule)
        check_orthonormal(result.components)
        assert result.options["columns"] == rule
    as_returned = fit_projection(moments, 3, method="jevd", columns="as_returned")
    assert as_returned.details["selected"] == [0, 1, 2]
    assert subspace_distance(as_returned.components, unit[:, :3]) < 1e-7
    scores = np.einsum("ij,ik,kj->j", unit, matrices.sum(0), unit)
    assert fit_projection(moments, 3, method="jevd").details["selected"] == list(np.argsort(-scores)[:3])
    # r = 1: the greedy max-min choice is the best single column
    one = fit_projection(moments, 1, method="jevd", columns="maxmin")
    worst = [losses(matrices, unit[:, [j]]).max() for j in range(unit.shape[1])]
    assert one.group_loss.max() == pytest.approx(min(worst), abs=1e-12)


def test_three_groups():
    x, labels = grouped_data(n_rows=600, n_features=5, n_groups=3, seed=7)
    moments = GroupMoments.from_arrays(x, labels)
    a = fit_projection(moments, 2, method="jevd")
    b = fit_projection(moments, 2, method="jevd-orthogonal")
    assert a.group_loss.shape == (3,) and a.converged and b.converged
    matrices = moments.covariance("group")
    jacobi = offdiag_energy(matrices, jevd.jacobi_jd(matrices).basis)
    assert abs(a.certificate["orthogonal_criterion"] - jacobi) <= 1e-6 * jacobi


def test_max_iter_warns_and_reports_status():
    moments = group_moments(random_pair(2))
    for method in ("jevd", "jevd-orthogonal"):
        with pytest.warns(ConvergenceWarning, match="max_iter=1"):
            result = fit_projection(moments, 2, method=method, max_iter=1)
        assert result.status == "max_iter" and not result.converged
        check_orthonormal(result.components)  # QR of the selected columns when not orthogonal
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fit_projection(moments, 2, method="jevd").status == "converged"


@pytest.mark.parametrize(
    ("method", "option", "value"),
    [
        ("jevd", "columns", "largest"),
        ("jevd", "init", "random"),
        ("jevd", "max_iter", 0),
        ("jevd", "tol", -1e-3),
        ("jevd", "stall_tol", -1.0),
        ("jevd", "step_tol", -1.0),
        ("jevd", "denominator_tol", -1.0),
        ("jevd", "fallback", "yes"),
        ("jevd-orthogonal", "columns", "first"),
        ("jevd-orthogonal", "max_iter", 0),
        ("jevd-orthogonal", "tol", -1.0),
    ],
)
def test_bad_options_name_the_option(method, option, value):
    with pytest.raises(InputError, match=option):
        fit_projection(group_moments(random_pair(0)), 2, method=method, **{option: value})
