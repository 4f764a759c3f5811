"""The memory a pass needs on a Dask worker, checked before the pass starts.

A worker's memory during a pass is its **floor** (the process once the libraries a pass
imports are loaded: Python, numpy, pandas, pyarrow, dask.dataframe, distributed and this
package, ≈ 350 MiB) plus, for each of its threads, what one task needs while it reads and
processes one partition (:meth:`PartitionSize.need`: a multiple of the partition's decoded
bytes, plus pyarrow's page buffers per column). ``distributed`` pauses a worker whose memory
passes 80 % of its limit and kills it at 95 %: a worker whose floor alone is above the pause
threshold never runs a task (the pass waits forever), and one whose partitions do not fit is
killed until the pass fails with ``KilledWorker``. Measured by ``benchmarks/bench_memory.py``
(``benchmarks/results/bench_memory.md``).

Every pass over a table's partitions builds its tasks in :mod:`fairpca_dist.sources`, which
:func:`mark`\\ s the graph with the size of its largest partition; :func:`check_workers`,
called by :func:`fairpca_dist.passes.run_graph` before a pass starts on a cluster, reads it
back and refuses with :class:`~fairpca_dist.exceptions.ResourceError` (the memory needed, the
workers' limit and what to do) when a worker cannot hold it. A ``KilledWorker`` that happens
anyway becomes :func:`killed_worker_error`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairpca_dist.exceptions import FairPCAError, ResourceError, ServiceError

__all__ = ["PartitionSize", "WorkerMemory", "mark", "pass_size", "check_workers", "killed_worker_error"]

# What one task needs for a partition of D decoded bytes and c columns (bytes): pyarrow's decoded
# table and the pandas partition made from it, one float64 slab, the statistics; plus a page
# buffer and a decompressed page per column while pyarrow decodes. Fitted on the peaks
# benchmarks/bench_memory.py measured (ingest and write-back, which copy the partition once
# more, included), rounded up.
NEED_PER_DECODED_BYTE = 4.0
NEED_PER_COLUMN = 2 * 2**20
NEED_PER_TASK = 32 * 2**20

_MARK = "fairpca-partition-size"
_VARIABLE_WIDTH_BYTES = 32  # a text or object value, decoded (offsets and characters)


@dataclass(frozen=True)
class PartitionSize:
    """The largest partition of a pass: its rows, the decoded bytes of one row of the columns
    read, and how many columns those are. ``smaller`` says how to make partitions smaller
    (the option of the source it came from)."""

    rows: int
    row_bytes: int
    n_columns: int
    smaller: str

    @property
    def decoded_bytes(self) -> int:
        return self.rows * self.row_bytes

    def need(self) -> int:
        """Bytes one task needs while it reads and processes this partition."""
        return int(NEED_PER_DECODED_BYTE * self.decoded_bytes + NEED_PER_COLUMN * self.n_columns + NEED_PER_TASK)

    def __str__(self) -> str:
        return (f"the largest partition holds {self.rows:,} rows of {self.n_columns} column(s), "
                f"{_size(self.decoded_bytes)} decoded")


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
    def usable(self) -> int:
        """The memory a worker can fill before distributed pauses it (or kills it, if it never
        pauses)."""
        return int(self.limit * (self.pause or self.terminate or 1.0))

    def required_limit(self, need: int) -> int:
        """The memory limit with which this worker's floor and ``nthreads`` tasks of ``need``
        bytes stay under the pause threshold."""
        return math.ceil((self.floor + self.nthreads * need) / (self.pause or self.terminate or 1.0))


def frame_partition_size(frame: Any) -> PartitionSize | None:
    """The size of the largest partition of a dask DataFrame, when its reader tells how many
    rows each partition has (Parquet, from the files' metadata; a pandas DataFrame split by
    rows); None otherwise (CSV: rows are known only once read)."""
    found = _partition_rows(frame.expr)
    if found is None:
        return None
    rows, smaller = found
    widths = [_value_bytes(dtype) for dtype in frame.dtypes]
    return PartitionSize(max(rows), sum(widths), len(widths), smaller)


def array_partition_size(blocks: Sequence[Any]) -> PartitionSize:
    """The size of the largest row block of row-aligned dask arrays (features, labels, …;
    ``None`` entries are absent arrays)."""
    present = [block for block in blocks if block is not None]
    columns = [int(np.prod(block.shape[1:], dtype=np.int64)) for block in present]
    return PartitionSize(
        int(max(max(block.chunks[0]) for block in present)),
        sum(n * _value_bytes(block.dtype) for n, block in zip(columns, present)),
        sum(columns),
        _SMALLER_IN_MEMORY,
    )


_SMALLER_PARQUET = ("read_options={'blocksize': '16 MiB'} (command line: --read-option blocksize=16MiB; "
                    "the default is 64 MiB)")
_SMALLER_IN_MEMORY = "fewer rows per partition (chunk_rows=, or rechunk the dask array)"


def _partition_rows(expr: Any) -> tuple[tuple[int, ...], str] | None:
    """The rows of each partition of the table ``expr`` reads, and how to make them fewer."""
    from dask.dataframe.dask_expr.io.io import FromMap, FromPandas
    from dask.dataframe.dask_expr.io.parquet import ReadParquetFSSpec

    from fairpca_dist.parquet_slices import SlicedParquet

    for op in expr.find_operations(FromMap):
        if isinstance(op.func, SlicedParquet):
            return op.func.partition_rows, _SMALLER_PARQUET
    for op in expr.find_operations(ReadParquetFSSpec):
        plan = op._dataset_info["plan"]
        statistics = plan["statistics"]
        if statistics and len(statistics) == len(plan["parts"]):
            return tuple(int(stats["num-rows"]) for stats in statistics), _SMALLER_PARQUET
    for op in expr.find_operations(FromPandas):
        return (-(-len(op.frame) // max(op.npartitions, 1)),), _SMALLER_IN_MEMORY
    return None


def _value_bytes(dtype: Any) -> int:
    """Decoded bytes of one value of ``dtype``: its width for numbers, a guess for text."""
    kind = getattr(dtype, "kind", "O")
    if kind in "biufcmM":
        return int(np.dtype(dtype).itemsize) if isinstance(dtype, np.dtype) else int(getattr(dtype, "itemsize", 8))
    if str(dtype) == "category":
        return 4
    return _VARIABLE_WIDTH_BYTES


def mark(graph: dict[Any, Any], size: PartitionSize | None) -> None:
    """Record in ``graph`` (a pass's task graph, before it becomes Delayed objects) the size of
    its largest partition, for :func:`pass_size`. The entry is data no task depends on: dask
    culls it before running the graph."""
    from dask._task_spec import DataNode
    from dask.base import tokenize

    if size is not None:
        key = (_MARK, tokenize(size))
        graph[key] = DataNode(key, size)


def pass_size(graph: Any) -> PartitionSize | None:
    """The largest partition :func:`mark`\\ ed in ``graph`` (a dask collection or a list of
    them), by the memory it needs; None if none is marked."""
    from dask.base import is_dask_collection

    collections = graph if isinstance(graph, (list, tuple)) else [graph]
    sizes = []
    for collection in collections:
        if not is_dask_collection(collection):
            continue
        tasks = collection.__dask_graph__()
        sizes += [getattr(tasks[key], "value", tasks[key]) for key in tasks.keys()
                  if isinstance(key, tuple) and key[:1] == (_MARK,)]
    return max(sizes, key=PartitionSize.need, default=None)


def check_workers(client: Any, size: PartitionSize | None) -> None:
    """Refuse, before a pass starts on ``client``'s cluster, when a worker with a memory limit
    cannot hold its floor (it would pause for good) or its floor plus one task per thread on
    partitions of ``size`` (it would pause and be killed): :class:`ResourceError` with the
    memory needed, the workers' limit and what to do."""
    workers = [w for w in _workers(client) if w.limit]
    if not workers:
        return
    need = size.need() if size is not None else 0
    short = [w for w in workers if w.floor + w.nthreads * need > w.usable]
    if not short:
        return
    worst = max(short, key=lambda w: w.required_limit(need))
    limits = _limits(workers)
    threshold = f"{worst.pause or worst.terminate or 1:.0%} of it, {_size(worst.usable)}"
    required = _size(_round_up(worst.required_limit(need)))
    if worst.floor >= worst.usable:
        raise ResourceError(
            f"the Dask workers ({limits}) cannot run a pass: a worker uses {_size(worst.floor)} once the libraries a "
            f"pass needs are loaded (pandas, pyarrow, dask.dataframe), at or above the {threshold} where distributed "
            f"pauses it, so it would wait forever; start the workers with a memory limit of at least {required} "
            "(dask worker --memory-limit)"
        )
    raise ResourceError(
        f"a pass needs ≈ {_size(worst.floor + worst.nthreads * need)} on each Dask worker ({_size(worst.floor)} "
        f"of libraries + {worst.nthreads} thread(s) × {_size(need)} to read and process a partition: {size}), "
        f"more than the {threshold} of the workers' memory limit ({limits}) at which distributed pauses a worker; "
        f"start workers with a memory limit of at least {required} (dask worker --memory-limit), or make the "
        f"partitions smaller: {size.smaller}"
    )


def killed_worker_error(error: BaseException, client: Any, size: PartitionSize | None) -> FairPCAError:
    """What to tell a person when ``distributed`` gave up on a task whose workers kept dying
    (``KilledWorker``): :class:`ResourceError` when the nannies' logs say a worker exceeded its
    memory budget (with the workers' limit and what this pass needs), else
    :class:`ServiceError` (a worker process died for another reason: its logs say why)."""
    task = getattr(error, "task", None)
    where = f"partition {task[1]}" if isinstance(task, tuple) and len(task) == 2 else f"task {task!r}"
    deaths = getattr(error, "allowed_failures", None)
    died = f"the Dask workers running {where} died {deaths + 1 if deaths is not None else 'several'} times"
    try:
        workers = _workers(client)
        killed_for_memory = any("memory budget" in line for line in _nanny_log(client))
    except Exception:  # noqa: BLE001 - the cluster may be half gone: say what is known
        workers, killed_for_memory = [], False
    limits = _limits(workers) if workers else "limit unknown"
    if killed_for_memory:
        need = f"; this pass needs ≈ {_size(size.need())} per task ({size})" if size is not None else ""
        smaller = f", or make the partitions smaller: {size.smaller}" if size is not None else ""
        return ResourceError(
            f"{died}, killed by their nannies for exceeding their memory limit ({limits}){need}; start workers with "
            f"a larger memory limit (dask worker --memory-limit){smaller}"
        )
    return ServiceError(
        f"{died} and distributed gave up ({limits}; their nannies' logs name no memory limit exceeded): look in "
        "the workers' logs for why their processes ended (killed by the system, a crash), then run again"
    )


def _workers(client: Any) -> list[WorkerMemory]:
    answers = client.run(_worker_memory, on_error="return")
    return [answer for answer in answers.values() if isinstance(answer, WorkerMemory)]


def _nanny_log(client: Any) -> list[str]:
    return [message for logs in client.get_worker_logs(nanny=True).values() for _, message in logs]


def _limits(workers: Iterable[WorkerMemory]) -> str:
    limits = sorted({w.limit for w in workers})
    shown = " to ".join(_size(limit) for limit in (limits[:1] + limits[-1:] if len(limits) > 1 else limits))
    return f"memory limit {shown}" if limits and limits[0] else "no memory limit"


_FLOOR: list[int] = []  # in a worker process: the smallest resident memory seen by _worker_memory


def _worker_memory(dask_worker: Any) -> WorkerMemory:
    """Run in each worker (``client.run``): import what a pass imports, then report."""
    import dask
    import psutil

    import fairpca_dist.passes  # noqa: F401 - what every pass's tasks import
    import fairpca_dist.sources  # noqa: F401

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


def _round_up(n_bytes: int) -> int:
    """Up to the next tenth of a GB (to the next 100 MB)."""
    return math.ceil(n_bytes / 1e8) * 10**8


def _size(n_bytes: float) -> str:
    """Bytes for a person: MiB below 1 GiB, GiB above (distributed's units in its logs); limits
    given in GB read as GB."""
    if n_bytes % 10**8 == 0 and n_bytes >= 10**8:
        return f"{n_bytes / 1e9:g} GB"
    return f"{n_bytes / 2**20:.0f} MiB" if n_bytes < 2**30 else f"{n_bytes / 2**30:.2f} GiB"


