"""Distributionally robust fairness-aware PCA (Vu, Tran, Yue & Nguyen, ICLR 2022; seeds/003).

Problem (paper (4), §3; spec/seeds-002-003.md §B.2–B.3, B.6). With M_b the second moment of
group b about its centre (the paper's M̂_b: ``center="global"``), p̂_b its share of the
rows and L_b(V) = ⟨I − VVᵀ, M_b⟩ its mean reconstruction error, minimise over orthonormal
p × r V the worst case, over each group's distribution moving within a Gelbrich (2-Wasserstein
between moments) ball of squared radius ε_b = α/√N_b, of

    E[ℓ(V, X)] + λ · max_{a,a'} |E[ℓ | A = a] − E[ℓ | A = a']|.

The ambiguity set fixes the group shares and the conditionals move independently, so with
υ_b = p̂_b + λ[b = a] − λ[b = a'] (one piece per ordered pair a ≠ a')

    F(V) = max_{a ≠ a'} Σ_b φ(υ_b, L_b(V), ε_b),

    φ(υ, L, ε) = υ(√L + √ε)²                 υ ≥ 0
               = υ · max(√L − √ε, 0)²        υ < 0          (Prop. 3.3, exact)

This is the **exact** objective (spec F_exact; for two groups the paper's J_0, J_1). Where the
paper is wrong, and what this module does (spec §B.10):

* Theorem 3.2's closed form (6b), φ = υL + υε + 2|υ|√(εL), equals φ only where υ ≥ 0 or
  L ≥ ε; the theorem's conditions ((i) λ ≤ p̂_b or (ii) the p − r smallest eigenvalues of M_b
  sum to ≥ ε_b, for every group b) guarantee that for every V. ``objective="exact"`` (default)
  always minimises F; the result says whether the conditions held (``certificate
  ["conditions_hold"]``, ``details["formula"]``: "6b" when F equals (6b) everywhere, else
  "exact") and a :class:`~fairpca_dist.exceptions.ModelWarning` names the failing groups.
  ``objective="paper"`` minimises (6b) anyway, for comparison. (The authors' code instead
  clips λ to min p̂ when the conditions fail: benchmarks/baselines/dro_authors.py.)
* E2: C_a = (p̂_a + λ)M_a + (p̂_a' − λ)M_a' is indefinite once λ > p̂_a', so F is not convex
  in U and Theorem 4.3 does not apply; the method is still a descent heuristic with restarts.
* E4: the multi-group Theorem B.2 drops Σ_b p̂_b(L_b + ε_b), which depends on V; the pieces
  above keep it (for two groups they are (6a)/(6b) exactly).
* E6: subgradient descent is not monotone and the paper returns the last iterate; here each
  start keeps its best iterate (``output="best"``, default), ``output="last"`` is the paper's.
* (8): the paper's incremental polar retraction (U + Δ)(I + ΔᵀΔ)^{-1/2} assumes UᵀU = I and
  UᵀΔ = 0 exactly and drifts off the manifold when iterated; ``retraction="polar"`` is the
  polar factor of U + Δ by SVD (equal in exact arithmetic), ``"qr"`` the paper's default, and
  ``"geodesic"`` the exact geodesic step (the paper's title says geodesic; its algorithm does not).

Algorithms. ``algorithm="frontier"`` (the default for two groups; not in the paper) solves
the problem to a certified global gap: F depends on V only through the two losses L(V), every
piece Σ_b φ(υ_b, L_b, ε_b) is concave in them (φ is concave in L for either sign of υ, and so
is (6b)'s term) and grows along (1, 1) at rate ≥ Σ_b υ_b = 1 (dφ/dL ≥ υ), so the minimum over
the Fantope's image lies on its boundary arc, whose points are rank-r projections on top
eigenvectors of cos θ M_0 + sin θ M_1: :mod:`fairpca_dist.solvers.frontier` finds it by branch
and bound over θ with one top-r eigendecomposition per direction (about 1–2 dense
eigendecompositions per fit at p = 1764 for a 10⁻⁴ gap, where Algorithm 1 costs 20–60).

``algorithm="subgradient"`` (the paper's Algorithm 1, §4; the only one for three or more
groups): Riemannian subgradient descent with the constant step
γ = 1/√(n_iter + 1) on the gradient of the active piece,
∂F/∂L_b = dφ/dL (υ_b, L_b, ε_b) = υ_b(1 ± √(ε_b/L_b)) (0 where υ_b < 0 and L_b < ε_b).
``form="U"`` is the paper's parametrisation by the orthonormal complement U ∈ St(p, p − r),
L_b = ⟨UUᵀ, M_b⟩, gradient (I − UUᵀ) Σ_b 2 ∂F/∂L_b M_bU; ``form="V"`` (default) works on
V ∈ St(p, r) with gradient −(I − VVᵀ) Σ_b 2 ∂F/∂L_b M_bV. Both move span V along the same
Grassmann gradient with the same length (‖VᵀSU‖_F), so they differ at second order only; V
costs O(p²r) per step instead of O(p²(p − r)). Starts: the PCA complement (top-r eigenvectors
of Σ_b p̂_b M_b) and ``n_restarts`` random orthonormal ones (paper: 20), all iterated at once
as one stack; the start with the smallest kept objective wins. Every start takes ``n_iter``
steps, as in the paper, unless the opt-in ``patience`` lets a start stop once its best value
has stalled (benchmarks/bench_dro_speed.py times both against the authors' code).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import dataclass
from itertools import permutations
from typing import Any, Literal

import numpy as np

from fairpca_dist.assessment.metrics import best_rank_variance, losses_from_covariance
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import InputError, ModelWarning
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.frontier import minimize_on_frontier
from fairpca_dist.solvers.result import STATUS_MESSAGES, FairProjection, make_projection, warn_gap
from fairpca_dist.solvers.stiefel import (
    fix_signs,
    geodesic,
    polar,
    qr_retraction,
    random_orthonormal,
    tangent_projection,
    top_eigenvectors,
)

__all__ = ["worst_case", "worst_case_slope", "DROProblem", "solve_dro", "RETRACTIONS", "FORMS", "ALGORITHMS"]

Retraction = Literal["qr", "polar", "geodesic"]
Form = Literal["V", "U"]
Algorithm = Literal["auto", "frontier", "subgradient"]
ALGORITHMS = ("auto", "frontier", "subgradient")
RETRACTIONS = ("qr", "polar", "geodesic")
FORMS = ("V", "U")
OUTPUTS = ("best", "last")
OBJECTIVES = ("exact", "paper")

_LOSS_FLOOR = 1e-300  # L_b below this counts as 0 in √(ε/L) (no 0/0)


def _exact_terms(loss: np.ndarray, radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """φ's two branches per unit υ: ((√L + √ε)², max(√L − √ε, 0)²), taken for υ ≥ 0 and υ < 0."""
    root_loss, root_radius = np.sqrt(np.maximum(loss, 0.0)), np.sqrt(radius)
    return (root_loss + root_radius) ** 2, np.maximum(root_loss - root_radius, 0.0) ** 2


def _exact_slope_terms(loss: np.ndarray, radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """dφ/dL's two branches per unit υ: (1 + √(ε/L), 1 − √(ε/L) where L ≥ ε else 0)."""
    ratio = np.sqrt(radius / np.maximum(loss, _LOSS_FLOOR))
    return 1.0 + ratio, np.where(loss >= radius, 1.0 - ratio, 0.0)


def _paper_terms(loss: np.ndarray, radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(6b)'s term υL + υε + 2|υ|√(εL) (φ wherever υ ≥ 0 or L ≥ ε, Theorem 3.2) as the
    coefficients of υ and of |υ|: (L + ε, 2√(εL))."""
    return loss + radius, 2.0 * np.sqrt(radius * np.maximum(loss, 0.0))


def _paper_slope_terms(loss: np.ndarray, radius: np.ndarray) -> tuple[float, np.ndarray]:
    """d/dL of (6b)'s term, υ + |υ|√(ε/L), as the coefficients of υ and of |υ|."""
    return 1.0, np.sqrt(radius / np.maximum(loss, _LOSS_FLOOR))


def worst_case(upsilon: Any, loss: Any, radius: Any) -> np.ndarray:
    """φ(υ, L, ε) = sup of υ·E_Q[ℓ] over the Gelbrich ball of squared radius ε around a group
    whose mean error is L (Prop. 3.3): υ(√L + √ε)² for υ ≥ 0, υ·max(√L − √ε, 0)² for υ < 0.
    Broadcasts."""
    upsilon, loss, radius = (np.asarray(a, dtype=np.float64) for a in (upsilon, loss, radius))
    plus, minus = _exact_terms(loss, radius)
    return np.where(upsilon >= 0, upsilon * plus, upsilon * minus)


def worst_case_slope(upsilon: Any, loss: Any, radius: Any) -> np.ndarray:
    """dφ/dL: υ(1 + √(ε/L)) for υ ≥ 0, υ(1 − √(ε/L)) for υ < 0 and L ≥ ε, else 0. Broadcasts."""
    upsilon, loss, radius = (np.asarray(a, dtype=np.float64) for a in (upsilon, loss, radius))
    plus, minus = _exact_slope_terms(loss, radius)
    return np.where(upsilon >= 0, upsilon * plus, upsilon * minus)


# For each objective: the per-group terms of a piece and of its slope, both linear in two
# coefficient matrices derived from υ (DROProblem._coefficients): piece = Σ_b (c1_b A_b + c2_b B_b).
_TERMS = {"exact": (_exact_terms, _exact_slope_terms), "paper": (_paper_terms, _paper_slope_terms)}


@dataclass(frozen=True)
class DROProblem:
    """The data of the DRO objective: ``second`` (m, p, p) = M_b, ``shares`` (m,) = p̂_b,
    ``radii`` (m,) = ε_b, ``lam`` = λ. Methods take one V (p, r) or a stack (s, p, r)."""

    second: np.ndarray
    shares: np.ndarray
    radii: np.ndarray
    lam: float

    @classmethod
    def from_moments(cls, moments: GroupMoments, *, alpha: float, lam: float, center: Center = "global") -> DROProblem:
        """M_b = second moment about ``center`` per unit weight, p̂_b = weight share,
        ε_b = α/√N_b with N_b the group's row count (paper §5)."""
        weight = np.asarray(moments.weight, dtype=np.float64)
        return cls(
            second=moments.covariance(center),
            shares=weight / weight.sum(),
            radii=alpha / np.sqrt(np.asarray(moments.count, dtype=np.float64)),
            lam=float(lam),
        )

    @functools.cached_property
    def upsilons(self) -> np.ndarray:
        """(P, m): υ_b for each ordered pair (a, a'), a ≠ a' — the pieces of the max."""
        m = self.shares.size
        pairs = list(permutations(range(m), 2))
        out = np.tile(self.shares, (len(pairs), 1))
        for row, (a, b) in enumerate(pairs):
            out[row, a] += self.lam
            out[row, b] -= self.lam
        return out

    def losses(self, components: np.ndarray) -> np.ndarray:
        """L_b(V) = tr M_b − tr(VᵀM_bV), shape (..., m)."""
        if components.ndim == 2:
            return losses_from_covariance(self.second, self.traces, components)  # BLAS products
        return self.traces - np.einsum("...pr,bpq,...qr->...b", components, self.second, components)

    @functools.cached_property
    def _coefficients(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per objective, the (P, m) matrices multiplying the two per-group terms of _TERMS:
        exact, (υ for υ ≥ 0 else 0, υ for υ < 0 else 0), so each group takes φ's branch of the
        sign of its υ; paper, (υ, |υ|)."""
        upsilons = self.upsilons
        return {
            "exact": (np.where(upsilons >= 0, upsilons, 0.0), np.where(upsilons < 0, upsilons, 0.0)),
            "paper": (upsilons, np.abs(upsilons)),
        }

    def pieces(self, losses: np.ndarray, objective: str = "exact") -> np.ndarray:
        """Value of every piece, shape (..., P), from the losses (..., m): Σ_b φ(υ_b, L_b, ε_b)
        (``"exact"``) or Σ_b of (6b)'s term (``"paper"``), as two products with the
        coefficient matrices (one per branch; the other branch's coefficient is 0)."""
        first, second = self._coefficients[objective]
        a, b = _TERMS[objective][0](losses, self.radii)
        return a @ first.T + b @ second.T

    def value(self, components: np.ndarray) -> np.ndarray | float:
        """F_exact(V), the worst-case objective."""
        out = self.pieces(self.losses(components)).max(axis=-1)
        return float(out) if out.ndim == 0 else out

    def paper_value(self, components: np.ndarray) -> np.ndarray | float:
        """(6b) / the corrected B.6 closed form: equal to F_exact where :meth:`conditions` hold."""
        out = self.pieces(self.losses(components), "paper").max(axis=-1)
        return float(out) if out.ndim == 0 else out

    def conditions(self, n_components: int, least_losses: np.ndarray | None = None) -> np.ndarray:
        """Theorem 3.2 per group: (i) 0 ≤ λ ≤ p̂_b or (ii) the p − r smallest eigenvalues of M_b
        sum to at least ε_b (then L_b(V) ≥ ε_b for every V, by Ky Fan). That sum is the least
        loss min_V L_b(V) = tr M_b − Σ_{i≤r} λ_i(M_b), computed from the top r eigenvalues unless
        given (``least_losses``, e.g. the frontier search's)."""
        first = self.lam <= self.shares
        if first.all():
            return first
        if least_losses is None:
            least_losses = self.traces - best_rank_variance(self.second, n_components)
        return first | (np.asarray(least_losses) >= self.radii)

    def slopes(self, losses: np.ndarray, objective: str = "exact") -> tuple[np.ndarray, np.ndarray]:
        """(F, ∂F/∂L_b of the active piece): shapes (...,) and (..., m)."""
        pieces = self.pieces(losses, objective)
        active = pieces.argmax(axis=-1)
        first, second = self._coefficients[objective]
        a, b = _TERMS[objective][1](losses, self.radii)
        return pieces.max(axis=-1), first.take(active, axis=0) * a + second.take(active, axis=0) * b

    @functools.cached_property
    def _stacked(self) -> np.ndarray:
        """[M_1; …; M_m] as one (m·p, p) matrix: one product gives every M_bV of a stack."""
        return self.second.reshape(-1, self.second.shape[-1])

    @functools.cached_property
    def traces(self) -> np.ndarray:
        return np.trace(self.second, axis1=1, axis2=2)

    def value_and_gradient(
        self, point: np.ndarray, form: str = "V", objective: str = "exact"
    ) -> tuple[np.ndarray, np.ndarray]:
        """F and its Riemannian gradient at a stack (s, p, w) of points: V (``form="V"``,
        L_b = tr M_b − tr(VᵀM_bV), gradient −(I − VVᵀ) Σ_b 2 ∂F/∂L_b M_bV) or the complement U
        (``"U"``, L_b = tr(UᵀM_bU), gradient (I − UUᵀ) Σ_b 2 ∂F/∂L_b M_bU).

        One product of [M_1; …; M_m] with the stack laid side by side, (m·p, p) × (p, s·w),
        gives every M_b·point while reading the M_b once (a batched product per point reads them
        s times: 6× slower at p = 1764 with 21 starts); the losses ⟨point, M_b·point⟩ and the
        Euclidean gradient Σ_b c_b M_b·point then follow from two batched matrix–vector
        products over the m groups (only the order of the floating-point sums differs from an
        elementwise evaluation)."""
        n_points, p, width = point.shape
        side_by_side = point.transpose(1, 0, 2).reshape(p, n_points * width)
        products = (self._stacked @ side_by_side).reshape(-1, p, n_points, width)  # (m, p, s, w)
        products = products.transpose(2, 0, 1, 3).reshape(n_points, -1, p * width)  # (s, m, p·w): vec(M_b·point)
        quadratic = (products @ point.reshape(n_points, p * width, 1))[..., 0]  # ⟨point, M_b·point⟩
        losses = self.traces - quadratic if form == "V" else quadratic
        value, slope = self.slopes(losses, objective)
        weights = (-2.0 if form == "V" else 2.0) * slope
        euclidean = (weights[:, None, :] @ products).reshape(n_points, p, width)
        return value, tangent_projection(point, euclidean)

    def gradient(self, components: np.ndarray, objective: str = "exact") -> np.ndarray:
        """Riemannian gradient of F at V (p, r) or a stack of them (V-parametrisation)."""
        stack = np.asarray(components, dtype=np.float64)
        gradient = self.value_and_gradient(stack.reshape(-1, *stack.shape[-2:]), "V", objective)[1]
        return gradient.reshape(stack.shape)


def _retract(kind: str, point: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Move from ``point`` by the tangent ``step``."""
    if kind == "qr":
        return qr_retraction(point + step)
    if kind == "polar":
        return polar(point + step)[0]
    return geodesic(point, step, 1.0)


def _complement(components: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the orthogonal complement of span V, for each V of a stack."""
    p, r = components.shape[-2:]
    full = np.linalg.svd(components, full_matrices=True)[0]
    return full[..., :, r:p]


def _check_options(
    algorithm: Any,
    alpha: Any,
    lam: Any,
    n_iter: Any,
    n_restarts: Any,
    retraction: Any,
    form: Any,
    output: Any,
    objective: Any,
    patience: Any,
    patience_rtol: Any,
    tol: Any,
    max_iter: Any,
) -> None:
    checks.choice("algorithm", algorithm, ALGORITHMS)
    checks.number("tol", tol, strict=True)
    checks.integer("max_iter", max_iter, minimum=4)
    checks.number("alpha", alpha)
    checks.number("lam", lam)
    checks.integer("n_iter", n_iter)
    checks.integer("n_restarts", n_restarts, minimum=0)
    checks.choice("retraction", retraction, RETRACTIONS)
    checks.choice("form", form, FORMS)
    checks.choice("output", output, OUTPUTS)
    checks.choice("objective", objective, OBJECTIVES)
    if patience is not None:
        checks.integer("patience", patience)
    checks.number("patience_rtol", patience_rtol)


_ONLY_FOR = {
    "frontier": ("tol", "max_iter"),
    "subgradient": ("n_iter", "n_restarts", "retraction", "form", "output", "patience", "patience_rtol"),
}


def _check_applies(algorithm: str, given: dict[str, Any]) -> None:
    """Refuse an option of the other algorithm set away from its default (it would be ignored)."""
    defaults = {name: parameter.default for name, parameter in inspect.signature(solve_dro).parameters.items()}
    other = "subgradient" if algorithm == "frontier" else "frontier"
    ignored = [name for name in _ONLY_FOR[other] if given[name] != defaults[name]]
    if ignored:
        raise InputError(
            f"dro: {', '.join(ignored)} set for algorithm='{other}', but the fit uses "
            f"algorithm='{algorithm}'"
            + (" (the default for two groups)" if algorithm == "frontier" else "")
            + f"; pass algorithm='{other}' or drop {'it' if len(ignored) == 1 else 'them'}"
        )


def solve_dro(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    alpha: float = 0.15,
    lam: float = 0.5,
    algorithm: Algorithm = "auto",
    objective: Literal["exact", "paper"] = "exact",
    tol: float = 1e-8,
    max_iter: int = 100,
    n_iter: int = 1000,
    n_restarts: int = 20,
    retraction: Retraction = "qr",
    form: Form = "V",
    output: Literal["best", "last"] = "best",
    patience: int | None = None,
    patience_rtol: float = 1e-10,
) -> FairProjection:
    """Distributionally robust fair PCA (method ``"dro"``; 003 §3–4; module docstring for the
    objective, the corrections to the paper and the two algorithms).

    Parameters
    ----------
    center : {"group", "global", "origin"}
        About which point each group's second moment M_b is taken, as for every method
        (library default "group": only the groups' spreads count). The paper's is "global":
        its data are centred and M̂_b = E[XXᵀ | A = b] includes the group's mean offset.
    alpha : float
        Radius scale: ε_b = α/√N_b in squared data units (paper grid 0.05, 0.1, 0.15).
    lam : float
        λ, the weight of the worst group gap (paper grid 0 … 2.5). λ = α = 0 is PCA.
    algorithm : {"auto", "frontier", "subgradient"}
        "frontier": the certified global minimum, two groups only; "subgradient": the paper's
        Algorithm 1 (a local method with restarts, no certificate); "auto" (default): frontier
        for two groups, subgradient otherwise.
    objective : {"exact", "paper"}
        Minimise F_exact (default) or the closed form (6b) whatever the conditions.
    tol : float
        frontier: stop when the certified gap satisfies upper − lower ≤ tol · |upper| (plus the
        objective's own rounding where a loss is near 0: :mod:`~fairpca_dist.solvers.frontier`).
    max_iter : int
        frontier: top-r eigendecompositions at most (≥ 4).
    n_iter : int
        subgradient: steps τ per start; the step is γ = 1/√(τ + 1) (paper: 1000; not scale
        invariant: the gradient scales with M, so standardised features are the paper's setting).
    n_restarts : int
        subgradient: random starts besides the PCA-complement start (paper: 20).
    retraction : {"qr", "polar", "geodesic"}
        subgradient only.
    form : {"V", "U"}
        subgradient: iterate on V ∈ St(p, r) (default, cheaper) or on the complement U (the paper's).
    output : {"best", "last"}
        subgradient: keep each start's best iterate (default) or its last (the paper's).
    patience : int or None
        subgradient, opt-in early stop (not in the paper): a start stops once ``patience``
        steps have passed since its best objective last fell by more than ``patience_rtol`` ×
        |best|, and the fit ends when every start has stopped (``n_iter`` stays the budget and
        sets the step γ). None (default): every start takes all ``n_iter`` steps, as in the paper.
    patience_rtol : float
        The relative decrease that counts as progress for ``patience``.
    random_state : int, Generator or None
        Seeds the subgradient's random starts (the frontier is deterministic).

    Returns
    -------
    FairProjection
        ``certificate``: ``objective`` (F at the returned V, by ``objective``),
        ``objective_exact`` (F_exact there), ``empirical`` (the same criterion with ε = 0:
        E[ℓ] + λ max gap, a lower bound), ``conditions_hold`` (Theorem 3.2 for every group);
        frontier: ``lower_bound`` (≤ the objective of every orthonormal V) and ``upper_bound``,
        status "converged" when they meet to ``tol``, else "max_iter" or "flat_segment" (with a
        :class:`~fairpca_dist.exceptions.ConvergenceWarning`), ``objective_history`` the upper
        bound per eigendecomposition or geodesic search, ``n_iter`` the eigendecompositions; subgradient:
        ``best_start`` (0 = the PCA complement), ``worst_start_value``, ``starts_run``, status
        "fixed_steps", ``objective_history`` per step the best-so-far objective of the start
        that is kept (the last-iterate objective with ``output="last"``), ``n_iter`` the steps
        taken (fewer than the option only with ``patience``).
    """
    _check_options(
        algorithm,
        alpha,
        lam,
        n_iter,
        n_restarts,
        retraction,
        form,
        output,
        objective,
        patience,
        patience_rtol,
        tol,
        max_iter,
    )
    if algorithm == "frontier" and moments.n_groups != 2:
        raise InputError(
            f"dro: algorithm='frontier' solves two-group problems; the data have {moments.n_groups} "
            "groups (use algorithm='subgradient')"
        )
    if algorithm == "auto":
        algorithm = "frontier" if moments.n_groups == 2 else "subgradient"
    _check_applies(
        algorithm,
        {
            "tol": tol,
            "max_iter": max_iter,
            "n_iter": n_iter,
            "n_restarts": n_restarts,
            "retraction": retraction,
            "form": form,
            "output": output,
            "patience": patience,
            "patience_rtol": patience_rtol,
        },
    )
    problem = DROProblem.from_moments(moments, alpha=float(alpha), lam=float(lam), center=center)
    r = n_components
    if algorithm == "frontier":
        found = minimize_on_frontier(
            problem.second,
            r,
            functools.partial(problem.pieces, objective=objective),
            tol=float(tol),
            max_iter=int(max_iter),
        )
        hold = problem.conditions(r, found.least_losses)
    else:
        hold = problem.conditions(r)
    if not hold.all():
        failing = [moments.groups[b] for b in np.flatnonzero(~hold)]
        rest = moments.n_features - r
        discarded = (
            f"the sum of their {rest} smallest eigenvalues, the variance r = {r} discards, is below ε"
            if rest
            else f"r = {r} = p discards no variance, which is below ε"
        )
        message = (
            f"dro at r = {r}: Theorem 3.2's conditions fail for group(s) {failing} "
            f"(λ = {lam:g} > their share and {discarded}): "
        )
        message += (
            "minimising the exact worst case, which differs from the closed form (6b) here"
            if objective == "exact"
            else "minimising (6b) anyway, which is not the worst case here"
        )
        warnings.warn(message, ModelWarning, stacklevel=2)
    common: dict[str, Any] = {"alpha": float(alpha), "lam": float(lam), "algorithm": algorithm, "objective": objective}
    if algorithm == "frontier":
        components, value, losses = fix_signs(found.components), found.upper, found.losses
        history, steps = np.asarray(found.history), found.n_directions
        status = found.stop
        if status != "converged":
            warn_gap(
                "dro",
                found.lower,
                found.upper,
                tol,
                f"after {found.n_directions} eigendecompositions ({STATUS_MESSAGES[status]})",
            )
        specific = {"lower_bound": found.lower, "upper_bound": found.upper}
        best = problem.traces - found.least_losses  # β_b(r), which the result's group losses need
        options = {**common, "tol": float(tol), "max_iter": int(max_iter)}
    else:
        components, value, history, specific = _subgradient(
            problem, r, random_state, n_iter, n_restarts, retraction, form, output, objective, patience, patience_rtol
        )
        steps, status, best = len(history) - 1, "fixed_steps", None
        losses = problem.losses(components)
        options = {
            **common,
            "n_iter": int(n_iter),
            "n_restarts": int(n_restarts),
            "retraction": retraction,
            "form": form,
            "output": output,
            "patience": None if patience is None else int(patience),
            "patience_rtol": float(patience_rtol),
        }
    certificate = {
        "objective": float(value),
        "objective_exact": float(problem.pieces(losses).max()),
        "empirical": float(problem.shares @ losses + problem.lam * (losses.max() - losses.min())),
        "conditions_hold": float(hold.all()),
        **specific,
    }
    return make_projection(
        moments,
        components,
        method="dro",
        n_components=n_components,
        center=center,
        objective_history=history,
        n_iter=steps,
        status=status,
        certificate=certificate,
        options=options,
        details={"formula": "6b" if hold.all() else "exact", "radii": problem.radii.tolist()},
        best=best,
    )


def _subgradient(
    problem: DROProblem,
    r: int,
    random_state: int | np.random.Generator | None,
    n_iter: int,
    n_restarts: int,
    retraction: str,
    form: str,
    output: str,
    objective: str,
    patience: int | None,
    patience_rtol: float,
) -> tuple[np.ndarray, float, np.ndarray, dict[str, float]]:
    """Algorithm 1 from the PCA complement and ``n_restarts`` random starts: (V of the best
    start, its objective, its history, the certificate entries of the starts)."""
    rng = np.random.default_rng(random_state)
    p = problem.second.shape[1]
    pooled = np.tensordot(problem.shares, problem.second, axes=1)
    start = top_eigenvectors(pooled, r)[1]
    if form == "V":
        starts = np.stack([start] + [random_orthonormal(rng, p, r) for _ in range(n_restarts)])
    else:
        starts = np.stack([_complement(start)] + [random_orthonormal(rng, p, p - r) for _ in range(n_restarts)])
    history, kept, kept_values = _descend(
        problem, starts, form, n_iter, retraction, output, objective, patience, patience_rtol
    )
    best = int(np.argmin(kept_values))
    components = fix_signs(kept[best] if form == "V" else _complement(kept[best]))
    entries = {
        "best_start": float(best),
        "worst_start_value": float(kept_values.max()),
        "starts_run": float(len(starts)),
    }
    return components, float(kept_values[best]), history[:, best], entries


def _descend(
    problem: DROProblem,
    starts: np.ndarray,
    form: str,
    n_iter: int,
    retraction: str,
    output: str,
    objective: str,
    patience: int | None = None,
    patience_rtol: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Algorithm 1 on a stack of starts at once. Returns (history (steps run + 1, s), the kept
    iterate per start, its objective per start).

    With ``patience``, a start leaves the stack once ``patience`` steps have passed since its
    best objective last fell by more than ``patience_rtol`` × |best| (its history stays flat
    from there), and the loop ends when no start is left. Without it (default) every start
    takes all ``n_iter`` steps."""
    step = 1.0 / np.sqrt(n_iter + 1.0)
    n_starts = len(starts)
    point = starts
    best_point, best_value = starts.copy(), np.full(n_starts, np.inf)
    history = np.empty((n_iter + 1, n_starts))
    if patience is not None:
        running = np.arange(n_starts)  # the original index of every start still in the stack
        kept_point, kept_value = np.empty_like(starts), np.empty(n_starts)
        since = np.zeros(n_starts, dtype=np.int64)  # steps since the last progress
    for t in range(n_iter + 1):
        value, gradient = problem.value_and_gradient(point, form, objective)
        if output == "best" or patience is not None:
            better = value < best_value
            np.copyto(best_value, value, where=better)
            np.copyto(best_point, point, where=better[:, None, None])
        row = best_value if output == "best" else value
        if patience is None:
            history[t] = row
        else:
            history[t, running] = row
            if t == 0:
                reference = best_value.copy()  # the best value at the last progress
            else:
                progress = best_value < reference - patience_rtol * np.abs(reference)
                np.copyto(reference, best_value, where=progress)
                since = np.where(progress, 0, since + 1)
            stop = since >= patience
            if t == n_iter:
                stop[:] = True
            if stop.any():
                leaving = running[stop]
                kept_point[leaving] = (best_point if output == "best" else point)[stop]
                kept_value[leaving] = (best_value if output == "best" else value)[stop]
                history[t + 1 :, leaving] = history[t, leaving]
                stay = ~stop
                running, point, gradient, since = running[stay], point[stay], gradient[stay], since[stay]
                best_point, best_value, reference = best_point[stay], best_value[stay], reference[stay]
                if not running.size:
                    return history[: t + 1], kept_point, kept_value
        if t == n_iter:
            break
        gradient *= -step
        point = _retract(retraction, point, gradient)
    if output == "best":
        return history, best_point, best_value
    return history, point, value
