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

Not carried over: the code's ``tradeoff_param``, which appends t³ × the PCA projection as extra
output columns (a representation for a downstream classifier, not a rank-r projection).
Standardising is ``fit_projection(..., standardize=True)``, as the code's default.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from fairpca_dist.exceptions import InputError
from fairpca_dist.moments import Center, GroupMoments
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import fix_signs, top_eigenvectors

__all__ = ["solve", "solve_covariance", "mean_complement"]


def mean_complement(moments: GroupMoments) -> np.ndarray:
    """R: an orthonormal basis of the complement of the group-mean differences μ_g − μ
    (p × (p − rank)); every projection VᵀR-spanned maps all groups to the same mean."""
    return scipy.linalg.null_space(moments.mean - moments.global_mean)


def _complement(moments: GroupMoments, n_components: int) -> np.ndarray:
    basis = mean_complement(moments)
    if basis.shape[1] < n_components:
        raise InputError(
            f"n_components={n_components} is more than the {basis.shape[1]} directions left once the "
            f"{moments.n_features - basis.shape[1]} group-mean differences are projected out "
            f"(n_features={moments.n_features}, {moments.n_groups} groups)"
        )
    return basis


def _pca_within(moments: GroupMoments, basis: np.ndarray, n_components: int) -> tuple[np.ndarray, float, float]:
    """PCA restricted to span(basis): V = basis · top-r eigenvectors of basisᵀ Σ basis, the
    variance it keeps, tr(VᵀΣV), and tr Σ."""
    total = moments.total_covariance()
    eigenvalues, inner = top_eigenvectors(basis.T @ total @ basis, n_components)
    return fix_signs(basis @ inner), float(eigenvalues.sum()), float(np.trace(total))


def _projection(moments: GroupMoments, found: tuple[np.ndarray, float, float], n_components: int, method: str,
                center: Center, certificate: dict[str, float], options: dict) -> FairProjection:
    components, variance, trace = found
    gaps = (moments.mean - moments.global_mean) @ components
    certificate = {**certificate, "max_projected_mean_gap": float(np.abs(gaps).max()),
                   "explained_variance_ratio": variance / trace}
    return make_projection(moments, components, method=method, n_components=n_components, center=center,
                           objective_history=[variance], n_iter=1, status="closed_form", certificate=certificate,
                           options=options)


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
) -> FairProjection:
    """Mean-fair PCA that also nearly equalises the projected group covariances (module
    docstring; Kleindessner et al. 2023, §4, FairPCAEqualizeCovariance).

    Parameters
    ----------
    n_directions : int
        l, how many directions of the mean complement to keep: those where the group covariances
        differ least (the smaller, the more equal the projected covariances; the code's
        ``nr_eigenvecs_cov_constraint``, default 10), clipped to [n_components, p − k + 1].

    ``certificate`` as :func:`solve`, plus ``n_directions`` (l after clipping) and
    ``max_covariance_gap`` = max_g ‖Vᵀ(Σ_g − Σ̄)V‖_F.
    """
    checks.integer("n_directions", n_directions)
    basis = _complement(moments, n_components)
    covariances = moments.scatter_about("group") / (moments.weight - 1.0)[:, None, None]
    average = np.tensordot(moments.weight / moments.weight.sum(), covariances, axes=1)
    spread = basis.T @ (covariances - average) @ basis  # (k, d, d) with d = p − k + 1, each symmetric
    kept = max(n_components, min(basis.shape[1], n_directions))
    side_by_side = np.concatenate(list(spread), axis=1)  # Σ_g S_g² = [S_1 … S_k][S_1 … S_k]ᵀ: one product
    _, directions = scipy.linalg.eigh(side_by_side @ side_by_side.T, subset_by_index=[0, kept - 1])  # the l smallest
    found = _pca_within(moments, basis @ directions, n_components)
    components = found[0]
    gap = max(float(np.linalg.norm(components.T @ (c - average) @ components)) for c in covariances)
    return _projection(moments, found, n_components, "kleindessner-cov", center,
                       {"n_directions": float(kept), "max_covariance_gap": gap}, {"n_directions": n_directions})
