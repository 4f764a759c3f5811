"""scikit-learn compatible fair PCA transformer."""

from __future__ import annotations

from dataclasses import replace
from numbers import Integral
from typing import Any

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from fairpca_dist.assessment import metrics
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.engine.moments import GroupMoments
from fairpca_dist.engine.passes import TablePasses, compute_moments, table_passes
from fairpca_dist.engine.sources import check_finite, feature_values
from fairpca_dist.exceptions import InputError, SchemaError
from fairpca_dist.solvers import CENTERS, SOLVERS, fit_projection
from fairpca_dist.solvers.result import FairProjection

__all__ = ["FairPCA"]


_MISSING_GROUPS = "FairPCA.fit requires sensitive_features: one group label per row, or column name(s) of X"


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


class FairPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Fair principal component analysis.

    Finds a linear projection to ``n_components`` dimensions that represents every group
    defined by the sensitive feature(s) well, by the criterion of ``method`` (see
    :data:`fairpca_dist.SOLVERS`). ``method="pca"`` is plain PCA, the baseline whose
    per-group losses the fair methods improve on. Fitting needs only per-group counts, means
    and scatter matrices, computed in one pass: in memory for numpy/pandas input, with dask
    for dask arrays and DataFrames of any size.

    Parameters
    ----------
    n_components : int or None, default=None
        Target dimension r. ``None`` keeps min(n_samples, n_features), as scikit-learn's PCA.
    method : str or callable, default="pca"
        Solver id in the registry, or a function with the solver signature.
    center : {"group", "global", "origin"}, default="group"
        Which second moments define each group's reconstruction error and loss: about the
        group's own mean (Samadi et al. 2018), about the global mean, or about the origin.
        Projection always subtracts the global mean ``mean_``: group membership is not
        known at transform time.
    standardize : bool, default=False
        Divide features by their pooled standard deviation before fitting.
    random_state : int, Generator or None, default=None
        For solvers that draw random numbers.
    **options
        Method-specific solver options, validated against the method's list.

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
        The sufficient statistics the fit used.
    projection_ : FairProjection
        The solver's full result (objective history, convergence, certificates), with the
        sensitive column name(s) when ``sensitive_features`` named columns of X or was a
        named Series or a DataFrame (``group_columns``: what reports name the groups by).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when X has string column names.

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
    """

    _common_parameters = ("n_components", "method", "center", "standardize", "random_state")

    def __init__(
        self,
        n_components: int | None = None,
        *,
        method: Any = "pca",
        center: str = "group",
        standardize: bool = False,
        random_state: int | np.random.Generator | None = None,
        **options: Any,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.center = center
        self.standardize = standardize
        self.random_state = random_state
        for name, value in options.items():
            setattr(self, name, value)

    # --------------------------------------------------------------- parameters
    def _solver_options(self) -> dict[str, Any]:
        return {
            name: value
            for name, value in vars(self).items()
            if name not in self._common_parameters and not name.startswith("_") and not name.endswith("_")
        }

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = super().get_params(deep=deep)
        params.update(self._solver_options())
        return params

    def _validate_params(self) -> None:
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

    # --------------------------------------------------------------- fitting
    def fit(self, X: Any, y: Any = None, *, sensitive_features: Any = None, sample_weight: Any = None) -> FairPCA:
        """Fit the projection.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), pandas/dask DataFrame or dask array
        y : ignored
        sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns), or column name(s)
            Required. Group label of each row (several columns form intersectional groups),
            or the name(s) of columns of a DataFrame ``X``, which are then not used as
            features. (It defaults to None only so that X is validated first.)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative row weights.
        """
        self._validate_params()
        self._sensitive_columns = (
            ([sensitive_features] if isinstance(sensitive_features, str) else list(sensitive_features))
            if _names_columns(sensitive_features, X)
            else []
        )
        if _is_dask(X):
            moments, passes = self._dask_moments(X, sensitive_features, sample_weight)
        else:
            moments, passes = self._memory_moments(X, sensitive_features, sample_weight)
        n_components = min(moments.n_features, moments.n_samples) if self.n_components is None else self.n_components
        projection = fit_projection(
            moments,
            n_components,
            method=self.method,
            center=self.center,
            standardize=bool(self.standardize),
            random_state=self.random_state,
            passes=passes,
            **self._solver_options(),
        )
        projection = replace(projection, group_columns=_group_columns(sensitive_features, self._sensitive_columns))
        self._set_fitted(moments, projection)
        return self

    def _needs_rows(self) -> bool:
        """Whether the method reads the rows at every iteration (then fit builds DataPasses)."""
        return not callable(self.method) and SOLVERS[self.method].reads_rows(self._solver_options())

    def _memory_moments(
        self, X: Any, sensitive_features: Any, sample_weight: Any
    ) -> tuple[GroupMoments, ArrayPasses | None]:
        if self._sensitive_columns:
            labels = X[self._sensitive_columns]
            labels = labels.iloc[:, 0].to_numpy() if labels.shape[1] == 1 else labels.to_numpy()
            X = X.drop(columns=self._sensitive_columns)
        else:
            labels = sensitive_features
        try:
            x = validate_data(self, X, dtype=np.float64, ensure_all_finite=False, ensure_min_samples=2)
        except ValueError as error:
            raise self._input_error(X, error, "the rows passed to fit") from error
        names = [str(n) for n in getattr(self, "feature_names_in_", [f"x{j}" for j in range(x.shape[1])])]
        if not np.isfinite(x).all():
            check_finite(x, names, "the rows passed to fit")
        if labels is None:
            raise InputError(_MISSING_GROUPS)
        labels = np.asarray(labels, dtype=object if isinstance(labels, list) else None)
        if labels.ndim == 2:
            rows = np.empty(labels.shape[0], dtype=object)
            rows[:] = [tuple(r) for r in labels.tolist()]
            labels = rows
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
        moments = GroupMoments.from_arrays(x, labels, weights=weights, feature_names=names).check_groups()
        passes = ArrayPasses(x, labels, moments.groups, weights=weights) if self._needs_rows() else None
        return moments, passes

    def _dask_moments(
        self, X: Any, sensitive_features: Any, sample_weight: Any
    ) -> tuple[GroupMoments, TablePasses | None]:
        if sensitive_features is None:
            raise InputError(_MISSING_GROUPS)
        if isinstance(X, dd.DataFrame):
            excluded = list(self._sensitive_columns)
            features = [c for c in X.columns if c not in excluded]
            if any(not isinstance(c, str) for c in features):
                raise SchemaError("dask DataFrame columns must be strings")
            self.feature_names_in_ = np.asarray(features, dtype=object)
        else:
            features = None
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        roles = {"sensitive_feature": self._sensitive_columns or sensitive_features, "sample_weight": sample_weight}
        moments = compute_moments(X, features=features, **roles)
        self.n_features_in_ = moments.n_features
        return moments, table_passes(X, moments, **roles) if self._needs_rows() else None

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

        numpy/pandas input gives a numpy array (or pandas with ``set_output``); a dask array
        gives a lazy dask array and a dask DataFrame a lazy dask DataFrame, chunk by chunk.
        """
        check_is_fitted(self)
        X = self._drop_sensitive(X)
        if isinstance(X, da.Array):
            self._check_width(X.shape[1])
            return X.rechunk({1: -1}).map_blocks(
                self._project, chunks=(X.chunks[0], (self.n_components_,)), dtype=np.float64
            )
        if isinstance(X, dd.DataFrame):
            names = list(getattr(self, "feature_names_in_", X.columns))
            self._check_width(len(names))
            missing = [c for c in names if c not in X.columns]
            if missing:
                raise SchemaError(f"columns {missing} seen at fit are missing from X")
            out_names = list(self.get_feature_names_out())
            meta = pd.DataFrame({c: pd.Series(dtype=np.float64) for c in out_names})
            return X[names].map_partitions(
                lambda part: pd.DataFrame(
                    self._project(part.to_numpy(dtype=np.float64)), columns=out_names, index=part.index
                ),
                meta=meta,
            )
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

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Map projected rows back to feature space: (Z @ components_) · scale_ + mean_."""
        check_is_fitted(self)
        if isinstance(X, da.Array):
            return X.map_blocks(
                lambda z: (z @ self.components_) * self.scale_ + self.mean_,
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

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
