"""Flow: the cross-validated evaluation protocol on an ingested table (one pass, cached cells)."""

from __future__ import annotations

from typing import Any

from fairpca_dist.assessment.table_evaluation import EVALUATION_FILE, check_settings, table_cells
from fairpca_dist.flows.runtime import flow
from fairpca_dist.flows.tasks import MethodsParameter, cell_moments_task, evaluation_task
from fairpca_dist.io.atomic import check_output
from fairpca_dist.params import check_run_parameters


@flow(name="fairpca-evaluate", flow_run_name="evaluate-r{n_components}")
def evaluate(
    table_dir: str,
    out_dir: str,
    methods: MethodsParameter | None = None,
    n_components: int = 3,
    n_cells: int = 10,
    cells_column: str | None = None,
    cell_seed: int = 0,
    n_splits: int = 10,
    train_fraction: float = 0.3,
    n_folds: int = 3,
    center: str = "group",
    standardize: bool = True,
    random_state: int | None = 0,
    cache_dir: str | None = None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Out-of-sample and in-sample ABDiff and ARE of each method over ``n_splits`` random
    train/test splits, its grid cross-validated on each training part (Vu et al., ICLR 2022).

    ``methods``: names, or name → options where a list of values is a grid to cross-validate
    (default: pca, fair-eig and dro with the paper's α × λ grid). The per-cell moments come
    from one pass over the rows, cached: evaluating other methods or settings reads no rows.
    ``dask_address``: run the pass on that scheduler instead of in this process.
    ``storage_options``: options of the filesystem of URL paths (``s3://…``: e.g.
    ``endpoint_url``); credentials come from the workers' environment, never from here.

    Parameters
    ----------
    table_dir : str
        An ingested table's folder.
    out_dir : str
        The evaluation folder to write.
    methods : list or dict, optional
        The methods, with grids.
    n_components : int, default 3
        The rank r.
    n_cells : int, default 10
        Hash cells of the key columns.
    cells_column : str, optional
        A column of cell labels, instead of hash cells.
    cell_seed : int, default 0
        Seed of the cells' hash.
    n_splits : int, default 10
        Random train/test splits.
    train_fraction : float, default 0.3
        Share of the cells in each training part (a whole number of cells).
    n_folds : int, default 3
        Folds of the cross-validation of each grid.
    center : {"group", "global", "origin"}, default "group"
    standardize : bool, default True
    random_state : int, optional
        Seed of the splits.
    cache_dir : str, optional
        Where the cell moments are cached.
    dask_address : str, optional
        A Dask scheduler (``tcp://host:8786``) to run the Dask work on, instead of in this process.
    storage_options : dict, optional
        Options of the filesystem of URL paths (e.g. ``endpoint_url``); never credentials.

    Returns
    -------
    dict
        ``out_dir`` and the ``summary`` (mean and s.d. per method).

    Raises
    ------
    InputError, SchemaError, GroupError
        Bad parameters or data, before anything is written (not retried).
    OutputPathError, OutputBusyError, WriteError
        The output overlaps an input, is held by another run, or cannot be written (not retried).
    ServiceError
        The Dask scheduler does not answer.
    """
    methods = methods if methods is not None else ["pca", "fair-eig", "dro"]
    check_run_parameters(
        source=table_dir,
        n_components=n_components,
        center=center,
        dask_address=dask_address,
        storage_options=storage_options,
    )
    check_output(out_dir, [table_dir], kind="folder", marker=EVALUATION_FILE, storage_options=storage_options)
    cells = table_cells(
        table_dir, n_cells=n_cells, cells_column=cells_column, seed=cell_seed, storage_options=storage_options
    )
    check_settings(methods, cells, n_splits=n_splits, train_fraction=train_fraction, n_folds=n_folds)
    cells_path = cell_moments_task(
        table_dir,
        cells_column=cells_column,
        n_cells=n_cells,
        cell_seed=cell_seed,
        cache_dir=cache_dir,
        dask_address=dask_address,
        storage_options=storage_options,
    )
    return evaluation_task(
        cells_path,
        out_dir,
        methods=methods,
        n_components=n_components,
        n_splits=n_splits,
        train_fraction=train_fraction,
        n_folds=n_folds,
        center=center,
        standardize=standardize,
        random_state=random_state,
        source=table_dir,
        storage_options=storage_options,
    )


if __name__ == "__main__":
    evaluate.serve(name="fairpca-evaluate")
