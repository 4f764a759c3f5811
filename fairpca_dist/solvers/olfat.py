"""Olfat & Aswani (2019), "Convex formulations for fair principal component analysis" (FPCA).

The baseline of Lee et al. (AAAI 2022, seeds/004) and Vu et al. (ICLR 2022, seeds/003); spec
spec/seed-004.md §1.7 (b), §6 E16. With two groups s ∈ {0, 1}, f = μ_1 − μ_0 (difference of
the group means) and Q = Σ_1 − Σ_0 (group covariances about their own means, divisor n_s),
projected groups with equal means and covariances cannot be told apart by a linear classifier
under a Gaussian model (Pinsker, SP B.1). Relaxing V Vᵀ to P gives the SDP (the paper's Eq. 14)

    maximise  ⟨Σ, P⟩ − μ t
    s.t.      0 ⪯ P ⪯ I,   tr P ≤ r,   ⟨P, f fᵀ⟩ ≤ δ²,
              [[t I, P M_±], [M_±ᵀ P, I]] ⪰ 0      (⇔ ‖M_±ᵀ P‖₂² = λ_max(P M_± M_±ᵀ P) ≤ t),

with M_± M_±ᵀ = ±Q + φ I, φ ≥ ‖Q‖₂ and Σ the covariance of all rows about the global mean.
On a projector P = V Vᵀ the two LMIs read t ≥ ‖VᵀQV‖₂ + φ (the paper's Eq. 18), so μ weighs
the projected covariance gap against the kept variance. The output V holds the top-r
eigenvectors of P*.

Everything is a function of the group counts, means and covariances: FPCA runs on
:class:`~fairpca_dist.engine.moments.GroupMoments` alone.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import ConvergenceWarning, InputError, SolverError
from fairpca_dist.extras import require
from fairpca_dist.solvers import checks, conic
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import top_eigenvectors

__all__ = ["solve", "fairness_terms", "covariance_factors", "FORMULATIONS", "SDP_SOLVERS"]

FORMULATIONS = ("code", "paper")
SDP_SOLVERS = ("auto", "CLARABEL", "SCS")
# Same reasoning as samadi._SCS_TOLERANCE: SCS's default eps (1e-4) is absolute on the
# normalised problem (tr Σ = 1), far too loose for the small gaps the constraints control.
_SCS_TOLERANCE = 1e-7
# Clarabel's own 1e-8 ended 'optimal_inaccurate' on 17 of 160 random p = 5 problems (δ, μ mixed),
# with solutions equal to those at 1e-7, which converged on 159 of them.
_CLARABEL_TOLERANCE = 1e-7


def fairness_terms(moments: GroupMoments) -> tuple[np.ndarray, np.ndarray]:
    """(f, Q) = (μ_1 − μ_0, Σ_1 − Σ_0) for exactly two groups, in the order of ``moments.groups``.

    Means are differenced about one reference point (:meth:`GroupMoments.means_about`) so that
    large column offsets lose no digits; covariances are about each group's own mean, divisor n_s
    (the authors' normalisation).
    """
    if moments.n_groups != 2:
        raise InputError(
            f"olfat-sdp compares exactly two groups, got {moments.n_groups}: {list(moments.groups)}; "
            "merge groups into two (e.g. one group against the rest) before fitting"
        )
    means = moments.means_about(moments.origin[0])
    covariance = moments.covariance("group")
    return means[1] - means[0], covariance[1] - covariance[0]


def covariance_factors(q: np.ndarray, formulation: str, phi: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Factors (M_+, M_−) with M_± M_±ᵀ = ±Q + c_± I, from the eigendecomposition Q = W diag(L) Wᵀ.

    ``"paper"``: c_± = φ (default ‖Q‖₂). The paper takes Cholesky factors; any two factors of
    one matrix differ by an orthogonal factor on the right (M ↦ M U), which leaves
    λ_max(P M Mᵀ P) and hence the LMI unchanged, and the eigen-factor also exists when
    ±Q + φI is singular (φ = ‖Q‖₂). ``"code"``: separate shifts c_+ = max(0, −min L),
    c_− = max(0, max L), as in the authors' code.
    """
    values, vectors = np.linalg.eigh((q + q.T) / 2.0)
    if formulation == "paper":
        shift = float(np.abs(values).max()) if phi is None else phi
        plus, minus = values + shift, -values + shift
    else:
        plus, minus = values + max(0.0, -values.min()), -values + max(0.0, values.max())
    return vectors * np.sqrt(np.clip(plus, 0.0, None)), vectors * np.sqrt(np.clip(minus, 0.0, None))


def _check_phi(phi: float | None, formulation: str, q: np.ndarray) -> float | None:
    if phi is None:
        return None
    if formulation != "paper":
        raise InputError(f"phi={phi!r} applies only to formulation='paper' (the code shifts each factor itself)")
    phi = checks.number("phi", phi)
    norm = float(np.linalg.norm(q, 2))
    if phi < norm * (1.0 - 1e-12):
        raise InputError(f"phi={phi:g} must be >= ||Q||_2 = {norm:g} so that ±Q + phi·I are positive semidefinite")
    return phi


def _solve_sdp(problem, name: str, tolerance: float | None) -> None:
    if tolerance is None:
        tolerance = _SCS_TOLERANCE if name == "SCS" else _CLARABEL_TOLERANCE
    status = conic.solve(problem, name, conic.tolerance_settings(name, tolerance), what="SDP solver")
    if status == "optimal_inaccurate":
        warnings.warn(
            f"olfat-sdp: {name} stopped at reduced accuracy ('optimal_inaccurate'); "
            "a looser tolerance= or solver='SCS' may converge",
            ConvergenceWarning,
            stacklevel=3,
        )


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    delta: float = 0.0,
    mu: float = 1.0,
    formulation: str = "code",
    phi: float | None = None,
    solver: str = "auto",
    tolerance: float | None = None,
) -> FairProjection:
    """FPCA by the convex SDP of Olfat & Aswani 2019 (method ``"olfat-sdp"``; module docstring).

    Parameters
    ----------
    delta : float
        δ ≥ 0, tolerance of the mean constraint ‖Vᵀf‖ ≤ δ (data units). δ = 0 removes the
        projected mean gap exactly (Vᵀf = 0 to rounding; see Notes).
    mu : float
        μ ≥ 0, weight of the covariance penalty. Σ and Q have the same units, so μ is
        dimensionless: kept variance is traded one for μ against the covariance term (default 1,
        our choice; the papers' μ are in other units, see Notes). μ = 0 and δ ≥ ‖f‖ give PCA.
    formulation : {"code", "paper"}
        ``"code"`` (default, what Lee et al.'s baseline runs): tr P = r, two variables t_± (one
        per LMI) penalised by μ (t_+ + t_−), factors with separate shifts; ``"paper"``: Eq. 14
        as printed, tr P ≤ r, one t in both LMIs, factors of ±Q + φI. See Notes.
    phi : float, optional
        φ ≥ ‖Q‖₂ for ``"paper"`` (default ‖Q‖₂, the smallest allowed); refused with ``"code"``.
    solver : {"auto", "CLARABEL", "SCS"}
        ``"auto"``: Clarabel below 50 features, SCS from 50 on (spec/stack.md §6).
    tolerance : float, optional
        Solver accuracy (Clarabel gap/feasibility tolerances, SCS ``eps_abs``/``eps_rel``);
        default 1e-7 for both (Clarabel's own 1e-8 often ends 'optimal_inaccurate' here). Σ, Q
        and δ² are divided by tr Σ before solving (same optimum), so tolerances are relative to
        the total variance.
    center : which per-group moments the reported losses use. f and Q are always about the
        group means (the paper's Gaussian argument).
    random_state : ignored (deterministic).

    Returns
    -------
    FairProjection
        V = top-r eigenvectors of P* (orthonormal, rank r). ``certificate``: ``objective``
        (the SDP value ⟨Σ, P*⟩ − μ·penalty), ``sdp_variance`` ⟨Σ, P*⟩, ``covariance_penalty``
        (t*, or t_+* + t_−*), ``mean_gap`` ‖Vᵀf‖², ``covariance_gap`` ‖VᵀQV‖₂, ``leaked_trace``
        Σ_{j>r} λ_j(P*) and ``leaked_variance`` Σ_{j>r} λ_j(P*) u_jᵀΣu_j (the rank-to-trace
        relaxation lets weight leak beyond the r-th eigenvector, Lee et al. SP C),
        ``eigengap`` λ_r(P*) − λ_{r+1}(P*) (V is well defined only when it is not small).
        ``status``: ``"converged"`` (cvxpy ``optimal``), ``"inaccurate"``
        (``optimal_inaccurate``) or ``"infeasible"``: then the components are plain PCA's, the
        SDP values are NaN and a :class:`ConvergenceWarning` says why. Only ``"code"`` can be
        infeasible, when r = p and ‖f‖ > δ (tr P = p forces P = I).

    Notes
    -----
    Differences between the paper's Eq. 14, the authors' code (Lee et al.'s FPCA/*.py, as read
    in spec/seed-004.md §1.7 b) and this function:

    - Trace: Eq. 14 has tr P ≤ r, the code tr P = r (``formulation`` chooses). With μ > 0
      the inequality may leave tr P* < r.
    - Covariance penalty: Eq. 14 has one t shared by both LMIs, whose projector value is
      ‖VᵀQV‖₂ + φ; the code has t_± per LMI and penalises t_+ + t_−, whose projector value is
      λ_max(VᵀQV) − λ_min(VᵀQV) + c_+ + c_−: the *spread* of the projected gap, which is zero
      for VᵀQV = cI (and constant over all projectors when r = 1), not ‖VᵀQV‖₂.
    - Factors: Eq. 14 takes Cholesky factors of ±Q + φI with one φ ≥ ‖Q‖₂; the code takes
      eigen-factors with separate shifts (:func:`covariance_factors`). Eq. 14's first LMI is
      printed with blocks P M_+ᵀ / P M_+, which is not symmetric; we read it as the second one.
    - Objective scaling: Eq. 14 uses XᵀX = N·Σ (so μ_paper = N·μ); the code minimises
      −⟨XᵀX, P⟩ / (N ‖X‖_F) + μ_code (t_+ + t_−) (so μ = μ_code · ‖X‖_F, with ‖X‖_F² = N tr Σ).
      We use ⟨Σ, P⟩ so that μ does not depend on the number of rows.
    - Standardisation: the code re-centres and scales every column to unit variance inside
      the solver. Here standardisation is the caller's choice (``fit_projection(...,
      standardize=True)``), so f, Q and Σ are in the units of the moments given.
    - δ = 0 (the code's equality ⟨P, ffᵀ⟩ = 0) is imposed by solving for P = B P̃ Bᵀ, B an
      orthonormal basis of f⊥: the same set (P ⪰ 0, fᵀPf = 0 ⇔ Pf = 0), without the loss of
      strict feasibility that cost Clarabel 2e-4 relative accuracy. Constraints that cannot
      bind are left out: the mean constraint when δ ≥ ‖f‖, the LMIs when μ = 0.
    - Lee et al.'s Table 1 prints FPCA's tuples as (μ, δ); they are (δ, μ) (spec §6 E16).
    - Two groups only, as in the paper (group "1" is the second of ``moments.groups``; swapping
      them changes f, Q to −f, −Q and leaves both formulations unchanged).

    References: Olfat & Aswani, AAAI 2019, §4–5 (Eqs. 13–14, 18); Lee et al., AAAI 2022, §3.1,
    SP B–C; spec/seed-004.md §1.7 (b), §4.5, §6 E16.
    """
    delta = checks.number("delta", delta)
    mu = checks.number("mu", mu)
    formulation = checks.choice("formulation", formulation, FORMULATIONS)
    solver = checks.choice("solver", solver, SDP_SOLVERS)
    if tolerance is not None:
        tolerance = checks.number("tolerance", tolerance, strict=True)
    f, q = fairness_terms(moments)
    phi = _check_phi(phi, formulation, q)
    covariance = moments.total_covariance()
    scale = float(np.trace(covariance))
    if not scale > 0:
        raise SolverError("all rows are equal (zero total variance): there is nothing to project")
    p, r = moments.n_features, n_components
    name = ("SCS" if p >= 50 else "CLARABEL") if solver == "auto" else solver
    options = {"delta": delta, "mu": mu, "formulation": formulation, "phi": phi, "solver": name, "tolerance": tolerance}
    if formulation == "code" and r == p and float(f @ f) > delta**2:
        return _infeasible(
            moments,
            covariance,
            f,
            q,
            r,
            center,
            options,
            f"tr P = r = p forces P = I, whose mean gap ||f||^2 = {float(f @ f):.3g} > delta^2",
        )
    # δ = 0: P ⪰ 0 and fᵀPf = 0 mean Pf = 0, i.e. P = B P̃ Bᵀ with B an orthonormal basis of f⊥.
    # Solving for P̃ imposes the constraint exactly and keeps the SDP strictly feasible (the
    # equality costs interior-point solvers several digits: 2e-4 relative on a p = 4 example).
    basis = scipy.linalg.null_space(f[None, :]) if delta == 0 else np.eye(p)
    factors = covariance_factors(q / scale, formulation, None if phi is None else phi / scale)
    # ⟨P, ffᵀ⟩ ≤ ‖f‖² on 0 ⪯ P ⪯ I: a larger δ² leaves the constraint out (a huge bound upsets Clarabel)
    bound = delta**2 / scale if 0 < delta**2 < float(f @ f) else 0.0
    matrix, problem = _build(
        basis.T @ covariance @ basis / scale,
        basis.T @ f / np.sqrt(scale),
        bound,
        [basis.T @ factor for factor in factors] if mu > 0 else [],
        mu=mu,
        n_components=r,
        formulation=formulation,
    )
    _solve_sdp(problem, name, tolerance)
    if problem.status in ("infeasible", "infeasible_inaccurate"):
        return _infeasible(moments, covariance, f, q, r, center, options, f"{name} reports {problem.status!r}")
    if problem.status not in ("optimal", "optimal_inaccurate") or matrix.value is None:
        raise SolverError(f"SDP solver {name} ended with status {problem.status!r}")
    relaxed = basis @ ((matrix.value + matrix.value.T) / 2.0) @ basis.T
    values, basis = scipy.linalg.eigh(relaxed)
    values, basis = values[::-1], basis[:, ::-1]
    _, components = top_eigenvectors(relaxed, r)
    tail = basis[:, r:]
    certificate = {
        "objective": float(problem.value) * scale,
        "sdp_variance": float(np.sum(covariance * relaxed)),
        "covariance_penalty": _penalty(relaxed, q, formulation, phi),
        "leaked_trace": float(values[r:].sum()),
        "leaked_variance": float(values[r:] @ np.sum(tail * (covariance @ tail), axis=0)),
        "eigengap": float(values[r - 1] - (values[r] if r < p else 0.0)),
        **_gaps(components, f, q),
    }
    return make_projection(
        moments,
        components,
        method="olfat-sdp",
        n_components=r,
        center=center,
        objective_history=[certificate["objective"]],
        n_iter=int(problem.solver_stats.num_iters or 0),
        status="converged" if problem.status == "optimal" else "inaccurate",
        certificate=certificate,
        options=options,
    )


def _build(
    covariance: np.ndarray,
    f: np.ndarray,
    bound: float,
    factors: list[np.ndarray],
    *,
    mu: float,
    n_components: int,
    formulation: str,
):
    """The cvxpy problem on normalised data, in the coordinates of the basis: (P̃, problem).

    The mean constraint is left out when ``bound`` is 0 (the basis already spans f⊥, or δ ≥ ‖f‖), the
    LMIs when ``factors`` is empty (μ = 0: t would be free and the problem dual-degenerate)."""
    cp = require("cvxpy", extra="conic", feature="method 'olfat-sdp'")

    m = covariance.shape[0]
    identity = np.eye(m)
    matrix = cp.Variable((m, m), symmetric=True)
    bounds = cp.Variable(2 if formulation == "code" else 1)
    slack = [bounds[0], bounds[1]] if formulation == "code" else [bounds[0], bounds[0]]
    trace = cp.trace(matrix) == n_components if formulation == "code" else cp.trace(matrix) <= n_components
    constraints = [matrix >> 0, identity - matrix >> 0, trace]
    if bound > 0:
        constraints.append(f @ matrix @ f <= bound)
    for t, factor in zip(slack, factors, strict=False):  # factors is empty when μ = 0 (no LMIs)
        block = matrix @ factor
        constraints.append(cp.bmat([[t * identity, block], [block.T, np.eye(factor.shape[1])]]) >> 0)
    penalty = mu * cp.sum(bounds) if factors else 0.0
    problem = cp.Problem(cp.Maximize(cp.sum(cp.multiply(covariance, matrix)) - penalty), constraints)
    return matrix, problem


def _penalty(relaxed: np.ndarray, q: np.ndarray, formulation: str, phi: float | None) -> float:
    """The covariance penalty at P* with the smallest feasible t: λ_max(P M_± M_±ᵀ P), summed over
    ± (``"code"``) or their maximum (``"paper"``), in data units (t itself is free when μ = 0)."""
    tops = [
        float(np.linalg.eigvalsh(relaxed @ factor @ factor.T @ relaxed)[-1])
        for factor in covariance_factors(q, formulation, phi)
    ]
    return sum(tops) if formulation == "code" else max(tops)


def _gaps(components: np.ndarray, f: np.ndarray, q: np.ndarray) -> dict[str, float]:
    """‖Vᵀf‖² and ‖VᵀQV‖₂ at the output components."""
    projected = components.T @ f
    return {
        "mean_gap": float(projected @ projected),
        "covariance_gap": float(np.abs(np.linalg.eigvalsh(components.T @ q @ components)).max()),
    }


def _infeasible(
    moments: GroupMoments,
    covariance: np.ndarray,
    f: np.ndarray,
    q: np.ndarray,
    n_components: int,
    center: Center,
    options: dict,
    reason: str,
) -> FairProjection:
    warnings.warn(
        f"olfat-sdp: the SDP is infeasible ({reason}); returning plain PCA components. "
        "Raise delta, lower n_components or use formulation='paper' (tr P <= r).",
        ConvergenceWarning,
        stacklevel=3,
    )
    _, components = top_eigenvectors(covariance, n_components)
    nan = float("nan")
    certificate = {
        "objective": nan,
        "sdp_variance": nan,
        "covariance_penalty": nan,
        "leaked_trace": nan,
        "leaked_variance": nan,
        "eigengap": nan,
        **_gaps(components, f, q),
    }
    return make_projection(
        moments,
        components,
        method="olfat-sdp",
        n_components=n_components,
        center=center,
        objective_history=[nan],
        n_iter=0,
        status="infeasible",
        certificate=certificate,
        options=options,
    )
