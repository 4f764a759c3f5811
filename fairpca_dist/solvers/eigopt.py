"""Exact two-group min-max fair PCA through its hidden convexity (method ``"fair-eig"``).

For two groups A, B the rank-r problem  min_{VᵀV=I} max(loss_A(V), loss_B(V))  equals its
Fantope relaxation (Samadi et al. 2018, Thm 4.5 / 5.1 case 1; Shen, Davis, Lu & Bai 2025,
"Hidden convexity of fair PCA and fast solver via eigenvalue optimization"; the EigOpt entry
of spec/anchors-fairpca.md §8). Its Lagrangian dual is one-dimensional:

    g(t) = t β_A + (1 − t) β_B − Σ_{i≤r} λ_i(t Σ_A + (1 − t) Σ_B),   t ∈ [0, 1],

concave, with g(t) ≤ OPT for every t and derivative g'(t) = loss_A(V_t) − loss_B(V_t), where
V_t holds the top-r eigenvectors of tΣ_A + (1 − t)Σ_B. The solver finds the root of g' by
safeguarded cubic (Hermite) interpolation of g on [0, 1]; each step costs one top-r
eigendecomposition, by a Krylov method warm-started from the nearest t evaluated before
(:func:`fairpca_dist.solvers.stiefel.top_eigenvectors`), and the two ends t = 0, 1 are the
eigenpairs of Σ_B and Σ_A that β_g(r) needs anyway. Every step certifies an interval: lower
bound max g(t), upper bound the smallest max-loss of the projectors V_t seen. When g' jumps
across 0 (λ_r and λ_{r+1} cross at t*), the optimum lies on the geodesic between the two
sides' bases (which rotates the swapped eigenvectors), at equal losses (a 1-D root), which
closes the gap.

EigOpt maximises g with Brent's method on g itself (``fminbnd``); using the derivative, which
costs nothing extra, converges in fewer eigendecompositions (on LFW, p = 1764, r = 1..20:
2–3 interior steps to a 10⁻⁴ certificate, where an Illinois secant needed 4–5).
"""

from __future__ import annotations

import numpy as np

from fairpca_dist.assessment.metrics import loss_rounding, losses_from_covariance
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import InputError
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.result import FairProjection, make_projection, warn_gap
from fairpca_dist.solvers.stiefel import fix_signs, geodesic_root, top_eigenvectors

__all__ = ["solve"]

# On a bracket narrower than this g' is steep (near an eigenvalue crossing) and its sign needs
# V_t to rounding accuracy: dense eigensolver. LFW (p = 1764) certifies 1e-4 on wider brackets.
_DENSE_BRACKET = 1e-6


class _Dual:
    """Evaluations of the dual g(t) with the primal projectors they produce, and the bounds.

    ``ends`` holds the top-r eigenpairs of Σ_B (t = 0) and Σ_A (t = 1), already computed for
    β_g(r); every other evaluation starts its Krylov eigensolver from the basis of the nearest
    t evaluated so far (consecutive matrices tΣ_A + (1 − t)Σ_B differ by |Δt|·‖Σ_A − Σ_B‖).
    """

    def __init__(
        self,
        covariance: np.ndarray,
        best: np.ndarray,
        n_components: int,
        ends: dict[float, tuple[np.ndarray, np.ndarray]],
    ) -> None:
        self.covariance, self.best, self.n_components = covariance, best, n_components
        self.lower, self.upper = -np.inf, np.inf
        self.solution: np.ndarray | None = None
        self.history: list[float] = []
        self.ends = ends
        self.bases: dict[float, np.ndarray] = {}
        self.rounding = loss_rounding(covariance)  # a gap below it is closed

    def evaluate(self, t: float, *, dense: bool = False) -> tuple[float, float, np.ndarray]:
        """(g(t), g'(t) = loss_A(V_t) − loss_B(V_t), V_t), recording g(t) and the max loss of
        V_t as bounds. ``dense``: LAPACK instead of the Krylov solver, whose subspace is exact
        to 10⁻⁸ only (on a bracket narrower than that, g' can turn within it)."""
        weights = np.array([t, 1.0 - t])
        if t in self.ends:
            values, basis = self.ends[t]
        else:
            nearest = min(self.bases, key=lambda s: abs(s - t)) if self.bases else None
            start = None if nearest is None else self.bases[nearest]
            values, basis = top_eigenvectors(
                np.tensordot(weights, self.covariance, axes=1), self.n_components, start=start, dense=dense
            )
        self.bases[t] = basis
        losses = losses_from_covariance(self.covariance, self.best, basis)
        value = float(weights @ self.best - values.sum())
        self.lower = max(self.lower, value)
        self.offer(basis, losses)
        return value, float(losses[0] - losses[1]), basis

    def offer(self, basis: np.ndarray, losses: np.ndarray) -> None:
        if losses.max() < self.upper:
            self.upper, self.solution = float(losses.max()), basis
        self.history.append(self.upper)

    def gap_closed(self, tol: float) -> bool:
        return self.upper - self.lower <= tol * max(self.upper, 0.0) + self.rounding


def _hermite_step(first: tuple[float, float, float], second: tuple[float, float, float]) -> float:
    """The local maximiser of the cubic Hermite interpolant of g through two points (t, g, g').

    With h = t₂ − t₁, s = (t − t₁)/h, values g₁, g₂ and scaled slopes d₁ = h g'(t₁),
    d₂ = h g'(t₂), the interpolant's derivative is p'(s) = A s² + B s + d₁ with
    A = 6(g₁ − g₂) + 3(d₁ + d₂), B = 6(g₂ − g₁) − 4d₁ − 2d₂ (Nocedal & Wright 2006, eq. (3.59));
    the maximiser is its root with p''(s) = 2As + B < 0, anywhere on the line (an extrapolation
    when both points lie on one side). NaN when there is none.
    """
    (t1, g1, slope1), (t2, g2, slope2) = first, second
    h = t2 - t1
    d1, d2 = h * slope1, h * slope2
    a = 6.0 * (g1 - g2) + 3.0 * (d1 + d2)
    b = 6.0 * (g2 - g1) - 4.0 * d1 - 2.0 * d2
    if abs(a) <= 1e-12 * (abs(b) + abs(d1)):
        roots = np.array([-d1 / b]) if b < 0 else np.array([])
    else:
        roots = np.roots([a, b, d1])
    maxima = [float(s.real) for s in np.atleast_1d(roots) if abs(s.imag) <= 1e-12 and 2.0 * a * s.real + b < 0.0]
    return t1 + maxima[0] * h if maxima else np.nan


def _bracket_root(dual: _Dual, tol: float, max_iter: int) -> tuple[float, float, np.ndarray, np.ndarray, int]:
    """Safeguarded interpolation for g'(t) = 0 on [0, 1]; returns the final bracket and its bases.

    Each step maximises the cubic Hermite interpolant of g (values and slopes,
    :func:`_hermite_step`) through the two latest points, else through the bracket's ends,
    else takes the secant of g' on the bracket: where g is smooth this converges
    superlinearly. It bisects when two steps did not halve the bracket (at an eigenvalue
    crossing g' jumps and one end would stall).
    """
    low, high = 0.0, 1.0
    value_low, slope_low, basis_low = dual.evaluate(low)
    value_high, slope_high, basis_high = dual.evaluate(high)
    points = [(low, value_low, slope_low), (high, value_high, slope_high)]
    iterations = 2
    widths = [np.inf, np.inf]
    while iterations < max_iter and not dual.gap_closed(tol) and slope_low > 0 > slope_high and high - low > 1e-15:
        width = high - low
        for t in (
            _hermite_step(points[-2], points[-1]),
            _hermite_step((low, value_low, slope_low), (high, value_high, slope_high)),
            high - slope_high * width / (slope_high - slope_low),
        ):
            if low < t < high:
                break
        if not low < t < high or width > widths[-2] / 2.0:
            t = (low + high) / 2.0
        value, slope, basis = dual.evaluate(t, dense=width < _DENSE_BRACKET)
        iterations += 1
        widths.append(width)
        points.append((t, value, slope))
        if slope > 0:
            low, value_low, slope_low, basis_low = t, value, slope, basis
        elif slope < 0:
            high, value_high, slope_high, basis_high = t, value, slope, basis
        else:
            return t, t, basis, basis, iterations
    return low, high, basis_low, basis_high, iterations


def _rotate_to_equal_losses(dual: _Dual, basis_low: np.ndarray, basis_high: np.ndarray) -> None:
    """At an eigenvalue crossing the two bracket bases span top-r eigenspaces on either side:
    move along the geodesic between them to equal losses. The losses move continuously between
    the two sides' signs, and the projectors on the way lie on the optimal face of the Fantope,
    hence the one with equal losses is optimal."""

    def difference(basis: np.ndarray) -> float:
        losses = losses_from_covariance(dual.covariance, dual.best, basis)
        return float(losses[0] - losses[1])

    basis = geodesic_root(basis_low, basis_high, difference)
    if basis is not None:
        dual.offer(basis, losses_from_covariance(dual.covariance, dual.best, basis))


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    tol: float = 1e-8,
    max_iter: int = 100,
) -> FairProjection:
    """Exact two-group fair PCA by 1-D eigenvalue optimisation (method ``"fair-eig"``).

    Minimises max(loss_A(V), loss_B(V)) over orthonormal p × r V (module docstring).

    Parameters
    ----------
    tol : float
        Stop when the certified interval [lower, upper] satisfies upper − lower ≤ tol · upper.
    max_iter : int
        Eigendecompositions at most.
    random_state : ignored (deterministic).

    Returns
    -------
    FairProjection
        Orthonormal rank-r components; ``certificate`` holds ``lower_bound`` (dual value) and
        ``upper_bound`` (the output's max loss).
    """
    if moments.n_groups != 2:
        raise InputError(
            f"fair-eig solves two-group problems; the data have {moments.n_groups} groups (use samadi-mw or samadi-sdp)"
        )
    max_iter = checks.integer("max_iter", max_iter, minimum=2)
    tol = checks.number("tol", tol, strict=True)
    covariance = moments.covariance(center)
    # β_g(r) = Σ_{i≤r} λ_i(Σ_g) from the same eigenpairs the dual needs at t = 1 (Σ_A), t = 0 (Σ_B)
    pairs = [top_eigenvectors(matrix, n_components) for matrix in covariance]
    best = np.array([values.sum() for values, _ in pairs])
    scale = max(float(best.max()), np.finfo(float).tiny)
    ends = {1.0: (pairs[0][0] / scale, pairs[0][1]), 0.0: (pairs[1][0] / scale, pairs[1][1])}
    dual = _Dual(covariance / scale, best / scale, n_components, ends)
    _, _, basis_low, basis_high, iterations = _bracket_root(dual, tol, max_iter)
    if not dual.gap_closed(tol):
        _rotate_to_equal_losses(dual, basis_low, basis_high)
    assert dual.solution is not None
    closed = dual.gap_closed(tol)
    if not closed:
        warn_gap(
            "fair-eig",
            dual.lower * scale,
            dual.upper * scale,
            tol,
            f"after max_iter={max_iter} eigendecompositions (raise max_iter)",
        )
    return make_projection(
        moments,
        fix_signs(dual.solution),
        method="fair-eig",
        n_components=n_components,
        center=center,
        objective_history=[value * scale for value in dual.history],
        n_iter=iterations,
        status="converged" if closed else "max_iter",
        certificate={"lower_bound": dual.lower * scale, "upper_bound": dual.upper * scale},
        options={"tol": tol, "max_iter": max_iter},
        best=best,
    )
