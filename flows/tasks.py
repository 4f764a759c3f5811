"""Prefect tasks: one library call each, paths in, small summaries out.

Data-touching tasks retry what may succeed on retry (a lost connection or worker, an I/O
timeout: :func:`is_transient`); anything else, bad input first, fails at once.
"""

from __future__ import annotations

import contextlib
import errno
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, cast
from uuid import UUID

from distributed import KilledWorker
from distributed.comm import CommClosedError
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext
from prefect.logging import get_run_logger

from fairpca_dist.assessment.evaluation import evaluate
from fairpca_dist.assessment.scoring import own_criterion, score_projection
from fairpca_dist.engine.cells import CellMoments
from fairpca_dist.engine.cluster import connect
from fairpca_dist.engine.moments import Center
from fairpca_dist.exceptions import FairPCAError, ServiceError
from fairpca_dist.fitting import check_report_target, fit_table, load_fitted, report_rff_work, write_table_report
from fairpca_dist.flows.task_runner import DriverTaskRunner
from fairpca_dist.io.ingest import ingest_table
from fairpca_dist.io.storage import locate
from fairpca_dist.projection import project_table

if TYPE_CHECKING:
    from fairpca_dist.assessment.report import RBFSums

# The report's, the comparison's and the evaluation's modules (scikit-learn, matplotlib, SciPy's
# statistics: ~2 s of imports) are imported by the tasks that need them: a Dask worker imports
# this module before its first task of a run, and most of its tasks never report.

MethodsParameter = dict[str, dict[str, Any] | None] | list[str] | str
"""The ``methods`` of the evaluate and compare flows, in every form the library takes that a
flow parameter can carry: a name, names, or name → options (None or ``{}``: the defaults;
a list of values: a grid), as in :func:`fairpca_dist.assessment.evaluation.evaluate`."""

_NETWORK_ERRNOS = frozenset({errno.ENETDOWN, errno.ENETUNREACH, errno.ENETRESET, errno.EHOSTDOWN, errno.EHOSTUNREACH})


def is_transient(error: BaseException) -> bool:
    """Whether a task that failed with ``error`` may succeed when it runs again: a connection
    lost or refused (:class:`~fairpca_dist.exceptions.ServiceError` included), a network
    unreachable, a Dask worker lost (``KilledWorker``, ``CommClosedError``), an I/O timeout.

    Nothing else is: every other :class:`~fairpca_dist.exceptions.FairPCAError` (bad input or
    schema, an input that cannot be opened, an output that cannot be written, a full disk, not
    enough memory, an output another run is writing), a cancellation, an interrupt, and any
    error not known to be transient — a retry would only repeat it, 5 s and 30 s later.
    """
    if isinstance(error, FairPCAError):
        return isinstance(error, ServiceError)
    if isinstance(error, (ConnectionError, TimeoutError, KilledWorker, CommClosedError)):
        return True
    return isinstance(error, OSError) and error.errno in _NETWORK_ERRNOS


_INTERRUPTED_RUNS: set[UUID] = set()  # flow runs of this process that an interrupt stopped


def retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Retry policy of the data-touching tasks: retry what :func:`is_transient` says may succeed,
    unless the task's flow run was interrupted (:func:`no_retry_after_interrupt`)."""
    try:
        state.result()
    except Exception as error:  # noqa: BLE001 - the failure the state holds, whatever its type
        return is_transient(error) and task_run.flow_run_id not in _INTERRUPTED_RUNS
    return False


@contextlib.contextmanager
def no_retry_after_interrupt() -> Iterator[None]:
    """Around the body of a flow whose tasks run on other threads of this process (a Dask
    cluster in the process): when an interrupt (Ctrl-C, SIGTERM) stops the flow, none of its
    tasks is retried. Such a task is not interrupted itself: it fails when its cluster closes,
    maybe with an error that is transient elsewhere (a closed connection), and possibly before
    Prefect has marked the run crashed."""
    try:
        yield
    except Exception:
        raise
    except BaseException:
        context = FlowRunContext.get()
        if context is not None and context.flow_run is not None:  # else not in a flow run: nothing to retry
            _INTERRUPTED_RUNS.add(context.flow_run.id)
        raise


_RETRIES: dict[str, Any] = {"retries": 2, "retry_delay_seconds": [5, 30], "retry_condition_fn": retry_if_transient}

# No cache key and no cache lookup: a task's output is what it writes to its path, and a cache hit
# would skip that write; Prefect's default policy hashed each task's source and inputs and
# looked the key up in the result store, for nothing (results persist only if the user's settings say so).
_UNCACHED: dict[str, Any] = {"cache_policy": NO_CACHE}


@contextlib.contextmanager
def dask_client(address: str | None = None) -> Iterator[Any]:
    """Where the task's Dask graphs run: a client of the scheduler at ``address`` if given
    (connected once for all the task's passes: :func:`fairpca_dist.engine.cluster.connect`), else
    the cluster of the flow run's :class:`~fairpca_dist.flows.task_runner.DriverTaskRunner` (the
    pipeline's), else None (threads in this process).

    A task of these that a flow of the user's runs on a Dask worker (prefect-dask's
    ``DaskTaskRunner``) sends its graphs to that worker's cluster and leaves the worker's thread
    pool while they run (``secede``, then ``rejoin``): otherwise it holds a thread while it waits
    for tasks that may be queued on that very thread, and a worker of one thread deadlocks."""
    if address:
        with connect(address) as client:
            yield client
        return
    context = FlowRunContext.get()
    if context is not None and isinstance(context.task_runner, DriverTaskRunner):
        yield context.task_runner.client
        return
    from distributed import get_worker, worker_client

    try:
        get_worker()
    except ValueError:  # not on a Dask worker's thread
        yield None
        return
    with worker_client() as client:  # secede, then rejoin
        yield client  # errors of the task body propagate unchanged


@task(name="ingest-table", **_RETRIES, **_UNCACHED)
def ingest_task(
    source: str,
    table_dir: str,
    *,
    sensitive_feature: list[str],
    features: list[str] | None,
    exclude: list[str],
    key_columns: list[str],
    pass_through: list[str],
    on_bad_rows: str,
    read_options: dict[str, Any] | None,
    dask_address: str | None = None,
    report_target: str | None = None,
    wide: bool | None = None,
    moments_budget: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ingest ``source``; with ``report_target``, also check now the target a later report's
    downstream check needs (kept, binary), rather than after the fit and the projection."""
    with dask_client(dask_address) as client:
        result = ingest_table(
            source,
            table_dir,
            sensitive_feature=sensitive_feature,
            features=features,
            exclude=exclude,
            key_columns=key_columns,
            pass_through=pass_through,
            on_bad_rows=cast(Literal["fail", "drop"], on_bad_rows),  # checked by ingest_table
            read_options=read_options,
            wide=wide,
            moments_budget=moments_budget,
            count_values=[report_target] if report_target in {*key_columns, *pass_through, *sensitive_feature} else [],
            client=client,
            progress=True,
            storage_options=storage_options,
        )
        if report_target is not None:
            counts = result.value_counts.get(report_target)
            check_report_target(table_dir, report_target, counts=counts, client=client, storage_options=storage_options)
    get_run_logger().info("ingested %d rows (%d rejected) into %s", result.rows, result.rejected, table_dir)
    return {
        "table_dir": str(result.table_dir),
        "rows": result.rows,
        "rejected": result.rejected,
        "summary": result.summary(),
    }


@task(name="fit-model", **_RETRIES, **_UNCACHED)
def fit_task(
    table_dir: str,
    model_dir: str,
    *,
    method: str,
    n_components: int,
    center: str,
    standardize: bool,
    options: dict[str, Any] | None,
    cache_dir: str | None,
    dask_address: str | None = None,
    wide: bool | None = None,
    moments_budget: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit the table; the result's ``wide`` says why the fit took the wide path (None if not)."""
    said: list[str] = []
    with dask_client(dask_address) as client:
        model = fit_table(
            table_dir,
            model_dir,
            method=method,
            n_components=n_components,
            center=center,
            standardize=standardize,
            options=options,
            cache_dir=cache_dir,
            wide=wide,
            moments_budget=moments_budget,
            announce=said.append,
            client=client,
            progress=True,
            storage_options=storage_options,
        )
    criterion, value = own_criterion(model, score_projection(model, load_fitted(model_dir, storage_options)[1]))
    shown = "measured by the report" if value is None else f"{value:.4g}"
    direction = criterion.direction
    get_run_logger().info(
        "fitted %s (r=%d): %s (%s) %s; %s",
        model.method,
        model.n_components,
        criterion.title,
        direction,
        shown,
        model.message,
    )
    return {
        "model_dir": model_dir,
        "criterion": f"{criterion.title} ({direction}) {shown}",
        "converged": model.converged,
        "wide": said[0] if said else None,
    }


@task(name="project-table", **_RETRIES, **_UNCACHED)
def project_task(
    model_dir: str,
    table_dir: str,
    out_dir: str,
    *,
    pass_through: list[str],
    dask_address: str | None = None,
    report_rbf_mmd: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Project the table; with ``report_rbf_mmd`` (the report's ``rbf_mmd``), also compute on the
    way the random-feature sums the report's RBF-kernel MMD² would read the rows again for
    (:func:`~fairpca_dist.fitting.report_rff_work`), returned with their plan under
    ``rbf_sums`` (None when the report measures it otherwise)."""
    with dask_client(dask_address) as client:
        planned = (
            None
            if report_rbf_mmd is None
            else report_rff_work(
                model_dir, table_dir, rbf_mmd=report_rbf_mmd, client=client, storage_options=storage_options
            )
        )
        result = project_table(
            model_dir,
            table_dir,
            out_dir,
            pass_through=pass_through,
            rff=None if planned is None else planned[1],
            client=client,
            progress=True,
            storage_options=storage_options,
        )
    get_run_logger().info("projected %d rows into %s", result.rows, out_dir)
    if planned is None or result.rff_sums is None:
        rbf_sums = None
    else:
        from fairpca_dist.assessment.report import RBFSums

        rbf_sums = RBFSums(planned[0], result.rff_sums)
    return {"out_dir": str(result.out_dir), "rows": result.rows, "rbf_sums": rbf_sums}


@task(name="fairness-report", **_RETRIES, **_UNCACHED)
def report_task(
    model_dir: str,
    table_dir: str,
    report_dir: str,
    *,
    target: str | None,
    max_components: int | None,
    sample_size: int,
    artifact_key: str,
    dask_address: str | None = None,
    rbf_mmd: str = "auto",
    group_names: dict[str, str] | None = None,
    rbf_sums: RBFSums | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the report; ``rbf_sums``: the random-feature sums the projection computed for it."""
    from fairpca_dist.assessment.report import report_markdown_summary, report_table

    with dask_client(dask_address) as client:
        report, files = write_table_report(
            model_dir,
            table_dir,
            report_dir,
            target=target,
            max_components=max_components,
            sample_size=sample_size,
            rbf_mmd=rbf_mmd,
            group_names=group_names,
            rbf_sums=rbf_sums,
            client=client,
            progress=True,
            announce=get_run_logger().info,
            storage_options=storage_options,
        )
    create_markdown_artifact(report_markdown_summary(report), key=artifact_key, description="fair PCA report")
    create_table_artifact(report_table(report), key=f"{artifact_key}-groups", description="per-group errors and losses")
    return {"report_dir": report_dir, "markdown": str(files.markdown), "html": str(files.html)}


@task(name="cell-moments", **_RETRIES, **_UNCACHED)
def cell_moments_task(
    table_dir: str,
    *,
    cells_column: str | None,
    n_cells: int,
    cell_seed: int,
    cache_dir: str | None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> str:
    from fairpca_dist.assessment.table_evaluation import cached_cell_moments, table_cells

    cells = table_cells(
        table_dir, n_cells=n_cells, cells_column=cells_column, seed=cell_seed, storage_options=storage_options
    )
    with dask_client(dask_address) as client:
        moments, path = cached_cell_moments(
            table_dir, cache_dir, cells=cells, client=client, progress=True, storage_options=storage_options
        )
    get_run_logger().info(
        "moments of %d cells x %d groups of %d rows in %s", moments.n_cells, moments.n_groups, moments.n_samples, path
    )
    return str(path)


@task(name="evaluate-methods", **_UNCACHED)
def evaluation_task(
    cells_path: str,
    out_dir: str,
    *,
    methods: MethodsParameter,
    n_components: int,
    n_splits: int,
    train_fraction: float,
    n_folds: int,
    center: str,
    standardize: bool,
    random_state: int | None,
    source: str,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from fairpca_dist.assessment.table_evaluation import write_evaluation

    evaluation = evaluate(
        CellMoments.load(locate(cells_path, storage_options)),
        n_components,
        methods,
        n_splits=n_splits,
        train_fraction=train_fraction,
        n_folds=n_folds,
        center=cast(Center, center),  # checked by check_run_parameters
        standardize=standardize,
        random_state=random_state,
        progress=True,
    )
    write_evaluation(evaluation, out_dir, source=source, storage_options=storage_options)
    create_markdown_artifact(
        evaluation.markdown(), key="fairpca-evaluation", description="cross-validated ABDiff and ARE per method"
    )
    get_run_logger().info("evaluated %s in %.1f s", ", ".join(evaluation.methods), evaluation.seconds)
    return {
        "out_dir": out_dir,
        "summary": json.loads(evaluation.summary().to_json(orient="index", double_precision=15)),
    }


@task(name="compare-methods", **_UNCACHED)
def comparison_task(
    table_dir: str,
    out_dir: str,
    *,
    methods: MethodsParameter | None,
    n_components: list[int],
    target: str | None,
    n_cells: int,
    cells_column: str | None,
    cell_seed: int,
    train_fraction: float,
    center: str,
    standardize: bool,
    rbf_mmd: bool,
    random_state: int,
    cache_dir: str | None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from fairpca_dist.assessment.table_comparison import compare_table

    with dask_client(dask_address) as client:
        comparison = compare_table(
            table_dir,
            out_dir,
            n_components=n_components,
            methods=methods,
            target=target,
            n_cells=n_cells,
            cells_column=cells_column,
            cell_seed=cell_seed,
            train_fraction=train_fraction,
            center=cast(Center, center),  # checked by check_run_parameters
            standardize=standardize,
            rbf_mmd=rbf_mmd,
            random_state=random_state,
            cache_dir=cache_dir,
            client=client,
            progress=True,
            storage_options=storage_options,
        )
    reading = "\n\n".join(
        [*comparison.summary(), *(f"**r = {r}.** " + " ".join(comparison.reading(r)) for r in comparison.ranks)]
    )
    create_markdown_artifact(reading, key="fairpca-comparison", description="fair PCA methods compared")
    create_table_artifact(
        json.loads(comparison.table().to_json(orient="records", double_precision=15)),
        key="fairpca-comparison-table",
        description="every method and grid point by every criterion",
    )
    get_run_logger().info(
        "compared %d fits in %.1f s with %d passes over the rows",
        len(comparison.candidates),
        comparison.seconds,
        sum(comparison.passes.values()),
    )
    return {
        "out_dir": out_dir,
        "passes": comparison.passes,
        "fits": [{"label": c.label, "n_components": c.n_components, "status": c.status} for c in comparison.candidates],
    }
