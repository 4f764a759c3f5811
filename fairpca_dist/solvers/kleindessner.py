"""Fair PCA by projecting out the group-mean differences: Kleindessner, Donini, Russell & Zafar,
"Efficient fair PCA for fair representation learning" (AISTATS 2023; code amazon-science/fair-pca,
spec/anchors-fairpca.md §6). Methods ``"kleindessner"`` and ``"kleindessner-cov"``.

Fairness here is that no linear function of the projection predicts the group better than a
constant: every projected group has the same mean, Vᵀμ_g = Vᵀμ for all g. The projections that
satisfy it are those inside the orthogonal complement of the mean differences,

    R = an orthonormal basis of span{μ_g − μ : g}^⊥      (p × (p − k + 1) for k generic groups),

and among them the variance is maximised by PCA there (the paper's Theorem; Ky Fan):

    V = R W,   W = the top-r eigenvectors of Rᵀ Σ R,

with Σ the covariance of all rows about the global mean. The authors' code forms R as the null
space of zᵀX with z the centred 0/1 group indicator, which is (n₁n₀/n)(μ₁ − μ₀)ᵀ: the same R.
For k > 2 groups (the code takes two) the complement of every μ_g − μ is the generalisation.

``"kleindessner-cov"`` (the paper's FairPCAEqualizeCovariance, §4) also makes the projected
group covariances nearly equal: within R it keeps the ``n_directions`` = l directions along
which the group covariances differ least, then does PCA in them (V = R Q W). The code takes the
l eigenvectors of Rᵀ(Σ₀ − Σ₁)R of smallest magnitude; for k groups this module takes the l
eigenvectors of smallest eigenvalue of Σ_g (Rᵀ(Σ_g − Σ̄)R)², Σ̄ the weighted mean of the group
covariances, which for two groups is c·(Rᵀ(Σ₀ − Σ₁)R)² and so selects exactly the code's
directions. As in the code, l is clipped to [r, p − k + 1], and Σ_g are the covariances with
divisor n_g − 1 (``np.cov``). The eigenproblems are solved densely (the code's ARPACK ``'SM'``
call can miss eigenvalues near zero).

Where the pooled covariance has a null space (a constant column, one-hot columns with every
category, any collinear columns) the paper's choice degenerates, and ``"kleindessner-cov"``
departs from it. Write H = RᵀΣR = U diag(λ) Uᵀ (λ decreasing) and N = span{U e_i : λ_i = 0},
the directions of R without variance. On R, Σ is the weighted mean of the group covariances
(the between-group part vanishes there), each PSD, so vᵀΣv = 0 gives Σ_g v = 0 for every g:
N lies in the null space of every Rᵀ(Σ_g − Σ̄)R, and the "least different" directions the
paper and the code take are N first. With dim N ≥ l the result spans directions with no
variance at all (explained variance 4.5 × 10⁻¹⁸ at the default l = 10 on the German credit
table one-hot encoded with every category, dim N = 12). Here the l directions are chosen
within the part of R where the pooled variance is not negligible,

    R₊ = R U₊,   U₊ = the eigenvectors of H with λ_i > p · ε · λ_1      (ε = 2.2 × 10⁻¹⁶),

the tolerance of ``numpy.linalg.matrix_rank`` for the symmetric p × p Σ: below it an
eigenvalue is rounding (on one-hot tables of 10³–10⁵ rows, also far from the origin, the null
eigenvalues came out below 10⁻¹⁵ λ_1 and the others above 10⁻⁴ λ_1). As Σ_g(Rᵀ(Σ_g − Σ̄)R)² is
block diagonal in N ⊕ span R₊, the choice in R₊ is the paper's with N replaced by the next
least different directions: the same subspace wherever H is full rank (dim N = 0), and never
less variance. When fewer than l directions carry variance, l is clipped to max(r, dim R₊);
the result is then ``"kleindessner"``'s (PCA in R, to which N adds nothing), and ``details``
says so. ``paper_selection=True`` keeps the paper's choice, for comparison with the authors'
code.

``"kleindessner-cov"`` warns (:class:`~fairpca_dist.exceptions.ModelWarning`) when its
projection keeps a negligible share of the variance the mean constraint allows: when, for some
j ≤ min(r, dim R₊), its j-th column keeps less than :data:`NEGLIGIBLE_SHARE` × λ_j, the
variance of ``"kleindessner"``'s j-th column (columns in decreasing order of variance). That
happens with ``paper_selection=True`` on a singular Σ, and whenever the l least different
directions carry almost no variance: on LFW (1,764 pixels) the default l = 10 at r = 2 keeps
2.5 × 10⁻⁶ of the variance, against 0.35 for ``"kleindessner"``; on UCI Bank Marketing
one-hot (four marital groups) at r = l ≤ 10 one column lies along nearly collinear one-hot
columns (loan, poutcome) and keeps < 10⁻⁶ of λ_j. On German credit, Adult and Bank one-hot the
default l = 10 keeps 0.29–0.44 of ``"kleindessner"``'s variance, each column 0.18 or more of λ_j.

Not carried over: the code's ``tradeoff_param``, which appends t³ × the PCA projection as extra
output columns (a representation for a downstream classifier, not a rank-r projection).
Standardising is ``fit_projection(..., standardize=True)``, as the code's default.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import InputError, ModelWarning
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import fix_signs, top_eigenvectors

__all__ = ["solve", "solve_covariance", "mean_complement", "NEGLIGIBLE_SHARE"]

#: kleindessner-cov warns when a column of its projection keeps less than this share of the
#: variance of the same column of kleindessner's (module docstring). At the default l = 10 the
#: columns of real tables keep 0.18 or more of it; degenerate ones keep ≤ 10⁻⁵ (module docstring).
NEGLIGIBLE_SHARE = 1e-3


def mean_complement(moments: GroupMoments) -> np.ndarray:
    """R: an orthonormal basis of the complement of the group-mean differences μ_g − μ
    (p × (p − rank)); every projection VᵀR-spanned maps all groups to the same mean."""
    return scipy.linalg.null_space(moments.mean_gaps())


def _complement(moments: GroupMoments, n_components: int) -> np.ndarray:
    basis = mean_complement(moments)
    if basis.shape[1] < n_components:
        raise InputError(
            f"n_components={n_components} is more than the {basis.shape[1]} directions left once the "
            f"{moments.n_features - basis.shape[1]} group-mean differences are projected out "
            f"(n_features={moments.n_features}, {moments.n_groups} groups)"
        )
    return basis


def _pca_within(moments: GroupMoments, basis: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray, float]:
    """PCA restricted to span(basis): V = basis · top-r eigenvectors of basisᵀ Σ basis, the
    variance of each of its columns (decreasing), and tr Σ."""
    total = moments.total_covariance()
    eigenvalues, inner = top_eigenvectors(basis.T @ total @ basis, n_components)
    return fix_signs(basis @ inner), eigenvalues, float(np.trace(total))


def _with_variance(moments: GroupMoments, basis: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """R₊ (module docstring), raised to ``n_components`` directions if it has fewer (the most
    variant of span(basis) first), and the eigenvalues λ of basisᵀ Σ basis above p · ε · λ_1,
    decreasing: dim R₊ of them."""
    values, vectors = scipy.linalg.eigh(basis.T @ moments.total_covariance() @ basis)
    values, vectors = values[::-1], vectors[:, ::-1]
    usable = values[values > moments.n_features * np.finfo(np.float64).eps * max(float(values[0]), 0.0)]
    return basis @ vectors[:, : max(usable.size, n_components)], usable


def _projection(
    moments: GroupMoments,
    found: tuple[np.ndarray, np.ndarray, float],
    n_components: int,
    method: str,
    center: Center,
    certificate: dict[str, float],
    options: dict,
    details: dict | None = None,
) -> FairProjection:
    components, variances, trace = found
    gaps = moments.mean_gaps() @ components
    certificate = {
        **certificate,
        "max_projected_mean_gap": float(np.abs(gaps).max()),
        "explained_variance_ratio": float(variances.sum()) / trace,
    }
    return make_projection(
        moments,
        components,
        method=method,
        n_components=n_components,
        center=center,
        objective_history=[float(variances.sum())],
        n_iter=1,
        status="closed_form",
        certificate=certificate,
        options=options,
        details=details,
    )


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
) -> FairProjection:
    """PCA in the complement of the group-mean differences (module docstring; Kleindessner et
    al. 2023, Algorithm 1): max tr(VᵀΣV) s.t. VᵀV = I, Vᵀ(μ_g − μ) = 0 for every group.

    ``certificate``: ``max_projected_mean_gap`` (max |Vᵀ(μ_g − μ)|, zero up to rounding) and
    ``explained_variance_ratio``. ``random_state`` is unused (closed form).
    """
    found = _pca_within(moments, _complement(moments, n_components), n_components)
    return _projection(moments, found, n_components, "kleindessner", center, {}, {})


def solve_covariance(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    n_directions: int = 10,
    paper_selection: bool = False,
) -> FairProjection:
    """Mean-fair PCA that also nearly equalises the projected group covariances (module
    docstring; Kleindessner et al. 2023, §4, FairPCAEqualizeCovariance).

    V = R₊ Q W: Q = the l eigenvectors of smallest eigenvalue of Σ_g (R₊ᵀ(Σ_g − Σ̄)R₊)², W = the
    top-r eigenvectors of QᵀR₊ᵀ Σ R₊Q, with R₊ the directions of the mean complement R whose
    pooled variance is not negligible (module docstring; R₊ = R where Σ is full rank on R).

    Parameters
    ----------
    n_directions : int
        l, how many directions of the mean complement to keep: those where the group covariances
        differ least (the smaller, the more equal the projected covariances; the code's
        ``nr_eigenvecs_cov_constraint``, default 10), clipped to [n_components, dim R₊]
        (dim R₊ = p − k + 1 where Σ is full rank on R).
    paper_selection : bool
        ``True``: choose among all of R (R₊ = R), as the paper and the authors' code do; where Σ
        is singular on R this takes the directions without variance first (and warns).

    ``certificate`` as :func:`solve`, plus ``n_directions`` (l after clipping) and
    ``max_covariance_gap`` = max_g ‖Vᵀ(Σ_g − Σ̄)V‖_F. ``details``: ``directions_with_variance``
    (dim R₊), ``directions_without_variance`` (dim R − dim R₊) and ``n_directions_clipped``: why
    l differs from ``n_directions``, or None. Warns (:class:`~fairpca_dist.exceptions.ModelWarning`)
    when the projection keeps a negligible share of the variance (module docstring).
    """
    checks.integer("n_directions", n_directions)
    checks.flag("paper_selection", paper_selection)
    basis = _complement(moments, n_components)
    span, usable = _with_variance(moments, basis, n_components)
    if paper_selection:
        span = basis
    covariances = moments.scatter_about("group") / (moments.weight - 1.0)[:, None, None]
    average = np.tensordot(moments.weight / moments.weight.sum(), covariances, axes=1)
    spread = span.T @ (covariances - average) @ span  # (k, d, d) with d = dim R₊, each symmetric
    kept = max(n_components, min(span.shape[1], n_directions))
    side_by_side = np.concatenate(list(spread), axis=1)  # Σ_g S_g² = [S_1 … S_k][S_1 … S_k]ᵀ: one product
    _, directions = scipy.linalg.eigh(side_by_side @ side_by_side.T, subset_by_index=[0, kept - 1])  # the l smallest
    found = _pca_within(moments, span @ directions, n_components)
    components = found[0]
    gap = max(float(np.linalg.norm(components.T @ (c - average) @ components)) for c in covariances)
    without = basis.shape[1] - usable.size
    _warn_if_negligible(found, usable, kept, without if paper_selection else 0)
    details = {
        "directions_with_variance": usable.size,
        "directions_without_variance": without,
        "n_directions_clipped": _clipped(n_directions, kept, n_components, usable.size, without, paper_selection),
    }
    return _projection(
        moments,
        found,
        n_components,
        "kleindessner-cov",
        center,
        {"n_directions": float(kept), "max_covariance_gap": gap},
        {"n_directions": n_directions, "paper_selection": paper_selection},
        details,
    )


def _warn_if_negligible(
    found: tuple[np.ndarray, np.ndarray, float], usable: np.ndarray, kept: int, skipped: int
) -> None:
    """The :class:`ModelWarning` of a kleindessner-cov projection some of whose columns keep less
    than :data:`NEGLIGIBLE_SHARE` of the variance of kleindessner's same column (``usable``: the
    eigenvalues λ_j of RᵀΣR above rounding, the latter's column variances); ``skipped``: the
    directions without variance that ``paper_selection=True`` took. Warned at the caller of
    :func:`~fairpca_dist.fit_projection`."""
    _, variances, trace = found
    best = usable[: variances.size]
    idle = int(np.count_nonzero(variances[: best.size] < NEGLIGIBLE_SHARE * best))
    if not idle:
        return
    cause = (
        f"paper_selection=True takes the {skipped} directions of the mean complement without variance first"
        if skipped
        else f"the n_directions={kept} directions where the group covariances differ least carry "
        "almost none; a larger n_directions keeps more"
    )
    warnings.warn(
        f"kleindessner-cov: the projection explains {variances.sum() / trace:.2g} of the variance, "
        f"kleindessner's {best.sum() / trace:.2g}; {idle} of its {variances.size} column(s) keep less than "
        f"{NEGLIGIBLE_SHARE:g} of the variance of kleindessner's: {cause}",
        ModelWarning,
        stacklevel=4,
    )


def _clipped(
    n_directions: int, kept: int, n_components: int, usable: int, without: int, paper_selection: bool
) -> str | None:
    """Why l = ``kept`` differs from the ``n_directions`` asked for (None when it does not)."""
    if kept == n_directions:
        return None
    if kept > n_directions:
        return f"n_directions={n_directions} raised to n_components={n_components}"
    if without and not paper_selection:
        return (
            f"n_directions={n_directions} clipped to {kept}: only {usable} directions of the mean complement "
            f"have variance ({without} have none); the result is kleindessner's, PCA in the mean complement"
        )
    return f"n_directions={n_directions} clipped to the {kept} directions of the mean complement"
