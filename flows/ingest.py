"""Flow: source table (CSV, Parquet, folder, glob) → validated Parquet + schema.json."""

from __future__ import annotations

from typing import Any

from fairpca_dist.flows.runtime import flow
from fairpca_dist.flows.tasks import ingest_task
from fairpca_dist.params import check_run_parameters


@flow(name="fairpca-ingest", flow_run_name="ingest-{table_dir}")
def ingest(
    source: str,
    table_dir: str,
    sensitive_feature: list[str],
    features: list[str] | None = None,
    exclude: list[str] | None = None,
    key_columns: list[str] | None = None,
    pass_through: list[str] | None = None,
    on_bad_rows: str = "fail",
    read_options: dict[str, Any] | None = None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate ``source`` and write it as partitioned Parquet with ``schema.json``
    (``features``: default every numeric column not otherwise used, but ``exclude``);
    rows with NaN/inf features or missing groups fail the run (or, with
    ``on_bad_rows="drop"``, are counted and sampled into ``rejects.csv``).
    ``dask_address``: run the Dask work on that scheduler instead of in this process.
    ``storage_options``: options of the filesystem of URL paths (``s3://…``: e.g.
    ``endpoint_url``); credentials come from the workers' environment, never from here.

    Parameters
    ----------
    source : str
        The source table: a CSV or Parquet file, folder or glob, local or a URL.
    table_dir : str
        The ingested table's folder (or URL) to write.
    sensitive_feature : list of str
        The group column(s).
    features, exclude : list of str, optional
        The feature columns, or the columns to leave out of the default ones.
    key_columns, pass_through : list of str, optional
        Identifier columns, and other columns kept unchanged (e.g. a target).
    on_bad_rows : {"fail", "drop"}, default "fail"
        What rows with NaN/inf features or missing groups do.
    read_options : dict, optional
        Options of the reader (e.g. ``{"sep": ";"}``, ``{"na_values": ["?"]}``).
    dask_address : str, optional
        A Dask scheduler (``tcp://host:8786``) to run the Dask work on, instead of in this process.
    storage_options : dict, optional
        Options of the filesystem of URL paths (e.g. ``endpoint_url``); never credentials.

    Returns
    -------
    dict
        ``table_dir``, ``rows``, ``rejected`` and the ``summary`` line.

    Raises
    ------
    InputError, SchemaError, GroupError
        Bad parameters or data, before anything is written (not retried).
    OutputPathError, OutputBusyError, WriteError
        The output overlaps an input, is held by another run, or cannot be written (not retried).
    ServiceError
        The Dask scheduler does not answer.
    """
    check_run_parameters(
        source=source, on_bad_rows=on_bad_rows, dask_address=dask_address, storage_options=storage_options
    )
    return ingest_task(
        source,
        table_dir,
        sensitive_feature=sensitive_feature,
        features=features,
        exclude=exclude or [],
        key_columns=key_columns or [],
        pass_through=pass_through or [],
        on_bad_rows=on_bad_rows,
        read_options=read_options,
        dask_address=dask_address,
        storage_options=storage_options,
    )


if __name__ == "__main__":
    ingest.serve(name="fairpca-ingest")
