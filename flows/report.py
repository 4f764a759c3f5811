"""Flow: fairness report (JSON, Markdown, HTML, PNGs), published as Prefect artifacts."""

from __future__ import annotations

from typing import Any

from fairpca_dist.flows.runtime import flow
from fairpca_dist.flows.tasks import report_task
from fairpca_dist.params import check_run_parameters


@flow(name="fairpca-report", flow_run_name="report-{report_dir}")
def report(
    model_dir: str,
    table_dir: str,
    report_dir: str,
    target: str | None = None,
    max_components: int | None = None,
    sample_size: int = 50_000,
    artifact_key: str = "fairpca-report",
    dask_address: str | None = None,
    rbf_mmd: str = "auto",
    storage_options: dict[str, Any] | None = None,
    group_names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The fitted method judged by its own criterion next to PCA, every other criterion side by
    side, per-group errors, losses and explained variance,
    linear- and RBF-kernel MMD² (``rbf_mmd``: "auto", "exact", "rff" or "none"), and (with
    ``target``) the demographic-parity difference of a classifier trained on the projected data.
    ``group_names``: display names of values of the sensitive column (``{"1": "female"}``, or
    ``{"sex=1": "female"}``; :func:`fairpca_dist.wording.group_display_names`).
    ``dask_address``: run the Dask work on that scheduler instead of in this process.
    ``storage_options``: options of the filesystem of URL paths (``s3://…``: e.g.
    ``endpoint_url``); credentials come from the workers' environment, never from here.

    Parameters
    ----------
    model_dir : str
        A model folder written by the fit flow (with its moments).
    table_dir : str
        The ingested table the model was fitted on.
    report_dir : str
        The report folder to write.
    target : str, optional
        A binary column for the downstream classifier.
    max_components : int, optional
        The largest r of the curves.
    sample_size : int, default 50000
        Rows sampled for the downstream check.
    artifact_key : str, default "fairpca-report"
        Key of the Prefect artifacts published.
    dask_address : str, optional
        A Dask scheduler (``tcp://host:8786``) to run the Dask work on, instead of in this process.
    rbf_mmd : {"auto", "exact", "rff", "none"}, default "auto"
        How the RBF-kernel MMD² is measured.
    storage_options : dict, optional
        Options of the filesystem of URL paths (e.g. ``endpoint_url``); never credentials.
    group_names : dict, optional
        Display names of values of the sensitive column.

    Returns
    -------
    dict
        ``report_dir`` and the paths of ``markdown`` and ``html``.

    Raises
    ------
    InputError, SchemaError, GroupError
        Bad parameters or data, before anything is written (not retried).
    OutputPathError, OutputBusyError, WriteError
        The output overlaps an input, is held by another run, or cannot be written (not retried).
    ServiceError
        The Dask scheduler does not answer.
    """
    check_run_parameters(source=model_dir, rbf_mmd=rbf_mmd, storage_options=storage_options)
    check_run_parameters(source=table_dir, dask_address=dask_address, storage_options=storage_options)
    return report_task(
        model_dir,
        table_dir,
        report_dir,
        target=target,
        max_components=max_components,
        sample_size=sample_size,
        artifact_key=artifact_key,
        dask_address=dask_address,
        rbf_mmd=rbf_mmd,
        group_names=group_names,
        storage_options=storage_options,
    )


if __name__ == "__main__":
    report.serve(name="fairpca-report")
