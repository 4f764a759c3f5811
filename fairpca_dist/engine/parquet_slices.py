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

A **wide** file (``sliced_row_groups(frame, wide_budget)``: dask planned it one partition per
row group, without their statistics) is read by the same reader, every row group as one slice (or
several, above the budget): dask's reader decodes all of a row group's columns at once, and
pyarrow keeps a reader with its buffers per column, ≈ 7 KB a column whatever the rows (148 MB
for a 16 MB row group of 20,000 columns); here they are decoded at most 2,048 at a time. Each
task also parses its file's footer, ≈ 6–9× its serialized size (290–430 MB for 20 row groups
of 20,000 columns): :attr:`SlicedParquet.footer_bytes` tells :mod:`fairpca_dist.engine.memory`.

The partitions of a sliced table, concatenated, are the rows of the file in order, with the
dtypes dask gives the same columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from dask.utils import parse_bytes

__all__ = [
    "COLUMNS_PER_READ",
    "RowSlice",
    "SlicedParquet",
    "columns_per_read",
    "footer_statistics",
    "sliced_row_groups",
]

# Rows are decoded in batches of about this many bytes (a power of two of rows, slices are whole
# batches), through page buffers of this size per column: pyarrow's default reads each column
# chunk of a row group whole (the whole row group in memory: 735 MiB for a 400 MiB group).
_BATCH_BYTES = 16 * 2**20
_PAGE_BUFFER_BYTES = 64 * 2**10
# Columns decoded together: pyarrow holds a page buffer and a decompressed page (~2 MiB) per
# column it decodes, 400 MiB for 200 columns at once; more at once when each column of the slice
# is small (a wide file's row group: hundreds of rows), up to MAX_COLUMNS_PER_READ, to decode
# about _COLUMNS_READ_BYTES at a time (~13 KB of buffers per column). pyarrow spends ≈ 0.1 ms per
# column chunk whatever its size: ≈ 2 s for a slice of 20,000 columns.
COLUMNS_PER_READ = 32
MAX_COLUMNS_PER_READ = 2048
_COLUMNS_READ_BYTES = 16 * 2**20


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

    def __init__(
        self,
        read_parts: Any,
        fs: Any,
        meta: pd.DataFrame,
        partition_rows: tuple[int, ...],
        footer_bytes: int = 0,
    ):
        self.read_parts, self.fs, self.meta, self.partition_rows = read_parts, fs, meta, partition_rows
        self.footer_bytes = footer_bytes  # the largest serialized footer a task parses (0: unknown)

    def __call__(self, part: RowSlice | list[Any], columns: list[str] | None = None) -> pd.DataFrame:
        columns = list(self.meta.columns) if columns is None else list(columns)
        if not isinstance(part, RowSlice):
            return self.read_parts.project_columns(columns)(part)
        if not columns:  # dask counting rows
            return pd.DataFrame(index=pd.RangeIndex(part.start, part.stop))
        frame = self._read_slice(part, columns).to_pandas(ignore_metadata=True, use_threads=False)
        # pyarrow's allocator (mimalloc) keeps the pages it freed: ~100 MB after a 64 MiB slice of
        # 20,000 columns, until a worker's unmanaged memory holds it above the pause threshold
        pa.default_memory_pool().release_unused()
        frame.index = pd.RangeIndex(part.start, part.stop)
        wanted = self.meta.dtypes[columns]
        for column, dtype in wanted[frame.dtypes != wanted].items():  # astype(dict) visits every column
            frame[column] = frame[column].astype(dtype)
        return frame

    def _read_slice(self, part: RowSlice, columns: list[str]) -> pa.Table:
        """The slice's ``columns``, decoded :func:`columns_per_read` columns at a time (pyarrow
        holds a page or two per column being decoded: ~2 MiB each for large pages)."""
        with self.fs.open(part.path, "rb") as file:
            reader = pq.ParquetFile(file, buffer_size=_PAGE_BUFFER_BYTES, pre_buffer=False)
            file_schema = reader.schema_arrow
            position = {name: i for i, name in enumerate(file_schema.names)}  # field(name) is O(columns)
            fields = [file_schema.field(position[c]) for c in columns]
            arrays: list[pa.ChunkedArray] = []
            step = columns_per_read(part.rows * 8)
            for start in range(0, len(columns), step):
                names, schema = columns[start : start + step], pa.schema(fields[start : start + step])
                arrays += pa.Table.from_batches(_batches(reader, part, names), schema=schema).columns
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def columns_per_read(column_bytes: int) -> int:
    """Columns decoded together when each holds about ``column_bytes`` bytes of the slice:
    :data:`COLUMNS_PER_READ`, more (up to :data:`MAX_COLUMNS_PER_READ`) for small columns."""
    return int(np.clip(_COLUMNS_READ_BYTES // max(column_bytes, 1), COLUMNS_PER_READ, MAX_COLUMNS_PER_READ))


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


def sliced_row_groups(frame: dd.DataFrame, wide_budget: int | None = None) -> dd.DataFrame:
    """``frame``, a Parquet read that dask planned row group by row group with a ``blocksize``
    (``split_row_groups="adaptive"`` or ``True``), with every row group larger than the
    blocksize read as slices of at most that many decoded bytes; ``frame`` itself when no row
    group is larger, or when dask plans it otherwise (a hive-partitioned folder, ``filters``,
    an index read from a column, pyarrow's filesystem: these keep dask's partitions).

    With ``wide_budget``, ``frame`` is the read of a wide file that dask planned one partition
    per row group without their statistics (``split_row_groups=True``, no ``blocksize``): every
    row group is read by :class:`SlicedParquet`, in slices of at most ``wide_budget`` decoded
    bytes, its rows and size taken from the files' footers (read here once each)."""
    # dask-expr's internal class, imported here (not with the package): a dask release that moves
    # it breaks slicing only; tests/test_dask_conventions.py names what changed
    from dask.dataframe.dask_expr.io.parquet import ReadParquetFSSpec

    expr = frame.expr
    if not isinstance(expr, ReadParquetFSSpec):
        return frame
    info = expr._dataset_info
    plan = info["plan"]
    budget = parse_bytes(info["blocksize"]) if isinstance(info["blocksize"], str) else info["blocksize"]
    statistics, footer_bytes = plan["statistics"], 0
    wide = bool(wide_budget) and not budget and not statistics
    if (
        plan["empty"]
        or info["split_row_groups"] is not True
        or not (budget or wide)
        or info["partition_names"]
        or info["filters"]
        or any(info["index_cols"] or ())
    ):
        return frame
    if wide:
        budget = wide_budget
        statistics, footer_bytes = footer_statistics(info["fs"], plan["parts"])
    if len(statistics) != len(plan["parts"]) or (
        not wide and all(stats["total_byte_size"] <= budget for stats in statistics)
    ):
        return frame
    parts: list[RowSlice | list[Any]] = []
    rows: list[int] = []
    for part, stats in zip(plan["parts"], statistics, strict=True):
        pieces = part if isinstance(part, list) else [part]
        whole = len(pieces) != 1 or len(pieces[0]["piece"][1]) != 1
        if whole or (stats["total_byte_size"] <= budget and not wide):
            parts.append(part)
            rows.append(int(stats["num-rows"]))
            continue
        path, (row_group,), _ = pieces[0]["piece"]
        slices = _row_slices(path, row_group, int(stats["num-rows"]), int(stats["total_byte_size"]), budget)
        parts += slices
        rows += [s.rows for s in slices]
    reader = SlicedParquet(expr._io_func, info["fs"], frame._meta, tuple(rows), footer_bytes)
    return dd.from_map(reader, parts, meta=frame._meta, label="read-parquet-slices", enforce_metadata=False)


def footer_statistics(fs: Any, parts: Sequence[Any]) -> tuple[list[dict[str, int]], int]:
    """The rows and decoded bytes of each part of a plan (``{"piece": (path, row groups,
    keys)}``, or a list of those) from its files' footers, and the largest footer's serialized
    size: a task reading a row group parses the whole footer of its file. One footer is held at
    a time (parsed, one can take hundreds of MB): a plan's parts follow its files in order."""
    statistics, largest = [], 0
    footer_path: str | None = None
    footer: Any = None
    for part in parts:
        n_rows = n_bytes = 0
        for piece in part if isinstance(part, list) else [part]:
            path, row_groups, _ = piece["piece"]
            if path != footer_path:
                footer = None  # freed before the next is parsed
                with fs.open(path, "rb") as file:
                    footer = pq.ParquetFile(file).metadata
                footer_path, largest = path, max(largest, footer.serialized_size)
            for i in range(footer.num_row_groups) if row_groups is None else row_groups:
                n_rows += footer.row_group(i).num_rows
                n_bytes += footer.row_group(i).total_byte_size
        statistics.append({"num-rows": n_rows, "total_byte_size": n_bytes})
    return statistics, largest


def _row_slices(path: str, row_group: int, n_rows: int, n_bytes: int, budget: int) -> list[RowSlice]:
    """Slices of whole batches, of about equal size and at most ``budget`` decoded bytes."""
    row_bytes = n_bytes / max(n_rows, 1)
    batch_rows = 1 << int(np.log2(max(min(_BATCH_BYTES, budget) / row_bytes, 1)))
    batches_per_slice = max(1, int(budget // (row_bytes * batch_rows)))
    n_batches = -(-n_rows // batch_rows)
    n_slices = -(-n_batches // batches_per_slice)
    per_slice = -(-n_batches // n_slices) * batch_rows  # equal slices, whole batches
    return [
        RowSlice(path, row_group, start, min(start + per_slice, n_rows), batch_rows)
        for start in range(0, n_rows, per_slice)
    ]
