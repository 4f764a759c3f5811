"""Everything that reads rows with dask: the one-pass grouped moments.

``compute_moments`` maps :meth:`GroupMoments.from_codes` over the partitions of a table and
merges the partial statistics in a tree of fan-in ``split_every`` (dask's chunk / combine /
aggregate pattern, with Chan's exact merge as the combine). Only (k, p, p) statistics travel
between tasks, so memory per worker is bounded by one partition whatever the table size.
With ``cells``, the same kernel runs on (cell, group) pair codes and the statistics stay
per cell (:class:`~fairpca_dist.engine.cells.CellMoments`, (n_cells, k, p, p) numbers).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import operator
import sys
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import dask
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from dask.base import tokenize
from dask.delayed import Delayed
from dask.system import CPU_COUNT

from fairpca_dist.engine import memory
from fairpca_dist.engine.blas import one_blas_thread
from fairpca_dist.engine.cells import CellMoments, HashCells, pair_codes
from fairpca_dist.engine.cluster import connect
from fairpca_dist.engine.datapasses import (
    ArrayPasses,
    L1Sums,
    PassCounter,
    RFFRequest,
    SampledL1Sums,
    ScatterProducts,
    check_rff_requests,
    check_sample_size,
    l1_block_sums,
    l1_block_sums_sampled,
    merge_rff_sums_many,
    rff_block_sums_many,
    scatter_block_products,
)
from fairpca_dist.engine.kernels import RandomFeatures, RFFSums, backprojection
from fairpca_dist.engine.moments import GroupMoments
from fairpca_dist.engine.progress import threaded_progress, wait_with_progress
from fairpca_dist.engine.sampling import RowSample, SampleSpec, row_keys
from fairpca_dist.engine.sources import (
    Chunk,
    Partition,
    Table,
    check_finite,
    feature_values,
    open_table,
    read_chunk,
)
from fairpca_dist.exceptions import GroupError, InputError, ResourceError, reading
from fairpca_dist.io.storage import StorageOptions, locate
from fairpca_dist.wording import size_text

try:  # dask ≥ 2025.10: its threaded scheduler's own pool, which carries context variables into the tasks
    from dask.threaded import ContextAwareThreadPoolExecutor as _ThreadPool
except ImportError:  # older dask pools its threads in a plain executor
    from concurrent.futures import ThreadPoolExecutor as _ThreadPool  # type: ignore[assignment]

__all__ = [
    "compute_moments",
    "compute_file_moments",
    "partition_moments",
    "RFFWork",
    "rff_pass",
    "row_keys",
    "sample_rows",
    "table_sample",
    "value_counts",
    "run_graph",
    "tree_sum",
    "scheduler_context",
    "TablePasses",
    "table_passes",
]


_SLAB_BYTES = 32 * 2**20  # float64 rows converted at a time from one partition


def _chunk_moments(chunk: Chunk, features: Sequence[str], diagonal: bool = False) -> GroupMoments:
    """Statistics of one partition, converted to float64 in slabs of ~32 MB that add to the same
    per-group sums (:meth:`GroupMoments.from_slabs`), so a task needs the partition plus one
    slab of memory, whatever the partition size; with ``diagonal``, those of a wide table
    (:meth:`GroupMoments.diagonal_from_codes`, O(k·p) per slab, merged).

    Non-finite values propagate into the statistics; checking those (k·p² numbers) instead of
    the rows keeps clean data free of a validation pass, and only then are the slabs read again
    to name the columns at fault."""
    bounds = chunk.slabs(_SLAB_BYTES)

    def slabs() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        for start, stop in bounds:
            weights = None if chunk.weights is None else chunk.weights[start:stop]
            yield chunk.rows(start, stop), chunk.codes[start:stop], weights

    with np.errstate(invalid="ignore", over="ignore"):
        if diagonal:
            moments = _merge(
                *(
                    GroupMoments.diagonal_from_codes(x, codes, chunk.groups, weights=weights, feature_names=features)
                    for x, codes, weights in slabs()
                )
            )
        else:
            moments = GroupMoments.from_slabs(slabs, chunk.groups, feature_names=features)
        finite = np.isfinite(moments.mean).all() and np.isfinite(moments.scatter).all()
    if not finite:
        check_finite((x for x, _, _ in slabs()), features, chunk.partition)
    return moments


def partition_moments(
    part: pd.DataFrame,
    partition: Partition,
    *,
    features: Sequence[str],
    sensitive: Sequence[str],
    sample_weight: str | None = None,
    values: np.ndarray | None = None,
    diagonal: bool = False,
) -> GroupMoments:
    """The statistics of one partition given as a DataFrame, by the kernel of every moments
    pass (so those of a file written from ``part`` equal what :func:`compute_file_moments`
    computes reading it back): for a pass that reads the rows for another reason, e.g. ingest
    while it writes them. ``values``: the features of ``part`` already as a float64 array (not
    converted again, and walked in slabs: a column-major array is not copied whole). Groups are
    not checked (a partition may hold one). ``diagonal``: only the diagonal of each scatter (a
    wide table)."""
    chunk = read_chunk(part, [] if values is not None else features, sensitive, sample_weight, partition)
    if values is not None:
        chunk = replace(chunk, features=values)
    return _chunk_moments(chunk, features, diagonal)


def _chunk_cell_moments(chunk: Chunk, features: Sequence[str], assignment: str | HashCells | None) -> CellMoments:
    """Statistics of one partition per cell and group: the kernel of :func:`_chunk_moments`
    on the pair codes cell·k + group, split into cells afterwards (one pass over the rows)."""
    k = len(chunk.groups)
    if chunk.cell_codes is None:
        raise InputError(
            f"rows of {chunk.partition} have no cells: open the table with cells= to keep moments per cell"
        )
    pairs = replace(
        chunk, codes=pair_codes(chunk.cell_codes, chunk.codes, k), groups=tuple(range(len(chunk.cells) * k))
    )
    return CellMoments.from_pairs(_chunk_moments(pairs, features), chunk.cells, chunk.groups, assignment=assignment)


_Additive = TypeVar("_Additive", GroupMoments, L1Sums, RowSample)


def _merge(*parts: _Additive) -> _Additive:
    """The sum of additive statistics (Chan's exact merge for moments)."""
    return functools.reduce(operator.add, parts)


# dask's names of its local schedulers (``dask.config.set(scheduler=...)``), by the one this module runs
_LOCAL_SCHEDULERS = {
    "threads": "threads",
    "threading": "threads",
    "sync": "sync",
    "synchronous": "sync",
    "single-threaded": "sync",
    "processes": "processes",
    "multiprocessing": "processes",
}
_DISTRIBUTED = ("dask.distributed", "distributed")


@contextlib.contextmanager
def scheduler_context(client: Any = None) -> Iterator[Any]:
    """Yield where a pass runs: a ``distributed.Client``, or the ``scheduler=`` argument of
    ``dask.compute`` for a pass in this process ("threads", "sync", "processes", or the get
    function or executor configured in dask).

    A ``distributed.Client`` given as ``client`` is used as is; a string is a scheduler address
    to connect to (:func:`fairpca_dist.engine.cluster.connect`: a malformed or unanswered address
    is named in the error). With ``client=None``, dask's configuration decides, as it does for
    ``dask.compute``:

    - ``dask.config.set(scheduler="synchronous" | "threads" | "processes")`` (or their other
      names, a get function, an executor, a client) runs the pass there;
    - nothing configured (or ``"dask.distributed"``) uses the active ``distributed`` client if
      there is one, else dask's threaded scheduler.

    On dask's threaded scheduler BLAS is limited to one thread per task (two BLAS pools on two
    cores oversubscribe: 0.64 s vs 0.39 s in spec/stack.md §4).
    """
    if isinstance(client, str):
        with connect(client) as connected:
            yield connected
        return
    if client is not None:
        yield client
        return
    configured = dask.config.get("scheduler", None)
    if configured is None or (isinstance(configured, str) and configured.lower() in _DISTRIBUTED):
        active = _active_client()
        if active is not None:
            yield active
            return
        configured = "threads"
    if isinstance(configured, str):
        local = _LOCAL_SCHEDULERS.get(configured.lower())
        if local is None:
            raise InputError(
                f"dask's configured scheduler {configured!r} is not one dask runs in this process; set "
                "dask.config.set(scheduler='threads' | 'synchronous' | 'processes'), or pass client= a "
                "distributed.Client or a scheduler address"
            )
        if local == "threads":
            with one_blas_thread():
                yield local
            return
        yield local
        return
    yield configured  # a get function, an executor, or a distributed Client set in dask's configuration


def _is_client(scheduler: Any) -> bool:
    """Whether ``scheduler`` is a ``distributed.Client`` (rather than one of dask's local schedulers)."""
    if isinstance(scheduler, str) or sys.modules.get("distributed") is None:  # no Client without distributed
        return False
    from distributed import Client

    return isinstance(scheduler, Client)


def _active_client() -> Any:
    """The ``distributed`` client set as default, or None: none can exist unless ``distributed``
    (optional: the ``cluster`` extra) was imported."""
    if sys.modules.get("distributed") is None:  # not imported, or blocked (None)
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def run_graph(graph: Any, *, client: Any = None, progress: bool = False, label: str = "pass") -> Any:
    """Compute a dask graph (or a list of them) where ``client`` and dask's configuration say
    (see :func:`scheduler_context`); every pass of the library goes through here. ``progress``
    draws a bar named ``label`` while it runs (see :mod:`fairpca_dist.engine.progress`). If the pass
    fails or is interrupted, it returns only once no task of it runs in this process (on a
    cluster: its remaining tasks are cancelled)."""
    with scheduler_context(client) as scheduler:
        if not _is_client(scheduler):
            with threaded_progress(label) if progress else contextlib.nullcontext():
                return _run_locally(graph, scheduler)
        size = memory.pass_size(graph)
        memory.check_workers(scheduler, size)  # before any task: refuse what the workers cannot hold
        futures = scheduler.compute(graph)
        try:
            if progress:
                wait_with_progress(futures, scheduler, label)
            return scheduler.gather(futures)
        except BaseException as error:
            # the rest of an interrupted pass is not run. Through a running client only: one that is
            # closing (an interrupted flow's task runner closes it, which is what ended the gather
            # above) takes its futures with it, and its stopped loop would never answer a cancel
            # (the task's thread then waited forever, and the flow's end for it).
            if scheduler.status == "running":
                scheduler.cancel(futures)
            from distributed import KilledWorker

            if isinstance(error, KilledWorker):
                raise memory.killed_worker_error(error, scheduler, size) from error
            raise


def smallest_worker_limit(client: Any = None) -> int | None:
    """The smallest memory limit of the workers a pass on ``client`` would run on (see
    :func:`scheduler_context`); None for a pass in this process or workers without a limit."""
    with scheduler_context(client) as scheduler:
        if not _is_client(scheduler):
            return None
        limits = [worker.limit for worker in memory.worker_memory(scheduler) if worker.limit]
    return min(limits) if limits else None


def _run_locally(graph: Any, scheduler: Any) -> Any:
    """``dask.compute`` of ``graph`` on one of dask's schedulers in this process. The threaded
    scheduler gets a pool of this pass's own (of ``num_workers`` threads if dask's configuration
    sets it, else one per core), so that when the pass is interrupted (an error, SIGTERM) no task
    still runs when the caller cleans up (e.g. removes a staging folder); a pool set in dask's
    configuration (``pool=``) is used instead."""
    if scheduler != "threads" or dask.config.get("pool", None) is not None:
        return dask.compute(graph, scheduler=scheduler)[0]
    workers = dask.config.get("num_workers", None) or CPU_COUNT
    with _ThreadPool(workers) as pool:
        try:
            return dask.compute(graph, scheduler=scheduler, pool=pool)[0]
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def compute_moments(
    data: Any,
    *,
    sensitive_feature: Any,
    features: Sequence[str] | None = None,
    sample_weight: Any = None,
    key_columns: Sequence[str] = (),
    exclude: Sequence[str] = (),
    feature_names: Sequence[str] | None = None,
    client: Any = None,
    split_every: int = 8,
    min_group_size: int = 2,
    chunk_rows: int | None = None,
    read_options: dict[str, Any] | None = None,
    progress: bool = False,
    cells: str | HashCells | Any = None,
    storage_options: StorageOptions | None = None,
    compute: bool = True,
) -> GroupMoments | CellMoments | Delayed:
    """Per-group count, mean and centred scatter of a table, in one dask pass.

    Every partition is read once, inside the task that accumulates its statistics; the
    partial statistics of the partitions are merged in a tree of fan-in ``split_every``, so only
    (k, p, p) numbers travel between tasks and memory per task is bounded by one partition.

    Parameters
    ----------
    data : pandas/dask DataFrame, numpy/dask array, path or URL (Parquet file/folder/glob, CSV)
        The rows. See :func:`fairpca_dist.engine.sources.open_table` for the column roles.
    sensitive_feature : str, list of str, or array-like
        Group column(s) (several columns form intersectional groups), or one label per row: an
        array for array input, a pandas Series or array for a pandas DataFrame, and for a dask
        DataFrame a dask Series (e.g. ``ddf["group"]``, the partitions paired and checked row
        by row) or a pandas Series aligned by index with a frame of known divisions.
    features : list of str, optional
        Feature columns; default every numeric column but the sensitive, weight, key, cell and
        ``exclude`` columns.
    sample_weight : str or array-like, optional
        Column name or one non-negative weight per row (given as ``sensitive_feature`` is).
    key_columns, exclude, feature_names, chunk_rows, read_options, storage_options
        Column selection and reading (``storage_options``: of a URL's filesystem, e.g.
        ``s3://…``); see :func:`~fairpca_dist.engine.sources.open_table`.
    client : None, distributed.Client or str
        Where the pass runs. ``None``: as ``dask.compute`` would, by dask's configuration
        (``dask.config.set(scheduler="synchronous" | "threads" | "processes")``), else on the
        active ``distributed`` client, else on dask's threaded scheduler in this process. A
        client, or the address of a running scheduler, runs the pass on that cluster.
    split_every : int
        Fan-in of the reduction tree (≥ 2).
    min_group_size : int
        Every group must have at least this many rows (:class:`GroupError` otherwise). 0 checks
        nothing, not even that there are two groups: for a batch whose moments are merged with
        others' (``FairPCA.partial_fit``).
    progress : bool
        Show a progress bar while the pass runs.
    cells : None, str, HashCells or array-like
        Keep the statistics per cell as well (same single pass), so that every split and fold
        made of cells needs no further pass (:mod:`fairpca_dist.engine.cells`): the column holding each
        row's cell label, a :class:`~fairpca_dist.engine.cells.HashCells` (cells from a seeded hash of
        key columns; no split column needed), or one label per row (as ``sensitive_feature``).
        A missing cell label or key value raises :class:`InputError` naming the column and the
        partition.
    compute : bool
        ``True`` (default): run the pass now and return the statistics. ``False``: return a
        :class:`dask.delayed.Delayed` whose result is those same statistics, checked the same
        way, for ``dask.compute`` to evaluate together with other work (one graph, one
        scheduler run: ``dask.compute(lazy, ddf.x.sum())``). The schema is checked now; the
        values (finite features, labels, weights, ``min_group_size``) when it is computed. It
        runs wherever that ``dask.compute`` runs, so ``client`` and ``progress`` must be left at
        their defaults.

    Returns
    -------
    GroupMoments, CellMoments, or dask.delayed.Delayed
        float64 statistics (:class:`~fairpca_dist.engine.moments.GroupMoments`), groups in sorted
        order; :class:`~fairpca_dist.engine.cells.CellMoments` when ``cells`` is given (cells in
        sorted order; with hash cells every cell 0 … n_cells−1 is present, even one that drew no
        rows); with ``compute=False``, a ``Delayed`` of that object. ``min_group_size`` is checked
        on all rows; :meth:`CellMoments.union` checks each split.

    Raises
    ------
    SchemaError
        A column is missing, misspelt, not numeric, or used twice; labels given per row cannot be
        aligned with the rows (a numpy array next to a dask DataFrame, a pandas Series next to a
        frame of unknown divisions).
    InputError
        Non-finite feature values, negative or missing weights, missing cell labels (naming the
        column and the partition), a bad option (``split_every``; ``client`` or ``progress`` with
        ``compute=False``), data of an unknown type or a path that cannot be read.
    GroupError
        Fewer than two groups, a group of fewer than ``min_group_size`` rows, a missing group
        label.
    ReadError, AccessError, ServiceError
        A file cannot be read, access is denied, a storage service or Dask scheduler does not
        answer (each naming the file, URL or address).

    Notes
    -----
    For each group g (rows x_i ∈ ℝᵖ with weights w_i, 1 when unweighted) the pass computes the
    sufficient statistics of fair PCA (Samadi et al. 2018, §2; every method of this library
    starts from them): the row count n_g, the weight sum W_g = Σ w_i, the mean
    μ_g = Σ w_i x_i / W_g and the centred scatter C_g = Σ w_i (x_i − μ_g)(x_i − μ_g)ᵀ — that is,
    the count, the sum Σ w_i x_i = W_g μ_g and the Gram matrix Σ w_i x_i x_iᵀ = C_g + W_g μ_g μ_gᵀ,
    kept in their centred form so that columns with means of 1e8 lose no digits. Each task
    accumulates its partition (in slabs of ~32 MB, about a per-group shift), and partial
    results merge exactly with Chan's pairwise formula (``+`` of
    :class:`~fairpca_dist.engine.moments.GroupMoments`), so the result does not depend on the
    partitioning, ``split_every`` or the scheduler, and equals
    :meth:`GroupMoments.from_arrays` on the same rows (to rounding).

    Examples
    --------
    >>> import dask
    >>> import dask.dataframe as dd
    >>> import numpy as np
    >>> import pandas as pd
    >>> from fairpca_dist import compute_moments
    >>> frame = pd.DataFrame(
    ...     {"a": [1.0, 2.0, 3.0, 4.0, 5.0, 7.0], "b": [0.0, 1.0, 0.0, 2.0, 1.0, 3.0], "group": list("fmfmfm")}
    ... )
    >>> moments = compute_moments(frame, sensitive_feature="group")
    >>> moments.groups, moments.count.tolist()
    (('f', 'm'), [3, 3])
    >>> moments.mean.tolist()
    [[3.0, 0.3333333333333333], [4.333333333333333, 2.0]]

    On a dask DataFrame, lazily and together with other work, with the labels as a dask Series:

    >>> ddf = dd.from_pandas(frame, npartitions=2)
    >>> lazy = compute_moments(ddf[["a", "b"]], sensitive_feature=ddf["group"], compute=False)
    >>> same, total = dask.compute(lazy, ddf["a"].sum())  # one scheduler run for both
    >>> bool(np.allclose(same.scatter, moments.scatter, rtol=0, atol=1e-12)), float(total)
    (True, 22.0)

    (dask warns "Computing mixed collections …" when a ``Delayed`` and a DataFrame
    collection are computed together: it merges their graphs into one; the results are those
    of separate computations.)
    """
    _check_split_every(split_every)
    if sensitive_feature is None:
        raise InputError("compute_moments needs sensitive_feature: the group column(s) or one label per row")
    if not compute and (client is not None or progress):
        given = "client" if client is not None else "progress"
        raise InputError(
            f"compute_moments(compute=False) takes no {given}=: the Delayed it returns runs where your "
            "dask.compute runs (a distributed Client, or dask.config.set(scheduler=...)); leave it out"
        )
    table = open_table(
        data,
        sensitive_feature=sensitive_feature,
        features=features,
        sample_weight=sample_weight,
        key_columns=key_columns,
        exclude=exclude,
        feature_names=feature_names,
        chunk_rows=chunk_rows,
        read_options=read_options,
        cells=cells,
        storage_options=storage_options,
    )
    finish: Callable[[Any], GroupMoments | CellMoments]
    if cells is None:
        graph = _moments_graph(table, split_every)
        finish = functools.partial(_checked_moments, min_group_size=min_group_size)
    else:
        assignment = cells if isinstance(cells, (str, HashCells)) else None
        graph = tree_sum(table.map_chunks(_chunk_cell_moments, table.features, assignment), split_every)
        finish = functools.partial(
            _checked_cell_moments,
            min_group_size=min_group_size,
            features=table.features,
            assignment=assignment,
            hash_cells=cells if isinstance(cells, HashCells) else None,
        )
    if not compute:
        return dask.delayed(finish, pure=True)(graph, dask_key_name=f"compute-moments-{tokenize(graph.key, finish)}")
    n_cells = cells.n_cells if isinstance(cells, HashCells) else 1
    check_moments_memory(
        len(table.features), client, merge_inputs=min(split_every, table.n_partitions), n_cells=n_cells
    )
    return finish(run_graph(graph, client=client, progress=progress, label="moments"))


_SMALL_MOMENTS = 10**8  # bytes a pass's moments may hold per worker without asking the workers' limits


def check_moments_memory(
    n_features: int, client: Any = None, *, merge_inputs: int = memory.MOMENTS_MERGE_INPUTS, n_cells: int = 1
) -> None:
    """Refuse, before it starts, a moments pass whose results the workers cannot hold: a worker
    holds :func:`~fairpca_dist.engine.memory.moments_held` partitions' p × p moments at once (a
    merge of ``merge_inputs`` and a task), 8·k·p² bytes each (k ≥ 2 groups, per cell); more than
    the smallest worker memory limit raises :class:`ResourceError` naming the wide path
    (:func:`fairpca_dist.params.choose_wide`), which keeps k × p numbers."""
    each = 8.0 * 2 * n_cells * n_features**2
    held = memory.moments_held(merge_inputs)
    need = each * held
    if need < _SMALL_MOMENTS:
        return
    limit = smallest_worker_limit(client)
    if limit is None or need <= limit:
        return
    cells = f" and {n_cells} cells" if n_cells > 1 else ""
    raise ResourceError(
        f"the p × p moments of {n_features:,} features take {size_text(each)} per partition for 2 groups{cells}, "
        f"and a worker of the moments pass holds {held} of them ({size_text(need)}): more than the "
        f"workers' memory limit of {size_text(limit)}; fit the table the wide way (fit_table(wide=True), "
        "command line --wide: method fnpm-streaming, k × p numbers), or start workers with more memory"
    )


def _checked_moments(moments: GroupMoments, *, min_group_size: int) -> GroupMoments:
    """The statistics of :func:`compute_moments` once its pass is done: groups checked (none
    with ``min_group_size=0``)."""
    return moments.check_groups(min_group_size) if min_group_size > 0 else moments


def _checked_cell_moments(
    by_cell: CellMoments,
    *,
    min_group_size: int,
    features: Sequence[str],
    assignment: str | HashCells | None,
    hash_cells: HashCells | None,
) -> CellMoments:
    """The per-cell statistics of :func:`compute_moments` once its pass is done: every hash
    cell present (even one without rows), groups checked on all rows."""
    if hash_cells is not None:
        by_cell = CellMoments(by_cell, feature_names=features, assignment=assignment, cells=range(hash_cells.n_cells))
    if min_group_size > 0:
        by_cell.total().check_groups(min_group_size)
    return by_cell


def compute_file_moments(
    paths: Sequence[str],
    *,
    sensitive_feature: str | Sequence[str],
    features: Sequence[str],
    sample_weight: str | None = None,
    client: Any = None,
    split_every: int = 8,
    progress: bool = False,
    diagonal: bool = False,
    storage_options: StorageOptions | None = None,
) -> list[GroupMoments]:
    """Statistics of each Parquet file separately, all in one dask pass.

    The building block of incremental fitting: per-file moments can be cached and merged
    with ``+`` into the statistics of any set of files (Chan's merge is exact), so a table that
    gained files is refitted by reading only the new ones. Groups are not checked here (one
    file may hold one group); check the merged result. ``diagonal``: only the diagonal of each
    scatter (:attr:`GroupMoments.is_diagonal`: k × p numbers, for a wide table).
    """
    _check_split_every(split_every)
    if not paths:
        return []
    if not diagonal:  # each file's moments wait on the workers for the pass's end: held ≥ a merge's
        check_moments_memory(len(features), client, merge_inputs=min(split_every, len(paths)))
    graphs = [
        _moments_graph(
            open_table(
                str(path),
                sensitive_feature=sensitive_feature,
                features=features,
                sample_weight=sample_weight,
                storage_options=storage_options,
            ),
            split_every,
            diagonal,
        )
        for path in paths
    ]
    if not graphs:
        return []
    return list(run_graph(graphs, client=client, progress=progress, label="moments"))


def sample_rows(
    source: Any,
    *,
    columns: Sequence[str],
    max_rows: int = 50_000,
    seed: int = 0,
    read_options: dict[str, Any] | None = None,
    client: Any = None,
    storage_options: StorageOptions | None = None,
) -> pd.DataFrame:
    """A uniform random sample of about ``max_rows`` rows of ``columns`` (deterministic for a
    given table, partitioning and ``seed``), e.g. to train a downstream model in a report.
    Two passes: the partition lengths, then each partition sampled at the same rate."""
    table = open_table(
        source, key_columns=list(columns), features=[], read_options=read_options, storage_options=storage_options
    )
    total = sum(run_graph(table.map_partitions(_partition_length), client=client))
    fraction = min(1.0, max_rows / max(total, 1))
    parts = run_graph(table.map_partitions(_sample_partition, list(columns), fraction, seed), client=client)
    return pd.concat(parts, ignore_index=True)


def table_sample(
    files: Sequence[str],
    spec: SampleSpec,
    *,
    client: Any = None,
    split_every: int = 8,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> RowSample:
    """The priority sample ``spec`` asks for (:mod:`fairpca_dist.engine.sampling`) of the rows of
    Parquet ``files`` (file i's keys seeded ``(seed, i)``), in one pass: a task per file reads it
    in batches of rows (memory: a batch plus the sample), and the files' samples merge in a
    tree. The same sample ingest draws while it writes the files."""
    _check_split_every(split_every)
    sample = dask.delayed(_file_sample, pure=True)
    parts = [sample(url, index, spec, storage_options) for index, url in enumerate(files)]
    if not parts:
        raise InputError("a row sample of no files")
    return run_graph(tree_sum(parts, split_every), client=client, progress=progress, label="sample")


_SAMPLE_BATCH_ROWS = 65_536


def _file_sample(url: str, index: int, spec: SampleSpec, storage_options: StorageOptions | None) -> RowSample:
    location = locate(url, storage_options)
    keys = spec.keys(index)
    with reading(location), location.open("rb") as file:
        parquet = pq.ParquetFile(file)
        empty = parquet.schema_arrow.empty_table().select(list(spec.columns)).to_pandas()  # the dtypes, no rows
        batches = parquet.iter_batches(batch_size=_SAMPLE_BATCH_ROWS, columns=list(spec.columns))
        return functools.reduce(
            operator.add, (spec.of_rows(batch.to_pandas(), keys) for batch in batches), spec.of_rows(empty, keys)
        )


def value_counts(
    source: Any,
    column: str,
    *,
    dropna: bool = True,
    read_options: dict[str, Any] | None = None,
    client: Any = None,
    storage_options: StorageOptions | None = None,
) -> pd.Series:
    """How many rows hold each value of ``column`` (missing values left out, or with
    ``dropna=False`` counted under NaN, as in pandas): one pass that reads that column alone."""
    table = open_table(
        source, key_columns=[column], features=[], read_options=read_options, storage_options=storage_options
    )
    parts = run_graph(table.map_partitions(_partition_counts, column, dropna), client=client)
    return pd.concat(parts).groupby(level=0, dropna=dropna).sum() if parts else pd.Series(dtype=np.int64)


def _partition_counts(part: pd.DataFrame, partition: Partition, column: str, dropna: bool) -> pd.Series:
    return part[column].value_counts(dropna=dropna)


def _partition_length(part: pd.DataFrame, partition: Partition) -> int:
    return len(part)


def _sample_partition(
    part: pd.DataFrame, partition: Partition, columns: list[str], fraction: float, seed: int
) -> pd.DataFrame:
    rng = np.random.default_rng([seed, partition.index])
    return part[columns].sample(frac=fraction, random_state=rng)


def _check_split_every(split_every: int) -> None:
    if not isinstance(split_every, (int, np.integer)) or split_every < 2:
        raise InputError(f"split_every must be an integer >= 2, got {split_every!r}")


def _moments_graph(table: Table, split_every: int, diagonal: bool = False) -> Any:
    """Delayed GroupMoments of a table (diagonal-only with ``diagonal``): one task per
    partition, merged in a tree."""
    return tree_sum(table.map_chunks(_chunk_moments, table.features, diagonal), split_every)


def tree_sum(level: list[Any], split_every: int, merge_parts: Callable[..., Any] = _merge) -> Any:
    """The merge (``+`` unless ``merge_parts`` says otherwise) of delayed additive statistics,
    in a tree of fan-in ``split_every``."""
    merge = dask.delayed(merge_parts, pure=True)
    while len(level) > 1:
        level = [merge(*level[i : i + split_every]) for i in range(0, len(level), split_every)]
    return level[0]


# ----------------------------------------------------------------------------- solver passes
class TablePasses:
    """:class:`~fairpca_dist.engine.datapasses.DataPasses` over a table with dask.

    Each request is one pass: a task per partition (read and sum fused, the partition walked
    in slabs, as the moments pass) and a tree reduction of the additive per-group sums; the
    request's arguments (V, the centres: k×p + p×r numbers) travel to the tasks once, and only
    k×p×r + k numbers per partition come back.

    With ``progress``, each pass draws its bar (:func:`run_graph`), labelled with its number
    and kind ("pass 37 over the rows: rff sums"): a fit that reads the rows hundreds of times
    shows where it is. Views (:meth:`rescaled`, :meth:`restricted`) share the count, which
    :attr:`n_passes` reads.

    A table opened with cells (:func:`table_passes` ``cells=``) can be read cell-restricted:
    :meth:`restricted` gives a view whose every pass reads only the rows of the given cells
    (e.g. the training cells of a split), with the statistics an :class:`ArrayPasses` on exactly
    those rows would give.
    """

    def __init__(
        self,
        table: Table,
        groups: Sequence[Hashable],
        *,
        scale: np.ndarray | None = None,
        client: Any = None,
        split_every: int = 8,
        progress: bool = False,
    ) -> None:
        _check_split_every(split_every)
        self.table = table
        self.groups = tuple(groups)
        self.scale = np.ones(len(table.features)) if scale is None else np.asarray(scale, dtype=np.float64)
        self.client = client
        self.split_every = split_every
        self.progress = progress
        self._counter = PassCounter()
        self._cells: frozenset[Hashable] | None = None  # the cells every pass reads (None: all rows)
        self._offsets: np.ndarray | None = None  # first row of each partition, learnt by projected()

    @property
    def n_passes(self) -> int:
        """Passes over the rows this object and all its views have run so far."""
        return self._counter.count

    @property
    def cells(self) -> frozenset[Hashable] | None:
        """The cell labels every pass reads (None: every row, no restriction)."""
        return self._cells

    def rescaled(self, scale: np.ndarray) -> TablePasses:
        """The same rows in units x / ``scale`` (a view sharing client, cells and pass count)."""
        view = copy.copy(self)
        view.scale = np.asarray(scale, dtype=np.float64)
        return view

    def restricted(self, cells: Iterable[Hashable]) -> TablePasses:
        """A view whose every pass reads only the rows whose cell label is in ``cells``,
        sharing the client, scale and pass count (e.g. ``passes.restricted(split.train)``).

        Labels are those of the table's cells (0 … n_cells−1 for
        :class:`~fairpca_dist.engine.cells.HashCells`, the column's values otherwise). Which labels
        exist is known only inside a pass, so a label no row carries is not an error: its rows
        are simply absent. A restricted view restricted again reads the intersection of both
        sets of cells. :class:`InputError` if the table was opened without cells or ``cells``
        is empty (or a string rather than a collection of labels).
        """
        if self.table.cells is None:
            raise InputError("restricted() needs a table opened with cells: pass cells= to table_passes")
        if isinstance(cells, (str, bytes)):
            raise InputError(f"restricted() takes a collection of cell labels, got the string {cells!r}")
        labels = frozenset(cells)
        if not labels:
            raise InputError("restricted() needs at least one cell label")
        view = copy.copy(self)
        view._cells = labels if self._cells is None else self._cells & labels
        view._offsets = None  # partition offsets count the rows this view reads
        return view

    def _map(self, func: Callable[..., Any], *args: Any) -> list[Any]:
        """``func(chunk, *args)`` on every partition's chunk, reduced to the rows of
        :attr:`cells` first: every request builds its tasks here (the one place rows are
        filtered)."""
        if self._cells is None:
            return self.table.map_chunks(func, *args)
        return self.table.map_chunks(_on_cells, func, self._cells, args)

    def _run(self, graph: Any, kind: str) -> Any:
        """One pass over the rows (every request goes through here)."""
        return run_graph(
            graph,
            client=self.client,
            progress=self.progress,
            label=f"pass {self._counter.next()} over the rows: {kind}",
        )

    def _group_sums(
        self, block_sums: Callable[..., L1Sums], components: np.ndarray, centers: np.ndarray, kind: str
    ) -> Any:
        """One pass of ``block_sums`` per partition and the tree sum, in the order of :attr:`groups`."""
        by_label = dict(zip(self.groups, np.asarray(centers, dtype=np.float64), strict=True))
        parts = self._map(_chunk_group_sums, block_sums, np.asarray(components, dtype=np.float64), by_label, self.scale)
        total: L1Sums = self._run(tree_sum(parts, self.split_every), kind)
        return total.in_order(self.groups)

    def l1_sums(self, components: np.ndarray, centers: np.ndarray) -> L1Sums:
        return self._group_sums(l1_block_sums, components, centers, "l1 sums")

    def scatter_products(self, components: np.ndarray, centers: np.ndarray) -> ScatterProducts:
        """S_g U of every group (k × p × q numbers per partition), for ``fnpm-streaming``."""
        return self._group_sums(scatter_block_products, components, centers, "scatter products")

    def l1_sums_sampled(
        self, components: np.ndarray, centers: np.ndarray, max_rows_per_group: int, seed: int
    ) -> tuple[L1Sums, ArrayPasses]:
        """:meth:`l1_sums` and a per-group sample in one pass: each partition also keeps its
        ``max_rows_per_group`` rows of smallest key per group
        (:class:`~fairpca_dist.engine.datapasses.GroupSample`), and the tree
        merges them with the sums: the same rows as :meth:`ArrayPasses.l1_sums_sampled` whatever
        the partitioning, k × ``max_rows_per_group`` rows per merge at most."""
        check_sample_size(max_rows_per_group)
        by_label = dict(zip(self.groups, np.asarray(centers, dtype=np.float64), strict=True))
        components = np.asarray(components, dtype=np.float64)
        parts = self._map(_chunk_l1_sampled, self.groups, components, by_label, self.scale, max_rows_per_group, seed)
        total: SampledL1Sums = self._run(tree_sum(parts, self.split_every), "l1 sums and a sample")
        return total.sums.in_order(self.groups), total.sample.passes(self.scale)

    # ---- the rows of mmd with the RBF kernel (Lee et al.; spec seed-004.md §3.2, §3.4)

    def projected(self, components: np.ndarray, origin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """U = ZV of every row read (of :attr:`cells` when restricted), in partition order,
        collected on the driver (n × r numbers)."""
        parts = self._run(
            self._map(
                _chunk_projected,
                np.asarray(components, dtype=np.float64),
                np.asarray(origin, dtype=np.float64),
                self.scale,
                self.groups,
            ),
            "projection",
        )
        weights = None if any(w is None for _, _, w in parts) else np.concatenate([w for _, _, w in parts])
        self._offsets = np.concatenate([[0], np.cumsum([len(c) for _, c, _ in parts])])
        return np.concatenate([u for u, _, _ in parts]), np.concatenate([c for _, c, _ in parts]), weights

    def backprojected(self, s: np.ndarray, origin: np.ndarray) -> np.ndarray:
        """Zᵀ S: S (in the row order of :meth:`projected`) travels to every task once, each
        partition takes its rows' slice (the exact path is for tables where N × q fits). The
        partition offsets come from the last :meth:`projected` pass (a pass counts them if none
        ran), so an evaluation reads the table twice, not three times."""
        if self._offsets is None:
            self._offsets = np.concatenate([[0], np.cumsum(self._run(self._map(len), "row counts"))])
        offsets = self._offsets
        if offsets[-1] != s.shape[0]:
            raise InputError(f"{s.shape[0]} rows of S for a table of {offsets[-1]} rows")
        parts = self._map(
            _chunk_backprojected,
            np.asarray(s, dtype=np.float64),
            offsets,
            np.asarray(origin, dtype=np.float64),
            self.scale,
        )
        return self._run(tree_sum(parts, self.split_every), "kernel gradient")

    def rff_sums(self, components: np.ndarray, origin: np.ndarray, features: RandomFeatures) -> RFFSums:
        return self.rff_sums_many([(components, features)], origin)[0]

    def rff_sums_many(
        self, requests: Sequence[RFFRequest], origin: np.ndarray, *, gradient: bool = True
    ) -> list[RFFSums]:
        """The random-feature sums of every (V, features) request in one pass: each slab of a
        partition is projected and summed for all of them while it is in memory."""
        requests = check_rff_requests(requests, len(self.table.features))
        parts = self._map(
            _chunk_rff_sums, requests, np.asarray(origin, dtype=np.float64), self.scale, self.groups, gradient
        )
        return self._run(tree_sum(parts, self.split_every, merge_rff_sums_many), "random-feature sums")

    def sample(self, max_rows_per_group: int, seed: int) -> ArrayPasses:
        """Uniform per group over the rows read (of :attr:`cells` when restricted): one pass
        counts each group's rows per partition, the driver draws row numbers, a second pass
        gathers them (two passes)."""
        if max_rows_per_group < 2:
            raise InputError(f"max_rows_per_group must be at least 2, got {max_rows_per_group!r}")
        counts = np.array(self._run(self._map(_chunk_group_counts, self.groups), "group counts"))
        rng = np.random.default_rng(seed)
        chosen = np.zeros(counts.shape, dtype=object)
        for g in range(len(self.groups)):
            total = int(counts[:, g].sum())
            picks = np.sort(rng.choice(total, size=min(max_rows_per_group, total), replace=False))
            bounds = np.concatenate([[0], np.cumsum(counts[:, g])])
            for part in range(counts.shape[0]):
                chosen[part, g] = picks[(picks >= bounds[part]) & (picks < bounds[part + 1])] - bounds[part]
        parts = self._run(self._map(_chunk_gather, self.groups, list(chosen)), "sample")
        x = np.concatenate([x for x, _, _ in parts])
        codes = np.concatenate([c for _, c, _ in parts])
        weights = None if any(w is None for _, _, w in parts) else np.concatenate([w for _, _, w in parts])
        return ArrayPasses(x, [self.groups[c] for c in codes], self.groups, weights=weights, scale=self.scale)


def _on_cells(chunk: Chunk, func: Callable[..., Any], cells: frozenset[Hashable], args: tuple[Any, ...]) -> Any:
    """``func`` on the rows of ``chunk`` whose cell is one of ``cells`` (:meth:`TablePasses._map`)."""
    return func(chunk.where_cells(cells), *args)


def _fitted_codes(chunk: Chunk, groups: tuple[Hashable, ...]) -> np.ndarray:
    """The chunk's group codes into the fitted ``groups`` (its own labels may be a subset)."""
    unknown = [g for g in chunk.groups if g not in groups]
    if unknown:
        raise GroupError(f"{chunk.partition}: group {unknown[0]!r} is not one of the fitted groups {groups}")
    index = np.array([groups.index(g) for g in chunk.groups], dtype=np.int64)
    return index[chunk.codes] if len(chunk) else np.zeros(0, dtype=np.int64)


def _chunk_slabs(chunk: Chunk, origin: np.ndarray, scale: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    for start, stop in chunk.slabs(_SLAB_BYTES):
        yield start, stop, chunk.rows(start, stop) / scale - origin


def _chunk_projected(
    chunk: Chunk, components: np.ndarray, origin: np.ndarray, scale: np.ndarray, groups: tuple[Hashable, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    u = np.zeros((len(chunk), components.shape[1]))
    for start, stop, z in _chunk_slabs(chunk, origin, scale):
        u[start:stop] = z @ components
    return u, _fitted_codes(chunk, groups), chunk.weights


def _chunk_backprojected(
    chunk: Chunk, s: np.ndarray, offsets: np.ndarray, origin: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    first = int(offsets[chunk.partition.index])
    total = np.zeros((scale.shape[0], s.shape[1]))
    for start, stop, z in _chunk_slabs(chunk, origin, scale):
        total += backprojection(z, s[first + start : first + stop])
    return total


def _chunk_rff_sums(
    chunk: Chunk,
    requests: list[RFFRequest],
    origin: np.ndarray,
    scale: np.ndarray,
    groups: tuple[Hashable, ...],
    gradient: bool,
) -> list[RFFSums]:
    codes = _fitted_codes(chunk, groups)
    return merge_rff_sums_many(
        *(
            rff_block_sums_many(
                z,
                codes[start:stop],
                len(groups),
                requests,
                None if chunk.weights is None else chunk.weights[start:stop],
                gradient=gradient,
            )
            for start, stop, z in _chunk_slabs(chunk, origin, scale)
        )
    )


@dataclass(frozen=True)
class RFFWork:
    """Random-feature sums of several projections (the ``requests`` of
    :meth:`~fairpca_dist.engine.datapasses.DataPasses.rff_sums_many`, without the gradient), to be
    computed by a pass that reads the rows for another reason (the projection's write-back
    computes the report's RBF-kernel MMD² of both arms while it has the rows in memory), or by
    :func:`rff_pass` alone: both give the same sums.

    Rows are taken in the units of :meth:`TablePasses.rescaled` (x / ``scale`` − ``origin``), by
    the same per-slab kernel as :meth:`TablePasses.rff_sums_many`. ``groups`` are the fitted
    groups (read from the ``sensitive`` columns), ``sample_weight`` the weight column, if any.

    ``rates`` (one per group, or None: every row) keeps a Bernoulli subsample: a row of group g
    is summed when its key is below ``rates[g]``. The key is a hash of the row's feature values
    mapped to [0, 1) (:func:`row_keys`), so the same rows are kept whatever pass, partitioning or
    column selection reads them; every row has inclusion probability ``rates[g]`` (equal rows
    are kept or left together, which leaves each row's probability unchanged), and the sums'
    ``weight`` counts the rows kept, so their means estimate the group's means."""

    features: tuple[str, ...]
    requests: tuple[RFFRequest, ...]
    origin: np.ndarray
    scale: np.ndarray
    groups: tuple[Hashable, ...]
    sensitive: tuple[str, ...]
    sample_weight: str | None = None
    rates: np.ndarray | None = None

    @property
    def columns(self) -> list[str]:
        """The columns the sums read beside the features."""
        return [*self.sensitive, *filter(None, [self.sample_weight])]

    def of_partition(self, part: pd.DataFrame, partition: Partition, values: np.ndarray | None = None) -> list[RFFSums]:
        """The sums of one partition (additive: :meth:`merge` adds those of disjoint partitions);
        ``values``: its features already as a float64 array."""
        chunk = read_chunk(part, [], self.sensitive, self.sample_weight, partition)
        x = feature_values(part, self.features, partition) if values is None else values
        if self.rates is not None:  # the subsample first: only its rows are copied
            keep = row_keys(x) < self.rates[_fitted_codes(chunk, self.groups)]
            chunk, x = chunk.subset(keep), x[keep]
        chunk = replace(chunk, features=np.ascontiguousarray(x, dtype=np.float64))
        return _chunk_rff_sums(chunk, list(self.requests), self.origin, self.scale, self.groups, False)

    @staticmethod
    def merge(parts: Sequence[list[RFFSums]]) -> list[RFFSums]:
        """The sums of the union of disjoint partitions."""
        return merge_rff_sums_many(*parts)


def rff_pass(
    source: Any,
    work: RFFWork,
    *,
    read_options: dict[str, Any] | None = None,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> list[RFFSums]:
    """The sums of ``work`` over every row of ``source``, in one pass of their own."""
    table = open_table(
        source,
        features=list(work.features),
        key_columns=work.columns,
        read_options=read_options,
        storage_options=storage_options,
    )
    parts = table.map_partitions(_partition_rff_sums, work)
    return run_graph(tree_sum(parts, 8, merge_rff_sums_many), client=client, progress=progress, label="rff sums")


def _partition_rff_sums(part: pd.DataFrame, partition: Partition, work: RFFWork) -> list[RFFSums]:
    return work.of_partition(part, partition)


def _chunk_group_counts(chunk: Chunk, groups: tuple[Hashable, ...]) -> np.ndarray:
    return np.bincount(_fitted_codes(chunk, groups), minlength=len(groups))


def _chunk_gather(
    chunk: Chunk, groups: tuple[Hashable, ...], chosen: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The rows picked for this partition: ``chosen[partition][g]`` are positions among its
    rows of group g."""
    codes = _fitted_codes(chunk, groups)
    keep = np.sort(
        np.concatenate(
            [np.flatnonzero(codes == g)[picks] for g, picks in enumerate(chosen[chunk.partition.index])]
        ).astype(np.int64)
    )
    pieces = [
        chunk.rows(start, stop)[keep[(keep >= start) & (keep < stop)] - start]
        for start, stop in chunk.slabs(_SLAB_BYTES)
    ]
    rows = np.concatenate(pieces) if pieces else np.zeros((0, chunk.features.shape[1]))
    return rows, codes[keep], None if chunk.weights is None else chunk.weights[keep]


def _chunk_l1_sampled(
    chunk: Chunk,
    groups: tuple[Hashable, ...],
    components: np.ndarray,
    centers: dict[Hashable, np.ndarray],
    scale: np.ndarray,
    max_rows_per_group: int,
    seed: int,
) -> SampledL1Sums:
    """:func:`~fairpca_dist.engine.datapasses.l1_block_sums_sampled` of a partition, slab by slab
    (each slab converted once for both), with group codes into the fitted ``groups``."""
    codes = _fitted_codes(chunk, groups)
    return functools.reduce(
        operator.add,
        (
            l1_block_sums_sampled(
                chunk.rows(start, stop),
                codes[start:stop],
                groups,
                components,
                centers,
                scale,
                None if chunk.weights is None else chunk.weights[start:stop],
                max_rows_per_group,
                seed,
            )
            for start, stop in chunk.slabs(_SLAB_BYTES)
        ),
    )


def _chunk_group_sums(
    chunk: Chunk,
    block_sums: Callable[..., L1Sums],
    components: np.ndarray,
    centers: dict[Hashable, np.ndarray],
    scale: np.ndarray,
) -> L1Sums:
    """``block_sums`` (:func:`~fairpca_dist.engine.datapasses.l1_block_sums` or
    :func:`~fairpca_dist.engine.datapasses.scatter_block_products`) of a partition, slab by slab."""
    return _merge(
        *(
            block_sums(
                chunk.rows(start, stop),
                chunk.codes[start:stop],
                chunk.groups,
                components,
                centers,
                scale,
                None if chunk.weights is None else chunk.weights[start:stop],
            )
            for start, stop in chunk.slabs(_SLAB_BYTES)
        )
    )


def table_passes(
    data: Any,
    moments: GroupMoments,
    *,
    sensitive_feature: Any,
    sample_weight: Any = None,
    key_columns: Sequence[str] = (),
    exclude: Sequence[str] = (),
    feature_names: Sequence[str] | None = None,
    client: Any = None,
    split_every: int = 8,
    chunk_rows: int | None = None,
    read_options: dict[str, Any] | None = None,
    progress: bool = False,
    cells: str | HashCells | Any = None,
    storage_options: StorageOptions | None = None,
) -> TablePasses:
    """The rows of ``data`` for a solver that reads them at every iteration (``mm-robust``,
    ``mmd`` with the RBF kernel) or a metric that does (:func:`fairpca_dist.assessment.metrics.mmd2_rbf`):
    the same arguments as :func:`compute_moments` gave ``moments`` (features are the moments'),
    ``client`` for where the passes run, and ``progress`` for a bar per pass. ``cells`` (a
    :class:`~fairpca_dist.engine.cells.HashCells`, the column of cell labels, or one label per row for
    in-memory input, as for :func:`compute_moments`) opens the table with its cells, so that
    :meth:`TablePasses.restricted` can read only some of them (the rows of a train split).

    >>> import numpy as np
    >>> import pandas as pd
    >>> from fairpca_dist import fit_projection
    >>> rng = np.random.default_rng(0)
    >>> frame = pd.DataFrame(rng.normal(size=(200, 4)), columns=list("abcd")).assign(sex=rng.choice(["f", "m"], 200))
    >>> moments = compute_moments(frame, sensitive_feature="sex")
    >>> passes = table_passes(frame, moments, sensitive_feature="sex")
    >>> model = fit_projection(moments, 2, method="mm-robust", passes=passes)
    >>> model.components.shape, passes.n_passes > 0
    ((4, 2), True)
    """
    table = open_table(
        data,
        sensitive_feature=sensitive_feature,
        features=list(moments.feature_names),
        sample_weight=sample_weight,
        key_columns=key_columns,
        exclude=exclude,
        feature_names=feature_names,
        chunk_rows=chunk_rows,
        read_options=read_options,
        cells=cells,
        storage_options=storage_options,
    )
    return TablePasses(table, moments.groups, client=client, split_every=split_every, progress=progress)
