"""Flow: every method by every fairness criterion on an ingested table (``fairpca compare``)."""

from __future__ import annotations

from typing import Any

from prefect import flow

from fairpca_dist.assessment.comparison import check_comparison
from fairpca_dist.assessment.comparison_report import COMPARISON_FILE
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
        center=center,
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
