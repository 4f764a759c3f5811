"""The memory a pass needs on a Dask worker, checked before the pass starts.

A worker's memory during a pass is its **floor** (the process once the libraries a pass
imports are loaded: Python, numpy, pandas, pyarrow, dask.dataframe, distributed and this
package, ≈ 260–365 MB depending on the machine: measured on each worker) plus, for each of
its threads, what one task needs while it reads and processes one partition
(:meth:`PartitionSize.need`: a multiple of the partition's decoded bytes, plus pyarrow's page
buffers per column). ``distributed`` pauses a worker whose memory passes 80 % of its limit
and kills it at 95 %: a worker whose floor alone is above the pause
threshold never runs a task (the pass waits forever), and one whose partitions do not fit is
killed until the pass fails with ``KilledWorker``. Measured by ``benchmarks/bench_memory.py``
(``benchmarks/results/bench_memory.md``).

Every pass over a table's partitions builds its tasks in :mod:`fairpca_dist.engine.sources`, which
:func:`mark`\\ s the graph with the size of its largest partition; :func:`check_workers`,
called by :func:`fairpca_dist.engine.passes.run_graph` before a pass starts on a cluster, reads it
back and refuses with :class:`~fairpca_dist.exceptions.ResourceError` (the memory needed, the
workers' limit and what to do) when a worker cannot hold it. A ``KilledWorker`` that happens
anyway becomes :func:`killed_worker_error`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np
from dask.base import is_dask_collection

from fairpca_dist.engine.parquet_slices import RowSlice, SlicedParquet, columns_per_read, footer_statistics
from fairpca_dist.exceptions import FairPCAError, ResourceError, ServiceError
from fairpca_dist.wording import size_text

__all__ = [
    "MOMENTS_MERGE_INPUTS",
    "moments_held",
    "PartitionSize",
    "WorkerMemory",
    "frame_partition_size",
    "array_partition_size",
    "worker_memory",
    "mark",
    "pass_size",
    "check_workers",
    "killed_worker_error",
]

# What one task needs for a partition of D decoded bytes, fitted on the peaks that
# benchmarks/bench_memory.py measured above a worker's floor (moments passes, ingest and
# write-back; p = 10 to 200; rounded up). Read by dask (row groups packed into a partition): the
# row groups' column chunks as read from the file, pyarrow's decoded table, the pandas partition
# made from it and one float64 slab, up to ≈ 5 D. Read as a slice of a larger row group
# (fairpca_dist.engine.parquet_slices): the decoded slice and its pandas partition, ≈ 3 D, plus a page
# buffer and a decompressed page per column decoded at once. Plus a little per task.
# A task also parses its file's footer: ≈ 6–9× its serialized size (pyarrow's metadata and the
# schema; 290–430 MB for the footer of 20 row groups × 20,000 columns, 47 MB), and a column
# decoded costs at most a page buffer and a page (its slice's values when they are fewer).
NEED_PER_DECODED_BYTE = 5.5
NEED_PER_SLICE_BYTE = 3.5
NEED_PER_SLICED_COLUMN = 5 * 2**19
NEED_PER_SMALL_COLUMN = 64 * 2**10
NEED_PER_FOOTER_BYTE = 9
NEED_PER_TASK = 16 * 2**20
MIN_SLICE_BYTES = 8 * 2**20  # smaller slices of a 400 MiB row group would decode it 25 times and more

MOMENTS_MERGE_INPUTS = 8  # split_every of the moments pass's tree


def moments_held(merge_inputs: int = MOMENTS_MERGE_INPUTS) -> int:
    """How many partitions' p × p moments a worker of the moments pass holds at once: a merge
    of the tree (its ``merge_inputs`` inputs and its output) and a task (its accumulators and
    the copy it sends)."""
    return merge_inputs + 1 + 2


_MARK = ("fairpca-partition-size",)  # one key: a pass's collections share it, so it is found in O(1)
_VARIABLE_WIDTH_BYTES = 32  # a text or object value, decoded (offsets and characters)
_PARQUET, _IN_MEMORY = "parquet", "in memory"  # where partitions come from: what sets their size


@dataclass(frozen=True)
class PartitionSize:
    """The largest partition of a pass: its rows, the decoded bytes of one row of the columns
    read, and how many columns those are; ``source`` says what sets the partitions' size
    (Parquet's ``blocksize``, or the rows per partition of data in memory), ``sliced`` whether
    it is read as a slice of a larger Parquet row group."""

    rows: int
    row_bytes: int
    n_columns: int
    source: str
    sliced: bool = False
    footer_bytes: int = 0

    @property
    def decoded_bytes(self) -> int:
        return self.rows * self.row_bytes

    def need(self, rows: int | None = None) -> int:
        """Bytes one task needs while it reads and processes this partition (or one like it of
        ``rows`` rows)."""
        rows = self.rows if rows is None else rows
        decoded = self.row_bytes * rows
        footer = NEED_PER_FOOTER_BYTE * self.footer_bytes + NEED_PER_TASK
        if self.sliced:
            column_bytes = rows * self.row_bytes // max(self.n_columns, 1)
            page = min(NEED_PER_SLICED_COLUMN, NEED_PER_SMALL_COLUMN + 2 * column_bytes)
            pages = page * min(self.n_columns, columns_per_read(column_bytes))
            return int(NEED_PER_SLICE_BYTE * decoded + pages + footer)
        return int(NEED_PER_DECODED_BYTE * decoded + footer)

    def smaller(self, n_bytes: int) -> str | None:
        """The option that makes partitions like this one need at most ``n_bytes`` per task, or
        None when even small ones would not, or would be too small to be worth it (slices of a
        row group below :data:`MIN_SLICE_BYTES`: each slice decodes the rows before it again)."""
        rows = next((r for r in (2**k for k in range(40, 9, -1)) if r < self.rows and self.need(r) <= n_bytes), None)
        if rows is None or (self.sliced and rows * self.row_bytes < MIN_SLICE_BYTES):
            return None
        if self.source == _PARQUET:
            size = f"{max(1, rows * self.row_bytes // 2**20)} MiB"
            return (
                f"read_options={{'blocksize': '{size}'}} (command line: --read-option blocksize="
                f"{size.replace(' ', '')}; the default is 64 MiB)"
            )
        return f"chunk_rows={rows} (or rechunk the dask array to {rows} rows per block)"

    def __str__(self) -> str:
        text = f"{self.rows:,} rows × {self.n_columns} columns, {size_text(self.decoded_bytes)} decoded"
        if NEED_PER_FOOTER_BYTE * self.footer_bytes > self.decoded_bytes:
            text += (
                f", in a file whose footer of {size_text(self.footer_bytes)} every task parses whole: "
                "rewritten in fewer row groups per file it is smaller"
            )
        return text


@dataclass(frozen=True)
class WorkerMemory:
    """One worker's memory as its own process reports it: the limit (0: none), the fractions
    of it at which distributed pauses and kills it (0: never), its threads, and its floor (the
    smallest resident memory seen once the libraries of a pass were imported)."""

    address: str
    limit: int
    pause: float
    terminate: float
    nthreads: int
    floor: int

    @property
    def threshold(self) -> float:
        """The fraction of the limit a worker can fill: where distributed pauses it (or kills
        it, if it never pauses)."""
        return self.pause or self.terminate or 1.0

    @property
    def usable(self) -> int:
        return int(self.limit * self.threshold)

    def required_limit(self, need: int) -> int:
        """The memory limit with which this worker's floor and ``nthreads`` tasks of ``need``
        bytes stay under :attr:`threshold`."""
        return math.ceil((self.floor + self.nthreads * need) / self.threshold)


def frame_partition_size(frame: Any) -> PartitionSize | None:
    """The size of the largest partition of a dask DataFrame (by :meth:`PartitionSize.need`),
    when its reader tells how many rows each partition has (Parquet, from the files' metadata;
    a pandas DataFrame split by rows); None otherwise (CSV: rows are known only once read)."""
    found = _largest_partitions(frame.expr)
    if found is None:
        return None
    candidates, source, footer = found
    widths = [_value_bytes(dtype) for dtype in frame.dtypes]
    return max(
        (PartitionSize(rows, sum(widths), len(widths), source, sliced, footer) for rows, sliced in candidates),
        key=PartitionSize.need,
    )


def array_partition_size(blocks: Sequence[Any]) -> PartitionSize:
    """The size of the largest row block of row-aligned dask arrays (features, labels, …;
    ``None`` entries are absent arrays)."""
    present = [block for block in blocks if block is not None]
    columns = [int(np.prod(block.shape[1:], dtype=np.int64)) for block in present]
    return PartitionSize(
        int(max(max(block.chunks[0]) for block in present)),
        sum(n * _value_bytes(block.dtype) for n, block in zip(columns, present, strict=True)),
        sum(columns),
        _IN_MEMORY,
    )


def _largest_partitions(expr: Any) -> tuple[list[tuple[int, bool]], str, int] | None:
    """For the table ``expr`` reads: the rows of its largest partition of each kind (read by
    dask, or as a slice of a row group: ``(rows, sliced)``), what sets their size, and the
    largest serialized footer a task parses where the reader knows it (a wide file's), else 0."""
    # dask-expr's internal classes, imported here (not with the package): a dask release that
    # moves them breaks memory sizing only; tests/test_dask_conventions.py names what changed
    from dask.dataframe.dask_expr.io.io import FromMap, FromPandas
    from dask.dataframe.dask_expr.io.parquet import ReadParquetFSSpec

    for op in expr.find_operations(FromMap):
        if isinstance(op.func, SlicedParquet):
            kinds = [
                (rows, isinstance(part, RowSlice))
                for rows, part in zip(op.func.partition_rows, op.iterables[0], strict=True)
            ]
            largest = [max((rows for rows, kind in kinds if kind == sliced), default=0) for sliced in (False, True)]
            return list(zip(largest, (False, True), strict=True)), _PARQUET, op.func.footer_bytes
    for op in expr.find_operations(ReadParquetFSSpec):
        rows = _parquet_rows(op)
        return ([(max(rows), False)], _PARQUET, 0) if rows else None
    for op in expr.find_operations(FromPandas):
        return [(int(np.diff(op._locations()).max(initial=0)), False)], _IN_MEMORY, 0
    return None


def _parquet_rows(read: Any) -> tuple[int, ...]:
    """Rows of each partition of dask's Parquet read ``read``: from its plan's statistics, or
    (when dask planned without them: whole files, ``split_row_groups=True``) from the files'
    footers, read once per table and process; none when a footer cannot be read (the pass
    itself will say why)."""
    info = read._dataset_info
    plan = info["plan"]
    if plan["statistics"] and len(plan["statistics"]) == len(plan["parts"]):
        return tuple(int(stats["num-rows"]) for stats in plan["statistics"])
    if plan["empty"]:
        return (0,)
    if read._name not in _FOOTER_ROWS:
        if len(_FOOTER_ROWS) >= 64:
            _FOOTER_ROWS.pop(next(iter(_FOOTER_ROWS)))
        try:
            _FOOTER_ROWS[read._name] = tuple(
                stats["num-rows"] for stats in footer_statistics(info["fs"], plan["parts"])[0]
            )
        except (OSError, ValueError):  # ArrowInvalid: a damaged footer
            return ()
    return _FOOTER_ROWS[read._name]


_FOOTER_ROWS: dict[str, tuple[int, ...]] = {}  # by the token of a Parquet read: rows of its partitions


def _value_bytes(dtype: Any) -> int:
    """Decoded bytes of one value of ``dtype``: its width for numbers, a guess for text."""
    kind = getattr(dtype, "kind", "O")
    if kind in "biufcmM":
        return int(np.dtype(dtype).itemsize) if isinstance(dtype, np.dtype) else int(getattr(dtype, "itemsize", 8))
    if str(dtype) == "category":
        return 4
    return _VARIABLE_WIDTH_BYTES


def mark(graph: dict[Any, Any], size: Callable[[], PartitionSize | None]) -> None:
    """Record in ``graph`` (a pass's task graph, before it becomes Delayed objects) how to size
    its largest partition, for :func:`pass_size`. ``size`` is called only there, before a pass
    on a cluster: sizing a Parquet read may open its files' footers, which a pass on this
    machine's threads never needs. The entry is data no task depends on: dask culls it before
    running the graph."""
    graph.update(dask.delayed(size, name=_MARK, traverse=False).__dask_graph__())


def pass_size(graph: Any) -> PartitionSize | None:
    """The largest partition :func:`mark`\\ ed in ``graph`` (a dask collection or a list of
    them: one lookup each), by the memory it needs; None if none is marked."""
    collections = graph if isinstance(graph, (list, tuple)) else [graph]
    sizers: dict[int, Callable[[], PartitionSize | None]] = {}
    for collection in collections:
        if is_dask_collection(collection):
            tasks = collection.__dask_graph__()
            if _MARK in tasks:
                sizer = getattr(tasks[_MARK], "value", tasks[_MARK])
                sizers[id(sizer)] = sizer  # once per pass, however many of its collections carry it
    sizes = [size for size in (sizer() for sizer in sizers.values()) if size is not None]
    return max(sizes, key=PartitionSize.need, default=None)


def check_workers(client: Any, size: PartitionSize | None) -> None:
    """Refuse, before a pass starts on ``client``'s cluster, when a worker with a memory limit
    cannot hold its floor (it would pause for good) or its floor plus one task per thread on
    partitions of ``size`` (it would pause, then be killed) under the threshold at which
    distributed pauses it: :class:`ResourceError` with the memory needed, the workers' limit and
    what to do."""
    workers = [w for w in worker_memory(client) if w.limit]
    need = size.need() if size is not None else 0
    short = [w for w in workers if w.floor + w.nthreads * need > w.usable]
    if not short:
        return
    worst = max(short, key=lambda w: w.required_limit(need))
    required = size_text(math.ceil(worst.required_limit(need) / 1e8) * 10**8)  # to the next 100 MB
    start = (
        f"start workers with a memory limit of at least {required} "
        f"(dask worker --memory-limit {required.replace(' ', '')})"
    )
    pauses = f"distributed pauses a worker at {worst.threshold:.0%} of it ({size_text(worst.usable)})"
    if worst.floor >= worst.usable:
        raise ResourceError(
            f"Dask workers with {_limits(workers)} cannot run a pass: a worker uses {size_text(worst.floor)} once the "
            f"libraries of a pass are loaded (pandas, pyarrow, dask.dataframe), and {pauses}, so the pass would wait "
            f"forever; {start}"
        )
    smaller = size.smaller((worst.usable - worst.floor) // worst.nthreads) if size is not None else None
    raise ResourceError(
        f"a pass needs ≈ {size_text(worst.floor + worst.nthreads * need)} on each Dask worker: "
        f"{size_text(worst.floor)} for the libraries of a pass and, for each of its {worst.nthreads} thread(s), "
        f"{size_text(need)} to read and process "
        f"a partition (the largest: {size}); the workers have {_limits(workers)}, and {pauses}; {start}"
        + (f", or make the partitions smaller: {smaller}" if smaller else "")
    )


def killed_worker_error(error: BaseException, client: Any, size: PartitionSize | None) -> FairPCAError:
    """What to tell a person when ``distributed`` gave up on a task whose workers kept dying
    (``KilledWorker``): :class:`ResourceError` when the nanny of the last worker to die says it
    exceeded its memory budget (with that worker's limit and what this pass needs), else
    :class:`ServiceError` (a worker process died for another reason: its logs say why)."""
    task = getattr(error, "task", None)
    where = f"partition {task[1]}" if isinstance(task, tuple) and len(task) == 2 else f"task {task!r}"
    deaths = getattr(error, "allowed_failures", None)
    died = f"the Dask workers running {where} died {deaths + 1 if deaths is not None else 'several'} times"
    last = getattr(error, "last_worker", None)  # distributed's record of it: address, nanny, memory limit
    limit = int(getattr(last, "memory_limit", 0) or 0)
    limits = f"a memory limit of {size_text(limit)}" if limit else "no memory limit"
    if last is not None and any("memory budget" in line and last.address in line for line in _nanny_log(client, last)):
        need = (
            f"; the largest partition of this pass ({size}) was estimated to need ≈ {size_text(size.need())} per task"
            if size is not None
            else ""
        )
        smaller = size.smaller(size.need() // 2) if size is not None else None
        smaller = f", or make the partitions smaller: {smaller}" if smaller else ""
        return ResourceError(
            f"{died}, killed by their nannies for exceeding their memory limit (the last had {limits}){need}; "
            f"start workers with a larger memory limit (dask worker --memory-limit){smaller}"
        )
    return ServiceError(
        f"{died} and distributed gave up (the last had {limits}, and its nanny's log says it did not exceed it): "
        "look in the workers' logs for why their processes ended (killed by the system, a crash), then run again"
    )


def _nanny_log(client: Any, worker: Any) -> list[str]:
    """The log lines of the nanny of ``worker`` (distributed's record of a worker, which names
    its nanny); none if it has no nanny or the nanny does not answer."""
    from distributed.core import rpc

    async def lines() -> list[str]:
        nanny = rpc(worker.nanny, timeout=10)
        try:
            return [message for _, message in await nanny.get_logs()]
        finally:
            await nanny.close_rpc()

    if getattr(worker, "nanny", None) is None:
        return []
    try:
        return client.sync(lines)
    except Exception:  # noqa: BLE001 - an error message is being written: say what is known
        return []


def worker_memory(client: Any) -> list[WorkerMemory]:
    """Each worker's memory limit, thresholds, threads and floor, as the worker reports them
    (importing what a pass imports first, so that the floor counts them)."""
    answers = client.run(_worker_memory, on_error="return")
    return [answer for answer in answers.values() if isinstance(answer, WorkerMemory)]


def _limits(workers: Iterable[WorkerMemory]) -> str:
    """ "a memory limit of 600 MB" (or "memory limits of 600 MB to 1 GB")."""
    limits = sorted({w.limit for w in workers})
    if not any(limits):
        return "no memory limit"
    if len(limits) == 1:
        return f"a memory limit of {size_text(limits[0])}"
    return f"memory limits of {size_text(limits[0])} to {size_text(limits[-1])}"


_FLOOR: list[int] = []  # in a worker process: the smallest resident memory _worker_memory has seen


def _worker_memory(dask_worker: Any) -> WorkerMemory:
    """Run in each worker (``client.run``): import what a pass imports, then report."""
    import psutil  # in a dask worker: distributed depends on it

    import fairpca_dist.engine.passes  # noqa: F401 - what every pass's tasks import (sources, pandas, pyarrow, dask)

    rss = psutil.Process().memory_info().rss
    _FLOOR[:] = [min(_FLOOR + [rss])]
    manager = dask_worker.memory_manager
    return WorkerMemory(
        address=dask_worker.address,
        limit=int(manager.memory_limit or 0),
        pause=float(manager.memory_pause_fraction or 0),
        terminate=float(dask.config.get("distributed.worker.memory.terminate") or 0),  # the nanny's, as configured
        nthreads=int(dask_worker.state.nthreads),
        floor=_FLOOR[0],
    )
