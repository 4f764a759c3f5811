"""The comparison of every method on a table: :func:`compare` for any data a notebook holds
(a DataFrame, arrays, a Parquet or CSV path), :func:`compare_table` for an ingested table (the
``fairpca compare`` command and the Prefect flow), which also writes the report.

Passes over the rows: one for the per-cell moments (cached for an ingested table), then, as
:mod:`fairpca_dist.assessment.comparison` documents, three per rank for the RBF MMD², two for the
downstream classifier's row sample, and those of the row-reading methods. Every setting that
needs no rows is checked before the first pass.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from fairpca_dist.assessment.comparison import Comparison, check_comparison, compare_methods
from fairpca_dist.assessment.comparison_report import COMPARISON_FILE, write_comparison
from fairpca_dist.assessment.evaluation import Methods, plan_splits
from fairpca_dist.assessment.table_evaluation import cached_cell_moments, cell_moments_cache_path, table_cells
from fairpca_dist.engine.cells import CellMoments, HashCells
from fairpca_dist.engine.moments import Center
from fairpca_dist.engine.passes import compute_moments, sample_rows, table_passes
from fairpca_dist.engine.sources import open_table
from fairpca_dist.exceptions import SchemaError
from fairpca_dist.io.atomic import check_output
from fairpca_dist.io.ingest import read_schema, table_source
from fairpca_dist.io.storage import StorageOptions
from fairpca_dist.params import check_narrow, choose_wide
from fairpca_dist.wording import listed

__all__ = ["compare", "compare_table"]

DOWNSTREAM_SAMPLE_ROWS = 50_000
"""Rows sampled for the downstream classifier."""


def compare(
    data: Any,
    *,
    sensitive_feature: Any,
    n_components: int | Sequence[int],
    methods: Methods | None = None,
    target: str | None = None,
    features: Sequence[str] | None = None,
    sample_weight: str | None = None,
    key_columns: Sequence[str] = (),
    n_cells: int = 10,
    cell_seed: int = 0,
    train_fraction: float = 0.7,
    center: Center = "group",
    standardize: bool = True,
    rbf_mmd: bool = True,
    random_state: int = 0,
    client: Any = None,
    progress: bool = False,
) -> Comparison:
    """Fit every method (or ``methods``) on ``data`` and score each fit by every criterion.

    Methods with a trade-off parameter are fitted over a grid
    (:data:`fairpca_dist.assessment.comparison.COMPARE_GRIDS`); each fit is scored in sample and
    out of sample (refitted on ``train_fraction`` of the cells, scored on the rest) by explained
    variance, the largest group loss (Samadi et al.), the smallest group variance (Babu et al.),
    ABDiff and ARE (Vu et al.), the linear-kernel MMD², the RBF-kernel MMD² over every row and,
    with a ``target``, a downstream classifier's accuracy and demographic-parity difference
    (:func:`fairpca_dist.assessment.comparison.compare_methods`). The moment-based methods cost one
    pass over the rows in all.

    Parameters
    ----------
    data : pandas/dask DataFrame, numpy/dask array, path or URL
        The rows, as for :func:`~fairpca_dist.engine.passes.compute_moments`.
    sensitive_feature : str, list of str, or array-like
        Group column(s).
    n_components : int or sequence of int
        The rank(s) r to compare at.
    methods : str, sequence of str, or mapping, optional
        The methods (default: every registered method); a mapping gives each method its options,
        a list of values being a grid.
    target : str, optional
        A binary column for the downstream classifier; it is left out of the features.
    features, sample_weight : optional
        Column roles, as for :func:`~fairpca_dist.engine.passes.compute_moments`.
    key_columns : sequence of str, default ()
        Columns whose hash assigns rows to cells (default: all feature and group columns).
    n_cells : int, default 10
        Hash cells; the out-of-sample split is a union of cells.
    cell_seed : int, default 0
        Seed of the cells' hash.
    train_fraction : float, default 0.7
        Share of the cells the out-of-sample fits are refitted on (a whole number of cells).
    center : {"group", "global", "origin"}, default "group"
        About which point each group's error is measured.
    standardize : bool, default True
        Divide each feature by its standard deviation before fitting.
    rbf_mmd : bool, default True
        Measure the RBF-kernel MMD² (random Fourier features: one pass for every fit).
    random_state : int, default 0
        Seed of the random starts, features and the downstream split.
    client : None, distributed.Client or str, optional
        Where the passes run (as for :func:`~fairpca_dist.engine.passes.compute_moments`).
    progress : bool, default False
        Show a progress bar per pass.

    Returns
    -------
    Comparison
        Every candidate fit with its scores; ``table()`` has one row per method, grid point and r.
        :func:`~fairpca_dist.assessment.comparison_report.write_comparison` writes its files.

    Raises
    ------
    InputError
        An unknown method or option, an empty grid, r out of range, a ``train_fraction`` that is
        not a whole number of cells, or a table with one group; before any pass.
    SchemaError
        A missing column, the ``target`` among them.

    Examples
    --------
    >>> from fairpca_dist import compare, write_comparison
    >>> from fairpca_dist.io.datasets import load_diabetes_table
    >>> table = load_diabetes_table()
    >>> table["high"] = (table.pop("target") > 140).astype(int)
    >>> comparison = compare(
    ...     table, sensitive_feature="sex", n_components=2, methods=["pca", "fair-eig"], target="high", rbf_mmd=False
    ... )
    >>> sorted(comparison.table()["method"])  # one row per method and grid point
    ['fair-eig', 'pca']
    >>> import tempfile
    >>> folder = write_comparison(comparison, f"{tempfile.mkdtemp()}/comparison")  # Markdown, HTML, CSV, JSON, PNGs
    """
    cells = HashCells(tuple(key_columns), n_cells, seed=cell_seed)
    table = open_table(
        data,
        sensitive_feature=sensitive_feature,
        features=features,
        sample_weight=sample_weight,
        key_columns=key_columns,
        cells=cells,
    )  # the schema, no rows
    if target is not None and (table.frame is None or target not in table.frame.columns):
        columns = [] if table.frame is None else list(table.frame.columns)
        raise SchemaError(f"target column {target!r} is not in the data; it has {columns}")
    features = [name for name in table.features if name != target]
    check_comparison(methods, n_components, len(features), center=center, target=target)
    check_narrow("compare", choose_wide(len(features), 2))
    plan_splits(range(n_cells), n_splits=1, train_fraction=train_fraction, n_folds=2)
    exclude = [target] if target is not None else []
    moments = cast(  # compute_moments(cells=...) gives CellMoments
        CellMoments,
        compute_moments(
            data,
            sensitive_feature=sensitive_feature,
            features=features,
            sample_weight=sample_weight,
            key_columns=key_columns,
            exclude=exclude,
            cells=cells,
            client=client,
            progress=progress,
            min_group_size=1,
        ),
    )
    roles = {
        "sensitive_feature": sensitive_feature,
        "sample_weight": sample_weight,
        "key_columns": key_columns,
        "exclude": exclude,
        "cells": cells,
    }
    return _compare_rows(
        data,
        moments,
        roles,
        list(table.sensitive),
        n_components,
        methods,
        target=target,
        moments_passes=1,
        train_fraction=train_fraction,
        center=center,
        standardize=standardize,
        rbf_mmd=rbf_mmd,
        random_state=random_state,
        client=client,
        progress=progress,
    )


def compare_table(
    table_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    n_components: int | Sequence[int],
    methods: Methods | None = None,
    target: str | None = None,
    n_cells: int = 10,
    cells_column: str | None = None,
    cell_seed: int = 0,
    train_fraction: float = 0.7,
    center: Center = "group",
    standardize: bool = True,
    rbf_mmd: bool = True,
    random_state: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> Comparison:
    """Compare methods on an ingested table (column roles from its ``schema.json``) and write
    the report into ``out_dir`` (:func:`~fairpca_dist.assessment.comparison_report.write_comparison`).
    Every setting, the groups and the target column are checked before any pass; the cell
    moments come from the cache when the table is unchanged. Paths may be URLs, opened with
    ``storage_options``."""
    check_output(out_dir, [table_dir], kind="folder", marker=COMPARISON_FILE, storage_options=storage_options)
    schema = read_schema(table_dir, storage_options)
    groups = [group["label"] for group in schema["groups"]]
    check_comparison(methods, n_components, len(schema["features"]), groups=groups, center=center, target=target)
    if target is not None and target not in schema["dtypes"]:
        raise SchemaError(
            f"target column {target!r} is not in the table {table_dir}; it has "
            f"{listed(sorted(schema['dtypes']))} (keep it at ingestion with pass_through)"
        )
    cells = table_cells(
        table_dir, n_cells=n_cells, cells_column=cells_column, seed=cell_seed, storage_options=storage_options
    )
    if isinstance(cells, HashCells):
        plan_splits(range(n_cells), n_splits=1, train_fraction=train_fraction, n_folds=2)
    cached = cell_moments_cache_path(table_dir, cache_dir, cells, storage_options).isfile()
    moments, _ = cached_cell_moments(
        table_dir, cache_dir, cells=cells, client=client, progress=progress, storage_options=storage_options
    )
    roles = {
        "sensitive_feature": schema["sensitive_feature"],
        "sample_weight": schema.get("sample_weight"),
        "key_columns": schema["key_columns"],
        "cells": cells,
    }
    comparison = _compare_rows(
        table_source(table_dir, storage_options),
        moments,
        roles,
        schema["sensitive_feature"],
        n_components,
        methods,
        target=target,
        moments_passes=0 if cached else 1,
        train_fraction=train_fraction,
        center=center,
        standardize=standardize,
        rbf_mmd=rbf_mmd,
        random_state=random_state,
        client=client,
        progress=progress,
        storage_options=storage_options,
    )
    write_comparison(comparison, out_dir, source=os.fspath(table_dir), storage_options=storage_options)
    return comparison


def _compare_rows(
    data: Any,
    moments: CellMoments,
    roles: dict[str, Any],
    sensitive: list[str],
    n_components: int | Sequence[int],
    methods: Methods | None,
    *,
    target: str | None,
    moments_passes: int,
    client: Any,
    progress: bool,
    random_state: int,
    storage_options: StorageOptions | None = None,
    **settings: Any,
) -> Comparison:
    """:func:`~fairpca_dist.assessment.comparison.compare_methods` with the rows of ``data`` (opened with
    the column ``roles`` and cells the moments came from) and, with a target, a row sample for
    the downstream classifier; the passes made before it (``moments_passes`` for the cell
    moments, 2 for the sample) are added to its count."""
    passes = table_passes(
        data, moments.total(), **roles, client=client, progress=progress, storage_options=storage_options
    )
    sample = None
    if target is not None:
        sample = sample_rows(
            data,
            columns=[*moments.feature_names, *sensitive, target],
            max_rows=DOWNSTREAM_SAMPLE_ROWS,
            seed=random_state,
            client=client,
            storage_options=storage_options,
        )
    comparison = compare_methods(
        moments,
        n_components,
        methods,
        passes=passes,
        sample=sample,
        target=target,
        sensitive=sensitive,
        random_state=random_state,
        progress=progress,
        **settings,
    )
    return replace(
        comparison,
        passes={
            "cell moments": moments_passes,
            **comparison.passes,
            "downstream sample": 2 if sample is not None else 0,
        },
    )
