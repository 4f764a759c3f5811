"""Samadi et al. (2018), "The Price of Fair PCA: One Extra Dimension" (seeds/000).

Both methods solve the relaxation of min-max fair PCA over the Fantope
𝒫_r = {P symmetric : 0 ⪯ P ⪯ I, tr P ≤ r} (spec/seeds-000-001.md §A.2.1, eq. (4)):

    minimise z   s.t.   z ≥ β_g(r) − ⟨Σ_g, P⟩  for every group g,   P ∈ 𝒫_r,

then round it to a linear map of rank ≤ r + k − 1 (Algorithm 1 steps 3–6, Theorem 5.2):

1. eigendecompose P̂ = Σ_j λ̂_j u_j u_jᵀ;
2. solve the LP  min z  s.t. z ≥ β_g − Σ_j λ_j a_gj (a_gj = u_jᵀΣ_g u_j), Σ λ_j ≤ r, 0 ≤ λ ≤ 1,
   to an extreme point: at most k of its λ̄_j are fractional (HiGHS dual simplex; a
   purification step restores a vertex if the solver returns a non-basic optimum);
3. output E = [√λ*_j u_j]_{λ̄_j > 0} with λ*_j = 1 − √(1 − λ̄_j), so that the reconstruction
   x ↦ x EEᵀ has error exactly τ_g − Σ_j λ̄_j a_gj: the LP value is realised by a real map.

When at most r of the λ̄_j are positive the map is replaced by the orthogonal projector onto
their span, padded to r dimensions (Lemma 4.6; the paper's proof omits this "Case 1½", spec
§A.6.2), so the result is an exact rank-r fair PCA. The authors' code skipped steps 1–2
(spec §A.6.10); ``skip_lp=True`` restores that behaviour for comparison.

Rank r when the optimum allows it (not in the paper). The rounded map's extra directions often
carry tiny weights (singular values 1e-4 … 5e-3 of E, an LP vertex around an optimum of rank r
found to the solver's accuracy), and where groups lie on orthogonal axes (spec §C.2 F1, F4) the
fractional directions combine into one of rank r at the LP's value. Let L_r be the largest loss
of the best of these orthogonal projections in the map's span (:func:`_rank_r_candidates`: its
r leading directions, largest λ̄ first; a signed mix of the fractional ones), and ``lower`` the
certificate's lower bound on the relaxation, hence on the rank-r optimum OPT_r. When

    L_r − lower ≤ tol · |L_r| + (the losses' rounding, :func:`~fairpca_dist.assessment.metrics.loss_rounding`),

that projection is returned instead: lower ≤ OPT_r ≤ L_r, so it is a rank-r optimum to the
relative tolerance tol, which is the certificate's own: samadi-mw's ``tol`` (default 1e-5),
1e-5 for samadi-sdp. Its certificate is recomputed (``rounded_value`` = ``upper_bound`` = L_r).
Otherwise the wider map is kept, and ``details["extra_columns_reason"]`` (also in ``message``)
says why; ``details`` records the rounded map's width and extra singular values and L_r either way.
Before keeping a wider map, samadi-mw iterates on (tenfold tighter gaps, at most three times,
within ``max_iter``) while that brings L_r closer to its bound, and samadi-sdp polishes its
lower bound (:func:`_polished_dual`). With ``skip_lp`` the map is never narrowed.

``samadi-sdp`` solves the SDP with cvxpy (its default solver falls back from Clarabel to SCS
when Clarabel fails or is inaccurate: :func:`solve_sdp`); ``samadi-mw`` over a weighted-PCA
oracle, which scales to p ≈ 2000: by default with cutting planes (not in the paper), or with
the paper's multiplicative weights (Appendix A, Algorithms 2–3; ``update="multiplicative"`` or
``eta=``).
"""

from __future__ import annotations

import functools
import itertools
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
from scipy.optimize import linprog

from fairpca_dist.assessment.metrics import best_rank_variance, loss_rounding, losses_from_covariance
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import ConvergenceWarning, InputError, SolverError
from fairpca_dist.extras import require
from fairpca_dist.solvers import checks, conic
from fairpca_dist.solvers.result import STATUS_MESSAGES, FairProjection, make_projection, warn_gap, with_status
from fairpca_dist.solvers.stiefel import fix_signs, top_eigenvectors

__all__ = ["solve_sdp", "solve_mw", "round_relaxation", "lp_vertex"]

_ROUND = 1e-9  # λ within this of 0 or 1 is integral
_POOL = 32  # latest MW iterates offered to the primal mixture besides its current support
_RANK_TOLERANCE = 1e-5  # samadi-sdp's tolerance for a rank-r projection in place of a wider map (module docstring)
_REFINEMENTS = 3  # samadi-mw's tenfold tighter stages at most, to bring a rank-r projection within tol
_SIGN_PATTERNS = 8  # fractional directions up to which every sign pattern is tried (2^(8−1) maps)


def _problem(moments: GroupMoments, n_components: int, center: Center) -> tuple[np.ndarray, np.ndarray, float]:
    """(Σ_g / s, β_g / s, s) with s = max_g β_g(r): losses then lie in [0, 1]."""
    covariance = moments.covariance(center)
    best = best_rank_variance(covariance, n_components)
    scale = float(best.max())
    if not scale > 0:
        raise SolverError("every group has zero variance: there is nothing to project")
    return covariance / scale, best / scale, scale


# ----------------------------------------------------------------------------- rounding
def lp_vertex(gains: np.ndarray, best: np.ndarray, n_components: int) -> tuple[np.ndarray, float]:
    """Extreme-point solution (λ̄, z*) of the rounding LP (spec §A.2.2, eqs. (5)–(9)).

    ``gains[g, j]`` = a_gj = u_jᵀ Σ_g u_j. At most k = ``len(best)`` entries of λ̄ are
    fractional (a vertex has m + 1 tight constraints, at most k + 1 of them not bounds).
    """
    k, m = gains.shape
    size = max(float(np.abs(gains).max(initial=0.0)), float(np.abs(best).max())) or 1.0
    gains, best = gains / size, best / size  # HiGHS's tolerances are absolute
    cost = np.zeros(m + 1)
    cost[-1] = 1.0
    upper = np.vstack([np.hstack([-gains, -np.ones((k, 1))]), np.append(np.ones(m), 0.0)])
    bound = np.append(-best, float(n_components))
    result = linprog(cost, A_ub=upper, b_ub=bound, bounds=[(0.0, 1.0)] * m + [(None, None)], method="highs-ds")
    if result.status != 0 or result.x is None:
        raise SolverError(f"rounding LP failed: {result.message}")
    weights = _snap(result.x[:m])
    z = float(np.max(best - gains @ weights))
    return _purify(weights, z, gains, best, n_components), z * size


def _snap(weights: np.ndarray) -> np.ndarray:
    weights = np.clip(weights, 0.0, 1.0)
    weights[weights < _ROUND] = 0.0
    weights[weights > 1.0 - _ROUND] = 1.0
    return weights


def _purify(weights: np.ndarray, z: float, gains: np.ndarray, best: np.ndarray, n_components: int) -> np.ndarray:
    """Move an optimal non-basic point to a vertex with at most k fractional weights.

    Along a null direction of the tight constraints (restricted to the fractional weights and
    z, with z held fixed) the objective is constant; step until a weight reaches 0 or 1, and
    repeat. Each step makes one more weight integral.
    """
    k = gains.shape[0]
    while True:
        fractional = np.flatnonzero((weights > 0.0) & (weights < 1.0))
        if fractional.size <= k:
            return weights
        rows = [np.append(-gains[g, fractional], -1.0) for g in range(k) if best[g] - gains[g] @ weights >= z - 1e-10]
        if abs(weights.sum() - n_components) <= 1e-10:
            rows.append(np.append(np.ones(fractional.size), 0.0))
        rows.append(np.append(np.zeros(fractional.size), 1.0))
        _, singular, right = np.linalg.svd(np.array(rows))
        if len(rows) >= fractional.size + 1 and singular[-1] > 1e-10:
            return weights  # numerically a vertex already
        direction = right[-1, :-1]
        with np.errstate(divide="ignore"):
            to_upper = np.where(direction > 0, (1.0 - weights[fractional]) / direction, np.inf)
            to_lower = np.where(direction < 0, -weights[fractional] / direction, np.inf)
        step = min(to_upper.min(), to_lower.min())
        weights = weights.copy()
        weights[fractional] += step * direction
        weights = _snap(weights)


def round_relaxation(
    basis: np.ndarray,
    relaxed_weights: np.ndarray,
    covariance: np.ndarray,
    best: np.ndarray,
    n_components: int,
    *,
    skip_lp: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Turn a relaxed solution P̂ = Σ_j λ̂_j u_j u_jᵀ into output components.

    Returns ``(components, weights)``: components (p × r') with r' ≤ r + k − 1, and the LP
    weights λ̄ (or λ̂ clipped to [0, 1] with ``skip_lp``). With at most r positive weights
    the components are the orthonormal basis of their span, padded with the eigenvectors of
    the next largest λ̂ (padding never raises a loss, since every Σ_g ⪰ 0).
    """
    gains = np.sum(basis * (covariance @ basis), axis=1)  # a_gj = u_jᵀ Σ_g u_j, shape (k, m)
    weights = _snap(relaxed_weights.copy())
    free = weights < 1.0
    if not skip_lp and free.any():
        # Directions with λ̂ = 1 (shared by every iterate) stay, and leave the LP: its losses are
        # then differences of the free directions' gains alone. With raw features of very
        # different scales the shared directions carry up to 1e10 times the losses, which the
        # LP's absolute tolerances could not resolve against them.
        rest = n_components - int(np.sum(~free))
        weights[free] = lp_vertex(gains[:, free], best - gains[:, ~free].sum(axis=1), rest)[0] if rest else 0.0
    positive = np.flatnonzero(weights > 0.0)
    if positive.size <= n_components:
        others = [j for j in np.argsort(-relaxed_weights, kind="stable") if j not in set(positive)]
        chosen = np.concatenate([positive, others[: n_components - positive.size]]).astype(int)
        return fix_signs(basis[:, chosen]), weights
    order = positive[np.argsort(-weights[positive], kind="stable")]
    root = np.sqrt(1.0 - np.sqrt(1.0 - weights[order]))
    return fix_signs(basis[:, order] * root), weights


def _max_loss(covariance: np.ndarray, best: np.ndarray, components: np.ndarray) -> float:
    return float(losses_from_covariance(covariance, best, components).max())


def _rounded_projection(
    moments: GroupMoments,
    n_components: int,
    *,
    method: str,
    center: Center,
    basis: np.ndarray,
    relaxed_weights: np.ndarray,
    covariance: np.ndarray,
    best: np.ndarray,
    scale: float,
    relaxed_value: float,
    objective_history: list[float],
    n_iter: int,
    status: str,
    certificate: dict[str, float],
    options: dict[str, object],
    rank_tolerance: float,
    polish: Callable[[], float] | None = None,
) -> FairProjection:
    """Round the relaxed solution, and narrow it to rank r where the certificate allows
    (:func:`_rank_r_if_certified`). ``polish`` returns a better lower bound on demand
    (normalised, as ``covariance``)."""
    skip_lp = bool(options.get("skip_lp"))
    components, weights = round_relaxation(basis, relaxed_weights, covariance, best, n_components, skip_lp=skip_lp)
    fractional = int(np.sum((weights > 0.0) & (weights < 1.0)))
    rounded = _max_loss(covariance, best, components)
    details: dict[str, Any] = {}
    if components.shape[1] > n_components:
        components, rounded, lower, details = _rank_r_if_certified(
            components,
            rounded,
            certificate["lower_bound"] / scale,
            covariance=covariance,
            best=best,
            scale=scale,
            n_components=n_components,
            tolerance=rank_tolerance,
            polish=polish,
            skip_lp=skip_lp,
        )
        certificate = {**certificate, "lower_bound": lower * scale}
    rounded *= scale
    if "rounded_columns" in details and components.shape[1] == n_components:  # narrowed: OPT_r ≤ its loss
        certificate = {**certificate, "upper_bound": rounded}
    elif components.shape[1] <= n_components:
        certificate = {**certificate, "upper_bound": min(certificate.get("upper_bound", np.inf), rounded)}
    return make_projection(
        moments,
        components,
        method=method,
        n_components=n_components,
        center=center,
        objective_history=[*objective_history, rounded],
        n_iter=n_iter,
        status=status,
        certificate={
            **certificate,
            "relaxation_value": relaxed_value * scale,
            "rounded_value": rounded,
            "fractional_weights": float(fractional),
            "output_rank": float(components.shape[1]),
        },
        options=options,
        details=details,
        best=best * scale,
    )


def _rank_r_if_certified(
    components: np.ndarray,
    rounded: float,
    lower: float,
    *,
    covariance: np.ndarray,
    best: np.ndarray,
    scale: float,
    n_components: int,
    tolerance: float,
    polish: Callable[[], float] | None,
    skip_lp: bool,
) -> tuple[np.ndarray, float, float, dict[str, Any]]:
    """The best rank-r projection in a wider rounded map's span (:func:`_rank_r_candidates`)
    where it is certified optimal for rank r to ``tolerance`` (module docstring), else the map
    itself.

    Returns (components, largest loss, lower bound, details); losses and bounds normalised as
    ``covariance``, details in the data's units."""
    norms = np.linalg.norm(components, axis=0)  # orthogonal columns: the singular values
    candidates = _rank_r_candidates(components, norms, n_components)
    losses = [_max_loss(covariance, best, candidate) for candidate in candidates]
    narrow = min(losses)
    slack = tolerance * abs(narrow) + loss_rounding(covariance)
    # The rounded map's loss is the LP's value over SDP-feasible points: no lower bound passes
    # it, so a better bound can certify the projection only if it is within the slack of it.
    if polish is not None and not skip_lp and narrow - lower > slack >= narrow - rounded:
        lower = max(lower, polish())
    details: dict[str, Any] = {
        "rounded_columns": components.shape[1],
        "extra_singular_values": np.sort(norms)[::-1][n_components:].tolist(),
        "rank_r_loss": narrow * scale,
        "rank_tolerance": tolerance,
    }
    if not skip_lp and narrow - lower <= slack:
        return candidates[losses.index(narrow)], narrow, lower, details
    return components, rounded, lower, details  # why: :func:`_described`, from the final certificate


def _rank_r_candidates(components: np.ndarray, norms: np.ndarray, n_components: int) -> list[np.ndarray]:
    """Orthonormal rank-r maps in the span of a rounded map E = [√λ*_j u_j] (ordered by weight).

    Its r leading directions; and where one of the r slots is shared by the fractional
    directions (weights λ̄_j = 2λ*_j − λ*_j², the directions of weight 1 kept), the unit vectors
    c ∝ Σ_j ±√λ̄_j u_j over the fractional j, for every sign pattern when there are at most 8:
    each group g keeps the LP's share Σ_j λ̄_j u_jᵀΣ_g u_j of them plus the cross terms
    Σ_{i≠j} ±√(λ̄_i λ̄_j) u_iᵀΣ_g u_j. Where these vanish (Samadi et al.'s fixtures F1 and F4,
    spec §C.2: groups on orthogonal axes) c attains the LP value, the rank-r optimum."""
    unit = components / norms
    candidates = [unit[:, :n_components]]
    weights = 2.0 * norms**2 - norms**4
    full = weights >= 1.0 - _ROUND
    fractional = np.flatnonzero(~full)
    if n_components - int(full.sum()) == 1 and 2 <= fractional.size <= _SIGN_PATTERNS:
        patterns = np.array(list(itertools.product([1.0, -1.0], repeat=fractional.size - 1)))
        signs = np.hstack([np.ones((len(patterns), 1)), patterns])  # c and −c are one map
        mixed = unit[:, fractional] @ (signs * np.sqrt(weights[fractional])).T
        mixed /= np.linalg.norm(mixed, axis=0)
        candidates += [np.hstack([unit[:, full], mixed[:, [i]]]) for i in range(mixed.shape[1])]
    return candidates


def _why_wider(result: FairProjection) -> str:
    """Why a result keeps more than r columns, in words (``details["extra_columns_reason"]``)."""
    r, k = result.n_components, len(result.group_labels)
    bound = r + k - 1
    if result.options.get("skip_lp"):
        return (
            f"skip_lp=True keeps every direction of the relaxed solution (the authors' code); the LP that "
            f"bounds the rank by r + k − 1 = {bound} and the narrowing to rank {r} are skipped"
        )
    narrow, lower = result.details["rank_r_loss"], result.certificate["lower_bound"]
    gap = (narrow - lower) / abs(narrow) if narrow else 0.0
    words = (
        f"the best rank-{r} projection found in the output's span has largest loss {narrow:.6g}, "
        f"{100 * gap:.2g} % above the certified lower bound {lower:.6g} on the rank-{r} optimum (the tolerance "
        f"is {100 * result.details['rank_tolerance']:.2g} %), while the output's largest loss "
        f"{result.certificate['rounded_value']:.6g} is at most that optimum (Samadi et al. 2018, Theorem 5.2: "
        f"rank ≤ r + k − 1 = {bound})"
    )
    return words + ("; fair-eig gives the exact rank-r optimum of two groups" if k == 2 else "")


def _described(result: FairProjection) -> FairProjection:
    """The result with what the solver did that a user should know, in ``details`` and after
    its status message: a fallback to another solver; why the output is wider than r."""
    details, notes = dict(result.details), []
    if "solver_fallback" in details:
        notes.append(details["solver_fallback"])
    columns = result.components.shape[1]
    if columns > result.n_components:
        details["extra_columns_reason"] = _why_wider(result)
        notes.append(f"{columns} columns, not r={result.n_components}: {details['extra_columns_reason']}")
    return replace(result, details=details, message="; ".join([STATUS_MESSAGES[result.status], *notes]))


# ----------------------------------------------------------------------------- SDP
# SCS's default eps (1e-4) is absolute on the normalised problem (best rank-r variance 1), while
# fair losses are often ~1e-3 of it: on LFW at p = 50 the rounded max loss came out 6 % above the
# optimum and at p = 200 the "lower bound" exceeded the rounded value. 1e-7 gives 3e-6 relative
# for 1.0-1.3x the time (0.15 s at p = 50, 1.2 s at p = 200; benchmarks/results/samadi_timing.md).
_SCS_TOLERANCE = 1e-7
_SDP_GAP = 1e-3  # a certified relative gap above this is the conic solver's inaccuracy: warned
_POLISH_EVALUATIONS = 60  # dual evaluations per group to improve the solver's multipliers' bound
_CLARABEL_FEATURES = 50  # "auto": Clarabel below, SCS from here on (Clarabel's time grows like p⁶)


def _sdp_solvers(solver: str, n_features: int) -> list[str]:
    """The conic solvers to try in turn: the one named, alone; for ``"auto"`` Clarabel then SCS
    below 50 features, SCS alone from 50 on (Clarabel took 26 s at p = 50 and 138 s at p = 75
    where SCS took under a second), each if cvxpy has it."""
    if solver != "auto":
        return [solver.upper()]
    cp = require("cvxpy", extra="conic", feature="method 'samadi-sdp'")

    order = ["CLARABEL", "SCS"] if n_features < _CLARABEL_FEATURES else ["SCS"]
    return [name for name in order if name in cp.installed_solvers()] or order[:1]


class _Relaxation:
    """The SDP of Algorithm 1 step 2 (eq. (4), trace constraint tight) as one cvxpy problem,
    solved by one conic solver after another."""

    def __init__(self, covariance: np.ndarray, best: np.ndarray, n_components: int) -> None:
        cp = require("cvxpy", extra="conic", feature="method 'samadi-sdp'")

        p = covariance.shape[1]
        self.matrix = cp.Variable((p, p), symmetric=True)
        self.worst = cp.Variable()
        constraints = [self.matrix >> 0, np.eye(p) - self.matrix >> 0, cp.trace(self.matrix) == n_components]
        self.groups = [
            self.worst >= best[g] - cp.sum(cp.multiply(covariance[g], self.matrix)) for g in range(len(best))
        ]
        self.problem = cp.Problem(cp.Minimize(self.worst), constraints + self.groups)

    def solve(self, name: str, settings: dict[str, float]) -> tuple[np.ndarray, float, np.ndarray, str]:
        """(P̂, its value z, the group multipliers on the simplex, cvxpy's status); a solver that
        returns no solution raises :class:`~fairpca_dist.exceptions.SolverError`."""
        status = conic.solve(self.problem, name, settings, what="SDP solver")
        if status not in ("optimal", "optimal_inaccurate") or self.matrix.value is None:
            raise SolverError(f"SDP solver {name} ended with status {status!r}")
        weights = np.maximum(np.array([float(np.asarray(c.dual_value)) for c in self.groups]), 0.0)
        k = len(self.groups)
        weights = weights / weights.sum() if weights.sum() > 0 else np.full(k, 1.0 / k)
        return (self.matrix.value + self.matrix.value.T) / 2.0, float(self.worst.value), weights, status


def _dual_value(
    weights: np.ndarray, covariance: np.ndarray, best: np.ndarray, n_components: int, *, start: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """The Lagrangian dual of the Fantope problem at group weights w on the simplex, a lower
    bound on its optimum: for every P, max_g (β_g − ⟨Σ_g, P⟩) ≥ Σ_g w_g β_g − Σ_{i≤r} λ_i(Σ_g w_g Σ_g);
    and the top-r eigenvectors V_w that attain the inner maximum. ``start`` seeds the Krylov
    eigensolver (the previous V_w when the weights moved little)."""
    values, basis = top_eigenvectors(np.tensordot(weights, covariance, axes=1), n_components, start=start)
    return float(weights @ best - values.sum()), basis


def _polished_dual(
    weights: np.ndarray, value: float, covariance: np.ndarray, best: np.ndarray, n_components: int
) -> float:
    """The best dual value (:func:`_dual_value`) found by Nelder–Mead from ``weights`` (whose
    dual value is ``value``) over the simplex (w = softmax z); every value evaluated is a lower
    bound. The dual is concave but not smooth (at eigenvalue ties), and a conic solver's
    multipliers can be far from its maximiser where the losses are small next to its tolerance."""
    found = [value]

    def negative(z: np.ndarray) -> float:
        w = np.exp(z - z.max())
        found.append(_dual_value(w / w.sum(), covariance, best, n_components)[0])
        return -found[-1]

    k = len(weights)
    start = np.log(0.9 * weights + 0.1 / k)  # off the simplex's faces, where softmax steps vanish
    simplex = np.vstack([start, start + np.eye(k)])
    scipy.optimize.minimize(
        negative,
        start,
        method="Nelder-Mead",
        options={"maxfev": _POLISH_EVALUATIONS * k, "xatol": 1e-10, "fatol": 0.0, "initial_simplex": simplex},
    )
    return max(found)


def solve_sdp(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    solver: str = "auto",
    tolerance: float | None = None,
    skip_lp: bool = False,
) -> FairProjection:
    """Fair PCA by the SDP relaxation and LP rounding (method ``"samadi-sdp"``).

    Solves  min z  s.t.  z ≥ β_g(r) − ⟨Σ_g, P⟩ ∀g,  0 ⪯ P ⪯ I,  tr P = r  with cvxpy
    (Samadi et al. 2018, Algorithm 1 step 2, eq. (4); the trace constraint is tight at some
    optimum because every Σ_g ⪰ 0, spec §A.2.1), then rounds it (module docstring).
    Result: rank ≤ r + k − 1 and max_g loss_g ≤ OPT_r (Theorems 5.1–5.2); exactly r columns
    when a rank-r projection is certified within 1e-5 (relative) of the lower bound (module
    docstring), and otherwise ``details["extra_columns_reason"]`` says why not.

    Parameters
    ----------
    solver : {"auto", "CLARABEL", "SCS"}
        ``"auto"``: Clarabel below 50 features, then SCS if Clarabel fails or its result is
        not certified (see Notes); SCS alone from 50 features on (Clarabel's time grows like
        p⁶: 208 s at p = 100, spec/stack.md §6). A solver named here is the only one tried: if
        it fails, the :class:`~fairpca_dist.exceptions.SolverError` names it and the others.
    tolerance : float, optional
        Solver accuracy (Clarabel gap/feasibility tolerances, SCS ``eps_abs``/``eps_rel``).
        Default: Clarabel's own (1e-8), and 1e-7 for SCS instead of its 1e-4, which leaves
        losses of ~1e-3 (normalised) several percent off.
    skip_lp : bool
        Apply the square-root map to P̂'s eigenbasis without the LP (the authors' code);
        the rank bound then no longer holds, and the output is not narrowed to rank r.
    random_state : ignored (deterministic).

    Notes
    -----
    The certificate holds ``lower_bound`` (the Lagrangian dual value at the solver's group
    multipliers, a lower bound on the rank-r optimum whatever the solver's accuracy),
    ``relaxation_value`` (the solver's SDP value, accurate to its tolerance) and
    ``rounded_value`` (max_g loss_g of the output); for two groups the relaxation is tight
    (hidden convexity). The solver's tolerance applies to losses normalised by max_g β_g(r);
    where the output's loss is more than 0.1 % above the lower bound (losses many orders of
    magnitude below β, as with features of very different scales and r near p), the result is
    not certified. With ``solver="auto"`` the next solver is then tried (as when a solver
    stops without a solution: Clarabel on some standardised tables); the first certified
    result is returned, or else the one with the smallest certified gap, with status
    ``"inaccurate"`` and a :class:`~fairpca_dist.exceptions.ConvergenceWarning`.
    ``details["solver_attempts"]`` lists every solver tried (``solver``, cvxpy's ``status``
    or ``"error"``, ``error``, the certified relative ``gap``, ``certified``, ``largest_loss``,
    ``lower_bound``, the ``tolerance`` used), ``details["solver_fallback"]`` (also in
    ``message``) says why the result is not the first solver's, and ``options["solver"]`` names
    the solver whose result it is.
    """
    covariance, best, scale = _problem(moments, n_components, center)
    relaxation = _Relaxation(covariance, best, n_components)
    tried: list[tuple[dict[str, Any], FairProjection | None]] = []
    for name in _sdp_solvers(solver, moments.n_features):
        try:
            tried.append(
                _sdp_attempt(
                    moments,
                    n_components,
                    relaxation,
                    name,
                    center=center,
                    tolerance=tolerance,
                    skip_lp=skip_lp,
                    covariance=covariance,
                    best=best,
                    scale=scale,
                )
            )
        except SolverError as error:
            tried.append(
                (
                    {
                        "solver": name,
                        "status": "error",
                        "error": str(error),
                        "gap": None,
                        "certified": False,
                        "largest_loss": None,
                        "lower_bound": None,
                        "tolerance": None,
                    },
                    None,
                )
            )
        if tried[-1][0]["certified"]:
            break
    solved = [(attempt, result) for attempt, result in tried if result is not None]
    if not solved:
        raise SolverError(_failure_words([attempt for attempt, _ in tried], solver))
    chosen, result = next(((a, r) for a, r in solved if a["certified"]), min(solved, key=lambda ar: ar[0]["gap"]))
    attempts = [attempt for attempt, _ in tried]
    if not chosen["certified"]:
        warnings.warn(
            _inaccuracy_words(attempts, chosen, scale, named=solver != "auto"), ConvergenceWarning, stacklevel=2
        )
        result = with_status(result, "inaccurate")
    details = {**result.details, "solver_attempts": attempts}
    if chosen is not attempts[0]:
        before = "; ".join(_attempt_words(attempt) for attempt in attempts[: attempts.index(chosen)])
        details["solver_fallback"] = f"{before}; the result is {chosen['solver']}'s (solver='auto' falls back)"
    return _described(replace(result, details=details))


def _sdp_attempt(
    moments: GroupMoments,
    n_components: int,
    relaxation: _Relaxation,
    name: str,
    *,
    center: Center,
    tolerance: float | None,
    skip_lp: bool,
    covariance: np.ndarray,
    best: np.ndarray,
    scale: float,
) -> tuple[dict[str, Any], FairProjection]:
    """Solve the relaxation with one solver, round it and certify the result: (the attempt's
    record, the result with status ``"converged"``). Its lower bound is polished
    (:func:`_polished_dual`) where the solver's multipliers leave the gap open."""
    settings = conic.tolerance_settings(name, _SCS_TOLERANCE if tolerance is None and name == "SCS" else tolerance)
    matrix, relaxed, weights, status = relaxation.solve(name, settings)
    values, basis = scipy.linalg.eigh(matrix)
    # the solver's values are accurate to its tolerance only (SCS: the primal value can pass the
    # rounded one); the dual at its group multipliers is a bound whatever their accuracy
    dual = _dual_value(weights, covariance, best, n_components)[0]
    polish = functools.cache(lambda: _polished_dual(weights, dual, covariance, best, n_components))
    result = _rounded_projection(
        moments,
        n_components,
        method="samadi-sdp",
        center=center,
        basis=basis[:, ::-1],
        relaxed_weights=np.clip(values[::-1], 0.0, 1.0),
        covariance=covariance,
        best=best,
        scale=scale,
        relaxed_value=relaxed,
        objective_history=[relaxed * scale],
        n_iter=int(relaxation.problem.solver_stats.num_iters or 0),
        status="converged",
        certificate={"lower_bound": dual * scale},
        options={"solver": name, "tolerance": tolerance, "skip_lp": skip_lp},
        rank_tolerance=_RANK_TOLERANCE,
        polish=polish,
    )
    # The solver's own status is not the verdict: its tolerance applies to losses normalised by
    # max_g β_g(r), so its multipliers or its primal can be far off where the losses are far
    # smaller than β (features of very different scales, r near p) or the tolerance is loose,
    # and an 'optimal_inaccurate' run can still be certified. The certified gap decides.
    lower, upper = result.certificate["lower_bound"], result.certificate["rounded_value"]
    allowed = _SDP_GAP * abs(upper) + loss_rounding(covariance) * scale
    if upper - lower > allowed:  # a better bound first
        lower = max(lower, polish() * scale)
        result = replace(result, certificate={**result.certificate, "lower_bound": lower})
    attempt = {
        "solver": name,
        "status": status,
        "error": None,
        "gap": (upper - lower) / abs(upper) if upper else 0.0,
        "certified": bool(upper - lower <= allowed),
        "largest_loss": upper,
        "lower_bound": lower,
        "tolerance": settings.get("eps_abs", settings.get("tol_gap_abs", 1e-8)),
    }
    return attempt, result


def _attempt_words(attempt: dict[str, Any]) -> str:
    """What one solver did, in words: its error, or its result's certified gap."""
    if attempt["error"] is not None:
        return attempt["error"]
    name, used = attempt["solver"], attempt["tolerance"]
    stopped = (
        f"{name} met its tolerance ({used:g}), but"
        if attempt["status"] == "optimal"
        else f"{name} stopped at reduced accuracy ({attempt['status']!r}, tolerance {used:g}), and"
    )
    return (
        f"{stopped} the output's largest loss {attempt['largest_loss']:.6g} is {attempt['gap']:.1%} above the "
        f"certified lower bound {attempt['lower_bound']:.6g}"
    )


def _inaccuracy_words(attempts: list[dict[str, Any]], chosen: dict[str, Any], scale: float, *, named: bool) -> str:
    """The warning of a result no solver certified: every attempt, which result is returned, why
    the tolerance could not resolve the losses, and what to do."""
    kept = f"; {chosen['solver']}'s output is returned" if len(attempts) > 1 else ""
    other = "; another solver" if named else ""
    return (
        f"samadi-sdp: {'; '.join(_attempt_words(a) for a in attempts)}{kept}: the tolerance applies to losses "
        f"divided by the largest group's best variance β, and these are {abs(chosen['largest_loss']) / scale:.1e} "
        f"of β (a tighter tolerance{other}; fair-eig for two groups or samadi-mw, which certify their own gap; "
        "or standardize=True)"
    )


def _failure_words(attempts: list[dict[str, Any]], solver: str) -> str:
    """The error when no solver returned a solution: each one's reason, and what to try."""
    reasons = "; ".join(attempt["error"] for attempt in attempts)
    if solver == "auto":
        return f"samadi-sdp: {reasons} (samadi-mw solves the same relaxation without a conic solver)"
    others = [f"solver={name!r}" for name in ("CLARABEL", "SCS") if name != solver.upper()]
    return (
        f"samadi-sdp: {reasons}; try {' or '.join(others)}, or the default solver='auto', which falls back "
        "from CLARABEL to SCS"
    )


# ----------------------------------------------------------------------------- MW
def _best_mixture(losses: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Weights α on the simplex minimising max_g Σ_t α_t loss_g(P_t), that value, and the LP's
    group multipliers w (on the simplex).

    Losses are linear in P, so this is the best point of the convex hull of the iterates
    (a small LP: T weights, k constraints). It recovers a far better primal point than the
    uniform average of the paper, at no extra oracle call. By LP duality its value is also
    max_w min_t Σ_g w_g loss_g(P_t): the cutting-plane model of the dual, maximised at w.

    The LP sees the losses divided by their largest magnitude: HiGHS's tolerances are absolute
    (~1e-7), and losses normalised by the largest best variance β can be 1e-11 of it (raw
    features of very different scales), where every mixture looked alike to it.
    """
    n_iterates, k = losses.shape
    norm = float(np.abs(losses).max()) or 1.0
    cost = np.append(np.zeros(n_iterates), 1.0)
    upper = np.hstack([losses.T / norm, -np.ones((k, 1))])
    equal = np.append(np.ones(n_iterates), 0.0)[None, :]
    result = linprog(
        cost,
        A_ub=upper,
        b_ub=np.zeros(k),
        A_eq=equal,
        b_eq=[1.0],
        bounds=[(0.0, None)] * n_iterates + [(None, None)],
        method="highs-ds",
    )
    if result.status != 0 or result.x is None:
        raise SolverError(f"primal recovery LP failed: {result.message}")
    mixture = np.clip(result.x[:n_iterates], 0.0, None)
    mixture /= mixture.sum()
    weights = np.maximum(-np.asarray(result.ineqlin.marginals), 0.0)
    weights = weights / weights.sum() if weights.sum() > 0 else np.full(k, 1.0 / k)
    return mixture, float((mixture @ losses).max()), weights


def solve_mw(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    eta: float | None = None,
    max_iter: int = 500,
    tol: float = 1e-5,
    skip_lp: bool = False,
    update: str = "auto",
) -> FairProjection:
    """Fair PCA by cutting planes or multiplicative weights over a weighted-PCA oracle (``"samadi-mw"``).

    Each step (Samadi et al. 2018, App. A, Algorithms 2–3): with group weights w on the
    simplex, the oracle returns V_t = top-r eigenvectors of Σ_g w_g Σ_g, which minimises
    Σ_g w_g loss_g over 𝒫_r; then w_g ← w_g exp(η loss_g(V_t)) and w is renormalised
    (``update="multiplicative"``). With ``update="cutting_plane"`` the next w instead
    maximises the cutting-plane model of the dual built from the iterates' losses (Kelley's
    method; the multipliers of the LP that gives the upper bound, so at no extra cost).

    Certificate, every step: the oracle's value Σ_g w_g β_g − Σ_{i≤r} λ_i(Σ_g w_g Σ_g) is a
    lower bound on the SDP optimum (weak duality); the best convex combination of the
    iterates' projectors (:func:`_best_mixture`, over the current mixture's support and the
    latest 32 iterates) is a feasible point whose max loss is an upper bound. The loop stops when
    (upper − lower) ≤ tol · upper, or when the gap is below the losses' rounding
    (:func:`~fairpca_dist.assessment.metrics.loss_rounding`: every loss zero, as at r = p).

    Parameters
    ----------
    eta : float, optional
        Initial step size of the multiplicative update (default 1); step t uses η/√t on losses
        divided by the largest loss of the first iterate (the equal-weight PCA), so that the
        step is scale free.
    max_iter : int
        Oracle calls at most (each one top-r eigendecomposition of a p × p matrix).
    tol : float
        Relative gap at which to stop. Also the tolerance within which the best rank-r
        projection in the rounded map's span replaces a wider map (module docstring): while
        the map is wider and that projection is not within ``tol`` of the lower bound, the
        iterations go on at tenfold tighter gaps (at most three times, within ``max_iter``) as
        long as each brings it at least twice closer; then the output has r columns, or
        ``details["extra_columns_reason"]`` says why not.
    skip_lp : bool
        Skip the LP (the authors' code), keeping only the square-root map (never narrowed to
        rank r).
    update : {"auto", "multiplicative", "cutting_plane"}
        The weights' update. ``"auto"``: the cutting plane, or multiplicative when ``eta`` is
        given. Multiplicative steps are O(1/√t): on random problems with p = 12, r = 2 they
        closed the gap to 1e-5 in 5–9 calls for two groups, but in 37–210 for three, 250 to
        over 5000 for four and five; the cutting planes took 8–11, 18–21, 28–33 and 26–42.
        For two groups the multiplicative steps' median is lower (4–6 calls against 7–10 on
        100 problems), but their tail is not bounded: up to 69 calls, and 500 without closing a
        0.3 % gap on a raw column of scale 1e5, where the cutting plane took at most 11.
    random_state : ignored (deterministic).

    Notes
    -----
    Deviations from the paper, which returns the better of the last and the average iterate
    after a fixed T (ref-code: T = 5–10) and skips the LP: the primal point is the best
    mixture of all iterates, the duality gap decides when to stop, and the mixture is rounded
    like the SDP solution. The paper's constant step on trace-normalised losses barely moves
    the weights when losses are small next to the variance (credit data: losses ≈ 1e−3 of
    the trace; 500 steps left 0.2–3 % gaps), and a constant step on loss-normalised values
    oscillates; η/√t on loss-normalised values closed the gap to 1e−5 on credit r = 1..10 in
    3–27 oracle calls each. Its eigendecomposition is computed in the span of the iterates
    (≤ T·r columns), never as a dense p × p problem. Per spec §A.2.5's proposal.
    """
    eta = None if eta is None else checks.number("eta", eta, strict=True)
    max_iter = checks.integer("max_iter", max_iter)
    update = checks.choice("update", update, ("auto", "multiplicative", "cutting_plane"))
    covariance, best, scale = _problem(moments, n_components, center)
    if update == "auto":
        update = "cutting_plane" if eta is None else "multiplicative"
    if update == "cutting_plane" and eta is not None:
        raise InputError(
            f"samadi-mw: eta={eta:g} is the step of update='multiplicative'; this fit uses "
            "update='cutting_plane', which has no step"
        )
    steps = _oracle_steps(covariance, best, n_components, update, 1.0 if eta is None else eta)
    rounding = loss_rounding(covariance)
    history: list[float] = []
    state = _run_steps(steps, tol, rounding, max_iter, history, scale)
    status = "converged" if state.closed(tol, rounding) else "max_iter"
    if status != "converged":
        warn_gap(
            "samadi-mw",
            state.lower * scale,
            state.upper * scale,
            tol,
            f"after max_iter={max_iter} oracle calls (update={update!r}; raise max_iter)",
        )
    options = {"eta": eta, "max_iter": max_iter, "tol": tol, "skip_lp": skip_lp, "update": update}
    common: dict[str, Any] = {
        "center": center,
        "covariance": covariance,
        "best": best,
        "scale": scale,
        "history": history,
        "status": status,
        "options": options,
    }
    result = _mw_projection(moments, n_components, state, **common)
    # A wider output that an optimum of rank r may explain (the mixture is only tol-accurate):
    # iterate on at tenfold tighter gaps while that brings the rank-r projection closer.
    target = tol
    for _ in range(_REFINEMENTS if status == "converged" and not skip_lp else 0):
        if result.components.shape[1] <= n_components or len(history) >= max_iter:
            break
        target /= 10.0
        state = _run_steps(steps, target, rounding, max_iter - len(history), history, scale)
        refined = _mw_projection(moments, n_components, state, **common)
        closer = _rank_r_gap(refined) <= 0.5 * _rank_r_gap(result)
        result = refined
        if not closer:
            break
    return _described(result)


@dataclass(frozen=True)
class _Bounds:
    """The state of the oracle iterations after one step: the certified bounds (normalised),
    the kept iterates (V_t, losses of V_t) and the best mixture of them."""

    lower: float
    upper: float
    pool: list[tuple[np.ndarray, np.ndarray]]
    mixture: np.ndarray

    def closed(self, tol: float, rounding: float) -> bool:
        """(upper − lower) ≤ tol · upper, or below the losses' rounding."""
        return self.upper - self.lower <= tol * max(self.upper, 0.0) + rounding


def _oracle_steps(
    covariance: np.ndarray, best: np.ndarray, n_components: int, update: str, step_size: float
) -> Iterator[_Bounds]:
    """The oracle iterations of :func:`solve_mw`, one :class:`_Bounds` per oracle call, without end."""
    k = len(best)
    weights = np.full(k, 1.0 / k)
    pool: list[tuple[np.ndarray, np.ndarray]] = []  # (V_t, losses of V_t) kept for the mixture
    lower = -np.inf
    width = 0.0
    rounding = loss_rounding(covariance)
    basis = None
    for step in itertools.count(1):
        # the weights move little per step: the previous V_t seeds the Krylov eigensolver
        value, basis = _dual_value(weights, covariance, best, n_components, start=basis)
        step_losses = losses_from_covariance(covariance, best, basis)
        lower = max(lower, value)
        pool.append((basis, step_losses))
        mixture, upper, model_weights = _best_mixture(np.array([loss for _, loss in pool]))
        # Keep the mixture's support (≤ k + 1 points) and the latest iterates: the LP stays
        # small, and any mixture of kept points is still a feasible upper bound.
        keep = sorted(set(np.flatnonzero(mixture > 0).tolist()) | set(range(max(0, len(pool) - _POOL), len(pool))))
        pool = [pool[i] for i in keep]
        yield _Bounds(lower, upper, list(pool), mixture[keep])
        if update == "cutting_plane":
            weights = model_weights
        else:
            width = width or max(float(step_losses.max()), rounding)
            weights = weights * np.exp(step_size / np.sqrt(step) * (step_losses - step_losses.max()) / width)
            weights /= weights.sum()


def _run_steps(
    steps: Iterator[_Bounds], tol: float, rounding: float, budget: int, history: list[float], scale: float
) -> _Bounds:
    """Take steps until the gap closes to ``tol`` or ``budget`` steps are taken (at least one);
    each step's upper bound, in the data's units, is appended to ``history``."""
    for _ in range(max(budget, 1)):
        state = next(steps)
        history.append(state.upper * scale)
        if state.closed(tol, rounding):
            break
    return state


def _mw_projection(
    moments: GroupMoments,
    n_components: int,
    state: _Bounds,
    *,
    center: Center,
    covariance: np.ndarray,
    best: np.ndarray,
    scale: float,
    history: list[float],
    status: str,
    options: dict[str, Any],
) -> FairProjection:
    """samadi-mw's result from the iterations' state: one projector as it is, a mixture rounded."""
    certificate = {"lower_bound": state.lower * scale, "upper_bound": state.upper * scale}
    used = np.flatnonzero(state.mixture > 1e-12)
    if used.size == 1:  # one projector: already a rank-r solution
        return make_projection(
            moments,
            fix_signs(state.pool[used[0]][0]),
            method="samadi-mw",
            n_components=n_components,
            center=center,
            objective_history=list(history),
            n_iter=len(history),
            status=status,
            certificate=certificate,
            options=options,
            best=best * scale,
        )
    span, relaxed_weights = _mixture_eigen([state.pool[t][0] for t in used], state.mixture[used])
    return _rounded_projection(
        moments,
        n_components,
        method="samadi-mw",
        center=center,
        basis=span,
        relaxed_weights=relaxed_weights,
        covariance=covariance,
        best=best,
        scale=scale,
        relaxed_value=state.upper,
        objective_history=list(history),
        n_iter=len(history),
        status=status,
        certificate=certificate,
        options=options,
        rank_tolerance=float(options["tol"]),
    )


def _rank_r_gap(result: FairProjection) -> float:
    """How far the rank-r projection of a wider result is above its lower bound (0 at rank r)."""
    if result.components.shape[1] <= result.n_components:
        return 0.0
    return result.details["rank_r_loss"] - result.certificate["lower_bound"]


def _mixture_eigen(iterates: list[np.ndarray], mixture: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of P = Σ_t α_t V_t V_tᵀ, computed in the span of the V_t."""
    left, singular, _ = np.linalg.svd(np.hstack(iterates), full_matrices=False)
    span = left[:, singular > singular[0] * 1e-10]
    small = sum(a * (span.T @ v) @ (span.T @ v).T for a, v in zip(mixture, iterates, strict=True))
    values, vectors = np.linalg.eigh((small + small.T) / 2.0)
    return span @ vectors[:, ::-1], np.clip(values[::-1], 0.0, 1.0)
