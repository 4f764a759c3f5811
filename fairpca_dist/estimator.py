"""scikit-learn compatible fair PCA transformer."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import replace
from numbers import Integral
from typing import Any

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin

# set_output's per-estimator configuration and container wrapping have no public accessor; FairPCA
# wraps its output itself so that dask input stays lazy (tests/test_estimator.py guards these two).
from sklearn.utils._set_output import _get_output_config, _wrap_data_with_container
from sklearn.utils.validation import check_is_fitted, validate_data

from fairpca_dist.assessment import metrics
from fairpca_dist.engine.datapasses import ArrayPasses, DataPasses
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.engine.passes import compute_moments, table_passes
from fairpca_dist.engine.sources import check_finite, feature_values
from fairpca_dist.exceptions import GroupError, InputError, SchemaError
from fairpca_dist.solvers import CENTERS, SOLVERS, fit_projection, option_defaults, solver_options
from fairpca_dist.solvers.result import FairProjection

__all__ = ["FairPCA"]


_MISSING_GROUPS = "FairPCA.{method} requires sensitive_features: one group label per row, or column name(s) of X"
_OPTIONS_HINT = (
    "method options go in method_options, e.g. FairPCA(method='samadi-mw', method_options={'tol': 1e-3}) "
    "(FairPCA(**options) was removed in 0.x)"
)


def _is_dask(data: Any) -> bool:
    return isinstance(data, (da.Array, dd.DataFrame, dd.Series))


def _group_columns(sensitive_features: Any, named: list[str]) -> tuple[str, ...]:
    """The column name(s) the group labels come from: the columns of X named, a named Series,
    or the columns of a DataFrame; () when unknown (an array)."""
    if named:
        return tuple(named)
    if isinstance(sensitive_features, (pd.Series, dd.Series)) and isinstance(sensitive_features.name, str):
        return (sensitive_features.name,)
    if isinstance(sensitive_features, (pd.DataFrame, dd.DataFrame)) and all(
        isinstance(column, str) for column in sensitive_features.columns
    ):
        return tuple(sensitive_features.columns)
    return ()


def _names_columns(sensitive_features: Any, X: Any) -> bool:
    """True when ``sensitive_features`` names columns of the frame ``X``."""
    if not isinstance(X, (pd.DataFrame, dd.DataFrame)):
        return False
    names = [sensitive_features] if isinstance(sensitive_features, str) else sensitive_features
    return (
        isinstance(names, (list, tuple))
        and len(names) > 0
        and all(isinstance(n, str) and n in X.columns for n in names)
    )


def _n_rows(X: Any) -> int | None:
    """Rows of an in-memory X, or None when X has no length."""
    try:
        return len(X)
    except TypeError:
        return None


def _column_names(sensitive_features: Any, X: Any) -> list[str]:
    """The columns of X that ``sensitive_features`` names (not features then), or []."""
    if not _names_columns(sensitive_features, X):
        return []
    return [sensitive_features] if isinstance(sensitive_features, str) else list(sensitive_features)


class FairPCA(  # type: ignore[call-arg]  # auto_wrap_output_keys: a keyword of scikit-learn's _SetOutputMixin
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None
):
    """Fair principal component analysis.

    Finds a linear projection to ``n_components`` dimensions that represents every group
    defined by the sensitive feature(s) well, by the criterion of ``method`` (see
    :data:`fairpca_dist.SOLVERS`). ``method="pca"`` is plain PCA, the baseline whose
    per-group losses the fair methods improve on. Fitting needs only per-group counts, means
    and scatter matrices, computed in one pass: in memory for numpy/pandas input, with dask
    for dask arrays and DataFrames of any size. Those statistics add up exactly, so
    :meth:`partial_fit` learns from batches.

    Parameters
    ----------
    n_components : int or None, default=None
        Target dimension r. ``None`` keeps min(n_samples, n_features), as scikit-learn's PCA.
    method : str or callable, default="pca"
        Solver id in the registry (:data:`fairpca_dist.SOLVERS`), or a function with the
        solver signature ``solve(moments, n_components, *, random_state, center, **options)``.
    method_options : dict or None, default=None
        Options of ``method``, by name, e.g. ``{"tol": 1e-6, "max_iter": 1000}`` for
        ``"samadi-mw"``; ``None`` uses the method's defaults
        (:func:`fairpca_dist.solvers.option_defaults` lists them). They are checked against
        ``method`` when :meth:`fit` starts, so ``set_params(method=...)`` may follow options of
        another method as long as the options are replaced before fitting. ``set_params`` also
        takes one option at a time as ``method_options__<name>`` (merged into the dict), so a
        grid search may range over ``{"method_options__tol": [1e-3, 1e-6]}`` or over whole
        dicts, ``{"method_options": [{"tol": 1e-3}, {"tol": 1e-6}]}``.
    center : {"group", "global", "origin"}, default="group"
        Which second moments define each group's reconstruction error and loss: about the
        group's own mean (Samadi et al. 2018), about the global mean, or about the origin.
        Projection always subtracts the global mean ``mean_``: group membership is not
        known at transform time.
    standardize : bool, default=False
        Divide features by their pooled standard deviation before fitting.
    random_state : int, Generator or None, default=None
        For solvers that draw random numbers.

    Attributes
    ----------
    components_ : ndarray of shape (n_output_columns, n_features_in_)
        Rows span the fitted subspace. ``n_output_columns`` is ``n_components`` except for
        rank-relaxed solvers (Samadi et al.'s SDP returns up to r + k − 1 directions), in
        which case :meth:`transform` returns that many columns.
    n_components_ : int
        Number of output columns.
    mean_ : ndarray of shape (n_features_in_,)
        Global (weighted) feature mean, subtracted by :meth:`transform`.
    scale_ : ndarray of shape (n_features_in_,)
        Per-feature scale divided after centring (ones unless ``standardize=True``).
    groups_ : ndarray of shape (n_groups,), dtype object
        Group labels, sorted.
    group_counts_ : ndarray of shape (n_groups,)
        Rows per group.
    group_losses_ : ndarray of shape (n_groups,)
        loss_g = err_g(V) − err_g*(r): each group's extra average reconstruction error over
        its own best rank-r projection.
    group_errors_ : ndarray of shape (n_groups,)
        err_g(V): average squared reconstruction error of each group.
    explained_variance_ : ndarray of shape (n_output_columns,)
        Variance of all rows along each component (divisor n − 1, as scikit-learn's PCA).
    explained_variance_ratio_ : ndarray of shape (n_output_columns,)
        ``explained_variance_`` divided by the total variance.
    moments_ : GroupMoments
        The sufficient statistics of every row seen: by the last :meth:`fit`, plus every
        :meth:`partial_fit` batch since.
    projection_ : FairProjection
        The solver's full result (objective history, convergence, certificates, the options
        used with defaults filled in), with the sensitive column name(s) when
        ``sensitive_features`` named columns of X or was a named Series or a DataFrame
        (``group_columns``: what reports name the groups by).
    n_features_in_ : int
        Number of features seen at fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when X has string column names.

    See Also
    --------
    fairpca_dist.compute_moments : The one-pass statistics, for tables of any size.
    fairpca_dist.fit_projection : Fit a projection from moments (what ``fit`` calls).
    fairpca_dist.fitting.fit_table : Fit from a stored table and save the model.
    sklearn.decomposition.PCA : Plain PCA (``method="pca"`` gives the same subspace).
    sklearn.decomposition.IncrementalPCA : The model for :meth:`partial_fit`.

    Notes
    -----
    With p features, k groups and r components, fitting reads the rows once into each
    group's count n_g, mean μ_g and scatter S_g = Σ_{i∈g} (x_i − μ_g)(x_i − μ_g)ᵀ, then solves
    on those p×p statistics: the cost of the solve does not depend on the number of rows
    (except for methods that read the rows at every iteration: ``mm-robust``, and ``mmd``
    with the RBF kernel). The group statistics of disjoint row sets merge exactly
    (Chan et al.'s pairwise update, :meth:`GroupMoments.__add__`), which is what
    :meth:`partial_fit` uses.

    Group g's average reconstruction error of the subspace spanned by V (p×r, orthonormal)
    is err_g(V) = tr(Σ_g) − tr(Vᵀ Σ_g V) with Σ_g its second moment about the centre chosen by
    ``center``, and its loss is loss_g(V) = err_g(V) − err_g*(r), where err_g*(r) is the error
    of the group's own best rank-r subspace (Samadi et al., "The Price of Fair PCA: One Extra
    Dimension", NeurIPS 2018, Def. 4). ``samadi-sdp``/``samadi-mw``/``fair-eig`` minimise
    max_g loss_g, ``mm`` maximises min_g tr(Vᵀ Σ_g V) (Babu, Stoica & Saini, TMLR), ``dro`` a
    distributionally robust ABDiff + ARE (Vu et al., ICLR 2022), ``mmd``, ``olfat-sdp`` and
    ``kleindessner`` make the projected group distributions alike (Lee et al., AAAI 2022;
    Olfat & Aswani, AAAI 2019; Kleindessner et al., AISTATS 2023). The user guide's page on
    choosing a method compares them; each solver's docstring states its deviations from the
    paper.

    :meth:`score` is the method's own criterion on the given rows, signed so that higher is
    better (the negated max group loss for the min-max methods), for model selection by
    :class:`~sklearn.model_selection.GridSearchCV`.

    scikit-learn's ``check_estimator(FairPCA())`` cannot pass on its own: its checks call
    ``fit(X, y)`` without ``sensitive_features``, which fitting requires. The project runs
    every check through a subclass that derives each row's group from the row's values
    (``tests/test_estimator_sklearn.py``, with ``parametrize_with_checks``); the checks that
    need no fit pass on ``FairPCA()`` itself, and the others fail only with the missing
    ``sensitive_features`` error. The documentation's estimator page lists the details.

    Examples
    --------
    >>> import numpy as np
    >>> from fairpca_dist import FairPCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5))
    >>> groups = np.repeat(["a", "b"], 100)
    >>> fpca = FairPCA(n_components=2).fit(X, sensitive_features=groups)
    >>> fpca.transform(X).shape
    (200, 2)

    A fair method, with options of its own:

    >>> fair = FairPCA(2, method="samadi-mw", method_options={"tol": 1e-6})
    >>> fair = fair.fit(X, sensitive_features=groups)
    >>> bool(fair.group_losses_.max() <= fpca.group_losses_.max() + 1e-9)
    True
    >>> bool(np.isclose(fair.score(X, sensitive_features=groups), -fair.group_losses_.max()))
    True

    Learning from batches gives the model of one fit on all rows:

    >>> batches = FairPCA(2, method="fair-eig")
    >>> for rows in np.array_split(np.arange(200), 3):
    ...     batches = batches.partial_fit(X[rows], sensitive_features=groups[rows])
    >>> once = FairPCA(2, method="fair-eig").fit(X, sensitive_features=groups)
    >>> P, Q = batches.components_, once.components_
    >>> bool(np.allclose(P.T @ P, Q.T @ Q, atol=1e-10))
    True
    """

    # fitted state, typed for mypy (set by fit/partial_fit, never by __init__)
    moments_: GroupMoments
    projection_: FairProjection
    _not_fitted_because: str | None
    _sensitive_columns: list[str]
    _first_group_columns: tuple[str, ...]

    def __new__(cls, *args: Any, **kwargs: Any) -> FairPCA:
        # Only to say where method options went: a keyword that is not a parameter of the
        # class raises Python's TypeError with that hint (the signature stays that of __init__).
        accepted = inspect.signature(cls.__init__).parameters
        if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in accepted.values()):
            unknown = sorted(set(kwargs) - set(accepted))
            if unknown:
                raise TypeError(
                    f"{cls.__name__}() got unexpected keyword argument(s) {unknown}: "
                    + _OPTIONS_HINT.replace("FairPCA(", f"{cls.__name__}(")
                )
        return super().__new__(cls)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__signature__ = _init_signature(cls)

    def __init__(
        self,
        n_components: int | None = None,
        *,
        method: str | Callable[..., FairProjection] = "pca",
        method_options: dict[str, Any] | None = None,
        center: Center = "group",
        standardize: bool = False,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.method_options = method_options
        self.center = center
        self.standardize = standardize
        self.random_state = random_state

    # --------------------------------------------------------------- parameters
    def set_params(self, **params: Any) -> FairPCA:
        """Set the parameters of this estimator.

        As :meth:`sklearn.base.BaseEstimator.set_params`, and ``method_options__<name>=value``
        sets one method option (merged into a copy of ``method_options``), so that a grid
        search can range over one option.

        Parameters
        ----------
        **params : dict
            Estimator parameters, and ``method_options__<name>`` entries.

        Returns
        -------
        FairPCA
            This estimator.

        Raises
        ------
        ValueError
            For a name that is neither a parameter nor ``method_options__<name>``; when it is
            an option of a registered method, the message says to use ``method_options``.
        """
        prefix = "method_options__"
        nested = {name[len(prefix) :]: params.pop(name) for name in list(params) if name.startswith(prefix)}
        valid = self.get_params(deep=True)
        known_options = set().union(*(spec.options for spec in SOLVERS.values()))
        for name in params:
            if name not in valid and "__" not in name and name in known_options:
                raise ValueError(
                    f"Invalid parameter {name!r} for estimator {self}. Valid parameters are: {sorted(valid)}. "
                    f"{name!r} is a method option: set_params(method_options={{{name!r}: ...}}) or "
                    f"set_params({prefix}{name}=...)"
                )
        super().set_params(**params)
        if nested:
            self.method_options = {**(self.method_options or {}), **nested}
        return self

    def _solver_options(self) -> dict[str, Any]:
        """``method_options`` as a dict, checked against the options of ``method``."""
        options = self.method_options
        if options is None:
            return {}
        if not isinstance(options, Mapping) or not all(isinstance(name, str) for name in options):
            raise InputError(
                f"method_options must be a dict of option name to value, or None; got {options!r}. " + _OPTIONS_HINT
            )
        options = dict(options)
        if callable(self.method):
            allowed = solver_options(self.method)
            name = getattr(self.method, "__name__", "custom")
            listing = ", ".join(sorted(allowed or ()))
        else:
            allowed, name = SOLVERS[self.method].options, self.method
            listing = ", ".join(f"{option}={default!r}" for option, default in option_defaults(self.method).items())
        unknown = sorted(set(options) - allowed) if allowed is not None else []
        if unknown:
            raise InputError(
                f"method_options has option(s) {unknown} that method {name!r} does not take; "
                f"its options{' (with defaults)' if not callable(self.method) else ''}: {listing or 'none'}"
            )
        return options

    def _validate_params(self) -> dict[str, Any]:
        """Check the parameters; return the method options."""
        if self.n_components is not None and (
            isinstance(self.n_components, bool) or not isinstance(self.n_components, Integral) or self.n_components < 1
        ):
            raise InputError(f"n_components must be a positive integer or None, got {self.n_components!r}")
        if not callable(self.method) and self.method not in SOLVERS:
            raise InputError(f"unknown method {self.method!r}; available: {sorted(SOLVERS)}")
        if self.center not in CENTERS:
            raise InputError(f"center={self.center!r} is not one of {CENTERS}")
        if not isinstance(self.standardize, (bool, np.bool_)):
            raise InputError(f"standardize must be True or False, got {self.standardize!r}")
        return self._solver_options()

    # --------------------------------------------------------------- fitting
    def fit(self, X: Any, y: Any = None, *, sensitive_features: Any = None, sample_weight: Any = None) -> FairPCA:
        """Fit the projection.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), pandas/dask DataFrame or dask array
            The rows.
        y : None
            Ignored.
        sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns), or column name(s)
            Required. Group label of each row (several columns form intersectional groups),
            or the name(s) of columns of a DataFrame ``X``, which are then not used as
            features. (It defaults to None only so that X is validated first.)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative row weights.

        Returns
        -------
        FairPCA
            This estimator, fitted.

        Raises
        ------
        InputError
            Bad parameters, unknown method options, missing ``sensitive_features``, NaN/inf
            in X (the column named).
        GroupError
            Fewer than two groups, or a group of fewer than two rows.
        """
        options = self._validate_params()
        self._sensitive_columns = _column_names(sensitive_features, X)
        moments, passes = self._moments(
            X, sensitive_features, sample_weight, reset=True, where="fit", rows=self._needs_rows(options)
        )
        n_components = min(moments.n_features, moments.n_samples) if self.n_components is None else self.n_components
        projection = fit_projection(
            moments,
            n_components,
            method=self.method,
            center=self.center,
            standardize=bool(self.standardize),
            random_state=self.random_state,
            passes=passes() if passes is not None else None,
            **options,
        )
        projection = replace(projection, group_columns=_group_columns(sensitive_features, self._sensitive_columns))
        self._set_fitted(moments, projection)
        return self

    def partial_fit(
        self, X: Any, y: Any = None, *, sensitive_features: Any = None, sample_weight: Any = None
    ) -> FairPCA:
        """Add a batch of rows and refit the projection on every row seen so far.

        The batch's group moments are merged into ``moments_`` exactly (Chan et al.'s
        pairwise update, :meth:`~fairpca_dist.GroupMoments.__add__`) and the projection is
        refitted from the merged moments, so after any number of batches the model is that of
        one :meth:`fit` on all their rows (up to rounding; the solver's result is unique up to
        the sign or rotation of the components). A group may appear first in any batch. As
        in :class:`~sklearn.decomposition.IncrementalPCA`, the first call starts afresh
        (unless the estimator was fitted: then the batches add to the rows of that fit), and
        every batch must have the features of the first.

        Until the rows seen hold at least two groups of at least two rows each, the moments
        are only accumulated: the estimator is not fitted yet (:meth:`transform` raises
        :class:`~sklearn.exceptions.NotFittedError` saying why).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), pandas/dask DataFrame or dask array
            The batch's rows.
        y : None
            Ignored.
        sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns), or column name(s)
            Required. As in :meth:`fit`.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative row weights.

        Returns
        -------
        FairPCA
            This estimator.

        Raises
        ------
        InputError
            As :meth:`fit`; also for a method that reads the rows at every iteration
            (``mm-robust``, ``mmd`` with the RBF kernel), which cannot be refitted from moments.
        SchemaError
            The batch's features differ from those seen before.
        """
        options = self._validate_params()
        if self._needs_rows(options):
            raise InputError(
                f"method {self.method!r} reads the rows at every iteration, and partial_fit keeps only their "
                "moments: fit on all rows at once (a dask DataFrame or array for rows that do not fit in memory)"
            )
        first = not hasattr(self, "moments_")
        columns = _column_names(sensitive_features, X)
        moments, _ = self._moments(
            X, sensitive_features, sample_weight, reset=first, where="partial_fit", rows=False, columns=columns
        )
        if first:
            self._sensitive_columns = columns
            self._first_group_columns = _group_columns(sensitive_features, columns)
        merged = moments if first else self.moments_ + moments
        group_columns = self.projection_.group_columns if hasattr(self, "projection_") else self._first_group_columns
        try:
            merged.check_groups()
        except GroupError as error:
            self.moments_ = merged
            self._not_fitted_because = str(error)
            return self
        n_components = min(merged.n_features, merged.n_samples) if self.n_components is None else self.n_components
        projection = fit_projection(
            merged,
            n_components,
            method=self.method,
            center=self.center,
            standardize=bool(self.standardize),
            random_state=self.random_state,
            **options,
        )
        self._set_fitted(merged, replace(projection, group_columns=group_columns))
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "components_")

    def _check_is_fitted(self) -> None:
        reason = getattr(self, "_not_fitted_because", None)
        message = (
            "This %(name)s instance is not fitted yet: partial_fit has accumulated moments whose groups "
            f"cannot be fitted yet ({reason}); call partial_fit with more rows."
            if reason and not hasattr(self, "components_")
            else None
        )
        check_is_fitted(self, msg=message)

    def _needs_rows(self, options: dict[str, Any]) -> bool:
        """Whether the method reads the rows at every iteration (then fit builds DataPasses)."""
        return not callable(self.method) and SOLVERS[self.method].reads_rows(options)

    def _moments(
        self,
        X: Any,
        sensitive_features: Any,
        sample_weight: Any,
        *,
        reset: bool,
        where: str,
        rows: bool,
        columns: list[str] | None = None,
    ) -> tuple[GroupMoments, Callable[[], DataPasses] | None]:
        """The group moments of the rows of X, and (when ``rows``) a function that builds
        the passes over those rows. ``reset``: record the features (fit); otherwise check
        them against those recorded. ``columns``: the columns of X holding the groups
        (default: those named at fit, when X has them)."""
        if columns is None:
            columns = self._sensitive_columns if reset else _column_names(sensitive_features, X)
        if not reset and not columns:
            X = self._drop_sensitive(X)  # group columns of the fit, given with labels passed apart
        if _is_dask(X):
            return self._dask_moments(X, sensitive_features, sample_weight, reset, where, rows, columns)
        return self._memory_moments(X, sensitive_features, sample_weight, reset, where, rows, columns)

    def _memory_moments(
        self,
        X: Any,
        sensitive_features: Any,
        sample_weight: Any,
        reset: bool,
        where: str,
        rows: bool,
        columns: list[str],
    ) -> tuple[GroupMoments, Callable[[], DataPasses] | None]:
        if columns:
            labels = X[columns]
            labels = labels.iloc[:, 0].to_numpy() if labels.shape[1] == 1 else labels.to_numpy()
            X = X.drop(columns=columns)
        else:
            labels = sensitive_features
        if isinstance(labels, str) or (
            isinstance(labels, (list, tuple))
            and labels
            and all(isinstance(n, str) for n in labels)
            and len(labels) != _n_rows(X)
        ):
            given = [labels] if isinstance(labels, str) else list(labels)
            available = list(getattr(X, "columns", []))
            raise SchemaError(
                f"sensitive_features={labels!r} names column(s) {given} that X does not have "
                f"({'columns: ' + str(available) if available else 'X has no column names: ' + type(X).__name__}); "
                "pass a DataFrame with those columns, or one label per row"
            )
        where_rows = f"the rows passed to {where}"
        try:
            x = validate_data(self, X, dtype=np.float64, ensure_all_finite=False, ensure_min_samples=2, reset=reset)
        except ValueError as error:
            raise self._input_error(X, error, where_rows) from error
        names = [str(n) for n in getattr(self, "feature_names_in_", [f"x{j}" for j in range(x.shape[1])])]
        if not np.isfinite(x).all():
            check_finite(x, names, where_rows)
        if labels is None:
            raise InputError(_MISSING_GROUPS.format(method=where))
        labels = np.asarray(labels, dtype=object if isinstance(labels, list) else None)
        if labels.ndim == 2:
            tuples = np.empty(labels.shape[0], dtype=object)
            tuples[:] = [tuple(r) for r in labels.tolist()]
            labels = tuples
        if labels.ndim != 1 or labels.shape[0] != x.shape[0]:
            raise SchemaError(
                f"sensitive_features must have one label per row ({x.shape[0]}), got shape {labels.shape}"
            )
        if pd.isna(pd.Series(labels)).any():
            raise InputError("sensitive_features contains missing labels (NaN/None)")
        weights = None
        if sample_weight is not None:
            weights = np.asarray(sample_weight, dtype=np.float64)
            if weights.shape != (x.shape[0],):
                raise SchemaError(f"sample_weight must have shape ({x.shape[0]},), got {weights.shape}")
            bad = ~np.isfinite(weights) | (weights < 0)
            if bad.any():
                first = int(np.flatnonzero(bad)[0])
                raise InputError(
                    f"sample_weight must be finite and non-negative: {int(bad.sum())} value(s) are not "
                    f"(first: {weights[first]!r} at row {first})"
                )
        moments = GroupMoments.from_arrays(x, labels, weights=weights, feature_names=names)
        if where == "fit":
            moments.check_groups()
        if not rows:
            return moments, None
        return moments, lambda: ArrayPasses(x, labels, moments.groups, weights=weights)

    def _dask_moments(
        self,
        X: Any,
        sensitive_features: Any,
        sample_weight: Any,
        reset: bool,
        where: str,
        rows: bool,
        columns: list[str],
    ) -> tuple[GroupMoments, Callable[[], DataPasses] | None]:
        if sensitive_features is None:
            raise InputError(_MISSING_GROUPS.format(method=where))
        features: list[str] | None
        if isinstance(X, dd.DataFrame):
            features = [c for c in X.columns if c not in columns]
            if any(not isinstance(c, str) for c in features):
                raise SchemaError("dask DataFrame columns must be strings")
            if reset:
                self.feature_names_in_ = np.asarray(features, dtype=object)
            else:
                seen = list(getattr(self, "feature_names_in_", []))
                missing = [c for c in seen if c not in features]
                if missing or not seen:
                    raise SchemaError(
                        f"the rows passed to {where} lack the columns seen at fit: {missing or features} "
                        f"(columns at fit: {seen or 'unnamed'}; X has: {list(X.columns)})"
                    )
                features = seen
        else:
            features = None
            if reset and hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            if not reset:
                self._check_width(X.shape[1])
        roles = {"sensitive_feature": columns or sensitive_features, "sample_weight": sample_weight}
        # A batch of partial_fit (or rows to score) may hold one group: the merged moments are
        # checked instead. (compute_moments checks its groups unless min_group_size=0 says not to.)
        moments = compute_moments(X, features=features, min_group_size=2 if where == "fit" else 0, **roles)
        assert isinstance(moments, GroupMoments)  # no cells asked for
        if reset:
            self.n_features_in_ = moments.n_features
        if not rows:
            return moments, None
        return moments, lambda: table_passes(X, moments, **roles)

    def _set_fitted(self, moments: GroupMoments, projection: FairProjection) -> None:
        working = moments.rescaled(projection.scale)
        components = projection.components
        self.moments_ = moments
        self.projection_ = projection
        self.components_ = components.T.copy()
        self.n_components_ = components.shape[1]
        self.mean_ = projection.mean
        self.scale_ = projection.scale
        groups = np.empty(moments.n_groups, dtype=object)
        groups[:] = list(moments.groups)
        self.groups_ = groups
        self.group_counts_ = moments.count.copy()
        self.group_losses_ = projection.group_loss
        self.group_errors_ = projection.group_error
        ddof = 1 if working.weight.sum() > 1 else 0
        self.explained_variance_ = metrics.explained_variance(working, components, ddof=ddof)
        self.explained_variance_ratio_ = metrics.explained_variance_ratio(working, components)
        self._not_fitted_because = None

    # --------------------------------------------------------------- scoring
    def score(self, X: Any, y: Any = None, *, sensitive_features: Any = None, sample_weight: Any = None) -> float:
        """The method's own criterion on the rows of X, signed so that higher is better.

        Each method is scored by what it makes fair (its paper's definition,
        :meth:`fairpca_dist.solvers.SolverSpec.criterion_of`; see
        :data:`fairpca_dist.assessment.scoring.CRITERIA`), measured on the rows of X with the
        groups' centres of the fit: −max_g loss_g for ``samadi-*``, ``fair-eig`` and ``jevd*``;
        min_g (variance kept of group g) for ``mm*``; −(ABDiff) for ``dro``; −(largest linear
        MMD² between projected group means) for ``olfat-sdp``, ``kleindessner*`` and ``mmd``
        with the linear or quadratic kernel; the explained variance ratio for ``pca``, for
        ``mmd`` with the RBF kernel (which maximises it subject to its RBF MMD² bound, a
        criterion measured on the rows rather than from moments) and for a callable ``method``.
        :class:`~sklearn.model_selection.GridSearchCV` uses it when no ``scoring`` is given;
        route ``sensitive_features`` to it with ``set_score_request(sensitive_features=True)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), pandas/dask DataFrame or dask array
            Rows to score; their groups must be groups of the fit.
        y : None
            Ignored.
        sensitive_features : array-like of shape (n_samples,) or column name(s)
            Required. As in :meth:`fit`.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative row weights.

        Returns
        -------
        float
            The signed criterion (higher is better).

        Raises
        ------
        InputError
            The rows' groups differ from those of the fit (a group missing or new): split the
            rows so that every part holds every group (e.g. stratify on the groups).
        """
        from fairpca_dist.assessment.scoring import criterion_named, score_projection

        self._check_is_fitted()
        moments, _ = self._moments(X, sensitive_features, sample_weight, reset=False, where="score", rows=False)
        if moments.groups != self.moments_.groups:
            raise InputError(
                f"FairPCA.score: the rows' groups {list(moments.groups)} differ from the groups of the fit "
                f"{list(self.moments_.groups)}; score rows that hold every group (e.g. a split stratified on the "
                "groups: GridSearchCV(..., cv=StratifiedKFold()) with the groups as y)"
            )
        scores = score_projection(self.projection_, self.moments_, moments)
        key = "explained_variance_ratio"
        if not callable(self.method):
            key = SOLVERS[self.method].criterion_of(self.projection_.options)
            if key == "rbf_mmd2":
                key = "explained_variance_ratio"
        criterion = criterion_named(key)
        value = scores.value(criterion.key)
        return float(-value if criterion.better == "lower" else value)

    # --------------------------------------------------------------- transforming
    @property
    def _n_features_out(self) -> int:
        return self.components_.shape[0]

    def _project(self, x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x, dtype=np.float64) - self.mean_) / self.scale_) @ self.components_.T

    def _drop_sensitive(self, X: Any) -> Any:
        columns = [c for c in getattr(self, "_sensitive_columns", []) if c in getattr(X, "columns", [])]
        return X.drop(columns=columns) if columns else X

    def transform(self, X: Any) -> Any:
        """Project X: ((X − mean_) / scale_) @ components_ᵀ.

        numpy/pandas input gives a numpy array, or the container chosen by ``set_output``. A
        dask array gives a lazy dask array and a dask DataFrame a lazy dask DataFrame, chunk
        by chunk; with ``set_output(transform="pandas")`` both give a lazy dask DataFrame with
        the output column names (nothing is computed). Polars output of dask input would
        compute every row and is refused.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), pandas/dask DataFrame or dask array
            The rows. Columns named as ``sensitive_features`` at fit are ignored.

        Returns
        -------
        ndarray, DataFrame, dask array or dask DataFrame of shape (n_samples, n_components_)
            The projected rows.
        """
        self._check_is_fitted()
        X = self._drop_sensitive(X)
        if _is_dask(X):
            return self._dask_transform(X)
        return _wrap_data_with_container("transform", self._memory_transform(X), X, self)

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit to X, then transform X (as ``fit(X, y, **fit_params).transform(X)``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), pandas/dask DataFrame or dask array
            The rows.
        y : None
            Ignored.
        **fit_params : dict
            ``sensitive_features`` and ``sample_weight``, as in :meth:`fit`.

        Returns
        -------
        ndarray, DataFrame, dask array or dask DataFrame of shape (n_samples, n_components_)
            The projected rows (see :meth:`transform`).
        """
        return self.fit(X, y, **fit_params).transform(X)

    def _dask_transform(self, X: Any) -> Any:
        container = _get_output_config("transform", self)["dense"]
        if container not in ("default", "pandas"):
            raise InputError(
                f"set_output(transform={container!r}) would compute every row of the dask input into memory: use "
                "set_output(transform='pandas') for a lazy dask DataFrame, or call .compute() on the input first"
            )
        out_names = list(self.get_feature_names_out())
        if isinstance(X, da.Array):
            self._check_width(X.shape[1])
            z = X.rechunk({1: -1}).map_blocks(
                self._project, chunks=(X.chunks[0], (self.n_components_,)), dtype=np.float64
            )
            return dd.from_dask_array(z, columns=out_names) if container == "pandas" else z
        if isinstance(X, dd.Series):
            raise InputError("FairPCA.transform takes a dask DataFrame or array, not a dask Series: use .to_frame()")
        names = list(getattr(self, "feature_names_in_", X.columns))
        self._check_width(len(names))
        missing = [c for c in names if c not in X.columns]
        if missing:
            raise SchemaError(f"columns {missing} seen at fit are missing from X")
        meta = pd.DataFrame({c: pd.Series(dtype=np.float64) for c in out_names})
        return X[names].map_partitions(
            lambda part: pd.DataFrame(
                self._project(part.to_numpy(dtype=np.float64)), columns=out_names, index=part.index
            ),
            meta=meta,
        )

    def _memory_transform(self, X: Any) -> np.ndarray:
        try:
            x = validate_data(self, X, dtype=np.float64, reset=False, ensure_all_finite=False)
        except ValueError as error:
            raise self._input_error(X, error, "the rows passed to transform") from error
        if not np.isfinite(x).all():
            names = [str(n) for n in getattr(self, "feature_names_in_", [f"x{j}" for j in range(x.shape[1])])]
            check_finite(x, names, "the rows passed to transform")
        return self._project(x)

    def _input_error(self, X: Any, error: ValueError, where: str) -> InputError:
        """scikit-learn's validation error as an :class:`InputError`: a non-numeric column of a
        DataFrame named (:func:`~fairpca_dist.engine.sources.feature_values`), columns that differ from
        those seen at fit listed (a :class:`SchemaError`), the rest with their message."""
        if isinstance(error, InputError):
            return error
        if isinstance(X, pd.DataFrame):
            try:
                feature_values(X, list(X.columns), where)
            except SchemaError as named:
                return named
            except ValueError:
                pass
        message = " ".join(str(error).split())
        if "feature" in message and hasattr(self, "n_features_in_"):
            seen = list(getattr(self, "feature_names_in_", []))
            given = list(getattr(X, "columns", []))
            detail = f" (columns at fit: {seen}; X has: {given})" if seen else ""
            return SchemaError(f"{where}: {message}{detail}")
        return InputError(f"{where}: {message}")

    def inverse_transform(self, X: Any) -> Any:
        """Map projected rows back to feature space: (Z @ components_) · scale_ + mean_.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_components_)
            Projected rows.

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_features_in_)
            The rows' reconstructions (lazy for a dask array).
        """
        self._check_is_fitted()
        if isinstance(X, da.Array):
            return da.map_blocks(
                lambda z: (z @ self.components_) * self.scale_ + self.mean_,
                X,
                chunks=(X.chunks[0], (self.components_.shape[1],)),
                dtype=np.float64,
            )
        z = np.asarray(X, dtype=np.float64)
        if z.ndim != 2 or z.shape[1] != self.n_components_:
            raise InputError(f"inverse_transform expects shape (n_samples, {self.n_components_}), got {z.shape}")
        return (z @ self.components_) * self.scale_ + self.mean_

    def _check_width(self, width: int) -> None:
        if width != self.n_features_in_:
            raise SchemaError(f"X has {width} features, but FairPCA was fitted with {self.n_features_in_}")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _init_signature(cls: type[FairPCA]) -> inspect.Signature:
    """The signature of ``cls(...)``: that of its ``__init__`` without ``self`` (``__new__``
    only adds a hint to the TypeError of an unknown keyword)."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())
    return inspect.Signature(parameters[1:], return_annotation=inspect.Signature.empty)


# set_output needs the "transform" key; FairPCA wraps its output itself (auto_wrap_output_keys=None
# above), so that dask input is never computed into pandas.
FairPCA._sklearn_auto_wrap_output_keys = {"transform"}
FairPCA.__signature__ = _init_signature(FairPCA)
