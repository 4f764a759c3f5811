"""Flow: every method by every fairness criterion on an ingested table (``fairpca compare``)."""

from __future__ import annotations

from typing import Any, cast

from fairpca_dist.assessment.comparison import check_comparison
from fairpca_dist.assessment.comparison_report import COMPARISON_FILE
from fairpca_dist.engine.moments import Center
from fairpca_dist.flows.runtime import flow
from fairpca_dist.flows.tasks import MethodsParameter, cell_moments_task, comparison_task
from fairpca_dist.io.atomic import check_output
from fairpca_dist.io.ingest import read_schema
from fairpca_dist.params import check_run_parameters


@flow(name="fairpca-compare", flow_run_name="compare-r{n_components}")
def compare(
    table_dir: str,
    out_dir: str,
    n_components: list[int] | int = 2,
    methods: MethodsParameter | None = None,
    target: str | None = None,
    n_cells: int = 10,
    cells_column: str | None = None,
    cell_seed: int = 0,
    train_fraction: float = 0.7,
    center: str = "group",
    standardize: bool = True,
    rbf_mmd: bool = True,
    random_state: int = 0,
    cache_dir: str | None = None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit every registered method (or ``methods``: names, or name → options where a list of
    values is a grid) at each rank of ``n_components`` and score every fit by every criterion,
    in and out of sample; write the comparison report to ``out_dir``.

    The per-cell moments come from one cached pass (a task of their own, retried on
    infrastructure errors); the comparison then reads the rows only for the RBF MMD², the
    downstream sample (with ``target``) and the methods that read rows. Settings, groups and
    the target column are checked before any pass. ``dask_address``: run the passes there.
    ``storage_options``: options of the filesystem of URL paths (``s3://…``: e.g.
    ``endpoint_url``); credentials come from the workers' environment, never from here.

    Parameters
    ----------
    table_dir : str
        An ingested table's folder.
    out_dir : str
        The comparison folder to write.
    n_components : int or list of int, default 2
        The rank(s) r.
    methods : list or dict, optional
        The methods, with grids (default: every registered method).
    target : str, optional
        A binary column for the downstream classifier.
    n_cells : int, default 10
    cells_column : str, optional
    cell_seed : int, default 0
        The cells, as for the evaluate flow.
    train_fraction : float, default 0.7
        Share of the cells the out-of-sample fits use.
    center : {"group", "global", "origin"}, default "group"
    standardize : bool, default True
    rbf_mmd : bool, default True
        Measure the RBF-kernel MMD².
    random_state : int, default 0
    cache_dir : str, optional
    dask_address : str, optional
        A Dask scheduler (``tcp://host:8786``) to run the Dask work on, instead of in this process.
    storage_options : dict, optional
        Options of the filesystem of URL paths (e.g. ``endpoint_url``); never credentials.

    Returns
    -------
    dict
        ``out_dir``, the ``passes`` over the rows by purpose, and the ``fits`` with their status.

    Raises
    ------
    InputError, SchemaError, GroupError
        Bad parameters or data, before anything is written (not retried).
    OutputPathError, OutputBusyError, WriteError
        The output overlaps an input, is held by another run, or cannot be written (not retried).
    ServiceError
        The Dask scheduler does not answer.
    """
    ranks = [n_components] if isinstance(n_components, int) else list(n_components)
    check_run_parameters(source=table_dir, center=center, dask_address=dask_address, storage_options=storage_options)
    check_output(out_dir, [table_dir], kind="folder", marker=COMPARISON_FILE, storage_options=storage_options)
    schema = read_schema(table_dir, storage_options)
    check_comparison(
        methods,
        ranks,
        len(schema["features"]),
        groups=[g["label"] for g in schema["groups"]],
        center=cast(Center, center),  # checked by check_run_parameters
        target=target,
    )
    cell_moments_task(
        table_dir,
        cells_column=cells_column,
        n_cells=n_cells,
        cell_seed=cell_seed,
        cache_dir=cache_dir,
        dask_address=dask_address,
        storage_options=storage_options,
    )
    return comparison_task(
        table_dir,
        out_dir,
        methods=methods,
        n_components=ranks,
        target=target,
        n_cells=n_cells,
        cells_column=cells_column,
        cell_seed=cell_seed,
        train_fraction=train_fraction,
        center=center,
        standardize=standardize,
        rbf_mmd=rbf_mmd,
        random_state=random_state,
        cache_dir=cache_dir,
        dask_address=dask_address,
        storage_options=storage_options,
    )


if __name__ == "__main__":
    compare.serve(name="fairpca-compare")
