"""Fair PCA in the complement of an "unfair subspace": the offline solution of the fair noisy
power method (FNPM) of Lee, Cho, Yun & Yun, "Fair streaming principal component analysis:
statistical and algorithmic viewpoint" (NeurIPS 2023, arXiv 2310.18593; code
HanseulJo/fair-streaming-pca, ``downstream_tasks_fair_streaming_pca/fair_streaming_pca.py``,
``FairPCA.fit_offline``; spec/anchors-fairpca.md §10). Method ``"fnpm"``; the same solution
computed by block power iterations over the rows, without p × p matrices, is ``"fnpm-streaming"``
(:mod:`fairpca_dist.solvers.fnpm_streaming`).

Two groups (k = 2, in the order of the moments). Write f = μ₁ − μ₀ for the difference of the
group means, Q = Σ₁ − Σ₀ for the difference of the group covariances (divisor w_g − 1, as the
code's ``jnp.cov``) and Σ for the covariance of all rows about the global mean. The method
projects out an *unfair subspace* N and does PCA in what is left:

    W = the eigenvectors of the m eigenvalues of Q largest in magnitude  (``n_unfair`` = m),
    g = f − W Wᵀ f,   N = [W, g / ‖g‖]     (``constraint="all"``),
    N = f / ‖f‖       (``"mean"``),     N = W      (``"covariance"``),
    V = the top-r eigenvectors of Π Σ Π,   Π = I − t N Nᵀ     (``tradeoff`` = t ∈ [0, 1]).

With t = 1 (the default) Π is the orthogonal projector onto N^⊥: every projected group then has
the same mean (Vᵀf = 0, ``"mean"`` and ``"all"``), and the projected covariances differ only
outside the m directions where they differ most (‖Vᵀ Q V‖₂ ≤ |λ_{m+1}(Q)| when V ⊥ W). Smaller t
shrinks the variance along N by (1 − t)² instead of removing it (t = 0 is plain PCA): the code's
``fairness_tradeoff``, which none of its experiments changes. t > 1 is refused: Π = I − 2NNᵀ is a
reflection, so Π Σ Π has Σ's spectrum and the "fair" projection is PCA rotated.

**The public code's errors, and what this module does instead** (``code_selection=True``
restores the code's choices, for comparison):

1. *Zero eigenvalues are selected as if they were unfair directions, and as if they were
   principal ones.* The code takes the m eigenvalues of Q largest in |λ| with ``argsort``; when
   rank Q < m (a collinear column, a column constant within both groups, or groups of fewer
   than p/2 rows: rank Q ≤ rank Σ₁ + rank Σ₀) the last of them are zeros, whose
   eigenvectors are an arbitrary basis of Q's null space: they remove variance for no fairness
   gain. Here eigenvalues with |λ| ≤ p·ε·max_g tr Σ_g (rounding) are left out, so N holds
   min(m, rank Q) covariance directions, and ``details`` says how many were left out. The PCA
   step has the same flaw: the code takes the top-r eigenvectors of the p × p matrix Π Σ Π by
   |eigenvalue|, and Π Σ Π vanishes on N itself. Where Σ has fewer than r directions of positive
   variance outside N (r > p − dim N − dim null), the selection reaches the zero eigenvalues and
   LAPACK returns an arbitrary basis of a null space that contains N, so V can keep the unfair
   directions: on Wine Quality's first 10 features and the sum of two of them (p = 11, one exact
   collinearity, standardised) the code's V kept 39 % of the mean gap at r = 10 with
   ``constraint="mean"`` and 91 % at r = 8 with ``"all"`` (tests/solvers/test_fnpm.py). Here V is computed
   inside N^⊥ (V = R · top-r eigenvectors of Rᵀ Σ R, R an orthonormal basis of N^⊥), so Vᵀ N = 0
   exactly whatever Σ's rank, and r > p − dim N raises :class:`InputError`.
2. *The mean direction is orthogonalised once and normalised with a guard.* The code computes
   g = f − W Wᵀ f once (classical Gram–Schmidt) and divides by ‖g‖ + 10⁻⁸ (and f by ‖f‖ + 10⁻⁸).
   When f lies nearly inside span W, g is mostly cancellation error: the single step leaves it
   far from orthogonal to W, and the guard leaves it of norm < 1, so N Nᵀ is not a projector and
   Π removes a random direction partly (for ‖g‖ ≈ 10⁻⁸ the column has norm ½). The same guard
   makes f/(‖f‖ + 10⁻⁸) a short vector on data whose mean gap is small in its units. Here g is
   orthogonalised twice ("twice is enough", Parlett–Kahan) and dropped when ‖g‖ ≤ √ε·‖f‖ (f then
   lies in span W, which N already removes); f is divided by ‖f‖, and an f at rounding level,
   ‖f‖ ≤ p·ε·(max_g tr Σ_g)^½ (equal means), contributes no direction (the code's test,
   ‖f/(‖f‖ + 10⁻⁸)‖ ≈ 0, holds only for ‖f‖ ≲ 10⁻¹⁶ in the data's units).

Also differing from the code, not errors: Σ's divisor (n − 1 there, w here) does not change V;
the streaming code estimates Q from second moments about the origin, XᵀX/n_g, rather than the
covariances its offline path uses, which shifts Q by μ₁μ₁ᵀ − μ₀μ₀ᵀ (``"fnpm-streaming"`` uses
the covariances, so that it converges to this module's solution).

With t = 1 and ``constraint="mean"`` this is ``"kleindessner"`` for two groups (PCA in the
complement of μ₁ − μ₀): the same subspace (tests/solvers/test_fnpm.py). The paper extends the
method to several groups (its appendix), which this module does not implement: k ≠ 2 raises
:class:`~fairpca_dist.exceptions.GroupError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import GroupError, InputError
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.kleindessner import _pca_within
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import fix_signs, top_eigenvectors

__all__ = [
    "CONSTRAINTS",
    "UnfairSubspace",
    "check_problem",
    "covariance_directions",
    "mean_difference",
    "mean_tolerance",
    "unfair_subspace",
    "zero_tolerance",
    "check_room",
    "certificate_of",
    "details_of",
    "solve",
    "criterion_key",
]

CONSTRAINTS = ("mean", "covariance", "all")

_MEAN_TOL = float(np.sqrt(np.finfo(np.float64).eps))  # ‖g‖ ≤ √ε‖f‖: f lies in span W
_CODE_GUARD = 1e-8  # the public code's ‖·‖ + 1e-8 (code_selection=True)


@dataclass(frozen=True)
class UnfairSubspace:
    """N and how it was built.

    Attributes
    ----------
    basis : ndarray of shape (n_features, d)
        N, orthonormal (except with ``code_selection=True``, as the public code builds it).
    eigenvalues : ndarray of shape (m',)
        The eigenvalues of Q = Σ₁ − Σ₀ whose eigenvectors are N's first m' columns.
    zero_directions : int
        Of the m eigenvalues largest in magnitude, how many were rounding zeros (left out).
    mean_direction : bool
        Whether N's last column is the (orthogonalised) mean difference.
    """

    basis: np.ndarray
    eigenvalues: np.ndarray
    zero_directions: int
    mean_direction: bool


def check_problem(
    moments: GroupMoments, method: str, n_unfair: int, constraint: str, tradeoff: float, code_selection: bool
) -> tuple[int, str, float, bool]:
    """The options of ``fnpm``/``fnpm-streaming``, checked (:class:`InputError`), and the groups
    (:class:`GroupError` unless exactly two)."""
    if moments.n_groups != 2:
        raise GroupError(
            f"{method} compares exactly two groups (N is built from Σ₁ − Σ₀ and μ₁ − μ₀), the sensitive_features "
            f"give {moments.n_groups}: {list(moments.groups)}; merge them into two (one group against the rest) "
            "or use kleindessner, which takes any number"
        )
    n_unfair = checks.integer("n_unfair", n_unfair)
    constraint = checks.choice("constraint", constraint, CONSTRAINTS)
    tradeoff = checks.number("tradeoff", tradeoff)
    if tradeoff > 1.0:
        raise InputError(f"tradeoff must be in [0, 1] (1 projects N out, 0 is plain PCA), got {tradeoff!r}")
    return n_unfair, constraint, tradeoff, checks.flag("code_selection", code_selection)


def mean_difference(moments: GroupMoments) -> np.ndarray:
    """f = μ₁ − μ₀, from offsets about one point so that large common column means lose no digits."""
    relative = moments.means_about(moments.origin[0])
    return relative[1] - relative[0]


def group_covariances(moments: GroupMoments) -> np.ndarray:
    """Σ_g = S_g / (w_g − 1) (the code's ``jnp.cov``), shape (2, p, p)."""
    return moments.scatter / (moments.weight - 1.0)[:, None, None]


def zero_tolerance(moments: GroupMoments) -> float:
    """p · ε · max_g tr Σ_g: eigenvalues of Q = Σ₁ − Σ₀ at most this large are rounding (the
    error of a difference of two matrices of norm ≤ tr Σ_g), from the diagonals alone."""
    traces = moments.scatter_diagonal.sum(axis=1) / (moments.weight - 1.0)
    return moments.n_features * float(np.finfo(np.float64).eps) * float(traces.max())


def covariance_directions(
    values: np.ndarray, vectors: np.ndarray, n_unfair: int, tolerance: float, *, code_selection: bool = False
) -> tuple[np.ndarray, np.ndarray, int]:
    """From eigenpairs (or Ritz pairs) of Q: the eigenvectors of the ``n_unfair`` eigenvalues
    largest in magnitude, in that order, without those of magnitude ≤ ``tolerance`` (with
    ``code_selection``, kept, as the public code keeps them). Returns (W, their eigenvalues,
    how many zeros were left out)."""
    order = np.argsort(-np.abs(values), kind="stable")[:n_unfair]
    kept = order if code_selection else order[np.abs(values[order]) > tolerance]
    return vectors[:, kept], values[kept], int(order.size - kept.size)


def mean_tolerance(moments: GroupMoments) -> float:
    """p · ε · (max_g tr Σ_g)^½: a mean difference no longer than this is rounding (equal means)."""
    return float(np.sqrt(zero_tolerance(moments) * moments.n_features * np.finfo(np.float64).eps))


def unfair_subspace(
    directions: np.ndarray, difference: np.ndarray | None, *, negligible: float = 0.0, code_selection: bool = False
) -> tuple[np.ndarray, bool]:
    """N = [W, g/‖g‖] with g the mean difference f orthogonalised against W (``difference`` None,
    or ‖f‖ ≤ ``negligible``: N = W). Returns N and whether the mean direction is in it (module
    docstring, item 2)."""
    if difference is None:
        return directions, False
    if code_selection:
        unit = difference / (np.linalg.norm(difference) + _CODE_GUARD)
        if directions.shape[1] == 0:
            return unit[:, None], True
        if np.isclose(np.linalg.norm(unit), 0.0):
            return directions, False
        g = unit - directions @ (directions.T @ unit)
        return np.column_stack([directions, g / (np.linalg.norm(g) + _CODE_GUARD)]), True
    size = float(np.linalg.norm(difference))
    g = difference.copy()
    for _ in range(2):  # twice is enough (Parlett–Kahan)
        g -= directions @ (directions.T @ g)
    length = float(np.linalg.norm(g))
    if size <= negligible or length <= _MEAN_TOL * size:
        return directions, False
    return np.column_stack([directions, g / length]), True


def _projection(
    moments: GroupMoments, basis: np.ndarray, n_components: int, tradeoff: float, *, code_selection: bool
) -> np.ndarray:
    """V: the top-r eigenvectors of Π Σ Π, Π = I − t N Nᵀ (N = ``basis``). With t = 1 computed
    inside N^⊥ (module docstring, item 1), so that Vᵀ N = 0 exactly; with ``code_selection``, the
    code's top-r by |eigenvalue| of the p × p matrix."""
    if tradeoff == 1.0 and not code_selection:
        complement = scipy.linalg.null_space(basis.T) if basis.shape[1] else np.eye(moments.n_features)
        return _pca_within(moments, complement, n_components)[0]
    shrink = np.eye(moments.n_features) - tradeoff * basis @ basis.T
    shrunk = shrink @ moments.total_covariance() @ shrink
    if not code_selection:
        return top_eigenvectors(shrunk, n_components)[1]
    values, vectors = np.linalg.eigh((shrunk + shrunk.T) / 2)
    return fix_signs(vectors[:, np.argsort(np.abs(values))[::-1][:n_components]])


def check_room(n_components: int, n_features: int, dimension: int, constraint: str, tradeoff: float) -> None:
    """:class:`InputError` when N^⊥ (N of ``dimension`` columns) has fewer than r directions
    (t = 1 projects N out)."""
    left = n_features - dimension
    if tradeoff == 1.0 and n_components > left:
        raise InputError(
            f"n_components={n_components} is more than the {left} directions left once the "
            f"{dimension} unfair directions (constraint={constraint!r}, n_unfair) are projected out "
            f"(n_features={n_features}); lower n_components or n_unfair, or set tradeoff < 1"
        )


def certificate_of(
    components: np.ndarray, difference: np.ndarray, products: np.ndarray, total_trace: float, variance: float
) -> dict[str, float]:
    """The fairness certificate at V (p × r): ``projected_mean_gap`` ‖Vᵀf‖ (f = ``difference``),
    ``projected_covariance_gap`` ‖Vᵀ(Σ₁ − Σ₀)V‖₂ (spectral norm; ``products`` holds Σ₀V and Σ₁V,
    shape (2, p, r)) and ``explained_variance_ratio`` = ``variance`` / ``total_trace``."""
    gap = components.T @ (products[1] - products[0])
    return {
        "projected_mean_gap": float(np.linalg.norm(components.T @ difference)),
        "projected_covariance_gap": float(np.linalg.norm((gap + gap.T) / 2, ord=2)),
        "explained_variance_ratio": float(variance / total_trace),
    }


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    n_unfair: int = 2,
    constraint: str = "all",
    tradeoff: float = 1.0,
    code_selection: bool = False,
) -> FairProjection:
    """FNPM's offline solution (module docstring): PCA of Π Σ Π with Π = I − t N Nᵀ, N the
    unfair subspace of the mean difference and the m directions where the group covariances
    differ most. Closed form: eigendecompositions of Q and of Σ in N^⊥, O(p³).

    Parameters
    ----------
    n_unfair : int
        m, the directions of Q = Σ₁ − Σ₀ (largest |eigenvalue|) in N (the code's
        ``target_unfair_dim``; its experiments use 2 … 50). Zero eigenvalues are left out.
    constraint : {"all", "mean", "covariance"}
        What N holds: both, the mean difference only, or Q's directions only.
    tradeoff : float
        t ∈ [0, 1] in Π = I − t N Nᵀ (the code's ``fairness_tradeoff``): 1 projects N out.
    code_selection : bool
        ``True``: the public code's choices (zero eigenvalues selected, the guarded one-step
        orthogonalisation, PCA by |eigenvalue| of the p × p Π Σ Π), for comparison with it.

    Returns
    -------
    FairProjection
        ``certificate``: ``projected_mean_gap`` ‖Vᵀ(μ₁ − μ₀)‖ (zero up to rounding for "mean" and
        "all" at t = 1), ``projected_covariance_gap`` ‖Vᵀ(Σ₁ − Σ₀)V‖₂, ``explained_variance_ratio``.
        ``details``: ``unfair_dimension`` (dim N), ``unfair_eigenvalues`` (Q's, in N),
        ``zero_directions_left_out``, ``mean_direction`` (whether N holds it).
    """
    n_unfair, constraint, tradeoff, code_selection = check_problem(
        moments, "fnpm", n_unfair, constraint, tradeoff, code_selection
    )
    covariances = group_covariances(moments)
    difference = mean_difference(moments)
    if constraint == "mean":
        directions, eigenvalues, zeros = np.zeros((moments.n_features, 0)), np.zeros(0), 0
    else:
        values, vectors = scipy.linalg.eigh(covariances[1] - covariances[0])
        directions, eigenvalues, zeros = covariance_directions(
            values, vectors, n_unfair, zero_tolerance(moments), code_selection=code_selection
        )
    basis, with_mean = unfair_subspace(
        directions,
        None if constraint == "covariance" else difference,
        negligible=mean_tolerance(moments),
        code_selection=code_selection,
    )
    unfair = UnfairSubspace(basis, eigenvalues, zeros, with_mean)
    if not code_selection:
        check_room(n_components, moments.n_features, basis.shape[1], constraint, tradeoff)
    total = moments.total_covariance()
    components = _projection(moments, basis, n_components, tradeoff, code_selection=code_selection)
    variance = float(np.trace(components.T @ total @ components))
    return make_projection(
        moments,
        components,
        method="fnpm",
        n_components=n_components,
        center=center,
        objective_history=[variance],
        n_iter=1,
        status="closed_form",
        certificate=certificate_of(components, difference, covariances @ components, float(np.trace(total)), variance),
        options={
            "n_unfair": n_unfair,
            "constraint": constraint,
            "tradeoff": tradeoff,
            "code_selection": code_selection,
        },
        details=details_of(unfair),
    )


def details_of(unfair: UnfairSubspace) -> dict[str, object]:
    """The ``details`` of an fnpm fit: what N holds."""
    return {
        "unfair_dimension": int(unfair.basis.shape[1]),
        "unfair_eigenvalues": [float(v) for v in unfair.eigenvalues],
        "zero_directions_left_out": unfair.zero_directions,
        "mean_direction": unfair.mean_direction,
    }


def criterion_key(options: dict[str, object]) -> str:
    """The criterion an fnpm fit makes fair: the projected mean gap (linear MMD²) unless
    ``constraint="covariance"``, which leaves the means alone (then explained variance)."""
    return "explained_variance_ratio" if options.get("constraint") == "covariance" else "mmd2_linear"
