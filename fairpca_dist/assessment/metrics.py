"""Fairness and quality metrics of a projection, from group moments or from rows.

For components V (p × r, orthonormal) and per-group second moments Σ_g about the chosen
centre (:meth:`GroupMoments.covariance`), following spec/seeds-000-001.md §0.3
(Samadi et al. 2018, Def. 4.3–4.4; Rathore & Manwani, Def. 1 and Lemma 1):

    err_g(V)  = tr Σ_g − tr(Vᵀ Σ_g V)         average squared reconstruction error of group g
    err_g*(r) = tr Σ_g − Σ_{i≤r} λ_i(Σ_g)      the best any rank-r projection can do for g alone
    loss_g(V) = err_g(V) − err_g*(r) ≥ 0       the price group g pays for sharing V
    EVR_g(V)  = 1 − err_g(V) / tr Σ_g          share of group g's variance kept
    MMD²_ab(V) = ‖Vᵀ(μ_a − μ_b)‖²              squared MMD of the projected groups, linear kernel

The RBF-kernel MMD² of the projected groups (:func:`mmd2_rbf`; Lee et al. 2022, spec
seed-004.md §1.3) has no finite statistic: it reads the rows, through a
:class:`~fairpca_dist.engine.datapasses.DataPasses` (all pairs in kernel blocks, or random Fourier
features in one additive pass; :func:`mmd2_rbf_many` estimates several projections in one such
pass), and :func:`rbf_bandwidth` gives its median-heuristic σ.

Components need not be orthonormal: Samadi et al.'s rank-(r + k − 1) output is a map
E = [√λ*_j u_j] with reconstruction x ↦ x EEᵀ. With P* = EEᵀ the reconstruction error is
tr((I − P*) Σ_g (I − P*)) = tr Σ_g − ⟨Σ_g, 2P* − P*²⟩, which is the formula used throughout
(for orthonormal V, 2P* − P*² = VVᵀ). Losses then take the target rank r explicitly.

Every moment-based function has a row-based twin (``*_from_rows``) computing the same number
literally from the rows, in memory; the tests prove the two agree. No dask here.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from fairpca_dist.engine.datapasses import DataPasses, RFFRequest
from fairpca_dist.engine.kernels import (
    DEFAULT_BLOCK_ROWS,
    RandomFeatures,
    RFFSums,
    median_bandwidth,
    pairwise_rbf,
    pairwise_rff,
)
from fairpca_dist.engine.moments import Center, GroupMoments, sorted_labels
from fairpca_dist.exceptions import GroupError, InputError
from fairpca_dist.wording import differences

__all__ = [
    "losses_from_covariance",
    "loss_rounding",
    "best_rank_variance",
    "group_errors",
    "group_traces",
    "center_offsets",
    "losses_from_kept",
    "group_errors_about",
    "group_variance_about",
    "optimal_group_errors",
    "group_losses",
    "group_explained_variance_ratio",
    "explained_variance",
    "explained_variance_ratio",
    "mmd2_linear",
    "RBF_ESTIMATORS",
    "rbf_bandwidth",
    "mmd2_rbf",
    "mmd2_rbf_many",
    "rff_requests",
    "mmd2_from_rff_sums",
    "group_errors_from_rows",
    "group_losses_from_rows",
    "group_explained_variance_ratio_from_rows",
    "explained_variance_ratio_from_rows",
    "mmd2_linear_from_rows",
]


def _check_components(moments: GroupMoments, components: np.ndarray) -> np.ndarray:
    components = np.asarray(components, dtype=np.float64)
    if components.ndim != 2 or components.shape[0] != moments.n_features:
        raise InputError(
            f"components must have shape (n_features={moments.n_features}, n_components), got {components.shape}"
        )
    return components


def _kept_variance(covariance: np.ndarray, components: np.ndarray) -> np.ndarray:
    """⟨Σ_g, 2P* − P*²⟩ with P* = EEᵀ for each group (= tr(VᵀΣ_gV) for orthonormal V)."""
    projected = components.T @ (covariance @ components)  # (k, r', r'), two BLAS products
    gram = components.T @ components
    return 2.0 * np.trace(projected, axis1=1, axis2=2) - np.einsum("gij,ji->g", projected, gram)


def best_rank_variance(covariance: np.ndarray, n_components: int) -> np.ndarray:
    """β_g(r): the sum of the r largest eigenvalues of each Σ_g, shape (k,).

    Only the top r are computed (:func:`fairpca_dist.solvers.stiefel.top_eigenvectors`: a
    block Lanczos method from p = 200 on, LAPACK with an index range below), to ~10⁻¹³·λ₁.

    Parameters
    ----------
    covariance : ndarray of shape (k, p, p)
        Per-group second moments Σ_g.
    n_components : int
        The rank r.

    Returns
    -------
    ndarray of shape (k,)
        β_g(r) per group.
    """
    # imported here: fairpca_dist.solvers imports this module
    from fairpca_dist.solvers.stiefel import top_eigenvectors

    return np.array([top_eigenvectors(matrix, n_components)[0].sum() for matrix in np.asarray(covariance)])


def losses_from_covariance(covariance: np.ndarray, best: np.ndarray, components: np.ndarray) -> np.ndarray:
    """loss_g = β_g − ⟨Σ_g, 2P* − P*²⟩ directly from the (k, p, p) second moments and the
    (k,) best values β_g(r): the inner loop of the fair solvers, which work on arrays.

    Parameters
    ----------
    covariance : ndarray of shape (k, p, p)
        Per-group second moments Σ_g.
    best : ndarray of shape (k,)
        β_g(r), from :func:`best_rank_variance`.
    components : ndarray of shape (p, r')
        The projection.

    Returns
    -------
    ndarray of shape (k,)
        loss_g per group.
    """
    return best - _kept_variance(covariance, components)


def loss_rounding(covariance: np.ndarray) -> float:
    """A margin for the rounding of losses computed from these (k, p, p) second moments:
    8·p·ε_mach·max_g tr Σ_g (β_g(r) and the kept variance are sums of p terms of that size, and
    their difference cancels). Gaps below it are the data's precision, not the solver's.

    Parameters
    ----------
    covariance : ndarray of shape (k, p, p)
        Per-group second moments Σ_g.

    Returns
    -------
    float
        8 · ε · p · max_g |tr Σ_g|.
    """
    traces = np.trace(np.asarray(covariance), axis1=-2, axis2=-1)
    return _rounding(traces, covariance.shape[-1])


def _rounding(traces: np.ndarray, n_features: int) -> float:
    return 8.0 * np.finfo(float).eps * n_features * float(np.abs(traces).max())


def losses_from_kept(best: np.ndarray, kept: np.ndarray, traces: np.ndarray, n_features: int) -> np.ndarray:
    """loss_g = β_g(r) − tr(VᵀΣ_gV) from the three per-group numbers a method that never forms
    Σ_g computes (``fnpm-streaming`` on a wide table: Ritz values and products with V from the
    rows), with :func:`group_losses`' rounding margin (8·p·ε·max_g tr Σ_g) clipped to 0.

    Parameters
    ----------
    best, kept, traces : ndarray of shape (k,)
        β_g(r), tr(VᵀΣ_gV) and tr Σ_g.
    n_features : int
        p.

    Returns
    -------
    ndarray of shape (k,)
    """
    losses = np.asarray(best, dtype=np.float64) - np.asarray(kept, dtype=np.float64)
    return np.where((losses < 0.0) & (losses >= -_rounding(np.asarray(traces), n_features)), 0.0, losses)


def group_errors(moments: GroupMoments, components: np.ndarray, *, center: Center = "group") -> np.ndarray:
    """err_g = tr Σ_g − ⟨Σ_g, 2P* − P*²⟩ (= tr Σ_g − tr(VᵀΣ_gV) for orthonormal V), shape (k,).

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    center : {"group", "global", "origin"}, default "group"
        About which point each group's second moments are taken.

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).

    Raises
    -------
    InputError
        ``components`` does not have one row per feature.

    Examples
    --------
    >>> import numpy as np
    >>> from fairpca_dist import GroupMoments
    >>> from fairpca_dist.assessment import metrics
    >>> x = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    >>> moments = GroupMoments.from_arrays(x, ["a", "a", "b", "b"])
    >>> first_axis = np.array([[1.0], [0.0]])
    >>> metrics.group_errors(moments, first_axis).tolist()  # group b lies along the axis left out
    [0.0, 1.0]
    >>> metrics.group_losses(moments, first_axis).tolist()  # b could have had error 0 alone
    [0.0, 1.0]
    """
    components = _check_components(moments, components)
    return _errors(moments.covariance(center), components)


def _errors(covariance: np.ndarray, components: np.ndarray) -> np.ndarray:
    return np.trace(covariance, axis1=1, axis2=2) - _kept_variance(covariance, components)


def _second_moments_about(moments: GroupMoments, points: np.ndarray) -> np.ndarray:
    """E_g (x − c_g)(x − c_g)ᵀ = Σ_g + d_g d_gᵀ with d_g = μ_g − c_g, shape (k, p, p);
    ``points`` (k, p), or (p,) for one point shared by all groups."""
    points = np.broadcast_to(np.asarray(points, dtype=np.float64), moments.mean.shape)
    offset = (moments.origin - points) + moments.mean_offset
    scatter = moments.scatter_about("group")  # refuses diagonal-only moments
    return scatter / moments.weight[:, None, None] + offset[:, :, None] * offset[:, None, :]


def center_offsets(moments: GroupMoments, center: Center = "group") -> np.ndarray:
    """d_g = μ_g − c_g, each group's mean about its centre (:meth:`GroupMoments.centers`), shape
    (k, p), every digit kept: Σ_g about c_g is S_g / w_g + d_g d_gᵀ."""
    if center == "group":
        return np.zeros((moments.n_groups, moments.n_features))
    return moments.mean_gaps() if center == "global" else moments.mean


def group_traces(moments: GroupMoments, *, center: Center = "group") -> np.ndarray:
    """tr Σ_g = Σ_j diag(S_g)_j / w_g + ‖d_g‖² about the centre of ``center``, shape (k,): each
    group's total variance, from the diagonals alone (both forms of the moments)."""
    offsets = center_offsets(moments, center)
    return moments.scatter_diagonal.sum(axis=1) / moments.weight + (offsets**2).sum(axis=1)


def group_errors_about(moments: GroupMoments, components: np.ndarray, points: np.ndarray) -> np.ndarray:
    """err_g = E_g ‖(I − P)(x − c_g)‖² about given points c_g, shape (k,).

    The reconstruction error of rows centred at a point that need not be their own (e.g. a
    training mean applied to test rows): with d_g = μ_g − c_g, the second moment about c_g is
    Σ_g + d_g d_gᵀ, so err_g = tr(Σ_g + d_g d_gᵀ) − ⟨Σ_g + d_g d_gᵀ, 2P − P²⟩.
    ``points`` has shape (k, p), or (p,) for one point shared by all groups.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    points : ndarray of shape (k, p) or (p,)
        The point c_g each group's rows are centred at (one point shared by all groups for (p,)).

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).

    Raises
    -------
    InputError
        ``components`` does not have one row per feature.
    """
    components = _check_components(moments, components)
    second = _second_moments_about(moments, points)
    return np.trace(second, axis1=1, axis2=2) - _kept_variance(second, components)


def group_variance_about(moments: GroupMoments, components: np.ndarray, points: np.ndarray) -> np.ndarray:
    """E_g ‖P(x − c_g)‖² = ⟨Σ_g + d_g d_gᵀ, 2P − P²⟩ about given points c_g, shape (k,): the
    variance each group keeps (Babu et al.'s max-min criterion), the complement of
    :func:`group_errors_about`.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    points : ndarray of shape (k, p) or (p,)
        The point c_g each group's rows are centred at (one point shared by all groups for (p,)).

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).

    Raises
    -------
    InputError
        ``components`` does not have one row per feature.
    """
    components = _check_components(moments, components)
    return _kept_variance(_second_moments_about(moments, points), components)


def optimal_group_errors(moments: GroupMoments, n_components: int, *, center: Center = "group") -> np.ndarray:
    """err_g*(r) = sum of all but the r largest eigenvalues of Σ_g, shape (k,).

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    n_components : int
        The rank r.
    center : {"group", "global", "origin"}, default "group"
        About which point each group's second moments are taken.

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).
    """
    return _optimal_errors(moments.covariance(center), n_components)


def _optimal_errors(covariance: np.ndarray, n_components: int) -> np.ndarray:
    total = np.trace(covariance, axis1=1, axis2=2)
    return np.clip(total - best_rank_variance(covariance, n_components), 0.0, None)


def group_losses(
    moments: GroupMoments,
    components: np.ndarray,
    *,
    n_components: int | None = None,
    center: Center = "group",
    best: np.ndarray | None = None,
) -> np.ndarray:
    """loss_g = err_g − err_g*(r), shape (k,). r defaults to the number of columns of the
    components; pass it for rank-relaxed maps (more columns than the target rank). ``best``
    (β_g(r), if the caller has it) saves the eigendecompositions. A loss is ≥ 0 (Ky Fan); one
    that its rounding (:func:`loss_rounding`) puts below 0, as at r = p, is reported as 0.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    n_components : int, optional
        The target rank r (default: the number of columns of ``components``).
    center : {"group", "global", "origin"}, default "group"
        About which point each group's second moments are taken.
    best : ndarray of shape (k,), optional
        β_g(r), when the caller has it.

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).

    Raises
    -------
    InputError
        ``components`` does not have one row per feature.
    """
    components = _check_components(moments, components)
    covariance = moments.covariance(center)  # once: Σ_g is k·p² numbers to form
    if best is not None:
        losses = losses_from_covariance(covariance, best, components)
    else:
        r = components.shape[1] if n_components is None else n_components
        losses = _errors(covariance, components) - _optimal_errors(covariance, r)
    return np.where((losses < 0.0) & (losses >= -loss_rounding(covariance)), 0.0, losses)


def group_explained_variance_ratio(
    moments: GroupMoments, components: np.ndarray, *, center: Center = "group"
) -> np.ndarray:
    """EVR_g = 1 − err_g / tr Σ_g, the share of each group's variance kept, shape (k,).

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    center : {"group", "global", "origin"}, default "group"
        About which point each group's second moments are taken.

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).

    Raises
    -------
    InputError
        ``components`` does not have one row per feature.
    """
    components = _check_components(moments, components)
    covariance = moments.covariance(center)
    return _kept_variance(covariance, components) / np.trace(covariance, axis1=1, axis2=2)


def explained_variance(moments: GroupMoments, components: np.ndarray, *, ddof: int = 0) -> np.ndarray:
    """Variance of all rows along each component, diag(Vᵀ Σ_tot V), shape (r,).

    ``ddof=1`` matches scikit-learn's ``PCA.explained_variance_``.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    ddof : int, default 0
        Delta degrees of freedom of the pooled covariance.

    Returns
    -------
    ndarray of shape (r',)

    Raises
    -------
    InputError
        ``components`` does not have one row per feature.
    """
    components = _check_components(moments, components)
    total = moments.total_covariance(ddof)
    return np.sum(components * (total @ components), axis=0)


def explained_variance_ratio(moments: GroupMoments, components: np.ndarray) -> np.ndarray:
    """Share of the total variance (all rows, about the global mean) along each component.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).

    Returns
    -------
    ndarray of shape (r',)
        Their sum is the share of the variance the projection keeps.
    """
    total = moments.total_covariance()
    return explained_variance(moments, components) / np.trace(total)


def mmd2_linear(moments: GroupMoments, components: np.ndarray) -> np.ndarray:
    """Pairwise ‖Vᵀ(μ_a − μ_b)‖², shape (k, k): the squared MMD of the projected groups
    under the linear kernel (biased V-statistic, which is exact for this kernel).

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).

    Returns
    -------
    ndarray of shape (k, k)
        Symmetric, zero diagonal; entry (a, b) for groups a and b.

    Raises
    -------
    InputError
        ``components`` does not have one row per feature.
    """
    components = _check_components(moments, components)
    projected = moments.means_about(moments.origin[0]) @ components
    difference = projected[:, None, :] - projected[None, :, :]
    return np.einsum("abi,abi->ab", difference, difference)


RBF_ESTIMATORS = ("exact", "rff")
"""How :func:`mmd2_rbf` reads the rows: every pair of rows, or random Fourier features."""


def _check_passes(moments: GroupMoments, passes: DataPasses) -> None:
    if tuple(passes.groups) != moments.groups:
        raise GroupError(
            "the rows have other groups than the moments: "
            + differences("the moments", moments.groups, "the rows", tuple(passes.groups))
        )


def rbf_bandwidth(
    moments: GroupMoments,
    passes: DataPasses,
    components: np.ndarray,
    *,
    mode: str = "code",
    max_rows_per_group: int = 2000,
    seed: int = 0,
) -> float:
    """σ of the RBF kernel by the median heuristic (:func:`fairpca_dist.engine.kernels.median_bandwidth`,
    ``mode`` "code" or "paper") on the rows projected by ``components``, from a uniform sample
    of at most ``max_rows_per_group`` rows per group (two passes; deterministic for a seed):
    what the ``mmd`` solver does at the PCA projection.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    passes : DataPasses
        The rows of ``moments`` (:func:`fairpca_dist.engine.passes.table_passes`).
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    mode : {"code", "paper"}, default "code"
        σ = √(median squared distance / 2) (the authors' code), or the median distance (the paper).
    max_rows_per_group : int, default 2000
        Rows sampled per group.
    seed : int, default 0
        Seed of the sample.

    Returns
    -------
    float
        σ > 0.
    """
    components = _check_components(moments, components)
    _check_passes(moments, passes)
    sampled = passes.sample(max_rows_per_group, seed)
    return median_bandwidth(sampled.projected(components, moments.global_mean)[0], mode=mode)


def mmd2_rbf(
    moments: GroupMoments,
    passes: DataPasses,
    components: np.ndarray,
    sigma: float,
    *,
    estimator: str = "exact",
    n_random_features: int = 1000,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    random_state: int | np.random.Generator | None = 0,
) -> np.ndarray:
    """Pairwise squared MMD of the projected groups under the RBF kernel
    k(u, v) = exp(−‖u − v‖² / (2σ²)), shape (k, k): the biased V-statistic of Lee et al.
    (spec seed-004.md §1.3; the ``mmd`` method's constraint), over every row of ``passes``
    (the rows of ``moments``, in its units: pass ``passes.rescaled(scale)`` for rescaled moments).

    ``estimator="exact"``: one pass projects the rows (N × r numbers on the driver), then every
    pair of rows in kernel blocks of ``block_rows`` (O(N² r) work, O(block_rows²) memory:
    practical to N ≈ 10⁵). ``"rff"``: ``n_random_features`` random Fourier features drawn
    from ``random_state``; one additive pass, O(N), an unbiased estimate of the kernel whose
    error shrinks as 1/√D (:func:`fairpca_dist.engine.kernels.rff_mmd2`): exactly what
    :func:`mmd2_rbf_many` gives for this projection.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    passes : DataPasses
        The rows of ``moments`` (:func:`fairpca_dist.engine.passes.table_passes`).
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    sigma : float
        The kernel's bandwidth σ > 0 (e.g. :func:`rbf_bandwidth`).
    estimator : {"exact", "rff"}, default "exact"
        Every pair of rows, or random Fourier features.
    n_random_features : int, default 1000
        D, for ``"rff"``.
    block_rows : int, optional
        Rows per kernel block, for ``"exact"``.
    random_state : int or Generator, default 0
        Seed of the random features.

    Returns
    -------
    ndarray of shape (k, k)
        Symmetric, zero diagonal; entry (a, b) for groups a and b.

    Raises
    ------
    InputError
        An unknown ``estimator``, σ ≤ 0, components of the wrong shape, or ``passes`` of other groups.
    """
    components = _check_components(moments, components)
    _check_passes(moments, passes)
    if estimator not in RBF_ESTIMATORS:
        raise InputError(f"estimator must be one of {list(RBF_ESTIMATORS)}, got {estimator!r}")
    _check_sigma(sigma)
    if estimator == "rff":
        return mmd2_rbf_many(
            moments, passes, [components], sigma, n_random_features=n_random_features, random_state=random_state
        )[0]
    pairs = _group_pairs(moments.n_groups)
    values, _ = pairwise_rbf(
        *passes.projected(components, moments.global_mean), pairs, sigma, block_rows=block_rows, gradient=False
    )
    return _pair_matrix(moments.n_groups, pairs, values)


def mmd2_rbf_many(
    moments: GroupMoments,
    passes: DataPasses,
    components: Sequence[np.ndarray],
    sigma: float,
    *,
    n_random_features: int = 1000,
    random_state: int | np.random.Generator | None = 0,
    precision: str = "single",
) -> list[np.ndarray]:
    """The random-feature estimate of :func:`mmd2_rbf` (``estimator="rff"``) for several
    projections, one (k, k) matrix each, in order, from ONE pass over the rows
    (:meth:`~fairpca_dist.engine.datapasses.DataPasses.rff_sums_many`).

    Features are drawn once per distinct number of columns r, in order of first appearance,
    each as ``RandomFeatures.draw(r, n_random_features, sigma, np.random.default_rng(random_state),
    precision=precision)``: for an integer seed every r starts from a fresh generator with that
    seed, so the features of a projection depend only on (seed, r, D, σ) — projections of equal
    r share them, and a projection gets the same estimate whatever else is in the call (and
    from :func:`mmd2_rbf` with the same seed). A ``Generator`` is advanced by each draw, in
    that order. ``precision`` is that of the features' cos and sin
    (:class:`~fairpca_dist.engine.kernels.RandomFeatures`; "single" moves the estimate by ~1e-8
    relative, far below its own O(1/√D) error, at a third of the time of "double"). Bad input
    (no projections, components of the wrong shape, σ ≤ 0, D < 1, an unknown precision) raises
    :class:`InputError` before the pass.

    Parameters
    ----------
    moments : GroupMoments
        Per-group moments of the rows.
    passes : DataPasses
        The rows of ``moments``.
    components : sequence of ndarray of shape (n_features, r)
        The projections.
    sigma : float
        The kernel's bandwidth σ > 0.
    n_random_features : int, default 1000
        D.
    random_state : int or Generator, default 0
        Seed of the random features.
    precision : {"single", "double"}, default "single"
        Precision of the features' cos and sin.

    Returns
    -------
    list of ndarray of shape (k, k)
        One matrix per projection, in order.

    Raises
    ------
    InputError
        No projections, components of the wrong shape, σ ≤ 0, D < 1, an unknown precision.
    """
    requests = rff_requests(
        moments, components, sigma, n_random_features=n_random_features, random_state=random_state, precision=precision
    )
    _check_passes(moments, passes)
    return mmd2_from_rff_sums(moments, passes.rff_sums_many(requests, moments.global_mean, gradient=False), requests)


def rff_requests(
    moments: GroupMoments,
    components: Sequence[np.ndarray],
    sigma: float,
    *,
    n_random_features: int = 1000,
    random_state: int | np.random.Generator | None = 0,
    precision: str = "single",
) -> list[RFFRequest]:
    """The (V, random features) requests of :func:`mmd2_rbf_many`, drawn as it says, checked
    before any pass: with :func:`mmd2_from_rff_sums`, the estimate from sums computed by any
    pass over the rows (``DataPasses.rff_sums_many(requests, moments.global_mean,
    gradient=False)``, or a write-back that computes them on the way,
    :class:`~fairpca_dist.engine.passes.RFFWork`)."""
    if isinstance(components, np.ndarray) or not isinstance(components, Sequence) or len(components) == 0:
        raise InputError("mmd2_rbf_many needs a non-empty sequence of components matrices (n_features × r)")
    checked = [_check_components(moments, v) for v in components]
    _check_sigma(sigma)
    features = {
        r: RandomFeatures.draw(r, n_random_features, sigma, np.random.default_rng(random_state), precision=precision)
        for r in dict.fromkeys(v.shape[1] for v in checked)
    }
    return [(v, features[v.shape[1]]) for v in checked]


def mmd2_from_rff_sums(
    moments: GroupMoments, sums: Sequence[RFFSums], requests: Sequence[RFFRequest]
) -> list[np.ndarray]:
    """The (k, k) matrix of random-feature MMD² of each request, in order, from its sums over
    the rows of ``moments`` (:func:`rff_requests`)."""
    pairs = _group_pairs(moments.n_groups)
    return [
        _pair_matrix(moments.n_groups, pairs, pairwise_rff(total, pairs, drawn)[0])
        for total, (_, drawn) in zip(sums, requests, strict=True)
    ]


def _check_sigma(sigma: float) -> None:
    if not (np.isfinite(sigma) and sigma > 0):
        raise InputError(f"sigma must be a positive number, got {sigma!r}")


def _group_pairs(n_groups: int) -> list[tuple[int, int]]:
    """Every pair of group codes (a, b) with a < b."""
    return [(a, b) for a in range(n_groups) for b in range(a + 1, n_groups)]


def _pair_matrix(n_groups: int, pairs: Sequence[tuple[int, int]], values: np.ndarray) -> np.ndarray:
    """The symmetric (k, k) matrix with ``values`` at ``pairs`` and zeros on the diagonal."""
    out = np.zeros((n_groups, n_groups))
    for (a, b), value in zip(pairs, values, strict=True):
        out[a, b] = out[b, a] = value
    return out


# ---------------------------------------------------------------------- from rows
def _rows_by_group(
    x: np.ndarray, labels: Sequence[Hashable] | np.ndarray, weights: np.ndarray | None
) -> list[tuple[np.ndarray, np.ndarray]]:
    x = np.asarray(x, dtype=np.float64)
    label_list = [v.item() if isinstance(v, np.generic) else v for v in labels]
    weights = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    out = []
    for group in sorted_labels(label_list):
        mask = np.array([v == group for v in label_list])
        out.append((x[mask], weights[mask]))
    return out


def _centred(rows: np.ndarray, w: np.ndarray, center: Center, global_mean: np.ndarray) -> np.ndarray:
    if center == "group":
        return rows - w @ rows / w.sum()
    if center == "global":
        return rows - global_mean
    return rows


def _row_context(
    x: np.ndarray, labels: Sequence[Hashable] | np.ndarray, weights: np.ndarray | None
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """Rows and weights split by sorted group label, and the weighted global mean."""
    x = np.asarray(x, dtype=np.float64)
    w_all = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    return _rows_by_group(x, labels, weights), w_all @ x / w_all.sum()


def _residual_energy(
    x: np.ndarray,
    labels: Sequence[Hashable] | np.ndarray,
    components: np.ndarray,
    center: Center,
    weights: np.ndarray | None,
) -> np.ndarray:
    """Per group (Σ w ‖y − y EEᵀ‖², Σ w ‖y‖², Σ w) with y the centred rows, shape (k, 3)."""
    groups, global_mean = _row_context(x, labels, weights)
    out = []
    for rows, w in groups:
        y = _centred(rows, w, center, global_mean)
        residual = y - y @ components @ components.T
        out.append((w @ np.sum(residual**2, axis=1), w @ np.sum(y**2, axis=1), w.sum()))
    return np.array(out)


def group_errors_from_rows(
    x: np.ndarray,
    labels: Sequence[Hashable] | np.ndarray,
    components: np.ndarray,
    *,
    center: Center = "group",
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """err_g = Σ w ‖y − y EEᵀ‖² / Σ w with y the centred rows of group g (literal reference).

    Parameters
    ----------
    x : ndarray of shape (n_rows, n_features)
        The rows.
    labels : sequence of hashable, length n_rows
        The group of each row.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    center : {"group", "global", "origin"}, default "group"
        About which point each group's second moments are taken.
    weights : ndarray of shape (n_rows,), optional
        Non-negative sample weights.

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).
    """
    energy = _residual_energy(x, labels, components, center, weights)
    return energy[:, 0] / energy[:, 2]


def group_losses_from_rows(
    x: np.ndarray,
    labels: Sequence[Hashable] | np.ndarray,
    components: np.ndarray,
    *,
    n_components: int | None = None,
    center: Center = "group",
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """loss_g = err_g − err of the best rank-r approximation of group g (SVD, Eckart–Young).

    Parameters
    ----------
    x : ndarray of shape (n_rows, n_features)
        The rows.
    labels : sequence of hashable, length n_rows
        The group of each row.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    n_components : int, optional
        The target rank r (default: the number of columns of ``components``).
    center : {"group", "global", "origin"}, default "group"
        About which point each group's second moments are taken.
    weights : ndarray of shape (n_rows,), optional
        Non-negative sample weights.

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).
    """
    groups, global_mean = _row_context(x, labels, weights)
    r = components.shape[1] if n_components is None else n_components
    best = []
    for rows, w in groups:
        y = _centred(rows, w, center, global_mean) * np.sqrt(w)[:, None]
        singular = np.linalg.svd(y, compute_uv=False)
        best.append(np.sum(singular[r:] ** 2) / w.sum())
    errors = group_errors_from_rows(x, labels, components, center=center, weights=weights)
    return errors - np.array(best)


def group_explained_variance_ratio_from_rows(
    x: np.ndarray,
    labels: Sequence[Hashable] | np.ndarray,
    components: np.ndarray,
    *,
    center: Center = "group",
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """1 − ‖y − y EEᵀ‖² / ‖y‖² per group (weighted), y the centred rows.

    Parameters
    ----------
    x : ndarray of shape (n_rows, n_features)
        The rows.
    labels : sequence of hashable, length n_rows
        The group of each row.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    center : {"group", "global", "origin"}, default "group"
        About which point each group's second moments are taken.
    weights : ndarray of shape (n_rows,), optional
        Non-negative sample weights.

    Returns
    -------
    ndarray of shape (k,)
        One value per group, in the order of the groups (sorted labels).
    """
    energy = _residual_energy(x, labels, components, center, weights)
    return 1.0 - energy[:, 0] / energy[:, 1]


def explained_variance_ratio_from_rows(
    x: np.ndarray, components: np.ndarray, *, weights: np.ndarray | None = None
) -> np.ndarray:
    """Per-component share of the variance of all rows about the weighted global mean.

    Parameters
    ----------
    x : ndarray of shape (n_rows, n_features)
        The rows.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    weights : ndarray of shape (n_rows,), optional
        Non-negative sample weights.

    Returns
    -------
    ndarray of shape (r',)
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    y = x - w @ x / w.sum()
    return (w @ (y @ components) ** 2) / (w @ np.sum(y**2, axis=1))


def mmd2_linear_from_rows(
    x: np.ndarray,
    labels: Sequence[Hashable] | np.ndarray,
    components: np.ndarray,
    *,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Pairwise biased MMD² with the linear kernel k(a, b) = aᵀb of the projected rows:
    mean k(a,a') + mean k(b,b') − 2 mean k(a,b), computed from the kernel sums.

    Parameters
    ----------
    x : ndarray of shape (n_rows, n_features)
        The rows.
    labels : sequence of hashable, length n_rows
        The group of each row.
    components : ndarray of shape (n_features, r')
        The projection V (or a rank-relaxed map E).
    weights : ndarray of shape (n_rows,), optional
        Non-negative sample weights.

    Returns
    -------
    ndarray of shape (k, k)
        Symmetric, zero diagonal; entry (a, b) for groups a and b.
    """
    groups, _ = _row_context(x, labels, weights)
    projected = [(rows @ components, w / w.sum()) for rows, w in groups]
    k = len(projected)
    out = np.zeros((k, k))
    for i, (za, wa) in enumerate(projected):
        for j, (zb, wb) in enumerate(projected):
            out[i, j] = wa @ (za @ za.T) @ wa + wb @ (zb @ zb.T) @ wb - 2 * wa @ (za @ zb.T) @ wb
    return out
