"""Parquet partitions no larger than a byte budget, however large the file's row groups.

dask packs a Parquet table's row groups into partitions of at most ``blocksize`` decoded bytes,
but never splits a row group: pandas and pyarrow write row groups of 1,048,576 rows by default,
400 MiB decoded at p = 50, and a task that decodes one of those needs more than a 1 GB worker
has. :func:`sliced_row_groups` keeps dask's plan for every partition within the budget and
replaces each oversized row group by partitions of consecutive row slices (:class:`RowSlice`).
A slice is read with pyarrow's batch reader, which decodes the row group a batch at a time with
small page buffers and keeps only the batches of the slice: a task holds one slice, never the
row group. Rows before the slice are decoded and dropped (a row group has no index by row), so
reading all s slices of a row group decodes it ≈ (s + 1) / 2 times: files with small row groups
(as ingest writes them) read faster (``benchmarks/results/bench_memory.md``).

The partitions of a sliced table, concatenated, are the rows of the file in order, with the
dtypes dask gives the same columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from dask.utils import parse_bytes

__all__ = ["COLUMNS_PER_READ", "RowSlice", "SlicedParquet", "sliced_row_groups"]

# Rows are decoded in batches of about this many bytes (a power of two of rows, slices are whole
# batches), through page buffers of this size per column: pyarrow's default reads each column
# chunk of a row group whole (the whole row group in memory: 735 MiB for a 400 MiB group).
_BATCH_BYTES = 16 * 2**20
_PAGE_BUFFER_BYTES = 64 * 2**10
# Columns decoded together: pyarrow holds a page buffer and a decompressed page (~2 MiB) per
# column it decodes, 400 MiB for 200 columns at once.
COLUMNS_PER_READ = 32


@dataclass(frozen=True)
class RowSlice:
    """Rows ``start:stop`` of row group ``row_group`` of the Parquet file ``path``: one
    partition of a row group too large for one. ``start`` is a multiple of ``batch_rows``,
    the rows decoded at a time."""

    path: str
    row_group: int
    start: int
    stop: int
    batch_rows: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


class SlicedParquet:
    """The reader of each partition of a sliced table (``dd.from_map``'s function): a
    :class:`RowSlice` read here, any other part by dask's own Parquet reader ``read_parts``.
    ``partition_rows`` is the number of rows of each partition (what
    :mod:`fairpca_dist.engine.memory` sizes a pass by)."""

    def __init__(self, read_parts: Any, fs: Any, meta: pd.DataFrame, partition_rows: tuple[int, ...]):
        self.read_parts, self.fs, self.meta, self.partition_rows = read_parts, fs, meta, partition_rows

    def __call__(self, part: RowSlice | list[Any], columns: list[str] | None = None) -> pd.DataFrame:
        columns = list(self.meta.columns) if columns is None else list(columns)
        if not isinstance(part, RowSlice):
            return self.read_parts.project_columns(columns)(part)
        if not columns:  # dask counting rows
            return pd.DataFrame(index=pd.RangeIndex(part.start, part.stop))
        table = self._read_slice(part, columns)
        frame = table.to_pandas(ignore_metadata=True, use_threads=False)
        frame.index = pd.RangeIndex(part.start, part.stop)
        differ = {c: self.meta[c].dtype for c in columns if frame[c].dtype != self.meta[c].dtype}
        return frame.astype(differ) if differ else frame

    def _read_slice(self, part: RowSlice, columns: list[str]) -> pa.Table:
        """The slice's ``columns``, decoded :data:`COLUMNS_PER_READ` columns at a time (pyarrow
        holds a page or two per column being decoded: ~2 MiB each)."""
        with self.fs.open(part.path, "rb") as file:
            reader = pq.ParquetFile(file, buffer_size=_PAGE_BUFFER_BYTES, pre_buffer=False)
            schema = pa.schema([reader.schema_arrow.field(c) for c in columns])
            arrays: list[pa.ChunkedArray] = []
            for start in range(0, len(columns), COLUMNS_PER_READ):
                names = columns[start : start + COLUMNS_PER_READ]
                batches = _batches(reader, part, names)
                arrays += pa.Table.from_batches(batches, schema=pa.schema([schema.field(c) for c in names])).columns
        return pa.Table.from_arrays(arrays, schema=schema)


def _batches(reader: pq.ParquetFile, part: RowSlice, columns: list[str]) -> list[pa.RecordBatch]:
    """The batches of ``columns`` in rows ``part.start:part.stop`` of the row group, the ones
    before decoded and dropped (cut at the slice's bounds, whatever size pyarrow gives them)."""
    batches, first = [], 0
    for batch in reader.iter_batches(
        batch_size=part.batch_rows, row_groups=[part.row_group], columns=columns, use_threads=False
    ):
        start, stop = max(part.start - first, 0), min(part.stop - first, batch.num_rows)
        if start < stop:
            batches.append(batch.slice(start, stop - start))
        first += batch.num_rows
        if first >= part.stop:
            break
    return batches


def sliced_row_groups(frame: dd.DataFrame) -> dd.DataFrame:
    """``frame``, a Parquet read that dask planned row group by row group with a ``blocksize``
    (``split_row_groups="adaptive"`` or ``True``), with every row group larger than the
    blocksize read as slices of at most that many decoded bytes; ``frame`` itself when no row
    group is larger, or when dask plans it otherwise (a hive-partitioned folder, ``filters``,
    an index read from a column, pyarrow's filesystem: these keep dask's partitions)."""
    # dask-expr's internal class, imported here (not with the package): a dask release that moves
    # it breaks slicing only; tests/test_dask_conventions.py names what changed
    from dask.dataframe.dask_expr.io.parquet import ReadParquetFSSpec

    expr = frame.expr
    if not isinstance(expr, ReadParquetFSSpec):
        return frame
    info = expr._dataset_info
    plan = info["plan"]
    budget = parse_bytes(info["blocksize"]) if isinstance(info["blocksize"], str) else info["blocksize"]
    statistics = plan["statistics"]
    if (
        plan["empty"]
        or info["split_row_groups"] is not True
        or not budget
        or info["partition_names"]
        or info["filters"]
        or any(info["index_cols"] or ())
        or len(statistics) != len(plan["parts"])
    ):
        return frame
    if all(stats["total_byte_size"] <= budget for stats in statistics):
        return frame
    parts: list[RowSlice | list[Any]] = []
    rows: list[int] = []
    for part, stats in zip(plan["parts"], statistics, strict=True):
        pieces = part if isinstance(part, list) else [part]
        if stats["total_byte_size"] <= budget or len(pieces) != 1 or len(pieces[0]["piece"][1]) != 1:
            parts.append(part)
            rows.append(int(stats["num-rows"]))
            continue
        path, (row_group,), _ = pieces[0]["piece"]
        slices = _row_slices(path, row_group, int(stats["num-rows"]), int(stats["total_byte_size"]), budget)
        parts += slices
        rows += [s.rows for s in slices]
    reader = SlicedParquet(expr._io_func, info["fs"], frame._meta, tuple(rows))
    return dd.from_map(reader, parts, meta=frame._meta, label="read-parquet-slices", enforce_metadata=False)


def _row_slices(path: str, row_group: int, n_rows: int, n_bytes: int, budget: int) -> list[RowSlice]:
    """Slices of whole batches, of about equal size and at most ``budget`` decoded bytes."""
    row_bytes = n_bytes / max(n_rows, 1)
    batch_rows = 1 << max(10, int(np.log2(max(min(_BATCH_BYTES, budget) / row_bytes, 1))))
    batches_per_slice = max(1, int(budget // (row_bytes * batch_rows)))
    n_batches = -(-n_rows // batch_rows)
    n_slices = -(-n_batches // batches_per_slice)
    per_slice = -(-n_batches // n_slices) * batch_rows  # equal slices, whole batches
    return [
        RowSlice(path, row_group, start, min(start + per_slice, n_rows), batch_rows)
        for start in range(0, n_rows, per_slice)
    ]
