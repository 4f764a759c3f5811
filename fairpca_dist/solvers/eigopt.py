"""Exact two-group min-max fair PCA through its hidden convexity (method ``"fair-eig"``).

For two groups A, B the rank-r problem  min_{VᵀV=I} max(loss_A(V), loss_B(V))  equals its
Fantope relaxation (Samadi et al. 2018, Thm 4.5 / 5.1 case 1; Shen, Davis, Lu & Bai 2025,
"Hidden convexity of fair PCA and fast solver via eigenvalue optimization"; the EigOpt entry
of spec/anchors-fairpca.md §8). Its Lagrangian dual is one-dimensional:

    g(t) = t β_A + (1 − t) β_B − Σ_{i≤r} λ_i(t Σ_A + (1 − t) Σ_B),   t ∈ [0, 1],

concave, with g(t) ≤ OPT for every t and derivative g'(t) = loss_A(V_t) − loss_B(V_t), where
V_t holds the top-r eigenvectors of tΣ_A + (1 − t)Σ_B. The solver finds the root of g' by a
safeguarded secant (Illinois) iteration on [0, 1]; each step costs one top-r
eigendecomposition. Every step certifies an interval: lower bound max g(t), upper bound the
smallest max-loss of the projectors V_t seen. When g' jumps across 0 (λ_r and λ_{r+1} cross at
t*), the optimum rotates the swapped eigenvector pair, v(θ) = cos θ a + sin θ b, to equal
losses (a 1-D root in θ), which closes the gap.

EigOpt maximises g with Brent's method on g itself (``fminbnd``); using the derivative, which
costs nothing extra, converges in fewer eigendecompositions.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from fairpca_dist.exceptions import InputError
from fairpca_dist.metrics import best_rank_variance, losses_from_covariance
from fairpca_dist.moments import Center, GroupMoments
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import fix_signs, top_eigenvectors

__all__ = ["solve"]


class _Dual:
    """Evaluations of the dual g(t) with the primal projectors they produce, and the bounds."""

    def __init__(self, covariance: np.ndarray, best: np.ndarray, n_components: int) -> None:
        self.covariance, self.best, self.n_components = covariance, best, n_components
        self.lower, self.upper = -np.inf, np.inf
        self.solution: np.ndarray | None = None
        self.history: list[float] = []

    def slope(self, t: float) -> tuple[float, np.ndarray]:
        """g'(t) = loss_A(V_t) − loss_B(V_t), recording g(t) and max loss of V_t as bounds."""
        weights = np.array([t, 1.0 - t])
        values, basis = top_eigenvectors(np.tensordot(weights, self.covariance, axes=1), self.n_components)
        losses = losses_from_covariance(self.covariance, self.best, basis)
        self.lower = max(self.lower, float(weights @ self.best - values.sum()))
        self.offer(basis, losses)
        return float(losses[0] - losses[1]), basis

    def offer(self, basis: np.ndarray, losses: np.ndarray) -> None:
        if losses.max() < self.upper:
            self.upper, self.solution = float(losses.max()), basis
        self.history.append(self.upper)

    def gap_closed(self, tol: float) -> bool:
        return self.upper - self.lower <= tol * max(self.upper, 1e-15)


def _secant_root(dual: _Dual, tol: float, max_iter: int) -> tuple[float, float, np.ndarray, np.ndarray, int]:
    """Illinois iteration for g'(t) = 0 on [0, 1]; returns the final bracket and its bases."""
    low, high = 0.0, 1.0
    slope_low, basis_low = dual.slope(low)
    slope_high, basis_high = dual.slope(high)
    iterations = 2
    side = 0
    while iterations < max_iter and not dual.gap_closed(tol) and slope_low > 0 > slope_high and high - low > 1e-15:
        t = high - slope_high * (high - low) / (slope_high - slope_low)
        if not low < t < high:
            t = (low + high) / 2.0
        slope, basis = dual.slope(t)
        iterations += 1
        if slope > 0:
            low, slope_low, basis_low = t, slope, basis
            slope_high = slope_high / 2.0 if side == 1 else slope_high
            side = 1
        elif slope < 0:
            high, slope_high, basis_high = t, slope, basis
            slope_low = slope_low / 2.0 if side == -1 else slope_low
            side = -1
        else:
            return t, t, basis, basis, iterations
    return low, high, basis_low, basis_high, iterations


def _rotate_swapped_pair(dual: _Dual, basis_low: np.ndarray, basis_high: np.ndarray) -> None:
    """At an eigenvalue crossing the two bracket bases differ in one direction; rotate it.

    With V_low = [C, a] and V_high = [C, b] (C the shared r − 1 directions), the losses of
    [C, cos θ a + sin θ b] move continuously between the two sides' signs, so an equal-loss
    θ exists; that projector lies on the optimal face of the Fantope, hence is optimal.
    """
    cosines = np.linalg.svd(basis_low.T @ basis_high, compute_uv=False)
    if basis_low.shape[1] == 0 or np.sum(cosines < 1.0 - 1e-6) != 1:
        return  # same subspace, or more than one swapped direction (not generic)
    n = basis_low.shape[1]
    left, _, right_t = np.linalg.svd(basis_low.T @ basis_high)
    aligned_low, aligned_high = basis_low @ left, basis_high @ right_t.T
    shared = aligned_low[:, : n - 1]
    a, c = aligned_low[:, n - 1], aligned_high[:, n - 1]
    c_perp = c - a * (a @ c) - shared @ (shared.T @ c)
    norm = float(np.linalg.norm(c_perp))
    if norm < 1e-12:
        return
    b = c_perp / norm
    end = float(np.arctan2(norm, a @ c))

    def basis_at(theta: float) -> np.ndarray:
        return np.column_stack([shared, np.cos(theta) * a + np.sin(theta) * b])

    def difference(theta: float) -> float:
        losses = losses_from_covariance(dual.covariance, dual.best, basis_at(theta))
        return float(losses[0] - losses[1])

    if difference(0.0) * difference(end) > 0:
        return
    theta = scipy.optimize.brentq(difference, 0.0, end, xtol=1e-14)
    basis = basis_at(theta)
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
        raise InputError(f"fair-eig solves two-group problems; the data have {moments.n_groups} groups "
                         "(use samadi-mw or samadi-sdp)")
    max_iter = checks.integer("max_iter", max_iter, minimum=2)
    covariance = moments.covariance(center)
    best = best_rank_variance(covariance, n_components)
    scale = max(float(best.max()), np.finfo(float).tiny)
    dual = _Dual(covariance / scale, best / scale, n_components)
    _, _, basis_low, basis_high, iterations = _secant_root(dual, tol, max_iter)
    if not dual.gap_closed(tol):
        _rotate_swapped_pair(dual, basis_low, basis_high)
    assert dual.solution is not None
    return make_projection(
        moments,
        fix_signs(dual.solution),
        method="fair-eig",
        n_components=n_components,
        center=center,
        objective_history=[value * scale for value in dual.history],
        n_iter=iterations,
        status="converged" if dual.gap_closed(tol) else "max_iter",
        certificate={"lower_bound": dual.lower * scale, "upper_bound": dual.upper * scale},
        options={"tol": tol, "max_iter": max_iter},
        best=best,
    )
