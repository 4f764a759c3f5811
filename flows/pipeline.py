"""Flow: ingest → fit → project → report, on a Dask cluster through prefect-dask.

Everything of run ``<run_id>`` goes under ``<runs_dir>/<run_id>/``: ``table/`` (ingested
Parquet + schema.json), ``model/`` (moments.npz, model.npz, model.json), ``projected/``
(Parquet + _SUCCESS) and ``report/`` (report.json/.md/.html + PNGs). Without
``dask_address`` a LocalCluster runs inside the flow's process; with it, the tasks and
their Dask graphs run on that scheduler's workers. ``runs_dir`` and ``source`` may be URLs
(``s3://…``): on a cluster whose workers share no disk with the driver, they must be.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from prefect import flow
from prefect.context import FlowRunContext
from prefect.runtime import flow_run
from prefect_dask import DaskTaskRunner

from fairpca_dist.atomic import check_output, input_paths, output_lock
from fairpca_dist.fitting import MOMENTS_CACHE
from fairpca_dist.ingest import failed_rejects_path
from fairpca_dist.params import check_run_parameters
from fairpca_dist.storage import Location, is_url, locate
from flows.steps import step
from flows.task_runner import QuietDaskTaskRunner
from flows.tasks import fit_task, ingest_task, no_retry_after_interrupt, project_task, report_task


def task_runner(dask_address: str | None) -> DaskTaskRunner:
    """An existing scheduler, or a LocalCluster of threads in this process (no extra
    processes, so no extra temporary Prefect servers in ephemeral mode)."""
    if dask_address:
        return QuietDaskTaskRunner(address=dask_address)
    return QuietDaskTaskRunner(cluster_kwargs={"n_workers": 1, "threads_per_worker": 2, "processes": False,
                                       "dashboard_address": ":0"})


# what the steps write, relative to the run folder
_STEP_OUTPUTS = ("table", "model", "projected", "report", f"../{MOMENTS_CACHE}")


def _run_dir(runs_dir: str, run_id: str | None, method: str, n_components: int,
             storage_options: dict[str, Any] | None) -> Location:
    """``<runs_dir>/<run_id>``, a local one as an absolute path (the steps run on Dask workers,
    whose working directory may not be this one); without a run id, a name no other run has:
    method, r, start time and the start of the flow-run id."""
    if not run_id:
        run_id = f"{method}-r{n_components}-{time.strftime('%Y%m%d-%H%M%S')}-{(flow_run.get_id() or 'local')[:8]}"
    runs = locate(runs_dir, storage_options)
    return (runs if is_url(runs_dir) else locate(runs.path)) / run_id


def _absolute_source(source: str) -> str:
    """A local source (file, folder or glob) as an absolute path, for the same reason; a URL
    (``s3://…``) as given."""
    return source if "://" in source else os.path.abspath(source)


@flow(name="fairpca-pipeline-steps")
def _steps(
    source: str, root: str, sensitive_feature: list[str], features: list[str] | None, exclude: list[str],
    key_columns: list[str], target: str | None, method: str, n_components: int, center: str, standardize: bool,
    options: dict[str, Any] | None, on_bad_rows: str, read_options: dict[str, Any] | None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    with no_retry_after_interrupt():  # the tasks run on the cluster's threads, not interrupted themselves
        with step("dask") as outcome:
            # prefect-dask starts (or connects to) the cluster on first use: do it here, timed.
            client = FlowRunContext.get().task_runner.client
            workers = client.scheduler_info()["workers"].values()
            outcome.summary = (f"{len(workers)} worker(s), {sum(w['nthreads'] for w in workers)} threads "
                               f"at {client.scheduler.address}")
        base = root.rstrip("/")
        pass_through = [*key_columns, *([target] if target else [])]
        # .submit() sends each task to the DaskTaskRunner's cluster, where get_dask_client()
        # hands the library the same cluster for its own graphs; steps run one after another.
        with step("ingest") as outcome:
            table = ingest_task.submit(
                source, f"{base}/table", sensitive_feature=sensitive_feature, features=features, exclude=exclude,
                key_columns=key_columns, pass_through=[target] if target else [], on_bad_rows=on_bad_rows,
                read_options=read_options, report_target=target, storage_options=storage_options,
            ).result()
            counts, *left_out = table["summary"].splitlines()  # then the columns left out, if any
            outcome.summary = "\n    ".join([f"{counts} -> {table['table_dir']}", *left_out])
        with step("fit") as outcome:
            model = fit_task.submit(
                table["table_dir"], f"{base}/model", method=method, n_components=n_components, center=center,
                standardize=standardize, options=options, cache_dir=f"{base.rsplit('/', 1)[0]}/{MOMENTS_CACHE}",
                storage_options=storage_options,
            ).result()
            outcome.summary = (f"{method} r={n_components}, largest group loss {model['max_loss']:.4g}"
                               f"{'' if model['converged'] else ' (not converged)'} -> {model['model_dir']}")
        with step("project") as outcome:
            projected = project_task.submit(
                model["model_dir"], table["table_dir"], f"{base}/projected", pass_through=pass_through,
                storage_options=storage_options,
            ).result()
            outcome.summary = f"{projected['rows']:,} rows -> {projected['out_dir']}"
        with step("report") as outcome:
            report = report_task.submit(
                model["model_dir"], table["table_dir"], f"{base}/report", target=target, max_components=None,
                sample_size=50_000, artifact_key=f"fairpca-report-{method}", storage_options=storage_options,
            ).result()
            outcome.summary = f"-> {report['markdown']}"
        return {"run_dir": base, "table": table, "model": model, "projected": projected, "report": report}


@flow(name="fairpca-pipeline", flow_run_name="pipeline-{method}-r{n_components}")
def pipeline(
    source: str,
    sensitive_feature: list[str],
    runs_dir: str = "runs",
    run_id: str | None = None,
    features: list[str] | None = None,
    exclude: list[str] | None = None,
    key_columns: list[str] | None = None,
    target: str | None = None,
    method: str = "fair-eig",
    n_components: int = 2,
    center: str = "group",
    standardize: bool = True,
    options: dict[str, Any] | None = None,
    on_bad_rows: str = "fail",
    read_options: dict[str, Any] | None = None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ingest → fit → project → report; every parameter is checked before data are read.
    On the local disk the run folder is locked while the run lasts: a concurrent run with the
    same ``run_id`` raises :class:`~fairpca_dist.exceptions.OutputBusyError` before it reads or
    writes anything (on an object store, each step's output refuses a concurrent writer when it
    commits). ``storage_options``: options of the filesystem of URL paths (e.g. ``endpoint_url``);
    credentials come from the workers' environment, never from a flow parameter."""
    check_run_parameters(source=source, method=method, n_components=n_components, center=center,
                         on_bad_rows=on_bad_rows, options=options, run_id=run_id or None, dask_address=dask_address,
                         storage_options=storage_options)
    root = _run_dir(runs_dir, run_id, method, n_components, storage_options)
    for output in _STEP_OUTPUTS:  # the run folder may hold the source (the demo's): its steps' outputs may not
        check_output(f"{root.url}/{output}" if not root.local else os.path.join(root.path, output),
                     input_paths(source), kind="folder", storage_options=storage_options)
    steps = _steps.with_options(task_runner=task_runner(dask_address))
    with output_lock(root, inputs=()):  # a second run with this run id fails here, naming the folder
        new_folder = not root.exists()
        try:
            return steps(_absolute_source(source), root.url if not root.local else root.path, sensitive_feature,
                         features, exclude or [], key_columns or [], target, method, n_components, center, standardize,
                         options, on_bad_rows, read_options, storage_options)
        except BaseException:
            if new_folder:
                _remove_unfinished_run(root)
            raise


def _remove_unfinished_run(root: Location) -> None:
    """A failed run's folder goes, with the steps that finished before the failure (an ingested
    table without its model is half a run), except the sample of rejected rows that an ingest
    failure points to: a folder with that file alone stays."""
    kept = failed_rejects_path(root / "table").name
    for entry in root.listdir():
        if entry.name != kept:
            entry.remove()
    if root.local:
        with contextlib.suppress(OSError):
            os.rmdir(root.path)


if __name__ == "__main__":
    pipeline.serve(name="fairpca-pipeline")
