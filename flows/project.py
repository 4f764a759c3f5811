"""Flow: apply a model to a table, writing Parquet atomically (``_SUCCESS`` marker)."""

from __future__ import annotations

from typing import Any

from fairpca_dist.flows.runtime import flow
from fairpca_dist.flows.tasks import project_task
from fairpca_dist.params import check_run_parameters


@flow(name="fairpca-project", flow_run_name="project-{out_dir}")
def project(
    model_dir: str,
    table_dir: str,
    out_dir: str,
    pass_through: list[str] | None = None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Project every row; the output folder is replaced only when complete.
    ``dask_address``: run the Dask work on that scheduler instead of in this process.
    ``storage_options``: options of the filesystem of URL paths (``s3://…``: e.g.
    ``endpoint_url``); credentials come from the workers' environment, never from here.

    Parameters
    ----------
    model_dir : str
        A model folder.
    table_dir : str
        The table to project (an ingested table's folder, or any table).
    out_dir : str
        The output folder: Parquet partitions and ``_SUCCESS``.
    pass_through : list of str, optional
        Columns copied unchanged before the projected ones.
    dask_address : str, optional
        A Dask scheduler (``tcp://host:8786``) to run the Dask work on, instead of in this process.
    storage_options : dict, optional
        Options of the filesystem of URL paths (e.g. ``endpoint_url``); never credentials.

    Returns
    -------
    dict
        ``out_dir`` and the ``rows`` written.

    Raises
    ------
    InputError, SchemaError, GroupError
        Bad parameters or data, before anything is written (not retried).
    OutputPathError, OutputBusyError, WriteError
        The output overlaps an input, is held by another run, or cannot be written (not retried).
    ServiceError
        The Dask scheduler does not answer.
    """
    check_run_parameters(source=model_dir, storage_options=storage_options)
    check_run_parameters(source=table_dir, dask_address=dask_address, storage_options=storage_options)
    return project_task(
        model_dir,
        table_dir,
        out_dir,
        pass_through=pass_through or [],
        dask_address=dask_address,
        storage_options=storage_options,
    )


if __name__ == "__main__":
    project.serve(name="fairpca-project")
