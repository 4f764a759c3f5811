"""Flow: ingested table → moments (cached per file) → fitted model artifact."""

from __future__ import annotations

from typing import Any

from fairpca_dist.flows.runtime import flow
from fairpca_dist.flows.tasks import fit_task
from fairpca_dist.params import check_run_parameters


@flow(name="fairpca-fit", flow_run_name="fit-{method}-r{n_components}")
def fit(
    table_dir: str,
    model_dir: str,
    method: str = "fair-eig",
    n_components: int = 2,
    center: str = "group",
    standardize: bool = True,
    options: dict[str, Any] | None = None,
    cache_dir: str | None = None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit ``method`` on the table; refits with another method or r reuse the cached moments,
    and a table that gained files reads only the new ones.
    ``dask_address``: run the Dask work on that scheduler instead of in this process.
    ``storage_options``: options of the filesystem of URL paths (``s3://…``: e.g.
    ``endpoint_url``); credentials come from the workers' environment, never from here.

    Parameters
    ----------
    table_dir : str
        An ingested table's folder (or URL).
    model_dir : str
        The model folder to write (``moments.npz``, ``model.npz``, ``model.json``).
    method : str, default "fair-eig"
        A method of :data:`fairpca_dist.solvers.SOLVERS`.
    n_components : int, default 2
        The rank r.
    center : {"group", "global", "origin"}, default "group"
        About which point each group's error is measured.
    standardize : bool, default True
        Divide each feature by its standard deviation before fitting.
    options : dict, optional
        The method's options.
    cache_dir : str, optional
        Where the per-file moments are cached (default: next to the table).
    dask_address : str, optional
        A Dask scheduler (``tcp://host:8786``) to run the Dask work on, instead of in this process.
    storage_options : dict, optional
        Options of the filesystem of URL paths (e.g. ``endpoint_url``); never credentials.

    Returns
    -------
    dict
        ``model_dir``, the method's own ``criterion`` in words, and ``converged``.

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
        source=table_dir,
        method=method,
        n_components=n_components,
        center=center,
        options=options,
        dask_address=dask_address,
        storage_options=storage_options,
    )
    return fit_task(
        table_dir,
        model_dir,
        method=method,
        n_components=n_components,
        center=center,
        standardize=standardize,
        options=options,
        cache_dir=cache_dir,
        dask_address=dask_address,
        storage_options=storage_options,
    )


if __name__ == "__main__":
    fit.serve(name="fairpca-fit")
