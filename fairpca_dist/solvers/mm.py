"""Max-min group variance fair PCA by minorization–maximization (Babu, Stoica & Saini, seeds/002).

Problem (paper eq. (4) = (17), "FPCA"; spec/seeds-002-003.md §A.1). With R_k the second
moment of group k about the chosen ``center``,

    maximise  f(V) = min_k f_k(V),   f_k(V) = tr(Vᵀ R_k V),   over V ∈ R^{p×r}, VᵀV = I_r.

This is the max-min *variance* criterion (Tantipongpipat et al.'s MM-Var), not Samadi et al.'s
max-min *loss*: the paper says it starts from Samadi's formulation, but the two differ unless
every group has the same best rank-r variance (spec E3). ``mm-sparse`` maximises
h(V) = f(V) − λ‖V‖₁ (eq. (6) = (35), "FSPCA").

Algorithm (paper §2–§3, Algorithms 1 and 2; spec §A.2–A.3). By Lemma 1 the constraint can be
relaxed to ‖V‖₂ ≤ 1 (some maximiser is orthonormal). Each f_k is convex, so its tangent
plane at the iterate V_t is a minorizer: f_k(V) ≥ g_k(V) = 2⟨A_k, V⟩ + c_k with A_k = R_k V_t,
c_k = −f_k(V_t). The outer loop (Algorithm 1) sets V_{t+1} = argmax_{‖V‖₂≤1} min_k g_k(V), so
f(V_{t+1}) ≥ min_k g_k(V_{t+1}) ≥ min_k g_k(V_t) = f(V_t): monotone ascent. The surrogate is
solved through its dual (Sion + von Neumann, eqs. (24)–(31)):

    min_{μ ∈ Δ_k}  f̃(μ) = 2‖A(μ)‖_* + cᵀμ,   A(μ) = Σ_k μ_k A_k,   then V_{t+1} = polar(A(μ*)).

With G_ij = A_iᵀA_j (r × r, computed once per outer iteration), A(μ)ᵀA(μ) = Σ_ij μ_iμ_j G_ij,
‖A(μ)‖_* is the sum of the square roots of its eigenvalues, and the surrogate value of
polar(A(μ)) is g_k = 2 tr(Σ_j μ_j G_kj (A(μ)ᵀA(μ))^{-1/2}) + c_k: the whole inner solve works on
r × r matrices and its cost does not depend on p. Inner solvers (option ``inner``):

* ``"line"`` (k = 2): f̃(m, 1 − m) is convex in m ∈ [0, 1] with derivative g_1 − g_2 at
  polar(A(m)); its root is found by Brent's method to machine precision (the paper's
  "1-dimensional problem via a bisection method").
* ``"qp"``: Algorithm 2, alternating minimisation of Tr(Φ⁻¹) + Tr(A(μ)ᵀA(μ)Φ) + cᵀμ: Φ =
  (A(μ)ᵀA(μ))^{-1/2}, then the simplex QP min μᵀQμ + cᵀμ with Q_ij = Tr(G_ij Φ), solved exactly by
  a primal active-set method. The problem is jointly convex in (μ, Φ⁻¹), so f̃ never increases;
  but for fixed Φ it is a quadratic majorizer of f̃, and the iteration converges only linearly:
  20 to more than 1000 iterations to a 10⁻¹² duality gap on random problems (k = 5, r = 10:
  ~1000), not the paper's "typically < 10".
* ``"newton"``: projected Newton on f̃ over the simplex with its exact Hessian, also computed
  from the G_ij alone (:func:`_dual_hessian`), each step a simplex QP solved by the same
  active-set method, then Armijo backtracking: 4–7 iterations to a 10⁻¹² gap.
* ``"sdp"``: the primal surrogate (23) as a conic program (cvxpy + Clarabel), kept to check the
  other three; it needs p × r variables and a (p + r) semidefinite cone, so it is for small p.

``"auto"`` is ``"line"`` for two groups and ``"newton"`` otherwise (``"qp"`` reproduces the paper).

Certificate: the semidefinite relaxation (SDR) of 002 §5, max over the Fantope
{P : 0 ⪯ P ⪯ I, tr P = r} of min_k tr(R_k P), bounds the rank-r optimum from above. By strong
duality (compact convex sets, bilinear objective) it equals min_{w ∈ Δ_k} S_r(Σ_k w_k R_k), S_r =
sum of the r largest eigenvalues (Ky Fan) — a convex, non-smooth function of w whose subgradient
at w is (tr(V_wᵀ R_k V_w))_k, V_w its top-r eigenvectors. :func:`sdr_bound` minimises it by
Kelley's cutting-plane method: because S_r is positively homogeneous every cut is linear,
s_jᵀw, and the LP min_w max_j s_jᵀw is dual to choosing the best mixture P = Σ_j α_j V_jV_jᵀ of the
eigenprojectors seen. Every evaluated S_r(Σ w_k R_k) is a valid upper bound (weak duality), every
mixture a feasible Fantope point, so each step certifies an interval for the SDR value. For two
groups this is a 1-D convex minimisation over t of S_r(tR_1 + (1 − t)R_2) and the relaxation
is tight (rank-r optimal P exists), so the MM value can reach the bound; for k ≥ 3 it may not.

The cutting planes are rarely needed: MM's own dual weights μ* are the SDR's at a global
optimum (there V spans the top-r eigenspace of Σ_k μ*_k R_k and the groups with μ*_k > 0 are
the active ones, so S_r(Σ_k μ*_k R_k) = min_k f_k(V)). So ``mm`` evaluates S_r at each step's
μ once the run has slowed down and stops as soon as the value is within ``tol`` of it: one
eigendecomposition per step certifies the run, and the Kelley method runs only when a run
stops uncertified (a local maximum, or a relaxation that is not tight). At the paper's Table 1
size (p, r, k) = (100, 5, 5) this took the fit from 0.21 s (88 cutting-plane LPs) to ~0.01 s
(benchmarks/results/mm_timing.md).

Where the paper is wrong or silent, and what this module does (spec §A.10):

* E1 normalisation: R_k = Y_kY_kᵀ is an unnormalised sum, so the min is dominated by the
  smaller group. ``normalize="mean"`` (default) uses per-row averages R_k / n_k;
  ``normalize="sum"`` is the paper's literal choice, for replication.
* E2 centring: the paper centres by the global mean; here ``center`` selects it ("global" is
  the paper's setting, "group" the library default shared by every solver).
* E4 notation: A(μ) = Σ μ_k A_k (not A_kᵀ, eq. (27)); Q_ij = Tr(A_iᵀA_jΦ) (eq. (34) does not
  conform); the lower block of (48) is A(μ)ᵀ; the nuclear norm in (29) sums all r singular values.
* E5 Algorithm 2's stopping test (f̃(μ^{t+1}) − f̃(μ^t))/f̃(μ^t) ≤ ε is always true for a
  decreasing sequence (it stops after one step). The inner solvers here stop on the duality
  gap f̃(μ) − min_k g_k(polar(A(μ))) ≥ 0, which bounds the surrogate suboptimality: at
  10⁻¹²·|f̃(μ)| when called alone; inside MM also once polar(A(μ)) gains 90 % of the largest
  possible surrogate ascent (inexact MM: ascent stays guaranteed, and the accuracy tightens as
  the outer loop converges) or the gap is ≤ 10⁻³·tol. This is what keeps Algorithm 2 usable;
  the default for k ≥ 3 is Newton (above). Algorithm 1's test uses |·| in numerator and
  denominator (h can be negative in FSPCA), is guarded against plateaus by extrapolation
  (see :func:`_ascend`), and the loop also stops once f is within ``tol`` of the SDR upper bound
  (a certified optimum). The paper's ascent guarantee assumes an exact surrogate step; should
  an inexact one lower f by more than ``tol``, the step is refused and the run ends at the last
  ascending iterate with status ``"inaccurate"`` and a :class:`ConvergenceWarning` naming the
  drop and the inner method (not an error: the SDR certificate still bounds the gap honestly).
* Acceleration (not in the paper): ``accelerate=True`` (default for ``mm`` and ``mm-robust``)
  replaces the plain step M(V_t) by a trial point and keeps it only if the objective reaches the
  surrogate value of the plain step, so ascent is kept (:func:`_ascend`). For ``mm`` (and
  ``mm-robust`` with ``sample_rows=None``) the trial over-relaxes the step along M(V_t) − V_t;
  it halves the iterations on Table 1 sizes. For ``mm-robust`` it is by default the maximiser
  of a model with the full rows' gradients and an in-memory sample's curvature
  (:func:`solve_mm_robust`), which cuts the passes over the rows by 5–10×.
  ``accelerate=False`` is Algorithms 1 and 4 step for step.
* E7 the FSPCA "tightness at every iteration" claim is false: for large λ the surrogate
  maximiser has singular values < 1 or is 0. ``mm-sparse`` checks every step, warns, reports
  status ``"not_tight"``, and offers projected MM (``output="polar"``; :func:`solve_mm_sparse`).
* E8 primal recovery polar(A(μ*)) assumes A(μ*) has full column rank. When it has not
  (σ_min/σ_max < 10⁻¹⁰) the step falls back to the primal conic program and takes the polar
  factor of its solution, which by Lemma 1 does not lower any f_k.
* E10 unspecified: μ⁰ (warm start from the previous outer step, else uniform), the maximum
  numbers of iterations, the non-zero threshold (|V_ij| > 10⁻⁶, V having spectral norm ≤ 1).
* E11 the objective is "often unimodal" only empirically; k ≥ 3 instances have non-global MM
  fixed points, so ``n_restarts`` defaults to 5 for k ≥ 3 (1 otherwise) and the best is kept.

``mm-robust`` (FRPCA, paper eq. (5) and §4.2, Algorithm 4; spec §A.5) maximises the ℓ1
criterion min_k h_k(V), h_k(V) = ‖VᵀY_k‖₁ (per row with ``normalize="mean"``). Since
|z| ≥ z·sgn(z_t) with equality at z_t, h_k(V) ≥ tr(B_kᵀV) with B_k = Y_k sgn(V_tᵀY_k)ᵀ, tight at
V_t (the paper's (43) prints Tr(UᵀY_kW_k), which does not conform: E4). The surrogate is the
one above with A_k = B_k / 2 and c_k = 0, so it reuses :func:`surrogate_step` and
:func:`_ascend`; B_k and h_k are sums over the rows, one pass per iteration through
:class:`~fairpca_dist.engine.datapasses.DataPasses` (the pass at V_t gives the objective at V_t and the
next minorizer). The paper's Algorithm 4 lists "{R_k}, λ" as inputs (E6): it needs the rows and
has no λ. It starts from the ``mm`` solution (the paper's remark: the ℓ1 objective is
multi-modal); centring is by ``center`` as everywhere (the paper's global mean is
``center="global"``; a robust centre is out of scope, E2). For one group and r = 1 the step is
Kwak's PCA-L1, u ← Y sgn(Yᵀu) / ‖Y sgn(Yᵀu)‖.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import scipy.optimize

from fairpca_dist.engine.blas import one_blas_thread
from fairpca_dist.engine.datapasses import ArrayPasses, DataPasses, L1Sums
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import ConvergenceWarning, InputError, SolverError
from fairpca_dist.extras import require
from fairpca_dist.solvers import checks, conic
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import fix_signs, largest_eigenvalue, polar, random_orthonormal, top_eigenvectors

__all__ = [
    "solve_mm",
    "solve_mm_sparse",
    "solve_mm_robust",
    "group_matrices",
    "sdr_bound",
    "SDRBound",
]

Normalize = Literal["mean", "sum"]
Inner = Literal["auto", "newton", "qp", "line", "sdp"]
Output = Literal["relaxed", "polar"]
NORMALIZE: tuple[str, ...] = ("mean", "sum")
INNER: tuple[str, ...] = ("auto", "newton", "qp", "line", "sdp")
OUTPUT: tuple[str, ...] = ("relaxed", "polar")

NOT_TIGHT = "not_tight"  # the relaxed ℓ1 iterate stopped being orthonormal (spec E7; result.STATUS_MESSAGES)

_INNER_GAP = 1e-12  # exact inner solves stop at duality gap ≤ this · |f̃(μ)|
_INNER_SHARE = 1e-3  # ... or once its relative gap is ≤ this · the outer tol
_ASCENT = 0.9  # inside MM, an inner solve may stop once its step gains this share of the possible ascent
_INNER_MAX_ITER = 2000  # Algorithm 2 / Newton iterations per inner solve at most
_RANK = 1e-10  # σ_min/σ_max of A(μ*) below this: primal recovery by polar is unsafe (E8)
_FLOOR = 1e-14  # eigenvalues of A(μ)ᵀA(μ) floored at this · the largest before the inverse root
_TIGHT = 1e-6  # a relaxed iterate with σ_min ≥ 1 − _TIGHT counts as orthonormal
_ZERO = 1e-6  # entries with |V_ij| ≤ _ZERO count as zeros (‖V‖₂ ≤ 1, so |V_ij| ≤ 1)
_VALUE_FLOOR = 1e-9  # relative changes of the scaled objective are taken w.r.t. max(|value|, this)
_SDR_TOL = 1e-9  # relative gap at which the SDR cutting-plane method stops
_LOCAL_GAP = 1e-6  # two groups: a relative gap to the (attained) SDR bound above this is a local maximum
_SDR_MAX_ITER = 300
_MAX_OVERRELAX = 64.0  # largest over-relaxation factor α of an extrapolated MM step
_EXTRAPOLATED_WINDOW = 5  # over-relaxed MM: convergence rate measured over windows of this many steps
_SAMPLED_WINDOW = 2  # sample-preconditioned steps (mm-robust): the same, over windows of this many steps
_SAMPLED_MAX_ITER = 100  # MM iterations over the in-memory sample per preconditioned step at most
_SAMPLE_ROWS = 50_000  # mm-robust's default in-memory sample: rows per group
_PROXIMAL_START = 0.1  # first proximal weight ρ of a preconditioned step (units: largest group criterion 1)
_PROXIMAL_MAX = 1e6  # ρ grows ×4 per refused trial up to this (a trial then moves ~1e-6 of a plain step: no overflow)
_ROUNDING = 16 * np.finfo(float).eps  # a step that changes the objective by less (relative) is a fixed point
# Clarabel's defaults (1e-8) leave the conic surrogate maximiser ~5e-5 away from the dual one;
# 1e-10 brings it to ~1e-5 on small problems (spec T-A3 expects ~1e-4).
_CONIC_TOLERANCES = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


# ----------------------------------------------------------------------------- problem data
def group_matrices(moments: GroupMoments, center: Center = "group", normalize: Normalize = "mean") -> np.ndarray:
    """The k per-group matrices R_k, shape (k, p, p): second moments about ``center``, per row
    (``"mean"``, C_g / n_g) or summed over the rows (``"sum"``, the paper's Y_kY_kᵀ)."""
    if normalize == "mean":
        return moments.covariance(center)
    return moments.scatter_about(center)


def _scaled(matrices: np.ndarray) -> tuple[np.ndarray, float]:
    """(R_k / ρ, ρ) with ρ = max_k ‖R_k‖₂: the solvers work in units where the largest group
    variance along any direction is 1, so tolerances and the ℓ1 penalty are scale free."""
    scale = max(largest_eigenvalue(m) for m in matrices)
    if not scale > 0:
        raise SolverError("every group has zero variance: there is nothing to project")
    return matrices / scale, scale


# ----------------------------------------------------------------------------- minorizer
@dataclass(frozen=True)
class Minorizer:
    """Tangent minorizers g_k(V) = 2⟨A_k, V⟩ + c_k of the group criteria at an iterate V_t.

    ``slopes`` (k, p, r) holds A_k, ``offsets`` (k,) holds c_k, ``values`` (k,) the criteria
    at V_t (where g_k(V_t) equals them). For max-min variance A_k = R_kV_t and c_k = −f_k(V_t);
    for the ℓ1 criterion of FRPCA, A_k = B_k / 2 and c_k = 0 (spec §A.5). The objective at
    V_t is min_k values_k (minus the ℓ1 penalty, if any).
    """

    slopes: np.ndarray
    offsets: np.ndarray
    values: np.ndarray

    def surrogate(self, components: np.ndarray) -> np.ndarray:
        """g_k(V) for every group, shape (k,)."""
        return 2.0 * np.einsum("kpr,pr->k", self.slopes, components) + self.offsets


def variance_minorizer(matrices: np.ndarray, components: np.ndarray) -> Minorizer:
    """Paper eq. (22): A_k = R_k V_t, c_k = −tr(V_tᵀ R_k V_t), values f_k(V_t)."""
    slopes = matrices @ components
    values = np.einsum("pr,kpr->k", components, slopes)
    return Minorizer(slopes=slopes, offsets=-values, values=values)


def l1_minorizer(sums: L1Sums, divisor: np.ndarray) -> Minorizer:
    """Paper (42)–(44): A_k = B_k / 2 (so 2⟨A_k, V⟩ = tr(B_kᵀV)), c_k = 0, values h_k(V_t);
    all divided by ``divisor`` (k,): per-group row counts times a unit scale."""
    slopes = sums.b / (2.0 * divisor[:, None, None])
    values = sums.h / divisor
    return Minorizer(slopes=slopes, offsets=np.zeros_like(values), values=values)


# ----------------------------------------------------------------------------- inner dual (r × r)
@dataclass(frozen=True)
class _DualPoint:
    """f̃(μ) and its gradient, with the pieces of A(μ)ᵀA(μ) the Hessian and Algorithm 2 reuse."""

    value: float
    gains: np.ndarray  # g_k(polar(A(μ))) = ∂f̃/∂μ_k (Danskin), shape (k,)
    mixed: np.ndarray  # M_k = Σ_j μ_j G_kj = A_kᵀA(μ), shape (k, r, r)
    roots: np.ndarray  # square roots of the eigenvalues of A(μ)ᵀA(μ) (floored), shape (r,)
    vectors: np.ndarray  # its eigenvectors, shape (r, r)

    @property
    def inverse_root(self) -> np.ndarray:
        """(A(μ)ᵀA(μ))^{-1/2} = Algorithm 2's Φ."""
        return (self.vectors / self.roots) @ self.vectors.T

    @property
    def gap(self) -> float:
        """f̃(μ) − min_k g_k(polar(A(μ))) ≥ 0 (weak duality; 0 exactly at the optimum)."""
        return self.value - float(self.gains.min())


def _dual_point(gram: np.ndarray, offsets: np.ndarray, weights: np.ndarray) -> _DualPoint:
    """Evaluate the dual at μ from G_ij = A_iᵀA_j alone (shape (k, k, r, r))."""
    mixed = np.einsum("j,kjab->kab", weights, gram)
    square = np.einsum("k,kab->ab", weights, mixed)  # A(μ)ᵀA(μ)
    values, vectors = np.linalg.eigh((square + square.T) / 2.0)
    top = max(float(values[-1]), 0.0)
    nuclear = float(np.sqrt(np.clip(values, 0.0, None)).sum())
    roots = np.sqrt(np.maximum(values, _FLOOR * top)) if top > 0 else np.ones_like(values)
    gains = 2.0 * np.einsum("kab,ba->k", mixed, (vectors / roots) @ vectors.T) + offsets
    return _DualPoint(2.0 * nuclear + float(offsets @ weights), gains, mixed, roots, vectors)


def _dual_hessian(gram: np.ndarray, point: _DualPoint) -> np.ndarray:
    """∇²f̃(μ), shape (k, k), from r × r pieces.

    With H = A(μ)ᵀA(μ) = W diag(h) Wᵀ, ∂_kH = M_k + M_kᵀ and ∂_k∂_lH = G_kl + G_lk, the
    derivative of H^{1/2} (Daleckii–Krein) gives
    ∂_k∂_l f̃ = tr(H^{-1/2}(G_kl + G_lk)) − Σ_ab (X_k)_ab (X_l)_ab / (√h_a √h_b (√h_a + √h_b)),
    X_k = Wᵀ(∂_kH)W.
    """
    vectors, roots = point.vectors, point.roots
    slopes = vectors.T @ (point.mixed + point.mixed.transpose(0, 2, 1)) @ vectors
    weight = 1.0 / (roots[:, None] * roots[None, :] * (roots[:, None] + roots[None, :]))
    pairs = gram + gram.transpose(1, 0, 3, 2)
    hessian = np.einsum("klab,ba->kl", pairs, point.inverse_root) - np.einsum("kab,lab,ab->kl", slopes, slopes, weight)
    return (hessian + hessian.T) / 2.0


def _line_search(gram: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, int]:
    """Two groups: the root of d f̃(m, 1 − m)/dm = g_1 − g_2 on [0, 1] (convex in m)."""
    evaluations = 0

    def slope(m: float) -> float:
        nonlocal evaluations
        evaluations += 1
        gains = _dual_point(gram, offsets, np.array([m, 1.0 - m])).gains
        return float(gains[0] - gains[1])

    if slope(0.0) >= 0.0:
        return np.array([0.0, 1.0]), evaluations
    if slope(1.0) <= 0.0:
        return np.array([1.0, 0.0]), evaluations
    root = scipy.optimize.brentq(slope, 0.0, 1.0, xtol=1e-16, rtol=4 * np.finfo(float).eps, maxiter=200)
    return np.array([root, 1.0 - root]), evaluations


def _simplex_qp(quad: np.ndarray, linear: np.ndarray, start: np.ndarray) -> np.ndarray:
    """argmin μᵀQμ + cᵀμ over the simplex, Q symmetric PSD: primal active-set method.

    The working set holds the weights fixed at 0. On the free weights each step minimises the
    quadratic on {Σ d = 0} (reduced Newton step; a zero-curvature direction of descent is
    followed to the boundary), stops at the first bound it meets, and frees the weight with the
    most negative multiplier when the step is zero. Exact up to rounding for the k ≤ ~100
    weights of Algorithm 2 (each step costs one (|free| − 1)² eigendecomposition).
    """
    k = linear.size
    weights = start.copy()
    free = weights > 0.0
    scale = max(float(np.abs(quad).max()), float(np.abs(linear).max()), np.finfo(float).tiny)
    for _ in range(20 * k + 50):
        grad = 2.0 * quad @ weights + linear
        index = np.flatnonzero(free)
        direction, unbounded = _reduced_step(quad[np.ix_(index, index)], grad[index], scale)
        if not unbounded and _level(grad[index], direction, scale):
            level = float(grad[index].mean())
            multipliers = np.where(free, np.inf, grad - level)
            j = int(np.argmin(multipliers))
            if multipliers[j] >= -1e-13 * scale:
                return weights
            free[j] = True
            continue
        falling = direction < 0.0
        limits = -weights[index][falling] / direction[falling]
        step = min(float(limits.min(initial=np.inf)), np.inf if unbounded else 1.0)
        weights[index] = weights[index] + step * direction
        hit = index[falling][limits <= step]
        weights[hit] = 0.0
        free[hit] = False
        weights = np.clip(weights, 0.0, None)
        weights /= weights.sum()
    return weights


def _level(grad: np.ndarray, direction: np.ndarray, scale: float) -> bool:
    """Whether the free weights are stationary: the reduced step is zero, or the gradient along
    it is at the multipliers' rounding level, |gᵀd| ≤ 10⁻¹³·scale·‖d‖₁.

    The second test matters when the reduced Hessian is nearly singular (f̃ is homogeneous of
    degree 1, so ∇²f̃(μ) μ = 0): the step computed from a gradient that is level to rounding
    is then ~ε·scale/λ_min ≈ 10⁻¹¹, not 0, and without the test the active-set loop took such
    steps until its iteration limit and never freed a weight with a negative multiplier (Newton
    stalled at a duality gap of ~5·10⁻⁴ on 12 groups, and the MM step lowered the objective).
    """
    size = float(np.abs(direction).sum())
    return size <= 1e-15 or abs(float(grad @ direction)) <= 1e-13 * scale * size


@functools.lru_cache(maxsize=64)
def _sum_zero_basis(m: int) -> np.ndarray:
    """An orthonormal basis of {d ∈ R^m : Σ d = 0}, shape (m, m − 1) (read-only, cached)."""
    basis = np.linalg.qr(np.ones((m, 1)), mode="complete")[0][:, 1:]
    basis.flags.writeable = False
    return basis


def _reduced_step(quad: np.ndarray, grad: np.ndarray, scale: float) -> tuple[np.ndarray, bool]:
    """Minimiser d of gᵀd + dᵀQd on {Σ d = 0}, or a descent direction of zero curvature."""
    m = grad.size
    if m == 1:
        return np.zeros(1), False
    basis = _sum_zero_basis(m)
    hessian = basis.T @ (2.0 * quad) @ basis
    values, vectors = np.linalg.eigh((hessian + hessian.T) / 2.0)
    projected = vectors.T @ (basis.T @ grad)
    flat = values <= 1e-12 * scale
    if np.any(np.abs(projected[flat]) > 1e-13 * scale):
        return -basis @ (vectors[:, flat] @ projected[flat]), True
    coefficients = np.where(flat, 0.0, -projected / np.where(flat, 1.0, values))
    return basis @ (vectors @ coefficients), False


def _alternating(
    gram: np.ndarray, offsets: np.ndarray, start: np.ndarray, done: Callable[[_DualPoint], bool]
) -> tuple[np.ndarray, int, bool]:
    """Algorithm 2 (paper eqs. (32)–(34), corrected Q_ij = Tr(G_ij Φ)) until ``done``.

    It is majorization–minimization on f̃: for fixed Φ = H(μ_t)^{-1/2} the objective of (32) is a
    quadratic upper bound of f̃, tight at μ_t. Linear convergence, often slow (module docstring).
    """
    weights = start
    for iteration in range(1, _INNER_MAX_ITER + 1):
        point = _dual_point(gram, offsets, weights)
        if done(point):
            return weights, iteration, True
        quad = np.einsum("ijab,ba->ij", gram, point.inverse_root)
        weights = _simplex_qp((quad + quad.T) / 2.0, offsets, weights)
    return weights, _INNER_MAX_ITER, False


def _newton(
    gram: np.ndarray, offsets: np.ndarray, start: np.ndarray, done: Callable[[_DualPoint], bool]
) -> tuple[np.ndarray, int, bool]:
    """Projected Newton on f̃ over the simplex until ``done``: the step minimises the exact
    second-order model on the simplex (:func:`_simplex_qp`); backtracking accepts a step that
    decreases f̃ enough (Armijo), or that does not raise f̃ beyond rounding and halves the
    duality gap. The second test matters near μ*, where f̃ is flat to rounding while the gap (a
    first-order quantity) is still ~10⁻⁷; without the no-rise condition Newton could cycle
    between two points where A(μ) nearly loses rank (f̃'s curvature explodes there).
    Quadratic convergence near μ*. Returns (μ, iterations, whether ``done`` was reached); the
    caller continues with Algorithm 2 when it was not."""
    weights = start
    for iteration in range(1, _INNER_MAX_ITER + 1):
        point = _dual_point(gram, offsets, weights)
        if done(point):
            return weights, iteration, True
        hessian = _dual_hessian(gram, point)
        target = _simplex_qp(hessian / 2.0, point.gains - hessian @ weights, weights)
        direction = target - weights
        slope = float(point.gains @ direction)
        rounding = 8 * np.finfo(float).eps * abs(point.value)
        step = 1.0
        while True:
            trial = _dual_point(gram, offsets, weights + step * direction)
            armijo = slope < 0 and trial.value <= point.value + 1e-4 * step * slope
            if armijo or (trial.gap <= point.gap / 2.0 and trial.value <= point.value + rounding):
                break
            step /= 2.0
            if step < 1e-12:
                return weights, iteration, False
        weights = np.clip(weights + step * direction, 0.0, None)
        weights /= weights.sum()
    return weights, _INNER_MAX_ITER, False


# ----------------------------------------------------------------------------- conic surrogate
class _ConicSurrogate:
    """max α − λ‖V‖₁ s.t. 2⟨A_k, V⟩ + c_k ≥ α ∀k, ‖V‖₂ ≤ 1 (paper (23) and (37)) with cvxpy.

    Built once per solve with A and c as parameters, so later solves skip canonicalisation.
    """

    def __init__(self, n_groups: int, n_features: int, n_components: int, penalty: float) -> None:
        cp = require(
            "cvxpy", extra="conic", feature="the conic surrogate (method 'mm-sparse', or 'mm' with inner='sdp')"
        )

        self.components = cp.Variable((n_features, n_components))
        level = cp.Variable()
        self.slopes = cp.Parameter((n_groups, n_features * n_components))
        self.offsets = cp.Parameter(n_groups)
        self.floor = 2.0 * self.slopes @ cp.vec(self.components, order="C") + self.offsets >= level
        objective = level - penalty * cp.sum(cp.abs(self.components)) if penalty > 0 else level
        self.problem = cp.Problem(cp.Maximize(objective), [self.floor, cp.sigma_max(self.components) <= 1.0])

    def solve(self, minorizer: Minorizer) -> tuple[np.ndarray, np.ndarray]:
        """The maximiser V and the dual weights μ of the k floor constraints."""
        self.slopes.value = minorizer.slopes.reshape(minorizer.slopes.shape[0], -1)
        self.offsets.value = minorizer.offsets
        # "optimal_inaccurate" is accepted: the MM loop checks ascent
        status = conic.solve(self.problem, "CLARABEL", _CONIC_TOLERANCES, what="conic surrogate solver")
        if status not in ("optimal", "optimal_inaccurate") or self.components.value is None:
            raise SolverError(f"conic surrogate ended with status {status!r}")
        weights = np.clip(np.asarray(self.floor.dual_value, dtype=float).ravel(), 0.0, None)
        total = weights.sum()
        weights = weights / total if total > 0 else np.full(weights.size, 1.0 / weights.size)
        return np.array(self.components.value), weights


class _ConicCache:
    """One :class:`_ConicSurrogate` per shape and penalty, built on first use (cvxpy is heavy)."""

    def __init__(self) -> None:
        self._built: dict[tuple[int, int, int, float], _ConicSurrogate] = {}

    def get(self, minorizer: Minorizer, penalty: float) -> _ConicSurrogate:
        key = (*minorizer.slopes.shape, float(penalty))
        if key not in self._built:
            n_groups, n_features, n_components = minorizer.slopes.shape
            self._built[key] = _ConicSurrogate(n_groups, n_features, n_components, penalty)
        return self._built[key]


# ----------------------------------------------------------------------------- one MM step
@dataclass(frozen=True)
class Step:
    """One surrogate maximisation (one MM step).

    Attributes
    ----------
    components : ndarray (p, r)
        The next iterate: polar(A(μ*)), or the polar factor of the conic maximiser (both
        orthonormal); the relaxed conic maximiser itself when ``penalty > 0``.
    weights : ndarray (k,)
        Dual weights μ* on the simplex.
    dual_value : float
        f̃(μ*) = 2‖A(μ*)‖_* + cᵀμ* (NaN for penalised steps, whose dual also has an ℓ1 block).
    surrogate_value : float
        min_k g_k(V_{t+1}) − penalty·‖V_{t+1}‖₁, the surrogate objective at the new iterate.
    gap : float
        dual_value − surrogate_value: certified suboptimality of the step (NaN if penalised).
    method : str
        ``"line"``, ``"newton"``, ``"qp"`` or ``"sdp"``; ``"sdp"`` also when a dual step fell
        back to the conic program (E8).
    inner_iterations : int
        Dual evaluations (line), Newton or Algorithm-2 iterations, or 1 (sdp).
    fell_back : bool
        The dual solution was rank-deficient and the conic program gave the step (E8).
    """

    components: np.ndarray
    weights: np.ndarray
    dual_value: float
    surrogate_value: float
    gap: float
    method: str
    inner_iterations: int
    fell_back: bool


def surrogate_step(
    minorizer: Minorizer,
    *,
    inner: Inner = "auto",
    penalty: float = 0.0,
    warm_start: np.ndarray | None = None,
    ascent: float = 1.0,
    gap_tol: float = _INNER_GAP,
    conic: _ConicCache | None = None,
) -> Step:
    """Maximise min_k g_k(V) − penalty·‖V‖₁ over ‖V‖₂ ≤ 1 (paper (20)–(30), and (37) for ℓ1).

    ``inner="sdp"`` or ``penalty > 0``: the primal conic program. Its maximiser is returned as
    is when ``penalty > 0`` (the relaxed FSPCA iterate, possibly not orthonormal: E7), and as its
    polar factor when ``penalty == 0`` (Lemma 1: no f_k decreases). Otherwise the dual (29) is
    solved on r × r matrices ("line" needs k = 2; "auto" is "line" for k = 2, "newton" otherwise)
    and the iterate is polar(A(μ*)); if A(μ*) is numerically rank-deficient (E8) the step falls
    back to the conic program. ``conic`` reuses conic programs built by earlier steps.

    Newton and Algorithm 2 start from ``warm_start`` (default uniform) and stop at a relative
    duality gap ≤ ``gap_tol``, or, with ``ascent < 1``, as soon as their point gains that share
    of the largest possible ascent of the surrogate over its value at the iterate, min_k
    values_k (inexact MM: ascent stays guaranteed, and the accuracy tightens by itself as the
    outer loop converges). The line search always runs to machine precision.
    """
    checks.choice("inner", inner, INNER)
    if inner == "line" and minorizer.offsets.size != 2:
        raise InputError(f"inner='line' needs exactly 2 groups, got {minorizer.offsets.size}")
    conic = conic or _ConicCache()
    if penalty > 0:
        components, weights = conic.get(minorizer, penalty).solve(minorizer)
        value = float(minorizer.surrogate(components).min()) - penalty * float(np.abs(components).sum())
        return Step(components, weights, np.nan, value, np.nan, "sdp", 1, False)
    k, p, r = minorizer.slopes.shape
    stacked = minorizer.slopes.transpose(1, 0, 2).reshape(p, k * r)  # [A_1 … A_k]
    gram = (stacked.T @ stacked).reshape(k, r, k, r).transpose(0, 2, 1, 3)  # G_ij = A_iᵀA_j
    method = ("line" if k == 2 else "newton") if inner == "auto" else inner
    fell_back = False
    current = float(minorizer.values.min())

    def done(point: _DualPoint) -> bool:
        return point.gap <= max(gap_tol * abs(point.value), (1.0 - ascent) * (point.value - current), 1e-300)

    if method == "line":
        weights, iterations = _line_search(gram, minorizer.offsets)
    elif method != "sdp":
        start = np.full(k, 1.0 / k) if warm_start is None else warm_start
        solver = _newton if method == "newton" else _alternating
        weights, iterations, solved = solver(gram, minorizer.offsets, start, done)
        if not solved and method == "newton":  # stalled: Algorithm 2 never raises f̃
            weights, more, solved = _alternating(gram, minorizer.offsets, weights, done)
            iterations += more
    if method != "sdp":
        components, singular = polar(np.tensordot(weights, minorizer.slopes, axes=1))
        fell_back = not singular[-1] > _RANK * singular[0]
    if method == "sdp" or fell_back:
        relaxed, weights = conic.get(minorizer, 0.0).solve(minorizer)
        components, iterations = polar(relaxed)[0], 1
    dual = _dual_point(gram, minorizer.offsets, weights).value
    value = float(minorizer.surrogate(components).min())
    used = "sdp" if fell_back else method
    return Step(components, weights, dual, value, dual - value, used, iterations, fell_back)


# ----------------------------------------------------------------------------- outer loop
@dataclass(frozen=True)
class _Run:
    components: np.ndarray
    history: list[float]
    converged: bool
    inner_gap: float  # largest relative step gap (NaN when not certified)
    fallbacks: int  # dual steps that fell back to the conic program
    loose_steps: int  # steps whose surrogate maximiser was not orthonormal (σ_min < 1 − _TIGHT)
    last_sigma: float  # σ_min of the last surrogate maximiser (before any retraction)
    weights: np.ndarray | None  # dual weights μ* of the last surrogate step (None before any step)
    upper_bound: float  # the best upper bound of the optimum known to the run (inf: none)
    refused: str = ""  # the step that would have lowered the objective by more than tol, said in words


def _objective(minorizer: Minorizer, components: np.ndarray, penalty: float) -> float:
    return float(minorizer.values.min()) - penalty * float(np.abs(components).sum())


class _Proposal(Protocol):
    """A trial point for :func:`_ascend` in place of the plain MM step, told whether it was kept."""

    window: int  # steps over which the stopping test sums the changes
    sustained: bool  # stop only when the window's total change is small, not counting a step after one refusal
    refused: int  # trial points refused so far

    def __call__(self, components: np.ndarray, minorizer: Minorizer, following: np.ndarray) -> np.ndarray:
        """W from V_t = ``components``, the minorizer at V_t and the plain step M(V_t) = ``following``."""
        ...

    def update(self, accepted: bool) -> None: ...


class _OverRelaxation:
    """W = polar(V_t + α (M(V_t) − V_t)), α > 1: α doubles after each kept W (at most
    ``_MAX_OVERRELAX``) and falls back to 2 after a refused one. Over-relaxed steps vary in
    length, so the stopping test sums the changes over ``_EXTRAPOLATED_WINDOW`` steps."""

    window = _EXTRAPOLATED_WINDOW
    sustained = False

    def __init__(self) -> None:
        self.relax = 2.0
        self.refused = 0

    def __call__(self, components: np.ndarray, minorizer: Minorizer, following: np.ndarray) -> np.ndarray:
        return polar(components + self.relax * (following - components))[0]

    def update(self, accepted: bool) -> None:
        self.relax = min(2.0 * self.relax, _MAX_OVERRELAX) if accepted else 2.0
        self.refused += not accepted


class _CentredSample:
    """The in-memory sample of ``mm-robust``'s preconditioned steps, centred once: per group the
    rows y = x / scale − c_g and their weights, so that each evaluation of the ℓ1 sums
    (the same :class:`~fairpca_dist.engine.datapasses.L1Sums` as a pass gives) is two products,
    B_g = Y_gᵀ (w ∘ sgn(Y_g V)) and h_g = tr(VᵀB_g), with no per-call shift or gather."""

    def __init__(self, sample: ArrayPasses, centers: np.ndarray) -> None:
        self.groups = sample.groups
        weights = np.ones(sample.codes.size) if sample.weights is None else sample.weights
        self.rows = [sample.x[sample.codes == g] / sample.scale - centers[g] for g in range(len(self.groups))]
        self.weights = [weights[sample.codes == g, None] for g in range(len(self.groups))]

    def total_weights(self) -> np.ndarray:
        """Σ w over each group's rows (the row count without weights), shape (k,)."""
        return np.array([float(w.sum()) for w in self.weights])

    def l1_sums(self, components: np.ndarray) -> L1Sums:
        with one_blas_thread():
            b = np.stack([y.T @ (w * np.sign(y @ components)) for y, w in zip(self.rows, self.weights, strict=True)])
        return L1Sums(self.groups, b, np.einsum("kpr,pr->k", b, components))


class _SampledModel:
    """The trial point of a sample-preconditioned step of ``mm-robust`` (:func:`solve_mm_robust`).

    With ĥ_k the group criteria on the in-memory sample (same units as the full ones h_k) and
    G_k = ∇h_k(V_t), Ĝ_k = ∇ĥ_k(V_t) (the minorizers' slopes: ∇h_k = 2A_k), W maximises

        m_t(V) = min_k [ĥ_k(V) + ⟨G_k − Ĝ_k, V⟩] + ρ⟨V_t, V⟩   over orthonormal V,

    by over-relaxed MM on the sample (no pass over the full rows): the full gradients at V_t
    with the sample's curvature, plus the proximal term ρ⟨V_t, V⟩ = const − ρ‖V − V_t‖²/2.
    Each ĥ_k + ⟨G_k − Ĝ_k, ·⟩ equals h_k to first order at V_t (both are homogeneous of
    degree 1, so the values agree too), and at a fixed point W = V_t the full problem's
    stationarity holds: a point where these steps stop is an MM fixed point of the full data.
    ρ is a trust-region weight: halved after a kept W, multiplied by 4 after a refused one.
    ``sample_evaluations`` counts the ℓ1 sums over the sample.
    """

    window = _SAMPLED_WINDOW
    sustained = True

    def __init__(
        self,
        sample: _CentredSample,
        divisor: np.ndarray,
        step: Callable[[Minorizer, np.ndarray | None], Step],
        tol: float,
    ) -> None:
        self.sample, self.divisor, self.step, self.tol = sample, divisor, step, tol
        self.proximal = _PROXIMAL_START
        self.sample_evaluations = 0
        self.refused = 0

    def _local(self, components: np.ndarray) -> Minorizer:
        self.sample_evaluations += 1
        return l1_minorizer(self.sample.l1_sums(components), self.divisor)

    def __call__(self, components: np.ndarray, minorizer: Minorizer, following: np.ndarray) -> np.ndarray:
        here = self._local(components)
        tilt = minorizer.slopes - here.slopes + (self.proximal / 2.0) * components  # 2A_k carries ρ V_t

        def model(local: Minorizer, v: np.ndarray) -> Minorizer:
            slopes = local.slopes + tilt
            return Minorizer(slopes, np.zeros_like(local.offsets), 2.0 * np.einsum("kpr,pr->k", slopes, v))

        run = _ascend(
            components,
            lambda v: model(self._local(v), v),
            self.step,
            penalty=0.0,
            tol=self.tol,
            max_iter=_SAMPLED_MAX_ITER,
            first=model(here, components),
            propose=_OverRelaxation(),
        )
        return run.components

    def update(self, accepted: bool) -> None:
        self.proximal = self.proximal / 2.0 if accepted else min(4.0 * self.proximal, _PROXIMAL_MAX)
        self.refused += not accepted


def _ascend(
    start: np.ndarray,
    minorize: Callable[[np.ndarray], Minorizer],
    step: Callable[[Minorizer, np.ndarray | None], Step],
    *,
    penalty: float,
    tol: float,
    max_iter: int,
    upper_bound: float = np.inf,
    retract: Callable[[np.ndarray, int], np.ndarray] | None = None,
    first: Minorizer | None = None,
    propose: _Proposal | None = None,
    certify: Callable[[np.ndarray], float] | None = None,
) -> _Run:
    """Algorithm 1 (and 3): V ← argmax of the surrogate, objective min_k values_k − penalty‖V‖₁.

    Stops when the objective is within ``tol`` (relative) of ``upper_bound`` (certified), or
    when the relative change is ≤ ``tol`` (the paper's test, with |·|: E5) *and* so is the
    remaining change extrapolated from the last two, |Δ_t|·ρ/(1 − ρ) with ρ = |Δ_t|/|Δ_{t−1}|
    (MM converges linearly; ρ ≥ 1 never stops), or when a step changes the objective by no more
    than rounding (16 ε relative: a fixed point). The paper's test alone stops on plateaus near
    saddle points: on the credit data (r = 4, one seed) changes fell to 5·10⁻⁶ for 15 steps while
    the value was still 0.6 % below the optimum. "Relative" divides by max(|value|, 10⁻⁹) in the
    scaled units (largest group variance 1), so an ℓ1 iterate collapsing to 0 stops too.

    ``certify(μ)`` maps a step's dual weights to an upper bound of the optimum (for FPCA the
    SDR bound S_r(Σ_k μ_k R_k), one eigendecomposition). Once the change test above holds it is
    evaluated at every step: the run stops when the objective is within ``tol`` of the best
    bound seen (certified), and otherwise only when the change test holds at ``tol`` ·
    ``_INNER_SHARE`` — near the optimum MM's change test alone stopped 1–2 ``tol`` below it.

    Without ``retract`` a step that lowers the objective (possible only through an inexact
    inner solve) is refused: the run stops at the last ascending iterate, converged if the drop
    is ≤ tol·max(|value|, 1), else not converged with ``refused`` naming the drop, the inner
    method and its step gap (:func:`_run_status` reports it as ``"inaccurate"`` with a
    :class:`ConvergenceWarning`). ``retract(V, t)`` maps each surrogate maximiser to the next
    iterate (projected MM; ascent is then not guaranteed and not enforced). ``first`` is the
    minorizer at ``start`` when the caller already has it (for FRPCA, a pass over the rows).

    ``propose`` replaces the plain step M(V_t) by a trial point W (for FRPCA, where every
    evaluation of the objective is a pass over the rows and plain MM converges linearly, often
    slowly): W is kept if f(W) is at least the surrogate value min_k g_k(M(V_t)) — a lower
    bound of f(M(V_t)), known without a pass — so ascent stays guaranteed; otherwise the step
    is M(V_t), which costs one more evaluation. An accepted W costs one evaluation, as a plain
    step does. The proposal is told the outcome (:class:`_OverRelaxation`,
    :class:`_SampledModel`), and its ``window`` sets how many steps the stopping test sums Δ
    and ρ over (steps of varying length). A ``sustained`` proposal (:class:`_SampledModel`) asks
    more of the change test: the window's total change (for a window of 2, two consecutive
    steps), not the last step's, must be ≤ ``tol``, and the plain step taken after a first
    refused trial point neither stops the run nor enters the rate: that step measures plain
    MM's crawl, not what the trial points have left (on the 10⁷-row benchmark the run stopped
    on such a step, 6·10⁻⁶ after a refusal, 8·10⁻⁵ below the over-relaxed run's value).
    After two refusals in a row the plain steps count again, so a model that keeps failing
    ends as plain MM does.
    """
    components = start
    minorizer = first if first is not None else minorize(components)
    value = _objective(minorizer, components, penalty)
    history = [value]
    weights: np.ndarray | None = None
    gaps: list[float] = []
    fallbacks = loose = 0
    last_sigma = 1.0
    converged = False
    changes: list[float] = []
    window = 1 if propose is None else propose.window
    sustained = propose is not None and propose.sustained
    refusals = 0  # trial points refused in a row
    certifying = False
    refused = ""
    for iteration in range(1, max_iter + 1):
        result = step(minorizer, weights)
        if not np.isfinite(result.components).all():
            raise SolverError("the MM step produced non-finite components")
        last_sigma = float(np.linalg.svd(result.components, compute_uv=False)[-1])
        loose += last_sigma < 1.0 - _TIGHT
        gaps.append(result.gap / max(abs(result.dual_value), 1e-300))
        fallbacks += result.fell_back
        following = result.components if retract is None else retract(result.components, iteration)
        candidate = None
        judged = True  # does this step's change tell how fast the run converges?
        if propose is not None:
            trial = propose(components, minorizer, following)
            trial_minorizer = minorize(trial)
            accepted = _objective(trial_minorizer, trial, penalty) >= result.surrogate_value
            propose.update(accepted)
            if accepted:
                following, candidate = trial, trial_minorizer
            refusals = 0 if accepted else refusals + 1
            # A plain step after one refused trial crawls whatever is left: it may not stop a sustained run.
            judged = not sustained or refusals != 1
        if candidate is None:
            candidate = minorize(following)
        new_value = _objective(candidate, following, penalty)
        allowed = tol * max(abs(value), _VALUE_FLOOR)
        if retract is None and new_value < value:
            converged = value - new_value <= tol * max(abs(value), 1.0)
            if not converged:
                refused = (
                    f"a step would have lowered the objective from {value:.12g} to {new_value:.12g} (scaled units; "
                    f"inner method {result.method!r}, step gap {result.gap:.3g})"
                )
            break
        change = abs(new_value - value)
        if judged:
            changes.append(change)
        recent = sum(changes[-window:])
        earlier = sum(changes[-2 * window : -window]) if len(changes) >= 2 * window else np.inf
        ratio = recent / earlier if earlier > 0 else float(recent > 0) * np.inf
        remaining = recent * ratio / (1.0 - ratio) if ratio < 1 else np.inf
        components, minorizer, value, weights = following, candidate, new_value, result.weights
        history.append(value)
        stalled = change <= _ROUNDING * abs(value)  # a fixed point, to rounding
        slow = judged and (recent if sustained else change) <= allowed and remaining <= allowed
        if certify is not None and (slow or certifying):
            certifying = True
            upper_bound = min(upper_bound, certify(result.weights))
            slow = change <= _INNER_SHARE * allowed and remaining <= _INNER_SHARE * allowed
        if stalled or upper_bound - value <= allowed or slow:
            converged = True
            break
    return _Run(
        components,
        history,
        converged,
        float(np.max(gaps, initial=0.0)),
        fallbacks,
        loose,
        last_sigma,
        weights,
        upper_bound,
        refused,
    )


# ----------------------------------------------------------------------------- SDR bound
@dataclass(frozen=True)
class SDRBound:
    """The SDR value max_{P ∈ Fantope} min_k tr(R_k P) lies in [lower, upper].

    ``upper`` = S_r(Σ_k w_k R_k) at ``weights`` (a valid bound on the rank-r optimum for any
    weights); ``lower`` = min_k tr(R_k P) of the best mixture P of the eigenprojectors seen.
    """

    upper: float
    lower: float
    weights: np.ndarray
    n_iter: int


def sdr_bound(
    matrices: np.ndarray,
    n_components: int,
    *,
    weights: np.ndarray | None = None,
    feasible: Sequence[np.ndarray] = (),
    tol: float = _SDR_TOL,
    max_iter: int = _SDR_MAX_ITER,
) -> SDRBound:
    """Kelley's cutting-plane method for min_{w ∈ Δ_k} S_r(Σ_k w_k R_k) (module docstring).

    Each step: one top-r eigendecomposition at w (value = upper-bound candidate, subgradient
    s = (tr(VᵀR_kV))_k), then the LP min_{w ∈ Δ, z} z s.t. z ≥ s_jᵀw for every cut, whose dual
    weights α give the Fantope point Σ_j α_j V_jV_jᵀ. Stops when upper − lower ≤ tol·|upper|.

    Warm start: the first step is at ``weights`` (default uniform), and every orthonormal V in
    ``feasible`` adds its cut (tr(VᵀR_kV))_k up front — valid because S_r(M) ≥ tr(VᵀMV) — and
    its value min_k tr(VᵀR_kV) as a lower bound. Given an MM solution and its final dual
    weights, the first eigendecomposition usually closes the gap and no LP is solved.
    """
    k = matrices.shape[0]
    weights = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, dtype=float)
    cuts = [np.einsum("pa,kpq,qa->k", v, matrices, v) for v in feasible]
    lower = max((float(cut.min()) for cut in cuts), default=-np.inf)
    upper, best = np.inf, weights
    iteration = 0
    for iteration in range(1, max_iter + 1):  # noqa: B007 (the count is returned after the loop)
        values, basis = top_eigenvectors(np.tensordot(weights, matrices, axes=1), n_components)
        cuts.append(np.einsum("pa,kpq,qa->k", basis, matrices, basis))
        if values.sum() < upper:
            upper, best = float(values.sum()), weights
        if upper - lower <= tol * max(abs(upper), 1e-300):
            break
        weights, mixture_value = _cutting_plane_lp(np.array(cuts))
        lower = max(lower, mixture_value)
        if upper - lower <= tol * max(abs(upper), 1e-300):
            break
    return SDRBound(upper=upper, lower=lower, weights=best, n_iter=iteration)


def _cutting_plane_lp(cuts: np.ndarray) -> tuple[np.ndarray, float]:
    """(w, value of the dual mixture): w minimises max_j s_jᵀw on the simplex; the mixture
    value min_k Σ_j α_j s_jk is recomputed from the LP duals, so it is a valid lower bound."""
    n_cuts, k = cuts.shape
    cost = np.append(np.zeros(k), 1.0)
    result = scipy.optimize.linprog(
        cost,
        A_ub=np.hstack([cuts, -np.ones((n_cuts, 1))]),
        b_ub=np.zeros(n_cuts),
        A_eq=np.append(np.ones(k), 0.0)[None, :],
        b_eq=[1.0],
        bounds=[(0.0, None)] * k + [(None, None)],
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if result.status != 0 or result.x is None:
        raise SolverError(f"SDR cutting-plane LP failed: {result.message}")
    weights = np.clip(result.x[:k], 0.0, None)
    mixture = np.clip(-np.asarray(result.ineqlin.marginals), 0.0, None)
    mixture = mixture / mixture.sum() if mixture.sum() > 0 else np.full(n_cuts, 1.0 / n_cuts)
    return weights / weights.sum(), float((mixture @ cuts).min())


# ----------------------------------------------------------------------------- shared driver
def _check_common(
    tol: Any, max_iter: Any, n_restarts: Any, normalize: Any, default_restarts: int
) -> tuple[float, int, int]:
    """Validate the options the solvers share; returns (tol, max_iter, n_restarts resolved)."""
    tol = checks.number("tol", tol, strict=True)
    max_iter = checks.integer("max_iter", max_iter)
    restarts = default_restarts if n_restarts is None else checks.integer("n_restarts", n_restarts)
    checks.choice("normalize", normalize, NORMALIZE)
    return tol, max_iter, restarts


@dataclass(frozen=True)
class _Restarts:
    best: _Run
    index: int
    worst_value: float
    count: int


def _restarts(
    matrices: np.ndarray,
    n_components: int,
    random_state: int | np.random.Generator | None,
    n_restarts: int,
    tol: float,
    run: Callable[[np.ndarray], _Run],
    optimal: Callable[[_Run], bool] = lambda _: False,
    starts: Sequence[Callable[[], np.ndarray]] = (),
) -> _Restarts:
    """``n_restarts`` runs: from ``starts`` first (each called when its run begins, so it may
    use what earlier runs found), then from successive :func:`random_orthonormal` draws of
    ``np.random.default_rng(random_state)``; the first run within ``tol`` of the largest final
    objective wins (:func:`_best_run`). Restarts end early after a run that is ``optimal``
    (certified)."""
    rng = np.random.default_rng(random_state)
    runs: list[_Run] = []
    while len(runs) < n_restarts and not (runs and optimal(runs[-1])):
        given = len(runs) < len(starts)
        runs.append(run(starts[len(runs)]() if given else random_orthonormal(rng, matrices.shape[1], n_components)))
    index = _best_run(runs, tol)
    return _Restarts(runs[index], index, float(min(r.history[-1] for r in runs)), len(runs))


def _best_run(runs: Sequence[_Run], tol: float) -> int:
    """The first run whose final objective is within ``tol`` (relative) of the largest: runs
    that reach the same optimum differ by rounding, which must not decide which one is reported
    (the dask and numpy paths, or two machines, would disagree)."""
    finals = np.array([r.history[-1] for r in runs])
    best = finals.max()
    return int(np.flatnonzero(finals >= best - tol * max(abs(best), _VALUE_FLOOR))[0])


def _run_status(run: _Run, method: str, max_iter: int) -> str:
    """The status of the kept run: ``"converged"``, ``"inaccurate"`` (it stopped at the last
    ascending iterate because an inexact surrogate step would have lowered the objective) or
    ``"max_iter"``; the last two warn (:class:`ConvergenceWarning`)."""
    if run.converged:
        return "converged"
    if run.refused:
        warnings.warn(
            f"{method}: stopped before meeting tol at the last ascending iterate: {run.refused}",
            ConvergenceWarning,
            stacklevel=3,
        )
        return "inaccurate"
    warnings.warn(f"{method}: stopped at max_iter={max_iter} before meeting tol", ConvergenceWarning, stacklevel=3)
    return "max_iter"


# ----------------------------------------------------------------------------- mm
def solve_mm(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    normalize: Normalize = "mean",
    inner: Inner = "auto",
    n_restarts: int | None = None,
    tol: float = 1e-5,
    max_iter: int = 1000,
    accelerate: bool = True,
) -> FairProjection:
    """Max-min group variance fair PCA by MM (method ``"mm"``; 002 §3, Algorithms 1–2).

    Maximises min_k tr(Vᵀ R_k V) over orthonormal p × r V (module docstring for the method,
    the inner solvers, the SDR certificate and the corrections to the paper).

    Parameters
    ----------
    center : {"group", "global", "origin"}
        Which second moments the R_k are: about each group's mean (default), the global mean
        (the paper's) or the origin.
    normalize : {"mean", "sum"}
        R_k per row (C_k / n_k, default) or summed over the group's rows (paper; E1).
    inner : {"auto", "newton", "qp", "line", "sdp"}
        Inner dual solver: projected Newton, Algorithm 2 (the paper's), 1-D search (two groups
        only) or the conic program; "auto" = "line" for two groups, "newton" otherwise.
    n_restarts : int, optional
        Runs; default 5 when k ≥ 3, else 2. The first starts from the top-r eigenvectors of
        Σ_k R_k / k, the second from those of Σ_k w_k R_k at the SDR bound's dual weights, the
        others from random orthonormal V. The best final value is kept. Restarts stop early
        once a run is within ``tol`` of the SDR bound (certified optimal), so a certified first
        run is the only one. With two groups the bound is attained, so stopping below it warns
        (:class:`ConvergenceWarning`).
    tol : float
        Relative change of the objective (or relative distance to the SDR bound) at which to stop.
    max_iter : int
        Outer MM iterations per restart at most.
    accelerate : bool
        Over-relaxed MM steps (default; :func:`_ascend`: ascent kept, about half the
        iterations), or the paper's plain Algorithm 1.
    random_state : int, Generator or None
        Seeds the random starts: run i ≥ 2 uses the (i − 1)-th draw of ``random_orthonormal``
        from ``np.random.default_rng(random_state)``.

    Returns
    -------
    FairProjection
        Orthonormal components; ``objective_history`` is min_k f_k per iteration of the best
        restart, including the start (units of R_k). ``certificate``: ``lower_bound`` (the value
        attained), ``upper_bound`` (SDR bound, valid for any solver accuracy), ``sdr_lower`` (a
        Fantope point's value: the SDR value is in [sdr_lower, upper_bound]), ``relative_gap``,
        ``best_restart`` (index), ``restarts_run``, ``worst_restart_value`` (the lowest final
        value of the restarts run), ``inner_gap`` (largest relative inner
        duality gap of the kept run), ``fallback_steps`` (E8 conic fallbacks).
    """
    tol, max_iter, restarts = _check_common(tol, max_iter, n_restarts, normalize, 5 if moments.n_groups >= 3 else 2)
    checks.flag("accelerate", accelerate)
    checks.choice("inner", inner, INNER)
    if inner == "line" and moments.n_groups != 2:
        raise InputError(f"inner='line' needs exactly 2 groups, the data have {moments.n_groups}")
    resolved = ("line" if moments.n_groups == 2 else "newton") if inner == "auto" else inner
    matrices, scale = _scaled(group_matrices(moments, center, normalize))
    conic = _ConicCache()
    bound: SDRBound | None = None  # computed after the first run, warm-started from it

    def cheap_bound(weights: np.ndarray) -> float:
        return float(top_eigenvectors(np.tensordot(weights, matrices, axes=1), n_components)[0].sum())

    def run(start: np.ndarray) -> _Run:
        return _ascend(
            start,
            lambda v: variance_minorizer(matrices, v),
            lambda m, w: surrogate_step(
                m, inner=resolved, warm_start=w, ascent=_ASCENT, gap_tol=_INNER_SHARE * tol, conic=conic
            ),
            penalty=0.0,
            tol=tol,
            max_iter=max_iter,
            upper_bound=np.inf if bound is None else bound.upper,
            certify=cheap_bound if bound is None else None,
            propose=_OverRelaxation() if accelerate else None,
        )

    def within(result: _Run, upper: float) -> bool:
        return upper - result.history[-1] <= tol * max(abs(result.history[-1]), _VALUE_FLOOR)

    def certified(result: _Run) -> bool:
        nonlocal bound
        if bound is None:
            if result.weights is not None and within(result, result.upper_bound):
                # The run's own bound S_r(Σ_k μ_k R_k) at its dual weights certifies it.
                bound = SDRBound(result.upper_bound, result.history[-1], result.weights, 0)
            else:  # not certified: the SDR value is needed to far better than tol (later runs stop at it)
                bound = sdr_bound(
                    matrices, n_components, weights=result.weights, feasible=[result.components], tol=_INNER_SHARE * tol
                )
        return within(result, bound.upper)

    def pooled_start() -> np.ndarray:
        return top_eigenvectors(matrices.mean(axis=0), n_components)[1]

    def sdr_start() -> np.ndarray:
        assert bound is not None  # certified() ran after the first run
        return top_eigenvectors(np.tensordot(bound.weights, matrices, axes=1), n_components)[1]

    # The first run starts from the top-r eigenvectors of Σ_k R_k / k; at its end the SDR bound
    # at its final dual weights usually certifies it (one eigendecomposition). If not, the
    # bound is refined by cutting planes and the second run starts from the top-r eigenvectors
    # at the bound's weights: for two groups (tight relaxation) MM from there reached the bound
    # within 1e-8 on 300 random problems in 1-2 steps, where random starts stopped up to 62 %
    # below it on 7 % of them.
    chosen = _restarts(
        matrices, n_components, random_state, restarts, tol, run, certified, starts=[pooled_start, sdr_start]
    )
    certified(chosen.best)
    assert bound is not None
    best = chosen.best
    status = _run_status(best, "mm", max_iter)
    value = best.history[-1]
    if moments.n_groups == 2 and bound.upper - value > max(10 * tol, _LOCAL_GAP) * abs(bound.upper):
        warnings.warn(
            f"mm: stopped {(bound.upper - value) / abs(bound.upper):.3g} (relative) below the SDR bound, which "
            "is attained for two groups: a local maximum; raise n_restarts",
            ConvergenceWarning,
            stacklevel=2,
        )
    certificate = {
        "lower_bound": value * scale,
        "upper_bound": bound.upper * scale,
        "sdr_lower": bound.lower * scale,
        "relative_gap": (bound.upper - value) / max(abs(bound.upper), 1e-300),
        "best_restart": float(chosen.index),
        "restarts_run": float(chosen.count),
        "worst_restart_value": chosen.worst_value * scale,
        "inner_gap": best.inner_gap,
        "fallback_steps": float(best.fallbacks),
    }
    return make_projection(
        moments,
        fix_signs(best.components),
        method="mm",
        n_components=n_components,
        center=center,
        objective_history=np.array(best.history) * scale,
        n_iter=len(best.history) - 1,
        status=status,
        certificate=certificate,
        options={
            "normalize": normalize,
            "inner": resolved,
            "n_restarts": restarts,
            "tol": tol,
            "max_iter": max_iter,
            "accelerate": accelerate,
        },
    )


# ----------------------------------------------------------------------------- mm-sparse
def solve_mm_sparse(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    penalty: float = 0.1,
    normalize: Normalize = "mean",
    output: Output = "relaxed",
    n_restarts: int | None = None,
    tol: float = 1e-5,
    max_iter: int = 200,
) -> FairProjection:
    """ℓ1-penalised max-min group variance by MM (method ``"mm-sparse"``; 002 §4.1, Algorithm 3).

    Maximises the relaxed objective (36), h(V) = min_k tr(Vᵀ R_k V) − λ‖V‖₁ over ‖V‖₂ ≤ 1, by
    V ← argmax min_k g_k(V) − λ‖V‖₁ (surrogate (37), a conic program solved with cvxpy +
    Clarabel at every iteration; its (p + r) semidefinite cone makes the cost grow quickly with
    p). Restarts, stopping rule and scaling are those of :func:`solve_mm`.

    Penalty units: λ = ``penalty`` · ρ with ρ = max_k ‖R_k‖₂, the largest variance of any
    group along any direction. ``penalty`` is therefore unit free: the solution does not change
    when every R_k is multiplied by c > 0 (feature units), nor, with ``normalize="mean"``, when
    groups grow by duplicating rows. ``penalty > 2`` always gives V = 0 (the surrogate's linear
    terms satisfy 2|⟨A_k, V⟩| ≤ 2ρ‖V‖₁). The absolute λ, in the units of R_k, is reported as
    ``penalty_absolute``; with ``normalize="sum"`` it is the paper's λ. The penalty is not free
    of the dimensions: ‖V‖₁ grows like r√p while the variance term is at most r, so one
    ``penalty`` sparsifies more at large p.

    The paper claims (§4.1, abstract) that the surrogate maximiser is orthonormal at every
    iteration. That holds only while A(μ*) + (λ/2)B* has full column rank; for larger λ the
    maximiser has singular values < 1 or is 0 (spec E7), and the relaxed MM iterates then lose
    rank: shrunken columns shrink further at the next step, down to 0. Every run is checked;
    when the relaxation is not tight a :class:`ConvergenceWarning` is issued and the status is
    ``"not_tight"`` (``converged=False``).

    Parameters
    ----------
    penalty : float
        λ / ρ ≥ 0 (see above). 0 gives ``mm`` through the conic surrogate.
    normalize : {"mean", "sum"}
        As in :func:`solve_mm`.
    output : {"relaxed", "polar"}
        ``"relaxed"`` (default, the paper's Algorithm 3): MM on the relaxed problem; h never
        decreases and the result is the last relaxed iterate, orthonormal if the relaxation was
        tight (then returned as its polar factor, which removes the conic solver's ~10⁻⁸
        departures), else returned as is: singular values < 1, zero columns, or all zero
        (``certificate["collapsed"]``). ``"polar"``: projected MM, each surrogate maximiser is
        replaced by its polar factor (the nearest orthonormal matrix), so every iterate and the
        result are orthonormal; h may then decrease, exact zeros are lost, and the status is
        ``"not_tight"`` if any step needed the projection (``loose_steps``). A surrogate
        maximiser of rank < r has no polar factor: ``"polar"`` then raises :class:`SolverError`.
        On random problems projected MM stays orthonormal over a wider range of penalties, and
        can end higher on h than a relaxed run that lost rank.
    n_restarts, tol, max_iter, random_state
        As in :func:`solve_mm` (``tol`` on |Δh| / |h|).

    Returns
    -------
    FairProjection
        ``objective_history``: h of the iterates of the best restart. ``certificate``: ``nnz``
        (entries with |V_ij| > ``nnz_threshold`` = 10⁻⁶; the components have spectral norm ≤ 1,
        and smaller entries are zero up to the conic solver's accuracy — they are not rounded
        to 0, which would break orthonormality), ``sigma_min`` (of the last surrogate
        maximiser), ``rank`` (of the returned components), ``tight``, ``collapsed``,
        ``loose_steps`` (steps whose surrogate maximiser was not orthonormal),
        ``penalty_absolute`` (λ), ``output_objective`` (h of the returned components, units of
        R_k), ``best_restart``, ``worst_restart_value``.
    """
    penalty = checks.number("penalty", penalty)
    tol, max_iter, restarts = _check_common(tol, max_iter, n_restarts, normalize, 5 if moments.n_groups >= 3 else 1)
    checks.choice("output", output, OUTPUT)
    matrices, scale = _scaled(group_matrices(moments, center, normalize))
    conic = _ConicCache()

    def retract(relaxed: np.ndarray, iteration: int) -> np.ndarray:
        factor, singular = polar(relaxed)
        if singular[-1] <= _TIGHT:
            raise SolverError(
                f"mm-sparse: at iteration {iteration} the surrogate maximiser has rank "
                f"{int(np.sum(singular > _TIGHT))} < n_components={n_components} at penalty={penalty:g}; "
                "it has no polar factor (lower the penalty, or use output='relaxed')"
            )
        return factor

    def run(start: np.ndarray) -> _Run:
        return _ascend(
            start,
            lambda v: variance_minorizer(matrices, v),
            lambda m, _: surrogate_step(m, inner="sdp", penalty=penalty, conic=conic),
            penalty=penalty,
            tol=tol,
            max_iter=max_iter,
            retract=retract if output == "polar" else None,
        )

    chosen = _restarts(matrices, n_components, random_state, restarts, tol, run)
    best = chosen.best
    singular = np.linalg.svd(best.components, compute_uv=False)
    rank = int(np.sum(singular > _TIGHT))
    tight = best.loose_steps == 0 if output == "polar" else bool(singular[-1] >= 1.0 - _TIGHT)
    components = fix_signs(polar(best.components)[0] if tight or output == "polar" else best.components)
    run_status = _run_status(best, "mm-sparse", max_iter)
    if not tight:
        detail = (
            f"{best.loose_steps} of {len(best.history) - 1} surrogate maximisers were projected to "
            f"orthonormal by their polar factor (last σ_min {best.last_sigma:.3g})"
            if output == "polar"
            else f"the relaxed solution has singular values {singular.min():.3g}..{singular.max():.3g}, rank {rank}"
        )
        warnings.warn(
            f"mm-sparse: penalty={penalty:g} is past the range where the relaxation is tight "
            f"(the paper's claim fails, spec E7): {detail}",
            ConvergenceWarning,
            stacklevel=2,
        )
    output_value = _objective(variance_minorizer(matrices, components), components, penalty)
    certificate = {
        "nnz": float(np.sum(np.abs(components) > _ZERO)),
        "nnz_threshold": _ZERO,
        "sigma_min": best.last_sigma,
        "rank": float(rank),
        "tight": float(tight),
        "collapsed": float(rank == 0),
        "loose_steps": float(best.loose_steps),
        "penalty_absolute": penalty * scale,
        "output_objective": output_value * scale,
        "best_restart": float(chosen.index),
        "worst_restart_value": chosen.worst_value * scale,
    }
    status = NOT_TIGHT if not tight else run_status
    return make_projection(
        moments,
        components,
        method="mm-sparse",
        n_components=n_components,
        center=center,
        objective_history=np.array(best.history) * scale,
        n_iter=len(best.history) - 1,
        status=status,
        certificate=certificate,
        options={
            "penalty": penalty,
            "normalize": normalize,
            "output": output,
            "n_restarts": restarts,
            "tol": tol,
            "max_iter": max_iter,
        },
    )


# ----------------------------------------------------------------------------- mm-robust
def solve_mm_robust(
    moments: GroupMoments,
    n_components: int,
    *,
    passes: DataPasses | None = None,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    normalize: Normalize = "mean",
    inner: Inner = "auto",
    n_restarts: int = 1,
    tol: float = 1e-5,
    max_iter: int = 200,
    accelerate: bool = True,
    sample_rows: int | None = _SAMPLE_ROWS,
) -> FairProjection:
    """Outlier-robust max-min fair PCA with the ℓ1 criterion (method ``"mm-robust"``; 002 §4.2,
    Algorithm 4 — module docstring for the minorizer and the corrections to the paper).

    Maximises min_k h_k(V), h_k(V) = Σ_{i∈k} ‖Vᵀy_i‖₁ (divided by the group's size with
    ``normalize="mean"``), y_i = x_i − c_k centred as ``center`` says, over orthonormal V. Every
    iteration is one pass over the rows (``passes``).

    The first run starts from the ``mm`` solution (the paper's start) and ``n_restarts − 1``
    more from random orthonormal V; the best final value is kept. Each run costs a pass over the
    rows per iteration, so the default is the paper's single run. The ℓ1 criterion is
    multi-modal (the paper's Fig. 5a) and the ``mm`` start can be a local maximum: on twelve
    80-row, 3-feature, two-group problems it stopped below the brute-force optimum twice (by
    2.7 % and 0.1 %), and four more random starts reached it both times
    (tests/solvers/test_mm_robust.py). Where passes are cheap (rows in memory, small tables)
    ``n_restarts=5`` is worth its cost.

    Plain MM (Algorithm 4) converges linearly and on large samples slowly: on 10⁵–10⁷ rows,
    relative gains of ~10⁻⁵ per pass for hundreds of passes (benchmarks/results/
    mm_robust_scale.md): its minorizer is linear in every |vᵀy|, so the curvature it sees comes
    from the orthonormality constraint alone, and along directions where the criterion is flat
    (rotations of V inside a near-optimal subspace change ‖Vᵀy‖₁ only a little) it crawls.

    The default (``accelerate=True`` with ``sample_rows``) takes *sample-preconditioned* steps:
    the rows of a uniform per-group sample of at most ``sample_rows`` rows per group are held
    in memory, drawn in the pass at the ``mm`` start that gives its ℓ1 sums
    (:meth:`~fairpca_dist.engine.datapasses.DataPasses.l1_sums_sampled`: each group's rows of
    smallest hash key, the same rows however the table is partitioned; no pass of its own), and
    with ĥ_k their criteria (in the full data's units) each step from V_t

    1. reads the rows once at V_t: h_k(V_t) and G_k = ∇h_k(V_t) = B_k (the ℓ1 sums);
    2. maximises, over the sample only, the model

           m_t(V) = min_k [ĥ_k(V) + ⟨G_k − ∇ĥ_k(V_t), V⟩] + ρ⟨V_t, V⟩,

       whose group terms equal h_k to first order at V_t (values too: every term is
       homogeneous of degree 1 in V) and carry the sample's curvature, by over-relaxed MM from
       V_t (each iteration one pass over the sample, in memory); ρ⟨V_t, V⟩ = const −
       ρ‖V − V_t‖²/2 keeps the trial point W where the model can be trusted;
    3. keeps W if h(W) = min_k h_k(W) (the next pass, which also gives step 1 at W) is at
       least the surrogate value of the plain MM step M(V_t) — a lower bound of h(M(V_t)) known
       without a pass — and halves ρ; else takes M(V_t) (one more pass) and multiplies ρ by 4.

    Ascent is guaranteed as in plain MM, every value in the history is the full data's, the
    stopping test is the one below on those values, and a point where the steps stop moving
    satisfies the full data's fixed-point condition (the model's gradient at V_t is the full
    gradient): the sample only decides which way to go, never where to stop. This is the
    DANE/statistical-preconditioning idea (a surrogate with the data's gradient and a sample's
    curvature) applied to MM. On the 10⁷ × 20 benchmark it needs about a quarter of the passes
    of over-relaxed MM and ends higher (mm_robust_scale.md has the numbers); on 10⁶ rows of the
    same table it ends lower (below). ``sample_rows=None`` (with ``accelerate=True``)
    gives the previous default, over-relaxed steps W = polar(V_t + α(M(V_t) − V_t))
    (:class:`_OverRelaxation`); ``accelerate=False`` is the paper's Algorithm 4 step for step
    (no sample is drawn). The ℓ1 criterion has many fixed points on small samples (on the
    paper's 100-row §5.4 data, plain, over-relaxed and preconditioned runs from the same start
    end up to ~2 % apart, each one higher in some cases), so the three settings may end at
    different fixed points there.

    Where every accelerated setting stops short: on Gaussian-like groups the ℓ1 criterion is
    nearly flat along rotations of V inside its span (for Gaussian rows E‖Vᵀy‖₁ depends on V only
    through diag(VᵀR_kV), and every rotation that balances it is a maximiser), so the maximum is
    a ridge whose height varies with the table's own sampling noise, ~10⁻⁴ relative over
    rotations of tenths of a radian. A sample's model cannot see that noise (its own differs), and
    plain and over-relaxed steps move along the ridge by ~10⁻⁶–10⁻⁵ per pass. On 10⁶ rows of the
    benchmark's table (r = 5): over-relaxed steps run to tol 10⁻¹¹ reach 7.5808388 in 1,009 passes;
    at the default tol they stop at 7.5799736 (94 passes, 1.1·10⁻⁴ below), the preconditioned
    default at 7.5804061 (25 passes, 5.5·10⁻⁵ below; with the sample seeds 1–3 instead of 0,
    13–20 passes and 7.5795051–7.5806158: where a run stops on the ridge depends on its sample;
    with an earlier sample it stopped at 7.5788752, its span 10⁻² rad from the over-relaxed
    run's, the rotation inside it ~0.4 rad away). No setting's ``"converged"`` certifies more
    than a point where its steps stopped gaining ``tol``.

    Robustness is weaker than the paper says. Its §5.4 claim ("comparatively low errors even in
    the presence of large outliers", Fig. 5b) reproduces only where the inliers spread about as
    far as the outliers: with outliers α·1 + N(0, I) on 10 % of the rows, the ℓ1 criterion
    spends a component on the outliers' direction as the variance criterion does, just less
    eagerly (|·| grows linearly, (·)² quadratically). Over 5 inlier spreads × 5 values of α
    (20 seeds each) the claim held in a few cells by small margins and was reversed wherever the
    outliers are weak, because the ℓ1 optimum is not the variance optimum the error (45) is
    measured against (benchmarks/results/mm_robust_outliers.md).

    Parameters
    ----------
    passes : DataPasses
        The rows the moments came from (in the moments' units:
        :func:`~fairpca_dist.solvers.fit_projection` rescales it with the moments). Required.
    n_restarts : int
        Runs: the ``mm`` start, then random starts (default 1: the paper's algorithm).
    normalize, inner, tol, max_iter
        As for ``mm``; ``tol`` is also the ``mm`` start's. A run stops when the relative change
        of the objective is ≤ ``tol`` (the paper's test, with |·|) and so is the change
        extrapolated from the rate of the last steps (:func:`_ascend`).
    accelerate : bool
        Accelerated steps (default: sample-preconditioned, or over-relaxed with
        ``sample_rows=None``), or the paper's plain steps (``False``).
    sample_rows : int or None
        Rows per group of the in-memory sample of the preconditioned steps (default 50,000:
        20 float64 features take 8 MB per group); a group with fewer rows is held whole. None:
        no sample (over-relaxed steps).
    random_state
        Seeds the ``mm`` start, then the sample, then the random starts.

    Returns
    -------
    FairProjection
        ``objective_history``: min_k h_k per iteration of the best run, including its start (one
        pass each). ``certificate``: ``lower_bound`` (the value attained), ``start_value`` (the ℓ1
        objective at the ``mm`` start), ``best_restart`` (0: the ``mm`` start), ``restarts_run``,
        ``worst_restart_value``; the work, all runs: ``passes`` (every pass over the full rows,
        the one at the ``mm`` start drawing the sample too), ``sample_rows`` (rows held),
        ``sample_evaluations`` (ℓ1 sums over the in-memory sample, not passes over the rows),
        ``refused_steps`` (accelerated trial points refused, each one extra pass).
    """
    tol, max_iter, restarts = _check_common(tol, max_iter, n_restarts, normalize, 1)
    checks.choice("inner", inner, INNER)
    checks.flag("accelerate", accelerate)
    if sample_rows is not None:
        sample_rows = checks.integer("sample_rows", sample_rows, minimum=2)
    if passes is None:
        raise InputError(
            "method 'mm-robust' reads the rows at every iteration: pass passes= (e.g. "
            "fairpca_dist.engine.passes.table_passes(data, moments, ...)), or fit with FairPCA or fit_table"
        )
    if tuple(passes.groups) != tuple(moments.groups):
        raise InputError(f"passes are over groups {tuple(passes.groups)}, the moments over {moments.groups}")
    rng = np.random.default_rng(random_state)
    start = solve_mm(moments, n_components, random_state=rng, center=center, normalize=normalize, inner=inner, tol=tol)
    centers = moments.centers(center)
    counts = moments.weight if normalize == "mean" else np.ones(moments.n_groups)
    passes_before = passes.n_passes
    sample = None
    if accelerate and sample_rows is not None:  # the sample rides on the pass at the mm start
        first_sums, rows = passes.l1_sums_sampled(
            start.components, centers, sample_rows, int(rng.spawn(1)[0].integers(2**63 - 1))
        )
        sample = _CentredSample(rows, centers)
    else:
        first_sums = passes.l1_sums(start.components, centers)
    # Unit scale: the largest group criterion at the mm start is 1, so tolerances are scale free.
    unit = float(np.max(first_sums.h / counts))
    if not unit > 0:
        raise SolverError("every group's rows project to zero at the mm start: there is nothing to robustify")
    divisor = counts * unit
    resolved = ("line" if moments.n_groups == 2 else "newton") if inner == "auto" else inner

    def minorize(components: np.ndarray) -> Minorizer:
        return l1_minorizer(passes.l1_sums(components, centers), divisor)

    def step(minorizer: Minorizer, warm: np.ndarray | None) -> Step:
        return surrogate_step(minorizer, inner=resolved, warm_start=warm, ascent=_ASCENT, gap_tol=_INNER_SHARE * tol)

    proposals: list[_Proposal] = []

    def proposal() -> _Proposal | None:
        if not accelerate:
            return None
        if sample is None:
            proposals.append(_OverRelaxation())
        else:  # the sample's criteria in the full data's units: its sums over its share of each group's weight
            share = sample.total_weights() / moments.weight
            proposals.append(_SampledModel(sample, divisor * share, step, _INNER_SHARE * tol))
        return proposals[-1]

    def run(components: np.ndarray, first: Minorizer | None = None) -> _Run:
        return _ascend(
            components, minorize, step, penalty=0.0, tol=tol, max_iter=max_iter, first=first, propose=proposal()
        )

    runs = [run(start.components, l1_minorizer(first_sums, divisor))]
    runs += [run(random_orthonormal(rng, moments.n_features, n_components)) for _ in range(restarts - 1)]
    index = _best_run(runs, tol)
    best = runs[index]
    status = _run_status(best, "mm-robust", max_iter)
    history = np.array(best.history) * unit
    return make_projection(
        moments,
        fix_signs(best.components),
        method="mm-robust",
        n_components=n_components,
        center=center,
        objective_history=history,
        n_iter=len(history) - 1,
        status=status,
        certificate={
            "lower_bound": float(history[-1]),
            "start_value": float(runs[0].history[0] * unit),
            "best_restart": float(index),
            "restarts_run": float(len(runs)),
            "worst_restart_value": float(min(r.history[-1] for r in runs) * unit),
            "passes": float(passes.n_passes - passes_before),
            "sample_rows": float(0 if sample is None else sum(len(y) for y in sample.rows)),
            "sample_evaluations": float(sum(getattr(m, "sample_evaluations", 0) for m in proposals)),
            "refused_steps": float(sum(m.refused for m in proposals)),
        },
        options={
            "normalize": normalize,
            "inner": resolved,
            "n_restarts": restarts,
            "tol": tol,
            "max_iter": max_iter,
            "accelerate": accelerate,
            "sample_rows": sample_rows,
        },
    )
