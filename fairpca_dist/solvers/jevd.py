"""Joint eigenvalue decomposition fair PCA (methods ``"jevd"`` and ``"jevd-orthogonal"``).

Rathore & Manwani, "Achieving Fair PCA Using Joint Eigenvalue Decomposition" (spec
seeds-000-001.md part B; the paper's §3.3, §4.1, eq. (6) and Algorithm 1, which takes its
update from André, Trainini, Luciani & Moreau, EUSIPCO 2015).

The math
--------
The paper forms M_g = Σ_g − (β_g(r)/r) I for each group g (β_g(r): the sum of the r largest
eigenvalues of Σ_g) and looks for an invertible d × d U that jointly diagonalises them by
similarity, minimising

    C(U) = Σ_g ‖offdiag(U⁻¹ M_g U)‖_F².

Because M_g differs from Σ_g by a multiple of I, U⁻¹M_gU and U⁻¹Σ_gU have the same
off-diagonal part and the same differences of diagonal entries: neither C nor the update below
depends on r or on shifts Σ_g + c_g I (spec K1). This module therefore works on the per-group
covariances ``moments.covariance(center)`` directly, runs once for all r, and chooses r of the
d columns afterwards.

Algorithm 1 (``"jevd"``, faithful): start from U = I, T_g = Σ_g; at each iteration split
T_g = Λ_g + O_g (diagonal, off-diagonal), Δ_g(mn) = Λ_g(mm) − Λ_g(nn), and set

    V_mn = − Σ_g O_g(mn) Δ_g(mn) / Σ_g Δ_g(mn)²     (m ≠ n),   V_mm = 0,

the per-entry minimiser of the first-order off-diagonal residual O_g(mn) + V_mn Δ_g(mn); then
B = I + V, T_g ← B⁻¹ T_g B (a similarity: T_g stops being symmetric), U ← U B. With k > 2
groups the sums run over all groups, each weighted equally (per-sample normalised Σ_g, so
group sizes n_g play no role).

Robustness additions (spec B.2 items 1–7; each a documented option, deviations from the paper):

1. ``denominator_tol``: V_mn = 0 when Σ_g Δ_g(mn)² ≤ denominator_tol · max_g ‖T_g‖_F² (the
   paper's non-uniqueness condition; it occurs at U = I whenever two features have equal
   diagonal entries in every group, e.g. after per-group standardisation).
2. Stopping: C ≤ tol · C_0 (the paper's ε, which it leaves unset), or stagnation
   |C_i − C_{i−1}| ≤ stall_tol · C_0, or max |V| ≤ step_tol; at most ``max_iter`` (the paper's
   S_max) iterations. C = 0 is reachable only for commuting Σ_g (K2), hence the extra tests.
3. C is recorded per iteration in ``objective_history``; it is not monotone (C can rise, and is
   not invariant to column scaling), so nothing assumes it decreases.
4. U is not orthonormal (B = I + V is not orthogonal, although eq. (6) asks UᵀU = I): its
   columns are normalised to unit norm, and the selected columns are orthonormalised by QR in
   the chosen order (diag(R) > 0). When the iteration has converged the unit columns are
   already orthogonal (max |cos| ≤ 1e-8 is reported as ``max_column_cosine``) and the QR
   moves them by that much only. The paper used the unnormalised U, which explains its
   variance-explained numbers above standard PCA's (impossible for an orthonormal U).
5. ``"jevd-orthogonal"``: Jacobi joint diagonalisation over orthogonal Q (Cardoso &
   Souloumiac 1996, closed-form angle per (p, q) pair for several symmetric matrices),
   minimising Σ_g ‖offdiag(QᵀΣ_gQ)‖², sweeping until every |sin θ| < ``tol`` or ``max_iter``
   sweeps. The normalised faithful U and Q reach the same orthogonal criterion up to local optima.
6. ``columns``: which r columns form the projection (the paper never says).
   ``"sum"`` (default): the r largest u_jᵀ(Σ_g Σ_g)u_j over unit columns (scale- and
   shift-invariant, groups weighted equally); ``"pooled"``: u_jᵀ Σ_tot u_j (Σ_tot the pooled
   covariance about the global mean); ``"maxmin"``: greedily add the column that minimises the
   largest group loss of the selected (orthonormalised) set; ``"as_returned"``: the first r
   columns. The rule used is in ``options["columns"]``.
7. ``init``: ``"identity"`` (the paper) or ``"eig_sum"`` (U = eigenvectors of Σ_g Σ_g,
   T_g = UᵀΣ_gU). With ``fallback=True`` the run restarts from ``"eig_sum"`` when the identity
   start

   * is stuck: some pair has a zero denominator (item 1) but a non-zero off-diagonal
     Σ_g |O_g(mn)| > denominator_tol · max_g ‖T_g‖_F, so it can never be rotated; or
   * diverges: the first-order step assumes off-diagonal entries small against the diagonal
     gaps Δ_g(mn). When they are not, C grows by many orders of magnitude and the run ends
     on a singular step or settles on columns that diagonalise worse than I did. Examples:
     z-scored features, where every diagonal is near 1 (LSAC z-scored: C from 14.5 to 1e37 in
     72 steps), and generic inputs of moderate d (random Wishart pairs: 34 of 100 at d = 10,
     100 of 100 at d = 20; benchmarks/results/jevd_lsac.md). A run (from either start)
     counts as diverged when it ends on a singular step or with unit columns Ū whose
     orthogonal criterion Σ_g ‖offdiag(ŪᵀΣ_gŪ)‖² is above that of its orthonormal start
     (C_0). Raw C is no guide, because it changes with the column scaling; or
   * stops at max_iter.

   A run that diverges (from either start, ``init="eig_sum"`` included) gives back its start,
   whose columns diagonalise better than where the run ended: on LFW at p ≥ 500 both starts
   diverge within 15 steps (C to 1e50, collinear columns), and returning the last iterate
   gave a degenerate projection (1e-3 of the variance kept). The restart is kept unless its
   unit columns diagonalise worse. ``details["init_used"]``, ``details["fallback_reason"]``
   (``"stuck"``, ``"diverged"`` or ``"max_iter"``), ``certificate["fallback_eig_sum"]`` and
   ``certificate["start_kept"]`` record it. With ``fallback=False`` the paper's behaviour is
   kept: the stuck start is a fixed point (V = 0, the run stops at once with
   ``details["stop_reason"] == "step"`` and U = I), and a diverged run returns its last
   finite iterate. A diverged result has status ``"inaccurate"`` and emits a
   ``ConvergenceWarning``, whatever the option.

Singular group covariances: nothing here inverts Σ_g; only B = I + V is inverted (by a linear
solve). Zero variance directions give zero denominators, which item 1 guards, so singular Σ_g
produce no NaN. If a step B is numerically singular (1-norm condition number above 1e12, LAPACK's
estimate from the LU factors that also solve the step) or produces
non-finite values, the iteration stops at the previous iterate with status ``"inaccurate"``
(and, with ``fallback=True`` from the identity start, restarts from ``"eig_sum"``: item 7).

The paper's errors (spec B.6)
-----------------------------
Theorem 4.1 ("C(U*) = 0 implies equal group losses") is false. Its hypothesis needs
Σ_AΣ_B = Σ_BΣ_A (K2), and even then it fails: fixture F1, Σ_A = diag(1, 0), Σ_B = diag(0, 1),
r = 1, is diagonalised exactly by U = I, but either column has group losses (0, 1) or (1, 0), so
the max loss is 1.0, while the min-max optimum (``fair-eig``) is 0.5 at 45°. JEVD-PCA neither
equalises nor minimises the group losses in general; every result therefore reports each
group's loss (``group_loss``) and the linear MMD² (``certificate["mmd2_linear"]`` for two
groups). Further: eq. (6) demands UᵀU = I but Algorithm 1 never enforces it; the column choice,
S_max and ε are unspecified; zero denominators are not discussed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
import scipy.linalg

from fairpca_dist.assessment import metrics
from fairpca_dist.assessment.metrics import best_rank_variance, losses_from_covariance
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import ConvergenceWarning
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import fix_signs, offdiagonal_energy

__all__ = [
    "COLUMN_RULES",
    "INITS",
    "JointDiagonalization",
    "faithful_jevd",
    "jacobi_jd",
    "select_columns",
    "solve",
    "solve_orthogonal",
]

COLUMN_RULES = ("sum", "pooled", "maxmin", "as_returned")
INITS = ("identity", "eig_sum")
_MAX_STEP_CONDITION = 1e12


@dataclass
class JointDiagonalization:
    """A d × d joint diagonaliser and how it was found.

    ``basis`` is the raw U (faithful: unnormalised columns; Jacobi: orthogonal), ``unit`` its
    columns normalised to unit norm, ``history`` the criterion per iteration (entry 0 at the
    start), ``reason`` the stopping test met (``"criterion"``, ``"stagnation"``, ``"step"``,
    ``"rotation"``, ``"singular_step"``, or ``"max_iter"``); ``diverged`` is set by
    :meth:`check_divergence`; ``start_kept``: ``basis`` is the run's start, given back because
    the run diverged from it (:meth:`back_to_start`).
    """

    basis: np.ndarray
    history: list[float]
    n_iter: int
    reason: str
    init_used: str = "identity"
    fallback_reason: str = ""
    diverged: bool = False
    start_kept: bool = False

    @property
    def fallback(self) -> bool:
        """Whether this run is the restart from ``eig_sum`` (``fallback_reason`` says why)."""
        return bool(self.fallback_reason)

    @property
    def unit(self) -> np.ndarray:
        norms = np.linalg.norm(self.basis, axis=0)
        return self.basis / np.where(norms > 0, norms, 1.0)

    @property
    def criterion(self) -> float:
        """C at the returned basis: the start's (history[0]) when it was kept, else the last."""
        return self.history[0] if self.start_kept else self.history[-1]

    def back_to_start(self, start: np.ndarray) -> JointDiagonalization:
        """This run with ``start`` as its basis (it diverged from there); still ``diverged``."""
        return replace(self, basis=start, start_kept=True)

    @property
    def converged(self) -> bool:
        return self.reason in ("criterion", "stagnation", "step", "rotation") and not self.diverged

    def orthogonal_criterion(self, matrices: np.ndarray) -> float:
        """Σ_g ‖offdiag(ŪᵀΣ_gŪ)‖² of the unit columns Ū: comparable across runs and column scalings."""
        unit = self.unit
        return offdiagonal_energy(np.swapaxes(unit, 0, 1) @ matrices @ unit)

    def check_divergence(self, matrices: np.ndarray) -> None:
        """Set ``diverged``: the run ended on a singular step, or its unit columns diagonalise
        ``matrices`` worse than the (orthonormal) start did, whose criterion is history[0]
        (module docstring, item 7)."""
        slack = 1e-12 * float(np.sum(matrices * matrices))  # rounding at a C_0 of zero
        worse = self.orthogonal_criterion(matrices) > (1.0 + 1e-9) * self.history[0] + slack
        self.diverged = self.reason == "singular_step" or worse


# ---------------------------------------------------------------------------- faithful
def _eig_sum_start(matrices: np.ndarray) -> np.ndarray:
    """Eigenvectors of Σ_g Σ_g, in decreasing eigenvalue order."""
    total = matrices.sum(axis=0)
    _, vectors = np.linalg.eigh((total + total.T) / 2.0)
    return fix_signs(vectors[:, ::-1])


def _split(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Diagonals (k, d), off-diagonal parts O_g, and Δ_g(mn) = Λ_g(mm) − Λ_g(nn)."""
    diagonal = np.diagonal(t, axis1=1, axis2=2)
    off = t.copy()
    index = np.arange(t.shape[1])
    off[:, index, index] = 0.0
    return diagonal, off, diagonal[:, :, None] - diagonal[:, None, :]


def _stuck(t: np.ndarray, denominator_tol: float) -> bool:
    """A pair with zero denominator but a non-negligible off-diagonal entry (spec B.5 item 9)."""
    scale = float(max(np.sum(t * t, axis=(1, 2)).max(), 0.0))
    _, off, delta = _split(t)
    zero = np.sum(delta * delta, axis=0) <= denominator_tol * scale
    np.fill_diagonal(zero, False)
    return bool(np.any(zero & (np.abs(off).sum(axis=0) > denominator_tol * np.sqrt(scale))))


def _factor_unless_singular(step: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The LU factors of a step B, or None when B is not finite or its 1-norm condition number
    (LAPACK ``gecon`` from those factors: O(d²) where an SVD costs O(d³)) exceeds 1e12."""
    if not np.isfinite(step).all():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)  # an exactly singular B: rcond 0 below
        factors = scipy.linalg.lu_factor(step, check_finite=False)
    rcond, info = scipy.linalg.lapack.dgecon(factors[0], float(np.abs(step).sum(axis=0).max()), norm="1")
    return None if info != 0 or not rcond * _MAX_STEP_CONDITION >= 1.0 else factors


def _solve_each(factors: tuple[np.ndarray, np.ndarray], stack: np.ndarray) -> np.ndarray:
    """B⁻¹ T_g for every matrix of a (k, d, d) stack, from one factorisation of B (the k right-hand
    sides side by side)."""
    k, d, _ = stack.shape
    side_by_side = scipy.linalg.lu_solve(factors, stack.transpose(1, 0, 2).reshape(d, k * d), check_finite=False)
    return side_by_side.reshape(d, k, d).transpose(1, 0, 2)


def _faithful_loop(
    matrices: np.ndarray,
    start: np.ndarray,
    *,
    max_iter: int,
    tol: float,
    stall_tol: float,
    step_tol: float,
    denominator_tol: float,
) -> JointDiagonalization:
    u = start.copy()
    t = np.linalg.solve(u, matrices @ u)  # U⁻¹Σ_gU (exact copy for U = I)
    criterion = offdiagonal_energy(t)
    history = [criterion]
    initial = criterion
    if criterion <= tol * initial:  # C_0 = 0: already jointly diagonal, the loop runs zero times
        return JointDiagonalization(u, history, 0, "criterion")
    identity = np.eye(matrices.shape[1])
    for iteration in range(1, max_iter + 1):
        _, off, delta = _split(t)
        numerator = np.sum(off * delta, axis=0)
        denominator = np.sum(delta * delta, axis=0)
        scale = float(np.sum(t * t, axis=(1, 2)).max())
        guarded = denominator <= denominator_tol * scale
        v = np.where(guarded, 0.0, -numerator / np.where(guarded, 1.0, denominator))
        np.fill_diagonal(v, 0.0)
        if float(np.abs(v).max()) <= step_tol:
            return JointDiagonalization(u, history, iteration - 1, "step")
        step = identity + v
        factors = _factor_unless_singular(step)
        if factors is None:
            return JointDiagonalization(u, history, iteration - 1, "singular_step")
        new_t = _solve_each(factors, t @ step)
        new_u = u @ step
        if not (np.isfinite(new_t).all() and np.isfinite(new_u).all()):
            return JointDiagonalization(u, history, iteration - 1, "singular_step")
        t, u = new_t, new_u
        previous, criterion = criterion, offdiagonal_energy(t)
        history.append(criterion)
        if criterion <= tol * initial:
            return JointDiagonalization(u, history, iteration, "criterion")
        if abs(criterion - previous) <= stall_tol * initial:
            return JointDiagonalization(u, history, iteration, "stagnation")
    return JointDiagonalization(u, history, max_iter, "max_iter")


def faithful_jevd(
    matrices: np.ndarray,
    *,
    init: str = "identity",
    fallback: bool = True,
    max_iter: int = 500,
    tol: float = 1e-12,
    stall_tol: float = 1e-12,
    step_tol: float = 1e-12,
    denominator_tol: float = 1e-12,
) -> JointDiagonalization:
    """Algorithm 1 of Rathore & Manwani on a stack (k, d, d) of matrices (module docstring)."""
    matrices = np.asarray(matrices, dtype=np.float64)
    d = matrices.shape[1]
    settings = dict(max_iter=max_iter, tol=tol, stall_tol=stall_tol, step_tol=step_tol, denominator_tol=denominator_tol)
    if init == "eig_sum":
        return _run(matrices, _eig_sum_start(matrices), settings, fallback, init_used="eig_sum")
    if fallback and _stuck(matrices, denominator_tol):
        return _run(
            matrices, _eig_sum_start(matrices), settings, fallback, init_used="eig_sum", fallback_reason="stuck"
        )
    result = _run(matrices, np.eye(d), settings, fallback)
    if fallback and (result.diverged or result.reason == "max_iter"):
        restart = _run(
            matrices,
            _eig_sum_start(matrices),
            settings,
            fallback,
            init_used="eig_sum",
            fallback_reason="diverged" if result.diverged else "max_iter",
        )
        if restart.orthogonal_criterion(matrices) <= result.orthogonal_criterion(matrices):
            return restart
    return result


def _run(
    matrices: np.ndarray,
    start: np.ndarray,
    settings: dict,
    fallback: bool,
    *,
    init_used: str = "identity",
    fallback_reason: str = "",
) -> JointDiagonalization:
    """One run from ``start``; with ``fallback``, a run that diverged gives back its start."""
    result = _faithful_loop(matrices, start, **settings)
    result.init_used, result.fallback_reason = init_used, fallback_reason
    result.check_divergence(matrices)
    return result.back_to_start(start) if fallback and result.diverged else result


# ---------------------------------------------------------------------------- Jacobi (orthogonal)
def jacobi_jd(
    matrices: np.ndarray, *, max_iter: int = 500, tol: float = 1e-12, stall_tol: float = 1e-12
) -> JointDiagonalization:
    """Orthogonal joint diagonalisation of symmetric matrices by Jacobi rotations.

    Cardoso & Souloumiac (1996), "Jacobi angles for simultaneous diagonalization": for a pair
    (p, q), with g_k = (a_pp − a_qq, a_pq + a_qp) and G = Σ_k g_k g_kᵀ, the angle
    θ = ½ atan2(G₁₂ + G₂₁, G₁₁ − G₂₂ + √((G₁₁ − G₂₂)² + (G₁₂ + G₂₁)²)) minimises the pair's
    off-diagonal energy exactly. A sweep visits every pair once in the round-robin (parallel)
    order of Brent & Luk (1985): d − 1 rounds of ⌊d/2⌋ disjoint pairs, whose rotations commute
    and are applied at once, a gather and two products per axis (the pair-by-pair cyclic order
    costs d(d − 1)/2 small operations per sweep: 10× slower at d = 100). Every rotation
    still lowers the criterion, so it is non-increasing. Sweeps until every |sin θ| < ``tol``
    (``reason="rotation"``), or a sweep lowers the criterion by at most ``stall_tol`` · C_0
    (``"stagnation"``: the convergence is linear, and on LFW at d = 200 the last 85 % of the
    sweeps to |sin θ| < 1e-12 moved the criterion by < 1e-9 of itself), or ``max_iter`` sweeps.
    ``history`` holds Σ_g ‖offdiag(QᵀΣ_gQ)‖² after each sweep.
    """
    a = np.array(matrices, dtype=np.float64)
    a = (a + np.swapaxes(a, 1, 2)) / 2.0
    d = a.shape[1]
    q = np.eye(d)
    history = [offdiagonal_energy(a)]
    rounds = _round_robin(d)
    for sweep in range(1, max_iter + 1):
        rotated = False
        for first, second in rounds:
            cos, sin = _pair_angles(a, first, second)
            if not (np.abs(sin) >= tol).any():
                continue
            rotated = True
            sin = np.where(np.abs(sin) >= tol, sin, 0.0)
            cos = np.where(sin != 0.0, cos, 1.0)
            partner, scale, shift = _round_rotation(d, first, second, cos, sin)
            a = scale[:, None] * a + shift[:, None] * a[:, partner, :]  # rows: Jᵀ a
            a = a * scale + a[:, :, partner] * shift  # columns: (Jᵀ a) J
            q = q * scale + q[:, partner] * shift
        history.append(offdiagonal_energy(a))
        if not rotated:
            return JointDiagonalization(q, history, sweep, "rotation")
        if history[-2] - history[-1] <= stall_tol * history[0]:
            return JointDiagonalization(q, history, sweep, "stagnation")
    return JointDiagonalization(q, history, max_iter, "max_iter")


def _round_robin(d: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every pair of 0..d−1 once, as d − 1 (d even) or d (d odd) rounds of disjoint pairs: the
    circle method, one index fixed and the others turning (an odd d sits one out per round)."""
    players = list(range(d)) + ([-1] if d % 2 else [])
    n = len(players)
    rounds = []
    for _ in range(n - 1):
        pairs = [(players[i], players[n - 1 - i]) for i in range(n // 2)]
        pairs = [(min(p, r), max(p, r)) for p, r in pairs if p >= 0 and r >= 0]
        rounds.append((np.array([p for p, _ in pairs]), np.array([r for _, r in pairs])))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _pair_angles(a: np.ndarray, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cos θ, sin θ) of Cardoso & Souloumiac's angle for each pair (first[i], second[i])."""
    diagonal = a[:, first, first] - a[:, second, second]  # (k, pairs)
    off = a[:, first, second] + a[:, second, first]
    g11, g22, g12 = (diagonal * diagonal).sum(axis=0), (off * off).sum(axis=0), (diagonal * off).sum(axis=0)
    ton, toff = g11 - g22, 2.0 * g12
    theta = 0.5 * np.arctan2(toff, ton + np.hypot(ton, toff))
    return np.cos(theta), np.sin(theta)


def _round_rotation(
    d: int, first: np.ndarray, second: np.ndarray, cos: np.ndarray, sin: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A round's rotations J as (partner, scale, shift): index i of x·J is scale_i x_i +
    shift_i x_partner(i), i.e. (x_p, x_q) ← (c x_p + s x_q, −s x_p + c x_q) for every pair (an
    index in no pair keeps itself). One gather per axis instead of a read and write per pair."""
    partner, scale, shift = np.arange(d), np.ones(d), np.zeros(d)
    partner[first], partner[second] = second, first
    scale[first], scale[second] = cos, cos
    shift[first], shift[second] = sin, -sin
    return partner, scale, shift


# ---------------------------------------------------------------------------- columns
def _qr_in_order(columns: np.ndarray) -> np.ndarray:
    """Orthonormalise columns in the given order (Gram–Schmidt via QR, diag(R) > 0)."""
    q, r = np.linalg.qr(columns)
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _given(value: np.ndarray | None, name: str, rule: str) -> np.ndarray:
    if value is None:
        raise ValueError(f"select_columns with rule={rule!r} needs {name}=")
    return value


def select_columns(
    unit: np.ndarray,
    covariance: np.ndarray,
    n_components: int,
    rule: str,
    *,
    pooled: np.ndarray | None = None,
    best: np.ndarray | None = None,
) -> np.ndarray:
    """Indices of the r chosen columns of ``unit`` (unit-norm d × d), in the chosen order."""
    d = unit.shape[1]
    if rule == "as_returned":
        return np.arange(n_components)
    if rule in ("sum", "pooled"):
        matrix = covariance.sum(axis=0) if rule == "sum" else _given(pooled, "pooled", rule)
        scores = np.einsum("ij,ik,kj->j", unit, matrix, unit)
        return np.argsort(-scores, kind="stable")[:n_components]
    # maxmin: greedy on the largest group loss of the orthonormalised selected set
    best = _given(best, "best", rule)
    chosen: list[int] = []
    for _ in range(n_components):
        candidates = [j for j in range(d) if j not in chosen]
        worst = [
            losses_from_covariance(covariance, best, _qr_in_order(unit[:, chosen + [j]])).max() for j in candidates
        ]
        chosen.append(candidates[int(np.argmin(worst))])
    return np.array(chosen)


# ---------------------------------------------------------------------------- solvers
def _check_common(columns: str, max_iter: int, tol: float) -> tuple[str, int, float]:
    columns = checks.choice("columns", columns, COLUMN_RULES)
    max_iter = checks.integer("max_iter", max_iter, minimum=1)
    tol = checks.number("tol", tol)
    return columns, max_iter, tol


def _finish(
    moments: GroupMoments,
    n_components: int,
    center: Center,
    covariance: np.ndarray,
    found: JointDiagonalization,
    *,
    method: str,
    columns: str,
    options: dict,
    certificate: dict,
    details: dict | None = None,
) -> FairProjection:
    unit = found.unit
    gram = unit.T @ unit
    cosine = float(np.abs(gram - np.diag(np.diag(gram))).max()) if unit.shape[1] > 1 else 0.0
    best = best_rank_variance(covariance, n_components)
    chosen = select_columns(unit, covariance, n_components, columns, pooled=moments.total_covariance(), best=best)
    components = fix_signs(_qr_in_order(unit[:, chosen]))
    orthogonal = found.orthogonal_criterion(covariance)
    status = "inaccurate" if found.diverged else ("converged" if found.converged else "max_iter")
    if status == "max_iter":
        warnings.warn(
            f"{method}: stopped at max_iter={options['max_iter']} before meeting a stopping test",
            ConvergenceWarning,
            stacklevel=3,
        )
    elif status == "inaccurate":
        hint = " (fallback=True restarts from init='eig_sum')" if options.get("fallback") is False else ""
        ending = (
            "stopped at a numerically singular step"
            if found.reason == "singular_step"
            else "ended with unit columns diagonalising worse than the start"
        )
        outcome = (
            f"the columns returned are its start's ({found.init_used!r}, orthogonal criterion "
            f"{orthogonal:.3g}), not a joint diagonaliser"
            if found.start_kept
            else f"the columns are not a joint diagonaliser (orthogonal criterion {orthogonal:.3g}){hint}"
        )
        warnings.warn(
            f"{method}: the iteration diverged (criterion {found.history[0]:.3g} -> up to "
            f"{max(found.history):.3g}) and {ending}: {outcome}",
            ConvergenceWarning,
            stacklevel=3,
        )
    certificate = {
        **certificate,
        "criterion_initial": found.history[0],
        "criterion": found.criterion,
        "start_kept": float(found.start_kept),
        "orthogonal_criterion": orthogonal,
        "max_column_cosine": cosine,
    }
    if moments.n_groups == 2:
        certificate["mmd2_linear"] = float(metrics.mmd2_linear(moments, components)[0, 1])
    return make_projection(
        moments,
        components,
        method=method,
        n_components=n_components,
        center=center,
        objective_history=found.history,
        n_iter=found.n_iter,
        status=status,
        certificate=certificate,
        options={**options, "columns": columns},
        details={**(details or {}), "selected": [int(j) for j in chosen], "stop_reason": found.reason},
        best=best,
    )


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    columns: str = "sum",
    init: str = "identity",
    fallback: bool = True,
    max_iter: int = 500,
    tol: float = 1e-12,
    stall_tol: float = 1e-12,
    step_tol: float = 1e-12,
    denominator_tol: float = 1e-12,
) -> FairProjection:
    """JEVD fair PCA, Algorithm 1 of Rathore & Manwani with spec B.2's additions (``"jevd"``).

    Parameters
    ----------
    columns : {"sum", "pooled", "maxmin", "as_returned"}
        Rule choosing r of the d columns (module docstring, item 6).
    init : {"identity", "eig_sum"}
        Start U = I (the paper) or the eigenvectors of Σ_g Σ_g (item 7).
    fallback : bool
        Restart from ``"eig_sum"`` when the identity start is stuck or diverges, and give back
        the start of a run that diverged (item 7). False: the paper's behaviour.
    max_iter : int
        S_max, iterations at most (≥ 1).
    tol : float
        ε = tol · C_0: stop when C ≤ ε.
    stall_tol : float
        Stop when |C_i − C_{i−1}| ≤ stall_tol · C_0.
    step_tol : float
        Stop when max |V| ≤ step_tol.
    denominator_tol : float
        V_mn = 0 when Σ_g Δ_g(mn)² ≤ denominator_tol · max_g ‖T_g‖_F² (item 1).
    random_state : ignored (deterministic).

    Returns
    -------
    FairProjection
        Orthonormal rank-r components; ``objective_history`` is C per iteration (not monotone);
        ``certificate`` holds the initial C and C at the returned U, the orthogonal criterion of
        the unit columns, their largest |cos|, ``fallback_eig_sum`` (1.0 when the fallback ran),
        ``start_kept`` (1.0 when the run diverged and its start is returned) and, for
        two groups, ``mmd2_linear``; ``details`` the columns selected, ``stop_reason``,
        ``init_used`` and ``fallback_reason``.
    """
    columns, max_iter, tol = _check_common(columns, max_iter, tol)
    init = checks.choice("init", init, INITS)
    fallback = checks.flag("fallback", fallback)
    stall_tol = checks.number("stall_tol", stall_tol)
    step_tol = checks.number("step_tol", step_tol)
    denominator_tol = checks.number("denominator_tol", denominator_tol)
    covariance = moments.covariance(center)
    found = faithful_jevd(
        covariance,
        init=init,
        fallback=fallback,
        max_iter=max_iter,
        tol=tol,
        stall_tol=stall_tol,
        step_tol=step_tol,
        denominator_tol=denominator_tol,
    )
    options = {
        "init": init,
        "fallback": fallback,
        "max_iter": max_iter,
        "tol": tol,
        "stall_tol": stall_tol,
        "step_tol": step_tol,
        "denominator_tol": denominator_tol,
    }
    return _finish(
        moments,
        n_components,
        center,
        covariance,
        found,
        method="jevd",
        columns=columns,
        options=options,
        details={"init_used": found.init_used, "fallback_reason": found.fallback_reason},
        certificate={"fallback_eig_sum": float(found.fallback)},
    )


def solve_orthogonal(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    columns: str = "sum",
    max_iter: int = 500,
    tol: float = 1e-12,
    stall_tol: float = 1e-12,
) -> FairProjection:
    """Jacobi joint diagonalisation over orthogonal matrices (``"jevd-orthogonal"``; spec B.2 item 5).

    Parameters
    ----------
    columns : {"sum", "pooled", "maxmin", "as_returned"}
        Rule choosing r of the d columns (module docstring, item 6).
    max_iter : int
        Sweeps at most (≥ 1).
    tol : float
        Stop when every rotation of a sweep has |sin θ| < tol.
    stall_tol : float
        Stop when a sweep lowers the criterion by at most stall_tol · C_0 (C_0 at Q = I).
    random_state : ignored (deterministic).

    Returns
    -------
    FairProjection
        ``objective_history`` is Σ_g ‖offdiag(QᵀΣ_gQ)‖² per sweep (non-increasing); ``details``
        the columns selected and ``stop_reason``.
    """
    columns, max_iter, tol = _check_common(columns, max_iter, tol)
    stall_tol = checks.number("stall_tol", stall_tol)
    covariance = moments.covariance(center)
    found = jacobi_jd(covariance, max_iter=max_iter, tol=tol, stall_tol=stall_tol)
    return _finish(
        moments,
        n_components,
        center,
        covariance,
        found,
        method="jevd-orthogonal",
        columns=columns,
        options={"max_iter": max_iter, "tol": tol, "stall_tol": stall_tol},
        certificate={},
    )
