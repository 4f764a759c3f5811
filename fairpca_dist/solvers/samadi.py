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

``samadi-sdp`` solves the SDP with cvxpy; ``samadi-mw`` over a weighted-PCA oracle, which
scales to p ≈ 2000: by default with cutting planes (not in the paper), or with the paper's
multiplicative weights (Appendix A, Algorithms 2–3; ``update="multiplicative"`` or ``eta=``).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import scipy.linalg
import scipy.optimize
from scipy.optimize import linprog

from fairpca_dist.exceptions import ConvergenceWarning, InputError, SolverError
from fairpca_dist.metrics import best_rank_variance, loss_rounding, losses_from_covariance
from fairpca_dist.moments import Center, GroupMoments
from fairpca_dist.solvers import checks, conic
from fairpca_dist.solvers.result import FairProjection, make_projection, warn_gap, with_status
from fairpca_dist.solvers.stiefel import fix_signs, top_eigenvectors

__all__ = ["solve_sdp", "solve_mw", "round_relaxation", "lp_vertex"]

_ROUND = 1e-9  # λ within this of 0 or 1 is integral
_POOL = 32  # latest MW iterates offered to the primal mixture besides its current support


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
    if result.status != 0:
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
        rest = [j for j in np.argsort(-relaxed_weights, kind="stable") if j not in set(positive)]
        chosen = np.concatenate([positive, rest[: n_components - positive.size]]).astype(int)
        return fix_signs(basis[:, chosen]), weights
    order = positive[np.argsort(-weights[positive], kind="stable")]
    root = np.sqrt(1.0 - np.sqrt(1.0 - weights[order]))
    return fix_signs(basis[:, order] * root), weights


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
) -> FairProjection:
    components, weights = round_relaxation(
        basis, relaxed_weights, covariance, best, n_components, skip_lp=bool(options.get("skip_lp"))
    )
    fractional = int(np.sum((weights > 0.0) & (weights < 1.0)))
    rounded = float(losses_from_covariance(covariance, best, components).max()) * scale
    if components.shape[1] <= n_components:
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
        certificate={**certificate, "relaxation_value": relaxed_value * scale, "rounded_value": rounded,
                     "fractional_weights": float(fractional), "output_rank": float(components.shape[1])},
        options=options,
        best=best * scale,
    )


# ----------------------------------------------------------------------------- SDP
# SCS's default eps (1e-4) is absolute on the normalised problem (best rank-r variance 1), while
# fair losses are often ~1e-3 of it: on LFW at p = 50 the rounded max loss came out 6 % above the
# optimum and at p = 200 the "lower bound" exceeded the rounded value. 1e-7 gives 3e-6 relative
# for 1.0-1.3x the time (0.15 s at p = 50, 1.2 s at p = 200; benchmarks/results/samadi_timing.md).
_SCS_TOLERANCE = 1e-7
_SDP_GAP = 1e-3  # a certified relative gap above this is the conic solver's inaccuracy: warned
_POLISH_EVALUATIONS = 60  # dual evaluations per group to improve the solver's multipliers' bound


def _sdp_solver(solver: str, n_features: int) -> str:
    if solver == "auto":
        return "SCS" if n_features >= 50 else "CLARABEL"
    return solver.upper()


def _dual_value(weights: np.ndarray, covariance: np.ndarray, best: np.ndarray, n_components: int, *,
                start: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """The Lagrangian dual of the Fantope problem at group weights w on the simplex, a lower
    bound on its optimum: for every P, max_g (β_g − ⟨Σ_g, P⟩) ≥ Σ_g w_g β_g − Σ_{i≤r} λ_i(Σ_g w_g Σ_g);
    and the top-r eigenvectors V_w that attain the inner maximum. ``start`` seeds the Krylov
    eigensolver (the previous V_w when the weights moved little)."""
    values, basis = top_eigenvectors(np.tensordot(weights, covariance, axes=1), n_components, start=start)
    return float(weights @ best - values.sum()), basis


def _polished_dual(weights: np.ndarray, value: float, covariance: np.ndarray, best: np.ndarray,
                   n_components: int) -> float:
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
    scipy.optimize.minimize(negative, start, method="Nelder-Mead",
                            options={"maxfev": _POLISH_EVALUATIONS * k, "xatol": 1e-10, "fatol": 0.0,
                                     "initial_simplex": simplex})
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
    Result: rank ≤ r + k − 1 and max_g loss_g ≤ OPT_r (Theorems 5.1–5.2).

    Parameters
    ----------
    solver : {"auto", "CLARABEL", "SCS"}
        ``"auto"``: Clarabel below 50 features, SCS from 50 on (Clarabel's time grows like
        p⁶: 208 s at p = 100, spec/stack.md §6).
    tolerance : float, optional
        Solver accuracy (Clarabel gap/feasibility tolerances, SCS ``eps_abs``/``eps_rel``).
        Default: Clarabel's own (1e-8), and 1e-7 for SCS instead of its 1e-4, which leaves
        losses of ~1e-3 (normalised) several percent off.
    skip_lp : bool
        Apply the square-root map to P̂'s eigenbasis without the LP (the authors' code);
        the rank bound then no longer holds.
    random_state : ignored (deterministic).

    Notes
    -----
    The certificate holds ``lower_bound`` (the Lagrangian dual value at the solver's group
    multipliers, a lower bound on the rank-r optimum whatever the solver's accuracy),
    ``relaxation_value`` (the solver's SDP value, accurate to its tolerance) and
    ``rounded_value`` (max_g loss_g of the output); for two groups the relaxation is tight
    (hidden convexity). The solver's tolerance applies to losses normalised by max_g β_g(r);
    where the output's loss is more than 0.1 % above the lower bound (losses many orders of
    magnitude below β, as with features of very different scales and r near p), the status is
    ``"inaccurate"`` with a :class:`~fairpca_dist.exceptions.ConvergenceWarning`.
    """
    import cvxpy as cp

    covariance, best, scale = _problem(moments, n_components, center)
    p = moments.n_features
    matrix = cp.Variable((p, p), symmetric=True)
    worst = cp.Variable()
    constraints = [matrix >> 0, np.eye(p) - matrix >> 0, cp.trace(matrix) == n_components]
    groups = [worst >= best[g] - cp.sum(cp.multiply(covariance[g], matrix)) for g in range(len(best))]
    problem = cp.Problem(cp.Minimize(worst), constraints + groups)
    name = _sdp_solver(solver, p)
    settings = conic.tolerance_settings(name, _SCS_TOLERANCE if tolerance is None and name == "SCS" else tolerance)
    status = conic.solve(problem, name, settings, what="SDP solver")
    if status not in ("optimal", "optimal_inaccurate") or matrix.value is None:
        raise SolverError(f"SDP solver {name} ended with status {status!r}")
    values, basis = scipy.linalg.eigh((matrix.value + matrix.value.T) / 2.0)
    relaxed = float(worst.value)
    # the solver's values are accurate to its tolerance only (SCS: the primal value can pass the
    # rounded one); the dual at its group multipliers is a bound whatever their accuracy
    weights = np.maximum(np.array([float(np.asarray(c.dual_value)) for c in groups]), 0.0)
    weights = weights / weights.sum() if weights.sum() > 0 else np.full(len(best), 1.0 / len(best))
    dual = _dual_value(weights, covariance, best, n_components)[0]
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
        n_iter=int(problem.solver_stats.num_iters or 0),
        status="converged",
        certificate={"lower_bound": dual * scale},
        options={"solver": name, "tolerance": tolerance, "skip_lp": skip_lp},
    )
    # The solver's own status is not the verdict: its tolerance applies to losses normalised by
    # max_g β_g(r), so its multipliers or its primal can be far off where the losses are far
    # smaller than β (features of very different scales, r near p) or the tolerance is loose,
    # and an 'optimal_inaccurate' run can still be certified. The certified gap decides.
    lower, upper = result.certificate["lower_bound"], result.certificate["rounded_value"]
    allowed = _SDP_GAP * abs(upper) + loss_rounding(covariance) * scale
    if upper - lower > allowed:  # a better bound first
        lower = _polished_dual(weights, dual, covariance, best, n_components) * scale
        result = replace(result, certificate={**result.certificate, "lower_bound": lower})
    if upper - lower > allowed:
        used = settings.get("eps_abs", settings.get("tol_gap_abs", 1e-8))
        stopped = (f"{name} met its tolerance ({used:g}), but" if status == "optimal"
                   else f"{name} stopped at reduced accuracy ({status!r}, tolerance {used:g}), and")
        warnings.warn(
            f"samadi-sdp: {stopped} the output's largest loss {upper:.6g} is {(upper - lower) / abs(upper):.1%} "
            f"above the certified lower bound {lower:.6g}: the tolerance applies to losses divided by the largest "
            f"group's best variance β, and these are {abs(upper) / scale:.1e} of β (a tighter tolerance; fair-eig "
            "for two groups or samadi-mw, which certify their own gap; or standardize=True)",
            ConvergenceWarning, stacklevel=2)
        result = with_status(result, "inaccurate")
    return result


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
    result = linprog(cost, A_ub=upper, b_ub=np.zeros(k), A_eq=equal, b_eq=[1.0],
                     bounds=[(0.0, None)] * n_iterates + [(None, None)], method="highs-ds")
    if result.status != 0:
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
    (:func:`~fairpca_dist.metrics.loss_rounding`: every loss zero, as at r = p).

    Parameters
    ----------
    eta : float, optional
        Initial step size of the multiplicative update (default 1); step t uses η/√t on losses
        divided by the largest loss of the first iterate (the equal-weight PCA), so that the
        step is scale free.
    max_iter : int
        Oracle calls at most (each one top-r eigendecomposition of a p × p matrix).
    tol : float
        Relative gap at which to stop.
    skip_lp : bool
        Skip the LP (the authors' code), keeping only the square-root map.
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
    k = len(best)
    if update == "auto":
        update = "cutting_plane" if eta is None else "multiplicative"
    if update == "cutting_plane" and eta is not None:
        raise InputError(f"samadi-mw: eta={eta:g} is the step of update='multiplicative'; this fit uses "
                         "update='cutting_plane', which has no step")
    step_size = 1.0 if eta is None else eta
    weights = np.full(k, 1.0 / k)
    pool: list[tuple[np.ndarray, np.ndarray]] = []  # (V_t, losses of V_t) kept for the mixture
    lower = -np.inf
    width = 0.0
    rounding = loss_rounding(covariance)
    history: list[float] = []
    status = "max_iter"
    basis = None
    for step in range(1, max_iter + 1):
        # the weights move little per step: the previous V_t seeds the Krylov eigensolver
        value, basis = _dual_value(weights, covariance, best, n_components, start=basis)
        step_losses = losses_from_covariance(covariance, best, basis)
        lower = max(lower, value)
        pool.append((basis, step_losses))
        mixture, upper, model_weights = _best_mixture(np.array([loss for _, loss in pool]))
        # Keep the mixture's support (≤ k + 1 points) and the latest iterates: the LP stays
        # small, and any mixture of kept points is still a feasible upper bound.
        keep = set(np.flatnonzero(mixture > 0).tolist()) | set(range(max(0, len(pool) - _POOL), len(pool)))
        pool = [pool[i] for i in sorted(keep)]
        mixture = mixture[sorted(keep)]
        history.append(upper * scale)
        if upper - lower <= tol * max(upper, 0.0) + rounding:
            status = "converged"
            break
        if update == "cutting_plane":
            weights = model_weights
        else:
            width = width or max(float(step_losses.max()), rounding)
            weights = weights * np.exp(step_size / np.sqrt(step) * (step_losses - step_losses.max()) / width)
            weights /= weights.sum()
    certificate = {"lower_bound": lower * scale, "upper_bound": upper * scale}
    if status != "converged":
        warn_gap("samadi-mw", lower * scale, upper * scale, tol,
                 f"after max_iter={max_iter} oracle calls (update={update!r}; raise max_iter)")
    options = {"eta": eta, "max_iter": max_iter, "tol": tol, "skip_lp": skip_lp, "update": update}
    used = np.flatnonzero(mixture > 1e-12)
    if used.size == 1:  # one projector: already a rank-r solution
        return make_projection(
            moments, fix_signs(pool[used[0]][0]), method="samadi-mw", n_components=n_components,
            center=center, objective_history=history, n_iter=len(history), status=status,
            certificate=certificate, options=options, best=best * scale,
        )
    span, relaxed_weights = _mixture_eigen([pool[t][0] for t in used], mixture[used])
    return _rounded_projection(
        moments, n_components, method="samadi-mw", center=center, basis=span,
        relaxed_weights=relaxed_weights, covariance=covariance, best=best, scale=scale,
        relaxed_value=upper, objective_history=history, n_iter=len(history),
        status=status, certificate=certificate, options=options,
    )


def _mixture_eigen(iterates: list[np.ndarray], mixture: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of P = Σ_t α_t V_t V_tᵀ, computed in the span of the V_t."""
    left, singular, _ = np.linalg.svd(np.hstack(iterates), full_matrices=False)
    span = left[:, singular > singular[0] * 1e-10]
    small = sum(a * (span.T @ v) @ (span.T @ v).T for a, v in zip(mixture, iterates))
    values, vectors = np.linalg.eigh((small + small.T) / 2.0)
    return span @ vectors[:, ::-1], np.clip(values[::-1], 0.0, 1.0)
