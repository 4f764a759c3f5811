"""Flow: ingest → fit → project → report, one flow run whose tasks' passes run on a Dask cluster.

Everything of run ``<run_id>`` goes under ``<runs_dir>/<run_id>/``: ``table/`` (ingested
Parquet + schema.json), ``model/`` (moments.npz, model.npz, model.json), ``projected/``
(Parquet + _SUCCESS) and ``report/`` (report.json/.md/.html + PNGs); a run id that names a
previous run is refused unless ``overwrite`` (:mod:`fairpca_dist.io.runs`). The tasks run in
the flow's process and their Dask graphs on a cluster
(:class:`~fairpca_dist.flows.task_runner.DriverTaskRunner`, the flow's task runner, told the
run's ``dask_address``): without it a LocalCluster of threads inside the flow's process; with
it, that scheduler's workers. The steps are tasks of the pipeline's own flow run, not of a
flow nested in it: a nested flow run (for a task runner made from the parameter) cost 0.2-0.3 s
of API calls per run.
``runs_dir`` and ``source`` may be URLs (``s3://…``): on a cluster whose workers share no disk
with the driver, they must be.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from prefect.context import FlowRunContext
from prefect.runtime import flow_run

from fairpca_dist.engine.cluster import warm_workers
from fairpca_dist.exceptions import InputError
from fairpca_dist.fitting import MOMENTS_CACHE
from fairpca_dist.flows.runtime import flow
from fairpca_dist.flows.steps import log_step, step
from fairpca_dist.flows.task_runner import DriverTaskRunner
from fairpca_dist.flows.tasks import fit_task, ingest_task, no_retry_after_interrupt, project_task, report_task
from fairpca_dist.io.atomic import output_lock, staging_folder, swap_in
from fairpca_dist.io.runs import (
    STEP_FOLDERS,
    check_run,
    check_run_folder,
    previous_run,
    remove_unfinished_run,
    run_folder,
)
from fairpca_dist.io.storage import Location, locate

PASS_MODULES = ("fairpca_dist.io.ingest", "fairpca_dist.projection")
"""The modules of the functions the pipeline's passes run on the workers."""


def _run_dir(
    runs_dir: str, run_id: str | None, method: str, n_components: int, storage_options: dict[str, Any] | None
) -> Location:
    """``<runs_dir>/<run_id>`` (:func:`fairpca_dist.io.runs.run_folder`); without a run id, a name no
    other run has: method, r, start time and the start of the flow-run id."""
    if not run_id:
        run_id = f"{method}-r{n_components}-{time.strftime('%Y%m%d-%H%M%S')}-{(flow_run.get_id() or 'local')[:8]}"
    return run_folder(runs_dir, run_id, storage_options)


def _absolute_source(source: str) -> str:
    """A local source (file, folder or glob) as an absolute path (the steps run on Dask workers,
    whose working directory may not be this one); a URL (``s3://…``) as given."""
    return source if "://" in source else os.path.abspath(source)


def _steps(
    source: str,
    root: str,
    sensitive_feature: list[str],
    features: list[str] | None,
    exclude: list[str],
    key_columns: list[str],
    target: str | None,
    method: str,
    n_components: int,
    center: str,
    standardize: bool,
    options: dict[str, Any] | None,
    on_bad_rows: str,
    read_options: dict[str, Any] | None,
    storage_options: dict[str, Any] | None = None,
    group_names: dict[str, str] | None = None,
    wide: bool | None = None,
    moments_budget: int | None = None,
) -> dict[str, Any]:
    """The pipeline's steps, as tasks of its flow run, into the folder ``root``."""
    with no_retry_after_interrupt():  # the tasks run on other threads, not interrupted themselves
        with step("dask") as outcome:
            # the runner starts (or connects to) the cluster on first use: do it here, timed.
            client = _runner().client
            workers = client.scheduler_info()["workers"].values()
            scheduler = client.scheduler.address if client.scheduler is not None else "the scheduler"
            outcome.summary = f"{len(workers)} worker(s), {sum(w['nthreads'] for w in workers)} threads at {scheduler}"
            warm_workers(client, PASS_MODULES)
        base = root.rstrip("/")
        pass_through = [*key_columns, *([target] if target else [])]
        # .submit() runs each task on a thread of this process, which hands the library the runner's
        # cluster for its graphs (tasks.dask_client); steps run one after another.
        with step("ingest") as outcome:
            table = ingest_task.submit(
                source,
                f"{base}/table",
                sensitive_feature=sensitive_feature,
                features=features,
                exclude=exclude,
                key_columns=key_columns,
                pass_through=[target] if target else [],
                on_bad_rows=on_bad_rows,
                read_options=read_options,
                report_target=target,
                wide=wide,
                moments_budget=moments_budget,
                storage_options=storage_options,
            ).result()
            counts, *left_out = table["summary"].splitlines()  # then the columns left out, if any
            outcome.summary = "\n    ".join([f"{counts} -> {table['table_dir']}", *left_out])
        with step("fit") as outcome:
            model = fit_task.submit(
                table["table_dir"],
                f"{base}/model",
                method=method,
                n_components=n_components,
                center=center,
                standardize=standardize,
                options=options,
                cache_dir=f"{base.rsplit('/', 1)[0]}/{MOMENTS_CACHE}",
                wide=wide,
                moments_budget=moments_budget,
                storage_options=storage_options,
            ).result()
            outcome.summary = (
                f"{method} r={n_components}, {model['criterion']}"
                f"{'' if model['converged'] else ' (not converged)'} -> {model['model_dir']}"
                + (f"\n    {model['wide']}" if model["wide"] else "")
            )
        with step("project") as outcome:
            projected = project_task.submit(
                model["model_dir"],
                table["table_dir"],
                f"{base}/projected",
                pass_through=pass_through,
                report_rbf_mmd="auto",
                storage_options=storage_options,
            ).result()
            rbf_sums = projected.pop("rbf_sums")  # for the report, not a result of the run
            outcome.summary = f"{projected['rows']:,} rows -> {projected['out_dir']}"
        with step("report") as outcome:
            report = report_task.submit(
                model["model_dir"],
                table["table_dir"],
                f"{base}/report",
                target=target,
                max_components=None,
                sample_size=50_000,
                artifact_key=f"fairpca-report-{method}",
                group_names=group_names,
                rbf_sums=rbf_sums,
                storage_options=storage_options,
            ).result()
            outcome.summary = f"-> {report['markdown']}"
        return {"run_dir": base, "table": table, "model": model, "projected": projected, "report": report}


def _runner() -> DriverTaskRunner:
    """The task runner of the pipeline's flow run."""
    context = FlowRunContext.get()
    runner = context.task_runner if context is not None else None
    if not isinstance(runner, DriverTaskRunner):
        raise InputError(
            f"the pipeline's tasks run on a DriverTaskRunner (fairpca_dist.flows.task_runner), not on "
            f"{type(runner).__name__}: its dask_address parameter names the cluster of their passes"
        )
    return runner


@flow(name="fairpca-pipeline", flow_run_name="pipeline-{method}-r{n_components}", task_runner=DriverTaskRunner())
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
    overwrite: bool = False,
    group_names: dict[str, str] | None = None,
    wide: bool | None = None,
    moments_budget: int | None = None,
) -> dict[str, Any]:
    """Run ingest → fit → project → report; every parameter, the run folder and the source's
    header and first rows are checked before data are read (:func:`fairpca_dist.io.runs.check_run`).

    A ``run_id`` whose folder holds a previous run is refused unless ``overwrite``. With it, on
    the local disk the new run is written to a hidden sibling folder that replaces the previous
    one whole once every step has succeeded: a failed or interrupted run leaves the previous
    one as it was. On an object store (no rename) each step's output replaces the previous
    run's when that step commits, so a failed run leaves the steps before the failure replaced.

    On the local disk the run folder is locked while the run lasts: a concurrent run with the
    same ``run_id`` raises :class:`~fairpca_dist.exceptions.OutputBusyError` before it reads or
    writes anything (on an object store, each step's output refuses a concurrent writer when it
    commits). ``storage_options``: options of the filesystem of URL paths (e.g. ``endpoint_url``);
    credentials come from the workers' environment, never from a flow parameter. ``group_names``:
    display names of values of the sensitive column in the report (``{"1": "female"}``; as
    :func:`fairpca_dist.flows.report.report`).

    Parameters
    ----------
    source : str
        The source table: a CSV or Parquet file, folder or glob, local or a URL.
    sensitive_feature : list of str
        The group column(s).
    runs_dir : str, default "runs"
        The folder (or URL) the run folder is created in.
    run_id : str, optional
        The run folder's name: a plain folder name (default: ``<method>-r<n_components>-<date>-<time>-<flow run id>``).
    features, exclude, key_columns : list of str, optional
        Column roles, as for the ingest flow.
    target : str, optional
        A binary column: kept through ingest and used by the report's downstream check.
    method : str, default "fair-eig"
        A method of :data:`fairpca_dist.solvers.SOLVERS`.
    n_components : int, default 2
        The rank r.
    center : {"group", "global", "origin"}, default "group"
    standardize : bool, default True
    options : dict, optional
        The method's options.
    on_bad_rows : {"fail", "drop"}, default "fail"
    read_options : dict, optional
        Options of the reader.
    dask_address : str, optional
        A Dask scheduler whose workers run the passes over rows (default: a local cluster of
        threads in this process). The tasks run in this process either way: the workers need
        the library, not Prefect or a route to its API.
    storage_options : dict, optional
        Options of the filesystem of URL paths; never credentials.
    overwrite : bool, default False
        Replace the run folder of a previous run with the same ``run_id``.
    group_names : dict, optional
        Display names of values of the sensitive column in the report.
    wide : bool, optional
        Fit the wide way (moments that keep only their diagonal; ``fnpm-streaming``), or not;
        default: when the p × p moments would exceed ``moments_budget``
        (:func:`fairpca_dist.params.choose_wide`). The ingest and fit steps say why.
    moments_budget : int, optional
        Bytes the p × p moments may take (default :data:`fairpca_dist.params.MOMENTS_BUDGET`).

    Returns
    -------
    dict
        ``run_dir`` and what each step returned: ``table``, ``model``, ``projected``, ``report``.

    Raises
    ------
    InputError, SchemaError, GroupError
        Bad parameters or data, before anything is written.
    OutputPathError, OutputBusyError, WriteError
        A run folder that exists (without ``overwrite``) or is held by another run; a failed write.
    ServiceError
        The Dask scheduler or the Prefect API does not answer.
    """
    check_run(
        source,
        sensitive_feature,
        runs_dir=runs_dir,
        run_id=run_id,
        features=features,
        exclude=exclude,
        key_columns=key_columns,
        target=target,
        method=method,
        n_components=n_components,
        center=center,
        options=options,
        on_bad_rows=on_bad_rows,
        read_options=read_options,
        dask_address=dask_address,
        storage_options=storage_options,
        overwrite=overwrite,
        wide=wide,
        moments_budget=moments_budget,
    )
    root = _run_dir(runs_dir, run_id, method, n_components, storage_options)
    _runner().use(dask_address)
    with output_lock(root, inputs=()):  # a second run with this run id fails here, naming the folder
        check_run_folder(root, source, overwrite, storage_options)  # again, now that no other run can write it
        new_folder, previous = not root.exists(), previous_run(root)
        replacing = root.local and bool(previous)
        folder = Path(os.path.realpath(root.path)) if root.local else None  # where the lock is
        target_dir = locate(staging_folder(folder)) if replacing and folder is not None else root
        # what a failure removes: a folder of this run's own all but the rejects sample; in a folder that was there,
        # the steps' outputs if no previous run's are among them (on an object store, steps replace them one by one)
        unfinished = None if new_folder or replacing else () if previous else STEP_FOLDERS
        if replacing:
            log_step("run", f"{root} is replaced once this run completes (written to {target_dir.name} until then)")
        try:
            result = _steps(
                _absolute_source(source),
                target_dir.url if not target_dir.local else target_dir.path,
                sensitive_feature,
                features,
                exclude or [],
                key_columns or [],
                target,
                method,
                n_components,
                center,
                standardize,
                options,
                on_bad_rows,
                read_options,
                storage_options,
                group_names,
                wide,
                moments_budget,
            )
        except BaseException:
            remove_unfinished_run(target_dir, unfinished)
            raise
        if not replacing or folder is None:  # folder: always, when replacing
            return result
        swap_in(Path(target_dir.path), folder)
        return _relocated(result, target_dir.path, root.path)


def _relocated(value: Any, old: str, new: str) -> Any:
    """``value`` (a step result: nested dicts and lists of paths and numbers) with the paths
    inside the folder ``old`` moved into ``new``."""
    if isinstance(value, dict):
        return {key: _relocated(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_relocated(item, old, new) for item in value]
    if isinstance(value, str) and (value == old or value.startswith(old + os.sep)):
        return new + value[len(old) :]
    return value


if __name__ == "__main__":
    pipeline.serve(name="fairpca-pipeline")
