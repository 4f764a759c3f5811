"""Solver registry and the single entry point :func:`fit_projection`.

Every solver has one signature (DESIGN.md, rule 2)::

    solve(moments, n_components, *, random_state=None, center="group", **options) -> FairProjection

Methods are lowercase string ids; a callable with that signature is accepted too, so users
can plug in their own solvers. Each registry entry lists the options its solver accepts;
anything else raises an :class:`~fairpca_dist.exceptions.InputError` naming the valid ones
(a typo in a scheduled pipeline must fail, not be ignored).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fairpca_dist.engine.datapasses import DataPasses
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import InputError
from fairpca_dist.solvers import dro, eigopt, fnpm, fnpm_streaming, jevd, kleindessner, mm, mmd, olfat, pca, samadi
from fairpca_dist.solvers.result import FairProjection

__all__ = [
    "SolverSpec",
    "SOLVERS",
    "fit_projection",
    "solver_options",
    "option_defaults",
    "FairProjection",
    "CENTERS",
    "wide_methods",
]

CENTERS = ("group", "global", "origin")


@dataclass(frozen=True)
class SolverSpec:
    """A registered method: its solve function and what it accepts.

    ``needs_rows``: whether the method may read the rows during the fit (then it takes
    ``passes``); ``rows_needed``, when given, decides it from the options of one fit (``mmd``
    reads rows for the RBF kernel only). Ask :meth:`reads_rows`.

    ``criterion``: the key in :data:`fairpca_dist.assessment.scoring.CRITERIA` of what the method itself
    makes fair (its paper's definition), by which reports judge it; ``criterion_needed``, when
    given, decides it from the options of one fit (``mmd``'s kernel). Ask :meth:`criterion_of`.

    ``two_groups``: the method solves two-group problems only (and refuses more groups); the
    others take any number of groups (at least two).

    ``wide``: the method fits from moments that keep only their diagonal
    (:attr:`~fairpca_dist.engine.moments.GroupMoments.is_diagonal`, a table too wide for k·p²
    numbers), reading the rows for every product with a covariance; the others need the p × p
    moments.

    Attributes
    ----------
    solve : callable
        ``solve(moments, n_components, *, random_state=None, center="group", **options)`` →
        :class:`~fairpca_dist.solvers.result.FairProjection` (and ``passes=`` when it reads rows).
    needs_rows : bool
        Whether the method may read the rows.
    options : frozenset of str
        The method's options (what ``method_options`` may hold).
    description : str
        One line, as ``fairpca methods`` shows it.
    rows_needed : callable, optional
        Options → whether this fit reads the rows.
    criterion : str
        The key of the method's own criterion.
    criterion_needed : callable, optional
        Options → the key of the criterion of this fit.
    two_groups : bool
        Whether the method takes exactly two groups.
    wide : bool
        Whether the method fits a wide table (diagonal-only moments).

    Examples
    --------
    >>> from fairpca_dist import SOLVERS
    >>> spec = SOLVERS["fair-eig"]
    >>> spec.two_groups, spec.criterion, sorted(spec.options)
    (True, 'max_loss', ['max_iter', 'tol'])
    >>> SOLVERS["mmd"].reads_rows({"kernel": "linear"}), SOLVERS["mmd"].reads_rows({"kernel": "rbf"})
    (False, True)
    """

    solve: Callable[..., FairProjection]
    needs_rows: bool
    options: frozenset[str]
    description: str
    rows_needed: Callable[[dict[str, Any]], bool] | None = None
    criterion: str = "explained_variance_ratio"
    criterion_needed: Callable[[dict[str, Any]], str] | None = None
    two_groups: bool = False
    wide: bool = False

    def reads_rows(self, options: dict[str, Any]) -> bool:
        """Whether a fit with these method options reads the rows.

        Parameters
        ----------
        options : dict
            The method's options for one fit.

        Returns
        -------
        bool
        """
        if not self.needs_rows:
            return False
        return True if self.rows_needed is None else self.rows_needed(options)

    def criterion_of(self, options: dict[str, Any]) -> str:
        """The key of the criterion a fit with these options makes fair.

        Parameters
        ----------
        options : dict
            The method's options for one fit.

        Returns
        -------
        str
            A key of :data:`fairpca_dist.assessment.scoring.CRITERIA`, e.g. ``"max_loss"``.
        """
        return self.criterion if self.criterion_needed is None else self.criterion_needed(options)


# Arguments every solver takes (DESIGN.md, rule 2): not options of a method
_COMMON_ARGUMENTS = frozenset({"moments", "n_components", "random_state", "center", "passes"})


def solver_options(solve: Callable[..., FairProjection]) -> frozenset[str] | None:
    """The method-specific options a solver function accepts by keyword (everything but the
    common arguments), or None when it takes ``**kwargs`` (any option)."""
    parameters = inspect.signature(solve).parameters.values()
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return None
    keyword = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(p.name for p in parameters if p.name not in _COMMON_ARGUMENTS and p.kind in keyword)


def option_defaults(method: str) -> dict[str, Any]:
    """Each option of the registered ``method`` with its default, in the order of its solver's
    signature (every option has one)."""
    parameters = inspect.signature(SOLVERS[method].solve).parameters
    return {name: parameters[name].default for name in parameters if name in SOLVERS[method].options}


def _options_of(solve: Callable[..., FairProjection]) -> frozenset[str]:
    return solver_options(solve) or frozenset()  # registered solvers list their options


SOLVERS: dict[str, SolverSpec] = {
    "pca": SolverSpec(pca.solve, False, _options_of(pca.solve), "vanilla PCA of all rows pooled"),
    "samadi-sdp": SolverSpec(
        samadi.solve_sdp,
        False,
        _options_of(samadi.solve_sdp),
        "min-max group loss: Fantope SDP + LP rounding, rank <= r + k - 1 (Samadi et al. 2018)",
        criterion="max_loss",
    ),
    "samadi-mw": SolverSpec(
        samadi.solve_mw,
        False,
        _options_of(samadi.solve_mw),
        "min-max group loss: multiplicative weights + LP rounding, certified gap (Samadi et al. 2018)",
        criterion="max_loss",
    ),
    "fair-eig": SolverSpec(
        eigopt.solve,
        False,
        _options_of(eigopt.solve),
        "exact two-group min-max group loss by 1-D eigenvalue optimisation (hidden convexity)",
        criterion="max_loss",
        two_groups=True,
    ),
    "mm": SolverSpec(
        mm.solve_mm,
        False,
        _options_of(mm.solve_mm),
        "max-min group variance by minorization-maximization, SDR-certified (Babu, Stoica & Saini, TMLR)",
        criterion="min_group_variance",
    ),
    "mm-sparse": SolverSpec(
        mm.solve_mm_sparse,
        False,
        _options_of(mm.solve_mm_sparse),
        "max-min group variance with an l1 sparsity penalty by MM (Babu, Stoica & Saini, Algorithm 3)",
        criterion="min_group_variance",
    ),
    "dro": SolverSpec(
        dro.solve_dro,
        False,
        _options_of(dro.solve_dro),
        "distributionally robust fair PCA: worst case over Gelbrich balls (Vu et al., ICLR 2022); two groups: "
        "certified global optimum by a search along the boundary of the group-loss region, else Riemannian descent",
        criterion="abdiff",
    ),
    "mm-robust": SolverSpec(
        mm.solve_mm_robust,
        True,
        _options_of(mm.solve_mm_robust),
        "outlier-robust max-min l1 criterion by MM, one pass over the rows per iteration (Babu et al., Algorithm 4)",
        criterion="min_group_variance",
    ),
    "jevd": SolverSpec(
        jevd.solve,
        False,
        _options_of(jevd.solve),
        "joint eigenvalue decomposition of the group covariances (Rathore & Manwani, Algorithm 1); "
        "no fairness guarantee (its Thm 4.1 is false)",
        criterion="max_loss",
    ),
    "jevd-orthogonal": SolverSpec(
        jevd.solve_orthogonal,
        False,
        _options_of(jevd.solve_orthogonal),
        "orthogonal joint diagonalisation of the group covariances by Jacobi rotations (Cardoso-Souloumiac 1996)",
        criterion="max_loss",
    ),
    "mmd": SolverSpec(
        mmd.solve,
        True,
        _options_of(mmd.solve),
        "max explained variance s.t. MMD² between projected groups <= tau, REPMS with Riemannian L-BFGS "
        "(Lee et al., AAAI 2022); the RBF kernel reads the rows (exact blocks, random features or a sample)",
        rows_needed=mmd.rows_needed,
        criterion_needed=mmd.criterion_key,
    ),
    "olfat-sdp": SolverSpec(
        olfat.solve,
        False,
        _options_of(olfat.solve),
        "two-group FPCA: max variance s.t. projected mean gap <= delta, minus mu x covariance gap, convex SDP "
        "(Olfat & Aswani 2019); Lee et al.'s Table 1 prints its (mu, delta) tuples, which are really (delta, mu)",
        criterion="mmd2_linear",
        two_groups=True,
    ),
    "kleindessner": SolverSpec(
        kleindessner.solve,
        False,
        _options_of(kleindessner.solve),
        "PCA in the complement of the group-mean differences: every projected group has the same mean, closed form "
        "(Kleindessner et al., AISTATS 2023)",
        criterion="mmd2_linear",
    ),
    "kleindessner-cov": SolverSpec(
        kleindessner.solve_covariance,
        False,
        _options_of(kleindessner.solve_covariance),
        "kleindessner that also keeps only the n_directions where the group covariances differ least "
        "(Kleindessner et al. 2023, FairPCAEqualizeCovariance)",
        criterion="mmd2_linear",
    ),
    "fnpm": SolverSpec(
        fnpm.solve,
        False,
        _options_of(fnpm.solve),
        "two-group PCA in the complement of an unfair subspace: the mean difference and the n_unfair directions "
        "where the group covariances differ most, closed form (Lee et al., NeurIPS 2023, FNPM offline)",
        criterion_needed=fnpm.criterion_key,
        two_groups=True,
    ),
    "fnpm-streaming": SolverSpec(
        fnpm_streaming.solve,
        True,
        _options_of(fnpm_streaming.solve),
        "fnpm by block power iterations, one pass over the rows per iteration, k x p x (m + r + 2s + 1) numbers "
        "per partition and no p x p matrix (Lee et al., NeurIPS 2023, the fair noisy power method)",
        criterion_needed=fnpm.criterion_key,
        two_groups=True,
        wide=True,
    ),
}
"""The registered methods: ``method`` name → :class:`SolverSpec`.

``fairpca methods`` lists them, and the guide's "choosing a method" page compares them. A
method not in the registry may still be fitted by passing a solve function as ``method``.
"""


def wide_methods() -> list[str]:
    """The registered methods that fit a wide table (:attr:`SolverSpec.wide`)."""
    return [name for name, spec in SOLVERS.items() if spec.wide]


def _check_n_components(n_components: Any, n_features: int) -> int:
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise InputError(f"n_components must be an integer, got {n_components!r}")
    if not 1 <= n_components <= n_features:
        raise InputError(f"n_components={n_components} must be between 1 and n_features={n_features}")
    return int(n_components)


def fit_projection(
    moments: GroupMoments,
    n_components: int,
    *,
    method: str | Callable[..., FairProjection] = "pca",
    center: Center = "group",
    standardize: bool | np.ndarray = False,
    ddof: int = 0,
    random_state: int | np.random.Generator | None = None,
    min_group_size: int = 2,
    passes: DataPasses | None = None,
    **options: Any,
) -> FairProjection:
    """Fit a (fair) projection from group moments.

    Parameters
    ----------
    moments : GroupMoments
        From :func:`~fairpca_dist.compute_moments` (or merged/loaded ones).
    n_components : int
        Target dimension r, 1 ≤ r ≤ n_features.
    method : str or callable
        A key of :data:`SOLVERS` or a function with the solver signature.
    center : {"group", "global", "origin"}
        Which per-group second moments define the groups' errors and losses:
        about each group's own mean (Samadi et al.'s choice), about the global mean, or
        about the origin.
    standardize : bool or ndarray of shape (n_features,)
        ``True``: divide every feature by its pooled standard deviation first (constant
        columns raise :class:`~fairpca_dist.exceptions.SchemaError`). An array: divide by
        that scale (e.g. a fitted model's ``scale``, to refit with the same preprocessing).
    ddof : int
        Divisor n − ddof for the standardisation scale (1 gives MATLAB ``std`` parity).
    random_state : int, Generator or None
        Passed to solvers that draw random numbers.
    min_group_size : int
        Smallest group the fit accepts.
    passes : DataPasses, optional
        The rows the moments came from, for methods that read them at every iteration
        (``SOLVERS[m].reads_rows(options)``: ``mm-robust``, ``fnpm-streaming``, ``mmd`` with the RBF kernel); see
        :func:`fairpca_dist.engine.passes.table_passes` and
        :class:`fairpca_dist.engine.datapasses.ArrayPasses`. It is rescaled with the moments.
    **options
        Method-specific options (see each solver's docstring).

    Returns
    -------
    FairProjection
        With ``mean`` and ``scale`` in the units of the input rows.
    """
    if center not in CENTERS:
        raise InputError(f"center={center!r} is not one of {CENTERS}")
    if callable(method):
        solve, name, allowed = method, getattr(method, "__name__", "custom"), solver_options(method)
    else:
        if method not in SOLVERS:
            raise InputError(f"unknown method {method!r}; available: {sorted(SOLVERS)}")
        spec = SOLVERS[method]
        solve, name, allowed = spec.solve, method, spec.options
        if moments.is_diagonal and not spec.wide:
            raise InputError(
                f"method {method!r} needs the p × p moments, and this wide table's keep only their diagonal "
                f"({moments.n_features:,} features); methods that fit a wide table: {wide_methods()}"
            )
    if allowed is not None:
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise InputError(
                f"unknown option(s) {unknown} for method {name!r}; valid options: {sorted(allowed) or 'none'}"
            )
        if name in SOLVERS and SOLVERS[name].reads_rows(options) and passes is None:
            raise InputError(
                f"method {name!r} reads the rows at every iteration: pass passes= (fairpca_dist.engine.passes."
                "table_passes for a table, fairpca_dist.engine.datapasses.ArrayPasses for arrays), or fit with "
                "FairPCA or fit_table, which build it"
            )
    n_components = _check_n_components(n_components, moments.n_features)
    moments.check_groups(min_group_size)
    if isinstance(standardize, np.ndarray):
        scale = np.asarray(standardize, dtype=np.float64)
    else:
        scale = moments.feature_scale(ddof) if standardize else np.ones(moments.n_features)
    working = moments.rescaled(scale)
    if passes is not None:
        options = {**options, "passes": passes.rescaled(scale)}
    result = solve(working, n_components, random_state=random_state, center=center, **options)
    return replace(result, method=name, mean=moments.global_mean, scale=scale)
