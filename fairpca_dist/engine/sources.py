"""Open a table (pandas, numpy, dask, Parquet, CSV) as row chunks with a validated schema.

Every input becomes a :class:`Table`: the features, the sensitive column(s) (or one label
per row), an optional sample weight and optional key columns, held as a dask DataFrame (files,
DataFrames) or as row-aligned dask arrays (numpy and dask arrays). Schema problems (missing or
misspelt columns, non-numeric features, one column used twice) raise
:class:`~fairpca_dist.exceptions.SchemaError` here, before any row is read (but the first
partition of a listed feature read as text, to say what it holds: numbers with a missing-value
marker such as ``?`` get the reader option that reads them, :mod:`fairpca_dist.io.markers`). Value problems
(NaN, inf, negative weights, missing group labels) can only be seen in the rows and are
raised while a partition is turned into the arrays the moments kernel needs (:class:`Chunk`),
naming the column, the partition (and its file) and the count of bad values.

Every pass over the partitions of a DataFrame table goes through :func:`map_partitions`, which
reads each partition inside the task that consumes it; an error raised by the reader itself
(a corrupt page, a CSV value dask cannot parse as the column's type, a column missing from one
file) is re-raised naming the partition and its file.
"""

from __future__ import annotations

import csv
import difflib
import errno
import functools
import inspect
import json
import os
import posixpath
import re
import shlex
import uuid
import warnings
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from dask.array.core import normalize_chunks
from dask.base import tokenize
from dask.core import get, get_dependencies
from dask.delayed import Delayed
from dask.utils import funcname, parse_bytes
from fsspec.core import OpenFile
from fsspec.utils import infer_compression

from fairpca_dist.engine import memory
from fairpca_dist.engine.allocator import reusing_freed_memory
from fairpca_dist.engine.cells import HashCells
from fairpca_dist.engine.parquet_slices import sliced_row_groups
from fairpca_dist.exceptions import (
    READ_ERRORS,
    AccessError,
    FairPCAError,
    GroupError,
    InputError,
    ReadError,
    SchemaError,
    error_line,
    read_error,
    reading,
)
from fairpca_dist.io.markers import looks_like_a_marker, na_values_hint, profile_text, with_markers
from fairpca_dist.io.storage import Location, StorageOptions, locate, missing_bucket, service_errors_named
from fairpca_dist.io.versions import committed
from fairpca_dist.wording import listed

__all__ = [
    "Table",
    "Chunk",
    "Partition",
    "open_table",
    "map_partitions",
    "read_chunk",
    "feature_values",
    "check_finite",
    "DEFAULT_CHUNK_ROWS",
    "in_memory_chunk_rows",
]

DEFAULT_CHUNK_ROWS = 100_000
# Partitions of an in-memory numpy array (views, no copy): about this many bytes of features, and
# at least DEFAULT_CHUNK_ROWS rows. A partition's fixed costs (its task, the labels' coding, the
# kernel's per-group steps, a merge: ~1.5 ms) are ~30 % of the moments kernel on 100k rows at
# p = 10 and ~10 % at p = 50 (benchmarks/results/bench_moments_kernel.md).
IN_MEMORY_CHUNK_BYTES = 64 * 2**20
# Parquet partitions: row groups are packed into partitions of at most this much decoded data,
# and a larger row group is read in row slices of at most this much (fairpca_dist.engine.parquet_slices).
# A task needs ~5.5x its partition while it decodes, converts and accumulates (fairpca_dist.engine.memory);
# dask's own default (one file per partition up to 512 MiB) paused and restarted 1 GB workers on
# 125 MB files, while this default ran them at a 0.6 GB peak (benchmarks/results/bench_out_of_core.md,
# bench_memory.md, deploy/README.md "Sizing").
PARQUET_PARTITION_BYTES = "64 MiB"
# Above this many columns a Parquet read is planned one partition per row group (slices of at
# most PARQUET_PARTITION_BYTES, or the blocksize given), read by parquet_slices at most 2,048
# columns at a time: dask's adaptive plan gathers each row group's statistics by a loop that is
# quadratic in the columns (7 s a row group at 3,000 columns, minutes at 20,000), and its reader
# decodes every column at once (~7 KB of pyarrow buffers per column, 148 MB at 20,000).
PARQUET_STATISTICS_COLUMNS = 1000
# A CSV's columns are typed from (at most) this many first rows of dask's sample (its first 256 kB):
# dask's default, 10 rows, types a column of numbers with a '?' in row 11 as numbers, and its read
# then fails on the '?'; seen among more rows, the column is read as text and its values say why.
CSV_SAMPLE_ROWS = 1000
SENSITIVE_COLUMN = "__sensitive__"
WEIGHT_COLUMN = "__sample_weight__"
CELL_COLUMN = "__cell__"


_PATHS = (str, os.PathLike, Location)  # what open_table reads as a path or URL
TABLE_SUFFIXES = (".parquet", ".parq", ".pq", ".csv", ".tsv", ".txt", ".gz", ".bz2", ".zst", ".json")


@dataclass(frozen=True)
class Partition:
    """Where rows came from, for error messages: the partition's number and, when the table
    was read from files, the file it was read from."""

    index: int
    file: str | None = None

    def __str__(self) -> str:
        return f"partition {self.index}" + (f" (file {self.file})" if self.file else "")


@dataclass(frozen=True)
class Chunk:
    """One partition: its feature rows, group ``codes`` into ``groups``, and weights; for a
    table opened with ``cells``, also ``cell_codes`` into ``cells`` (labels of this partition).

    ``features`` stays as it came (a numpy block or the partition's feature columns);
    :meth:`rows` converts any row range to a C-ordered float64 array, so a consumer can
    walk a large partition in slabs and never hold a second full copy of it.
    """

    features: np.ndarray | pd.DataFrame
    codes: np.ndarray
    groups: tuple[Hashable, ...]
    weights: np.ndarray | None
    partition: Partition
    cell_codes: np.ndarray | None = None
    cells: tuple[Hashable, ...] = ()

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def slabs(self, max_bytes: int) -> list[tuple[int, int]]:
        """Row ranges of about equal size whose float64 conversion needs at most ``max_bytes``
        each; one range when the features already are C-ordered float64 (no conversion)."""
        n_rows, n_features = len(self), max(self.features.shape[1], 1)
        if (
            isinstance(self.features, np.ndarray)
            and self.features.dtype == np.float64
            and self.features.flags.c_contiguous
        ):
            n_slabs = 1
        else:
            n_slabs = min(max(1, -(-n_rows * 8 * n_features // max_bytes)), max(n_rows, 1))  # no empty slab
        bounds = np.linspace(0, n_rows, n_slabs + 1).astype(int)
        return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a C-ordered float64 array (missing values become NaN)."""
        if isinstance(self.features, pd.DataFrame):
            block = feature_values(self.features.iloc[start:stop], list(self.features.columns), self.partition)
        else:
            block = self.features[start:stop]
        return np.ascontiguousarray(block, dtype=np.float64)

    def subset(self, mask: np.ndarray) -> Chunk:
        """The rows where the boolean ``mask`` (one entry per row) is true, in their order,
        with the same label tuples (``groups``, ``cells``) and partition; ``self`` when every
        row is kept (no copy)."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(self),):
            raise InputError(f"a mask of shape {mask.shape} for the {len(self)} rows of {self.partition}")
        if mask.all():
            return self
        keep = np.flatnonzero(mask)
        features = self.features.iloc[keep] if isinstance(self.features, pd.DataFrame) else self.features[keep]
        return replace(
            self,
            features=features,
            codes=self.codes[keep],
            weights=None if self.weights is None else self.weights[keep],
            cell_codes=None if self.cell_codes is None else self.cell_codes[keep],
        )

    def where_cells(self, labels: frozenset[Hashable]) -> Chunk:
        """The rows whose cell label is one of ``labels`` (:meth:`subset`); a label no row of
        this partition carries simply selects nothing. :class:`InputError` if the table was
        opened without cells."""
        if self.cell_codes is None:
            raise InputError(f"rows of {self.partition} have no cells: open the table with cells= to select cells")
        kept = np.array([label in labels for label in self.cells], dtype=bool)
        return self.subset(kept[self.cell_codes] if kept.size else np.zeros(len(self), dtype=bool))


@dataclass(frozen=True)
class Table:
    """A validated table and the roles of its columns.

    Tables from files and DataFrames keep a dask DataFrame (``frame``); tables from numpy or
    dask arrays keep the arrays themselves (``rows``: features with one column chunk, then
    labels and optional weights with the same row chunks), so no DataFrame round trip is paid.

    ``cells`` says how rows are assigned to cells (``None``: no cells): the column holding
    the cell labels (:data:`CELL_COLUMN` for labels given per row; for arrays they are
    ``cell_rows``, with the row chunks of ``rows``), or a :class:`~fairpca_dist.engine.cells.HashCells`
    whose key columns are resolved (feature names or :data:`SENSITIVE_COLUMN` for arrays).
    """

    features: tuple[str, ...]
    sensitive: tuple[str, ...]
    sample_weight: str | None
    keys: tuple[str, ...]
    frame: dd.DataFrame | None = None
    rows: tuple[da.Array, da.Array, da.Array | None] | None = None
    cells: str | HashCells | None = None
    cell_rows: da.Array | None = None

    @property
    def n_partitions(self) -> int:
        if self.frame is not None:
            return int(self.frame.npartitions)
        assert self.rows is not None  # a Table holds a frame or rows
        return int(self.rows[0].numblocks[0])

    @property
    def columns(self) -> list[str]:
        """Every column the table uses: features, sensitive, key, weight and cell columns."""
        return list(
            dict.fromkeys(
                [
                    *self.features,
                    *self.sensitive,
                    *self.keys,
                    *filter(None, [self.sample_weight]),
                    *self.cell_columns,
                ]
            )
        )

    @property
    def cell_columns(self) -> tuple[str, ...]:
        """The columns the cell of a row is read from (none without cells)."""
        if isinstance(self.cells, HashCells):
            return self.cells.key_columns
        return () if self.cells is None else (self.cells,)

    def map_partitions(self, func: Callable[..., Any], *args: Any) -> list[Delayed]:
        """``func(part, partition, *args)`` on every partition of a DataFrame table (its
        :attr:`columns` only), read inside the task; see :func:`map_partitions`."""
        if self.frame is None:
            raise SchemaError("this step needs named columns: pass a DataFrame or a path, not an array")
        return map_partitions(self.frame[self.columns], func, *args)

    def map_chunks(self, func: Callable[..., Any], *args: Any) -> list[Delayed]:
        """``func(chunk, *args)`` on every partition's :class:`Chunk`, one task each.

        Reading a partition and applying ``func`` happen in one task, so no partition waits in
        worker memory between a read task and its consumer: a worker holds the partitions it
        is processing, nothing more.
        """
        if self.frame is not None:
            return self.map_partitions(
                _apply_to_frame_chunk, func, self.features, self.sensitive, self.sample_weight, args, self.cells
            )
        assert self.rows is not None  # a Table holds a frame or rows
        x, labels, weights = self.rows
        weight_blocks = weights.to_delayed().ravel() if weights is not None else [None] * x.numblocks[0]
        cell_blocks = self.cell_rows.to_delayed().ravel() if self.cell_rows is not None else [None] * x.numblocks[0]
        # One token for the whole map and the arguments as one graph literal: tokenizing and
        # unpacking them per partition (50 feature names each) cost ~10 ms per 20 partitions.
        names = [block.name if block is not None else None for block in (x, labels, weights, self.cell_rows)]
        prefix = f"{funcname(func)}-{tokenize(*names, func, args, self.cells)}"
        blocks = [x, labels, weights, self.cell_rows]
        shared = _graph_literal(
            f"{prefix}-args",
            (args, self.features, self.cells),
            functools.partial(memory.array_partition_size, blocks),
        )
        apply = dask.delayed(_apply_to_array_chunk)
        return [
            apply(func, xb, lb, wb, cb, i, shared, dask_key_name=f"{prefix}-{i}")
            for i, (xb, lb, wb, cb) in enumerate(
                zip(x.to_delayed().ravel(), labels.to_delayed().ravel(), weight_blocks, cell_blocks, strict=True)
            )
        ]


def map_partitions(frame: dd.DataFrame, func: Callable[..., Any], *args: Any) -> list[Delayed]:
    """``func(part, partition, *args)`` on every partition of ``frame``, one task each.

    ``part`` is the partition as a pandas DataFrame and ``partition`` its :class:`Partition`.
    Each task runs the partition's own read task (dask's fused reader task: Parquet row groups,
    a CSV block, a DataFrame slice) itself, then ``func``: the read and its consumer share one
    task, and an error raised by the reader is re-raised naming the partition and its file —
    as a :class:`ReadError` when it is about the data (a value dask cannot parse, a corrupt
    page, a missing column), otherwise unchanged with that note added (I/O errors stay
    retryable). Dependencies of the read task (other partitions' inputs of a user's graph)
    stay ordinary graph dependencies, computed once.

    Only public dask interfaces are used: ``DataFrame.to_delayed`` (one optimized read task per
    partition), the graph of each ``Delayed`` as dask's graph specification defines it,
    :func:`dask.core.get_dependencies`, :func:`dask.core.get` (which runs the read task inside
    the consumer, with its dependencies' values) and :func:`dask.delayed`
    (``tests/test_dask_conventions.py`` fails loudly if one of them changes).
    """
    parts = frame.to_delayed()  # optimized: column selection pushed into the reader, one task per partition
    graph: dict[Any, Any] = dict(parts[0].__dask_graph__()) if parts else {}
    name = f"{funcname(func)}-{tokenize(frame, func, args)}"
    shared = _graph_literal(f"{name}-args", args, functools.partial(memory.frame_partition_size, frame))
    reads = {part.key for part in parts}
    upstream = {key: node for key, node in graph.items() if key not in reads}  # what read tasks depend on
    inputs = {key: Delayed(key, upstream) for key in upstream}
    apply = dask.delayed(_run_partition, pure=True)
    tasks = []
    for index, part in enumerate(parts):
        depends = sorted(get_dependencies(graph, part.key), key=str)
        read = _ReadTask(part.key, graph[part.key], tuple(depends))
        tasks.append(apply(func, read, [inputs[key] for key in depends], index, shared, dask_key_name=(name, index)))
    return tasks


@dataclass(frozen=True)
class _ReadTask:
    """A partition's read task, carried into the task that consumes it as an opaque value
    (dask runs it there, not as a task of its own): its key, its graph node and the keys of
    the tasks it depends on (whose values the consumer receives)."""

    key: Any
    node: Any
    dependencies: tuple[Any, ...]

    def __call__(self, inputs: Sequence[Any]) -> Any:
        return get({self.key: self.node}, [self.key], cache=dict(zip(self.dependencies, inputs, strict=True)))[0]


def _graph_literal(key: str, value: Any, size: Callable[[], Any]) -> Delayed:
    """``value`` as a one-task graph whose every consumer receives it as is (one copy per
    pass, not one per task), marked with the pass's partition ``size`` (:func:`memory.mark`)."""
    literal = dask.delayed(value, name=key, traverse=False)
    graph = dict(literal.__dask_graph__())
    memory.mark(graph, size)
    return Delayed(key, graph)


def _run_partition(
    func: Callable[..., Any], read: _ReadTask, inputs: Sequence[Any], index: int, args: tuple[Any, ...]
) -> Any:
    with reusing_freed_memory():
        return _read_and_run(func, read, inputs, index, args)


def _read_and_run(
    func: Callable[..., Any], read: _ReadTask, inputs: Sequence[Any], index: int, args: tuple[Any, ...]
) -> Any:
    partition = Partition(index, _source_file(read.node))
    try:
        with warnings.catch_warnings():  # a column typed apart in pandas' chunks: said below, or profiled
            warnings.simplefilter("ignore", pd.errors.DtypeWarning)
            part = read(inputs)
    except FairPCAError:
        raise
    except (ValueError, TypeError, KeyError) as error:  # ArrowInvalid, ParserError, dtype mismatches
        mismatch = _mismatched_dtypes(error, _csv_reader_options(read.node))
        if mismatch:
            raise ReadError(f"cannot read {partition}: {mismatch}") from error
        raise ReadError(f"cannot read {partition}: {type(error).__name__}: {error}{_reader_hint(error)}") from error
    except READ_ERRORS as error:  # damaged, forbidden, missing: named; others may be transient
        named = read_error(error, partition.file or str(partition))
        if named is None:
            error.add_note(f"while reading {partition}")
            raise
        raise named from error
    except Exception as error:  # may be transient (a lost connection): keep the type, add where
        error.add_note(f"while reading {partition}")
        raise
    # Arrow keeps freed decode buffers for reuse; hand them back before ``func`` runs (the
    # partition is in pandas now: a worker's peak is its read or its processing, not both) and
    # after, so a long-running worker's memory reflects the partitions in flight, not the
    # largest one it ever read.
    pool = pa.default_memory_pool()
    pool.release_unused()
    try:
        return func(part, partition, *args)
    finally:
        pool.release_unused()


def _reader_hint(error: BaseException) -> str:
    """A hint for a reader's error: the encoding option for text that is not UTF-8, the
    missing-value option when text in a numeric CSV column may mark missing values ('?', 'NA ',
    '-')."""
    if isinstance(error, UnicodeDecodeError):
        return (
            "\nThe file is not UTF-8 text: give its encoding, e.g. read_options={'encoding': 'latin-1'} "
            "(command line: --read-option encoding=latin-1)"
        )
    found = re.search(r"could not convert string to float: '([^']{0,8})'", str(error))
    return f"\n{na_values_hint([found.group(1)])}" if found else ""


# dask's "Mismatched dtypes" error: an ASCII table of column, dtype found and dtype expected,
# then, per column, the exception its conversion raised.
_MISMATCH_ROW = re.compile(r"^\| (.+?) +\| (\S+) +\| (\S+) +\|$", re.M)
_CONVERSION = re.compile(r"^- (.+)\n  \w+\(.*could not convert string to \w+: '(.*)'", re.M)


def _mismatched_dtypes(error: BaseException, reader_options: dict[str, Any]) -> str | None:
    """dask's "Mismatched dtypes" error in one line naming the columns typed from the file's
    first rows that hold other values further down (``'b' (read as float64) holds '?'``),
    then the remedy: ``na_values`` (with the one given, ``reader_options``) for a
    missing-value marker, ``dtype`` for the other columns (text: ``object``; other numbers:
    the dtype found); None for another error."""
    text = str(error)
    if not text.startswith("Mismatched dtypes found"):
        return None
    rows = [m.groups() for m in _MISMATCH_ROW.finditer(text) if m.groups() != ("Column", "Found", "Expected")]
    values = dict(_CONVERSION.findall(text))
    if not rows:
        return None
    held = [
        f"{c!r} (read as {expected}) holds {values[c]!r}"
        if c in values
        else f"{c!r} (read as {expected}) holds {found} values"
        for c, found, expected in rows
    ]
    markers = {c: [values[c]] for c, _, _ in rows if c in values and looks_like_a_marker(values[c])}
    others = {c: "object" if c in values else found for c, found, _ in rows if c not in markers}
    hints = [na_values_hint(with_markers(reader_options.get("na_values"), markers))] if markers else []
    if others:
        option = shlex.quote(f"dtype={json.dumps(others)}")
        hints.append(
            f"To read {listed(others, len(others))} as found there: read_options={{'dtype': {others!r}}} "
            f"(command line: --read-option {option})"
        )
    typed = (
        "column typed from the file's first rows holds"
        if len(rows) == 1
        else "columns typed from the file's first rows hold"
    )
    return f"{typed} other values further down: {listed(held, show=str)}" + "".join(f"\n{hint}" for hint in hints)


def _graph_children(node: Any) -> list[Any] | None:
    """What a read task's ``node`` holds, for :func:`_csv_reader_options` and :func:`_source_file`
    to search: the values of a dict (a fused task's subgraph), the items of a list or tuple (a
    task in dask's tuple form), the arguments of a ``functools.partial``, the arguments (or the
    value) of a task object of dask's task specification (found by its attributes, not its
    class); None for anything else."""
    if isinstance(node, (pd.DataFrame, pd.Series, np.ndarray, str, bytes)):
        return None
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, (list, tuple)):
        return list(node)
    if isinstance(node, functools.partial):
        return [*node.args, *node.keywords.values()]
    if hasattr(node, "key") and (hasattr(node, "args") or hasattr(node, "value")):
        kwargs = getattr(node, "kwargs", None)
        return [
            *getattr(node, "args", ()),
            *(kwargs.values() if isinstance(kwargs, dict) else ()),
            *([node.value] if hasattr(node, "value") else []),
        ]
    return None


def _csv_reader_options(node: Any, depth: int = 0) -> dict[str, Any]:
    """The pandas options of the CSV read that the task ``node`` runs (dask's reader keeps them
    as its ``kwargs``), ``{}`` when none is found: for hints only."""
    if depth > 12:
        return {}
    for function in (node, getattr(node, "func", None)):
        options = getattr(function, "keywords", None)
        if isinstance(options, dict) and isinstance(options.get("kwargs"), dict):
            return options["kwargs"]
    for child in _graph_children(node) or []:
        found = _csv_reader_options(child, depth + 1)
        if found:
            return found
    return {}


def _source_file(node: Any, depth: int = 0) -> str | None:
    """The file a reader task reads, found among its arguments (dask's Parquet pieces and
    pyarrow fragments, CSV block paths), or None for in-memory partitions."""
    if depth > 12:
        return None
    if isinstance(node, str):
        return node if node.lower().endswith(TABLE_SUFFIXES) else None
    children = _graph_children(node)
    if children is None:  # fsspec OpenFile, pyarrow fragments and dask's wrapper of them
        path = getattr(node, "path", None) or getattr(getattr(node, "fragment", None), "path", None)
        return path if isinstance(path, str) else None
    for child in children:
        found = _source_file(child, depth + 1)
        if found:
            return found
    return None


def _apply_to_array_chunk(
    func: Callable[..., Any],
    x: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray | None,
    cell_labels: np.ndarray | None,
    index: int,
    shared: tuple[tuple[Any, ...], tuple[str, ...], str | HashCells | None],
) -> Any:
    args, features, cells = shared
    chunk = _array_chunk(x, labels, weights, Partition(index))
    if cells is not None:
        chunk = _with_cells(chunk, _array_cell_columns(x, labels, cell_labels, features, cells), cells)
    return func(chunk, *args)


def _apply_to_frame_chunk(
    part: pd.DataFrame,
    partition: Partition,
    func: Callable[..., Any],
    features: Sequence[str],
    sensitive: Sequence[str],
    sample_weight: str | None,
    args: tuple[Any, ...],
    cells: str | HashCells | None = None,
) -> Any:
    return func(read_chunk(part, features, sensitive, sample_weight, partition, cells=cells), *args)


def _closest(name: object, candidates: Sequence[str]) -> str:
    match = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1)
    return f"; did you mean {match[0]!r}?" if match else ""


def _require_columns(frame: dd.DataFrame, names: Sequence[str], role: str, origin: str) -> None:
    columns = list(frame.columns)
    present = set(columns)
    for name in names:
        if name not in present:
            raise SchemaError(
                f"{role} column {name!r} not found{origin}{_closest(name, columns)} "
                f"(available columns: {columns}){_delimiter_hint(columns)}"
            )


def _delimiter_hint(columns: Sequence[Any]) -> str:
    """A hint when a CSV was split on the wrong delimiter (one column named like 'a;b;c')."""
    if len(columns) == 1:
        for sep in (";", "\t", "|"):
            if sep in str(columns[0]):
                return (
                    f"; the file seems to use {sep!r} as delimiter: pass read_options={{'sep': {sep!r}}} "
                    f"(command line: --read-option 'sep={json.dumps(sep)}')"
                )
    return ""


def _check_unique_columns(columns: Sequence[Any], origin: str) -> None:
    index = pd.Index(columns)
    duplicated = list(dict.fromkeys(index[index.duplicated()].tolist()))
    if duplicated:
        raise SchemaError(f"column name(s) {duplicated} appear more than once{origin}; every column needs its own name")


def _has_wildcards(source: Location) -> bool:
    """Whether ``source`` is a pattern: ``*``, ``?`` and ``[…]`` are wildcards."""
    return any(ch in source.path for ch in "*?[")


def _first_file(source: Location) -> tuple[Location, bool]:
    """The path itself, or the first file its glob matches, checked to be readable, and
    whether it is a folder. A folder on an object store is read at its committed version when
    it is an output of this library (:func:`fairpca_dist.io.versions.committed`)."""
    if not _has_wildcards(source):
        folder = _check_readable(source)
        return (committed(source) if folder and not source.local else source), folder
    matches = _glob(source)
    if not matches and source.fs.lexists(source.path):
        raise InputError(
            f"{source.url!r} is read as a pattern ('*', '?' and '[...]' are wildcards), which matches no "
            "file, though a file of that name exists: rename it without those characters"
        )
    if not matches:
        raise InputError(f"no files match {source.url!r}")
    return matches[0], _check_readable(matches[0])


def _glob(pattern: Location) -> list[Location]:
    """The files ``pattern`` matches. Denied access, and on an object store a missing bucket
    (where a listing just finds nothing), raise naming the pattern."""
    with service_errors_named(pattern), reading(pattern.url):
        matches = pattern.glob()
        if not matches and not pattern.local:
            try:
                pattern.fs.info(pattern.path)  # the store says whether the bucket exists
            except FileNotFoundError as error:
                if missing_bucket(error):
                    raise
    return matches


def _check_readable(location: Location) -> bool:
    """Open ``location`` (list it, for a folder) as the reader will, so that a missing path or
    bucket, a permission or denied credentials, a looping link, a parent that is a file, a path
    that is neither a file nor a folder (a FIFO, which would block, a socket, a device), or a
    storage service that cannot be reached is reported naming it. Whether it is a folder."""
    location.forget_listings()
    with service_errors_named(location), reading(location.url):
        kind = location.fs.info(location.path)["type"]
        if kind == "directory":
            location.fs.ls(location.path)
            return True
        if kind == "file":
            with location.fs.open(location.path, "rb"):
                return False
    raise AccessError(
        errno.ENXIO,
        f"cannot read {location.url!r}: it is not a regular file or a folder (a pipe, "
        "a socket or a device): copy the data into a file",
        location.url,
    )


_COMPRESSED = (".gz", ".bz2", ".xz", ".zip", ".zst")  # what pandas infers from a CSV file's name


def _suffix(location: Location) -> str:
    return posixpath.splitext(location.name)[1]


def _source_format(source: Location, read_options: dict[str, Any]) -> tuple[str, Location]:
    """("Parquet" or "CSV", the path (a folder on an object store: its committed version) or
    its glob's first file): ``read_options["format"]`` if given, else from that file's name."""
    first, folder = _first_file(source)
    given = read_options.get("format")
    if given is not None:
        if str(given).lower() not in {"csv", "parquet"}:
            raise InputError(f"read option format={given!r} must be 'csv' or 'parquet'")
        return ("CSV" if str(given).lower() == "csv" else "Parquet"), first
    if folder or _suffix(first) in {".parquet", ".pq", ".parq"}:
        return "Parquet", first
    uncompressed = first.name.removesuffix(_suffix(first)) if _suffix(first) in _COMPRESSED else first.name
    if uncompressed.endswith((".csv", ".txt", ".tsv")):
        return "CSV", first
    raise InputError(
        f"cannot tell the format of {source.url!r}: expected a Parquet file or folder (.parquet, .pq) or a CSV "
        "file (.csv, .txt, .tsv, compressed or not: .gz, .bz2, .xz, .zip, .zst); for another name say which: "
        "read_options={'format': 'csv'} (command line: --read-option format=csv)"
    )


def _parquet_columns(first: Location) -> int:
    """The columns of a Parquet file, or of a folder's first file, from its footer (0 if it
    cannot be read here: the reader then says why)."""
    try:
        with reading(first):
            files = _parquet_files(first)
            if not files:
                return 0
            with files[0].open("rb") as file:
                return len(pq.read_schema(file).names)
    except (FairPCAError, OSError, pa.ArrowException):
        return 0


def _read_path(source: Location, read_options: dict[str, Any]) -> dd.DataFrame:
    """The planned read of a path or URL (a file, a folder: on an object store its committed
    version, or a glob); ``read_options`` go to dask's reader, but ``format``."""
    kind, first = _source_format(source, read_options)
    target = source if _has_wildcards(source) else first
    read_options = {key: value for key, value in read_options.items() if key != "format"}
    if kind == "Parquet":
        wide_budget = None
        if "split_row_groups" not in read_options and not _arrow_filesystem(read_options):
            if _parquet_columns(first) > PARQUET_STATISTICS_COLUMNS:
                wide_budget = parse_bytes(read_options.get("blocksize", PARQUET_PARTITION_BYTES))
                # any blocksize (dask's default included) has dask gather the row groups' statistics
                read_options = {**read_options, "split_row_groups": True, "blocksize": None}
            else:
                read_options = {"split_row_groups": "adaptive", "blocksize": PARQUET_PARTITION_BYTES, **read_options}
        frame = _open_reader(dd.read_parquet, target, "Parquet", read_options)
        return sliced_row_groups(frame, wide_budget)
    if _suffix(first) in _COMPRESSED or read_options.get("compression", "infer") not in ("infer", None):
        # a compressed file cannot be split into blocks: one partition per file
        read_options = {"blocksize": None, **read_options}
    separator = str(read_options.get("sep", ","))
    if len(separator) > 1 and separator != r"\s+" and "engine" not in read_options:
        read_options = {**read_options, "engine": "python"}  # pandas' C parser: one character (or \s+) only
    if _ends_rows_with_a_delimiter(first, separator, read_options):
        return _without_trailing_field(target, read_options)
    frame = _open_reader(dd.read_csv, target, "CSV", read_options)
    if "names" not in read_options and not all(isinstance(c, str) for c in frame.columns):
        # header=None numbers the columns; names are strings everywhere else (Parquet, the CLI)
        frame = _open_reader(dd.read_csv, target, "CSV", {**read_options, "names": list(map(str, frame.columns))})
    return frame


# Options by which the user says how a CSV's lines map to columns: then they are read as told.
_CSV_LAYOUT_OPTIONS = frozenset({"names", "header", "index_col", "usecols", "skiprows", "comment", "delimiter"})
_TRAILING_FIELD = "__trailing_field__"


def _ends_rows_with_a_delimiter(first: Location, separator: str, read_options: dict[str, Any]) -> bool:
    """Whether the CSV ``first``'s first data row has one field more than its header, and that
    field is empty: its rows end with the delimiter (``a,b,sex`` then ``1,2,f,``).

    pandas reads such a file with the first column as the index, every column shifted onto its
    neighbour's name. Files whose layout the user gave (:data:`_CSV_LAYOUT_OPTIONS`) or whose
    separator is not one character are not looked at, nor files this cannot read: dask's
    reader, which opens them next, says why.
    """
    if _CSV_LAYOUT_OPTIONS & set(read_options) or len(separator) != 1:
        return False
    encoding = read_options.get("encoding") or "utf-8"
    quotechar = read_options.get("quotechar") or '"'
    try:
        with OpenFile(
            first.fs,
            first.path,
            "rt",
            compression=infer_compression(first.path),
            encoding=encoding,
            errors="replace",
            newline="",
        ) as file:
            lines = (row for row in csv.reader(file, delimiter=separator, quotechar=quotechar) if row)
            header, row = next(lines, []), next(lines, [])
    except (OSError, EOFError, ValueError, LookupError, csv.Error):
        return False
    return len(row) == len(header) + 1 and not row[-1].strip()


def _without_trailing_field(source: Location, read_options: dict[str, Any]) -> dd.DataFrame:
    """The planned read of a CSV whose rows end with a delimiter: the header's columns, each
    under its own name (as pandas reads the header). The empty last field is read as a column
    of its own (text) and dropped by :func:`_drop_trailing_field` once checked empty in every
    row of every partition."""
    dtype = read_options.get("dtype", {})
    shifted = _open_reader(dd.read_csv, source, "CSV", {k: v for k, v in read_options.items() if k != "dtype"})
    header = list(map(str, shifted.columns))
    options = {**read_options, "names": [*header, _TRAILING_FIELD], "header": 0}
    if isinstance(dtype, dict):
        options["dtype"] = {**dtype, _TRAILING_FIELD: "object"}
    frame = _open_reader(dd.read_csv, source, "CSV", options)
    meta = [(column, dtype) for column, dtype in frame.dtypes.items() if column != _TRAILING_FIELD]
    return frame.map_partitions(_drop_trailing_field, header[-1], meta=meta, enforce_metadata=False)


def _drop_trailing_field(part: pd.DataFrame, last_column: str) -> pd.DataFrame:
    """``part`` without :data:`_TRAILING_FIELD`; ValueError if a row holds a value there (its
    rows cannot be told apart from rows with a value too many)."""
    extra = part[_TRAILING_FIELD]
    filled = extra.notna().to_numpy()
    if filled.any():
        raise ValueError(
            f"the rows end with a delimiter (an empty field after {last_column!r}, the header's last column), "
            f"but {int(filled.sum())} row(s) hold a value there (first: {extra[filled].iloc[0]!r}); "
            "fix those rows, or give the columns' names: read_options={'names': [...], 'header': 0}"
        )
    return part.drop(columns=_TRAILING_FIELD)


def _open_reader(
    reader: Callable[..., dd.DataFrame], source: Location, kind: str, read_options: dict[str, Any]
) -> dd.DataFrame:
    """Plan the read (dask reads footers or a sample here) of ``source``'s URL, on its
    filesystem with its storage options; a file that cannot be read as ``kind`` raises
    :class:`ReadError` naming ``source`` (pyarrow's message names the file)."""
    storage = {"storage_options": source.storage_options} if source.storage_options else {}
    typed_from = {"sample_rows": CSV_SAMPLE_ROWS} if kind == "CSV" and "sample_rows" not in read_options else {}
    text = source.url
    try:
        with service_errors_named(source):
            return reader(source.dask_url, **storage, **typed_from, **read_options)
    except FairPCAError:
        raise
    except (ValueError, KeyError) as error:  # ArrowInvalid, ParserError, UnicodeDecodeError, ...
        culprit = _unreadable_parquet_file(source) if kind == "Parquet" else None
        where = f" (file {culprit[0]}: {culprit[1]})" if culprit else ""
        raise ReadError(f"cannot read {text!r} as {kind}{where}: {error_line(error)}{_reader_hint(error)}") from error
    except (TypeError, LookupError) as error:  # a misspelt option, a value of the wrong type, an unknown encoding
        raise InputError(
            f"read options {read_options} are not accepted by the {kind} reader: "
            f"{error_line(error)}{_option_hint(error, reader, kind)}"
        ) from error
    except READ_ERRORS as error:  # damaged, forbidden, missing: named; others may pass on retry (remote storage)
        named = read_error(error, getattr(error, "filename", None) or text)
        if named is None:
            error.add_note(f"while opening {text!r} as {kind}")
            raise
        raise named from error


def _option_hint(error: Exception, reader: Callable[..., Any], kind: str) -> str:
    """'did you mean' for an option the reader does not know (its keyword arguments, and for
    CSV those of pandas.read_csv, which dask passes on)."""
    unknown = re.search(r"unexpected keyword argument '([^']+)'", str(error))
    if not unknown:
        return ""
    pandas_reader = inspect.signature(pd.read_csv).parameters if kind == "CSV" else {}
    known = [*inspect.signature(reader).parameters, *pandas_reader]
    close = difflib.get_close_matches(unknown.group(1), known, n=1)
    spelled = f"; did you mean {close[0]!r}?" if close else ""
    options = "pandas.read_csv" if kind == "CSV" else "dask.dataframe.read_parquet"
    return f"{spelled} (the options are those of {options})"


def _parquet_files(source: Location) -> list[Location]:
    """The data files of a Parquet path (file, folder or glob), in order: a folder's files at
    any depth (hive partitions) but those whose names start with ``_`` or ``.`` (``_SUCCESS``,
    ``_metadata``), as dask reads them."""
    if _has_wildcards(source):
        return _glob(source)
    if not source.isdir():
        return [source]
    base = source.path.rstrip("/")
    return [
        source / name[len(base) + 1 :]
        for name in sorted(source.fs.find(base))
        if not posixpath.basename(name).startswith(("_", "."))
    ]


def _unreadable_parquet_file(source: Location) -> tuple[str, str] | None:
    """The first file of a Parquet path (file, folder or glob) whose footer pyarrow cannot
    read, and why; None when every footer reads."""
    for file in _parquet_files(source):
        try:
            with file.open("rb") as opened:
                pq.read_metadata(opened)
        except Exception as error:  # noqa: BLE001 - whatever pyarrow says is the reason
            return file.url, " ".join(str(error).split())
    return None


def _arrow_filesystem(read_options: dict[str, Any]) -> bool:
    """Whether dask reads through a pyarrow filesystem, whose reader plans its own partitions
    and refuses ``split_row_groups``."""
    filesystem = read_options.get("filesystem", "fsspec")
    return (isinstance(filesystem, str) and filesystem == "arrow") or isinstance(filesystem, pafs.FileSystem)


def _row_values(values: Any, name: str, *, lazy: bool = False) -> Any:
    """One value per row as a 1-D numpy or dask array; 2-D label arrays become tuples. With
    ``lazy`` (the data is a dask DataFrame), a pandas or dask Series stays as it is, to be aligned
    with the frame's partitions (:func:`_with_row_values`)."""
    if lazy and isinstance(values, (dd.Series, pd.Series)):
        return values
    if isinstance(values, (dd.Series, da.Array)):
        return values.to_dask_array(lengths=True) if isinstance(values, dd.Series) else values
    if isinstance(values, pd.Series):
        values = values.to_numpy()
    array = np.asarray(values, dtype=object if isinstance(values, list) else None)
    if array.ndim == 2 and name == SENSITIVE_COLUMN:
        tuples = np.empty(array.shape[0], dtype=object)
        tuples[:] = [tuple(row) for row in array.tolist()]
        array = tuples
    if array.ndim != 1:
        raise SchemaError(f"{_ROLE[name]} must be 1-D (one value per row), got shape {array.shape}")
    return array


_ROLE = {SENSITIVE_COLUMN: "sensitive_features", WEIGHT_COLUMN: "sample_weight", CELL_COLUMN: "cells"}


def _check_length(extra: dict[str, Any], n_rows: int) -> None:
    for name, values in extra.items():
        if values.shape[0] != n_rows:
            raise SchemaError(f"{_ROLE[name]} has {values.shape[0]} values but the data has {n_rows} rows")


def _as_frame(
    data: Any,
    extra: dict[str, Any],
    chunk_rows: int,
    read_options: dict[str, Any],
) -> dd.DataFrame:
    """Locations and DataFrames as a dask DataFrame, with the row-aligned ``extra`` arrays as columns."""
    if isinstance(data, Location):
        data = _read_path(data, read_options)
    if isinstance(data, dd.DataFrame):
        _check_unique_columns(list(data.columns), " in the DataFrame")
        return _with_row_values(data, extra) if extra else data
    if not isinstance(data, pd.DataFrame):
        raise InputError(
            f"cannot read data of type {type(data).__name__}: pass a pandas or dask DataFrame, "
            "a numpy or dask array, or a path to Parquet/CSV"
        )
    _check_unique_columns(list(data.columns), " in the DataFrame")
    frame = data.reset_index(drop=True)
    if extra:
        _check_length(extra, len(frame))
        frame = frame.assign(**{k: np.asarray(v) for k, v in extra.items()})
    return _frame_in_memory(frame, chunk_rows)


def _with_row_values(frame: dd.DataFrame, extra: dict[str, Any]) -> dd.DataFrame:
    """``frame`` with the per-row ``extra`` values (labels, weights, cells given as Series) as
    columns, each row with its own value.

    - A dask Series with the frame's partitioning (taken from the same frame: ``ddf["group"]``)
      is paired partition by partition; each task checks that its partition of the Series has
      the index of the frame's partition (:class:`SchemaError` otherwise, naming the partition),
      so a Series that only looks aligned is never silently misread.
    - A dask or pandas Series and a frame whose divisions are both known are aligned by index,
      as pandas aligns (dask repartitions the Series to the frame's divisions); a row whose index
      the Series lacks has a missing value (for labels: :class:`GroupError` naming the partition).
    - Anything else is refused with the remedy: a numpy array (it has no index to align with), a
      pandas Series next to a frame of unknown divisions, a dask Series partitioned otherwise.
    """
    aligned: dict[str, Any] = {}
    paired: dict[str, dd.Series] = {}
    remedy = "pass the column's name, or a Series taken from the same dask DataFrame (ddf['group'])"
    for name, values in extra.items():
        role = _ROLE[name]
        if isinstance(values, pd.Series):
            if not frame.known_divisions:
                raise SchemaError(
                    f"{role} is a pandas Series and the dask DataFrame's divisions are unknown, so its rows cannot "
                    f"be aligned by index; {remedy}, or give the frame a sorted index (ddf.set_index(...))"
                )
            if not values.index.is_unique:
                raise SchemaError(f"{role} is a pandas Series whose index has duplicates; {remedy}")
            aligned[name] = dd.from_pandas(values, npartitions=1)
        elif isinstance(values, dd.Series):
            if values.npartitions == frame.npartitions and (
                not (frame.known_divisions and values.known_divisions) or values.divisions == frame.divisions
            ):
                paired[name] = values
            elif frame.known_divisions and values.known_divisions:
                aligned[name] = values
            else:
                raise SchemaError(
                    f"{role} is a dask Series of {values.npartitions} partition(s) without known divisions, and "
                    f"the DataFrame has {frame.npartitions}: its rows cannot be aligned; {remedy}"
                )
        else:
            raise SchemaError(
                f"{role} is an in-memory array, which cannot be aligned with the partitions of a dask DataFrame: "
                "pass column names (cells too), or a pandas or dask Series aligned with the frame"
            )
    if aligned:
        frame = frame.assign(**aligned)
    if not paired:
        return frame
    meta = pd.DataFrame(
        {
            **{column: pd.Series(dtype=dtype) for column, dtype in frame.dtypes.items()},
            **{name: pd.Series(dtype=values.dtype) for name, values in paired.items()},
        },
        index=pd.Index([], dtype=frame.index.dtype),
    )
    return dd.map_partitions(
        _paired_row_values,
        frame,
        *paired.values(),
        names=tuple(paired),
        meta=meta,
        align_dataframes=False,
        enforce_metadata=False,
    )


def _paired_row_values(
    part: pd.DataFrame, *values: pd.Series, names: tuple[str, ...], partition_info: dict[str, Any] | None = None
) -> pd.DataFrame:
    """``part`` with each of ``values`` (the same partition of a per-row Series) as the column of
    its name, once checked to hold the same rows (the same index)."""
    number = (partition_info or {}).get("number", "?")
    for name, column in zip(names, values, strict=True):
        if len(column) != len(part) or not column.index.equals(part.index):
            raise SchemaError(
                f"{_ROLE[name]} does not line up with the rows of partition {number} of the DataFrame "
                f"({len(column)} values for {len(part)} rows, or another index): pass the column's name, or a "
                "Series taken from the same dask DataFrame (ddf['group'])"
            )
    return part.assign(**{name: column.to_numpy() for name, column in zip(names, values, strict=True)})


def _as_rows(
    data: Any, extra: dict[str, Any], chunk_rows: int | None
) -> tuple[da.Array, da.Array, da.Array | None, da.Array | None]:
    """Array input as aligned dask arrays: features (one column chunk), labels, weights, cells."""
    if not isinstance(data, da.Array):
        data = np.asarray(data)
        width = data.shape[1] if data.ndim == 2 else 1
        data = _in_memory(data, chunk_rows or in_memory_chunk_rows(width))
    x = data
    if x.ndim != 2:
        raise SchemaError(f"expected a 2-D array of rows, got shape {x.shape}")
    if SENSITIVE_COLUMN not in extra:
        raise SchemaError("array input needs sensitive_feature as one label per row, not column names")
    if not np.isnan(x.shape[0]):
        _check_length(extra, int(x.shape[0]))
    x = x.rechunk({1: -1})
    aligned = {
        name: values.rechunk((x.chunks[0],))
        if isinstance(values, da.Array)
        else _in_memory(np.asarray(values), x.chunks[0])
        for name, values in extra.items()
    }
    return x, aligned[SENSITIVE_COLUMN], aligned.get(WEIGHT_COLUMN), aligned.get(CELL_COLUMN)


def in_memory_chunk_rows(n_features: int) -> int:
    """Rows per partition of an in-memory array of ``n_features`` float64 columns when none are
    given: :data:`IN_MEMORY_CHUNK_BYTES` of them, at least :data:`DEFAULT_CHUNK_ROWS`."""
    return max(DEFAULT_CHUNK_ROWS, IN_MEMORY_CHUNK_BYTES // (8 * max(n_features, 1)))


def _in_memory(values: np.ndarray, rows: int | tuple[int, ...]) -> da.Array:
    """A dask array whose row blocks are views of ``values`` (all other axes in one block).

    ``da.from_array`` copies a numpy array whole (dask 2026.8) and hashes it unless given a
    random name; views cost neither, and the caller's array outlives the pass anyway.
    """
    chunks = normalize_chunks((rows,) + (-1,) * (values.ndim - 1), values.shape, dtype=values.dtype)
    bounds = np.cumsum((0, *chunks[0]))
    name = f"rows-{uuid.uuid4().hex}"
    blocks = {(name, i) + (0,) * (values.ndim - 1): values[bounds[i] : bounds[i + 1]] for i in range(len(chunks[0]))}
    return da.Array(blocks, name, chunks, dtype=values.dtype)


def _frame_in_memory(frame: pd.DataFrame, rows: int) -> dd.DataFrame:
    """``dd.from_pandas(frame, chunksize=rows, sort=False)`` without its copy and its hash.

    ``from_pandas`` copies the frame whole and hashes its values to name the collection (dask
    2026.8): 3 s of a 0.8 GB frame, where the pass over it takes 2 s. The same expression over
    the caller's frame (its partitions are row slices of it, as with ``from_pandas``), named by
    a random token, costs neither; string columns still become Arrow strings.
    """
    # dask-expr's internal classes, as engine.memory reads them (tests/test_dask_conventions.py
    # names what a dask release changed)
    from dask.dataframe.dask_expr._collection import new_collection
    from dask.dataframe.dask_expr._util import _BackendData
    from dask.dataframe.dask_expr.io.io import FromPandas
    from dask.dataframe.utils import pyarrow_strings_enabled

    data = _BackendData(frame)
    data.__dict__["_token"] = uuid.uuid4().hex  # its cached name: what it would hash the values for
    return new_collection(
        FromPandas(data, chunksize=rows, sort=False, pyarrow_strings_enabled=pyarrow_strings_enabled())
    )


def _is_array(data: Any) -> bool:
    if isinstance(data, (da.Array, np.ndarray, list)):
        return True
    return not isinstance(data, (*_PATHS, pd.DataFrame, dd.DataFrame)) and hasattr(data, "__array__")


def _array_chunk(x: np.ndarray, labels: np.ndarray, weights: np.ndarray | None, partition: Partition) -> Chunk:
    labels = np.asarray(labels)
    missing = pd.isna(labels)
    if np.any(missing):
        raise GroupError(f"sensitive_features has {int(np.sum(missing))} missing label(s) in {partition}")
    codes, groups = _factorize(labels)
    if weights is not None:
        weights = _checked_weights(np.asarray(weights, dtype=np.float64), partition)
    return Chunk(x, codes, groups, weights, partition)


# Integer labels spanning at most this many values are coded by offset and a lookup table
# (0.3 ms per 100k rows) instead of a hash table (pd.factorize: 1.6 ms, ~8 % of the kernel).
_MAX_DIRECT_CODE_RANGE = 1 << 16


def _factorize(labels: np.ndarray | pd.Series) -> tuple[np.ndarray, tuple[Hashable, ...]]:
    """Codes into the distinct labels of one partition, and those labels (in any order)."""
    values = np.asarray(labels)
    if values.dtype.kind in "iub" and values.size:
        numbers = (values.view(np.uint8) if values.dtype.kind == "b" else values).astype(
            np.uint64 if values.dtype.kind in "ub" else np.int64, copy=False
        )
        low, high = numbers.min(), numbers.max()
        if int(high) - int(low) < _MAX_DIRECT_CODE_RANGE:  # so numbers − low cannot overflow
            offsets = (numbers - low).astype(np.intp)
            present = np.flatnonzero(np.bincount(offsets))
            if present.size < offsets.max() + 1:
                lookup = np.zeros(offsets.max() + 1, dtype=np.intp)
                lookup[present] = np.arange(present.size)
                offsets = lookup[offsets]
            distinct = present.astype(numbers.dtype) + low
            return offsets, tuple(distinct.astype(values.dtype).tolist())
    codes, uniques = pd.factorize(labels, sort=False)
    return codes, tuple(uniques.tolist())


def _array_feature_names(p: int, feature_names: Sequence[str] | None) -> list[str]:
    if feature_names is None:
        return [f"x{j}" for j in range(p)]
    names = [str(n) for n in feature_names]
    if len(names) != p:
        raise SchemaError(f"{len(names)} feature names given for {p} columns")
    return names


def open_table(
    data: Any,
    *,
    sensitive_feature: Any = None,
    features: Sequence[str] | None = None,
    sample_weight: str | Any | None = None,
    key_columns: Sequence[str] = (),
    exclude: Sequence[str] = (),
    feature_names: Sequence[str] | None = None,
    chunk_rows: int | None = None,
    read_options: dict[str, Any] | None = None,
    cells: str | HashCells | Any = None,
    storage_options: StorageOptions | None = None,
) -> Table:
    """Open ``data`` as a :class:`Table` and check its schema (no rows are read, but the first
    partition of a listed feature that is not numeric, to say what it holds).

    Parameters
    ----------
    data : pandas/dask DataFrame, numpy/dask array, path, URL or storage Location
        Paths may be a Parquet file, folder or glob, or a CSV file or glob (compressed or
        not), on the local disk or at any URL fsspec opens (``s3://bucket/table/``,
        ``gs://…``, ``memory://…``; :mod:`fairpca_dist.io.storage`). A folder on an object store
        that this library wrote is read at its committed version
        (:func:`fairpca_dist.io.versions.committed`). A missing path or bucket, denied access, an
        unreachable storage service, an unknown scheme or one whose package is not installed
        raise here, naming the path or URL (never the storage options).
    sensitive_feature : str, list of str, array-like or None
        Column name(s) holding the group label (several columns form intersectional groups),
        or one label per row (required for array input). ``None`` for uses that need no
        groups (projection).
    features : list of str, optional
        Feature columns. Default: every numeric column except the sensitive, weight, key and
        ``exclude`` columns.
    sample_weight : str or array-like, optional
        Column name or one non-negative weight per row.
    key_columns : list of str
        Identifier columns carried through to projections, never used as features.
    exclude : list of str
        Columns to leave out of the default feature set.
    feature_names : list of str, optional
        Names for the columns of array input (default ``x0 … x{p−1}``).
    chunk_rows : int, optional
        Rows per partition for in-memory input. Default: for a numpy array, partitions of about
        :data:`IN_MEMORY_CHUNK_BYTES` (64 MiB) of features and at least
        :data:`DEFAULT_CHUNK_ROWS` rows (:func:`in_memory_chunk_rows`); for a pandas DataFrame,
        :data:`DEFAULT_CHUNK_ROWS`.
    read_options : dict, optional
        Passed to ``dask.dataframe.read_parquet`` / ``read_csv``. Parquet defaults to
        ``split_row_groups="adaptive", blocksize=PARQUET_PARTITION_BYTES`` (64 MiB of decoded
        row groups per partition; a larger row group is read in row slices of that size), or
        one partition per row group (sliced likewise) for a file of more than
        :data:`PARQUET_STATISTICS_COLUMNS` columns, read at most 2,048 columns at a time
        (:mod:`fairpca_dist.engine.parquet_slices`), unless ``split_row_groups`` is given
        (``blocksize`` alone sets the size). A CSV's columns are
        typed from its first :data:`CSV_SAMPLE_ROWS` rows (``sample_rows``; dask's default is 10),
        its feature and weight columns are parsed as float64 (dask would type them from the first
        rows only); a separator of several characters selects pandas' Python parser. ``format`` ("csv" or
        "parquet") names the format of a file whose name does not (e.g. UCI's ``adult.data``).
    cells : str, HashCells, array-like or None
        How rows are assigned to cells (see :mod:`fairpca_dist.engine.cells`): the column holding the
        cell labels (never a feature, the sensitive or the weight column), a
        :class:`~fairpca_dist.engine.cells.HashCells` (its key columns leave the default feature set;
        ``key_columns=()`` hashes every feature and sensitive column), or one label per row for
        in-memory input.
    storage_options : mapping, optional
        Keyword arguments of the filesystem of a URL (e.g. ``endpoint_url``, ``key``,
        ``secret`` for ``s3://``), given to Dask's readers too; credentials otherwise come from
        the filesystem's usual environment variables and files (``AWS_*``). Ignored for local
        paths and for a :class:`~fairpca_dist.io.storage.Location`, which carries its own.
    """
    if chunk_rows is not None and (not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1):
        raise InputError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    if "storage_options" in (read_options or {}):
        raise InputError(
            "give the options of a URL's filesystem as storage_options=..., not in read_options "
            "(command line: --storage-option key=value)"
        )
    if isinstance(data, _PATHS):
        data = locate(data, storage_options)
    extra: dict[str, Any] = {}
    lazy_frame = isinstance(data, dd.DataFrame)  # labels given as Series are aligned with its partitions
    if sensitive_feature is None:
        sensitive: list[str] = []  # projection and ingestion of features only
    elif _is_column_reference(sensitive_feature):
        sensitive = [sensitive_feature] if isinstance(sensitive_feature, str) else list(sensitive_feature)
    else:
        extra[SENSITIVE_COLUMN] = _row_values(sensitive_feature, SENSITIVE_COLUMN, lazy=lazy_frame)
        sensitive = [SENSITIVE_COLUMN]
    weight: str | None = sample_weight if isinstance(sample_weight, str) else None
    if sample_weight is not None and weight is None:
        extra[WEIGHT_COLUMN] = _row_values(sample_weight, WEIGHT_COLUMN, lazy=lazy_frame)
        weight = WEIGHT_COLUMN
    if cells is not None and not isinstance(cells, (str, HashCells)):
        extra[CELL_COLUMN] = _row_values(cells, CELL_COLUMN, lazy=lazy_frame)
        cells = CELL_COLUMN
    if _is_array(data):
        rows = _as_rows(data, extra, None if chunk_rows is None else int(chunk_rows))
        names = _array_feature_names(rows[0].shape[1], feature_names)
        chosen = list(names) if features is None else list(features)
        for name in [*chosen, *key_columns, *exclude]:
            if name not in names:
                raise SchemaError(f"column {name!r} not found{_closest(name, names)} (array columns: {names})")
        if key_columns:
            raise SchemaError("array input has no key columns; use a DataFrame to carry keys through")
        chosen = [c for c in chosen if c not in exclude]
        index = [names.index(c) for c in chosen]
        x = rows[0] if index == list(range(len(names))) else rows[0][:, index]
        if isinstance(cells, str) and cells != CELL_COLUMN:
            raise SchemaError(
                f"array input has no cells column {cells!r}: pass one cell label per row (cells=array) "
                "or HashCells over feature columns"
            )
        if isinstance(cells, HashCells):
            for name in cells.key_columns:
                if name not in chosen:
                    raise SchemaError(
                        f"HashCells key column {name!r} is not a feature of the array{_closest(name, chosen)} "
                        f"(features: {chosen})"
                    )
            cells = _resolved_hash_cells(cells, chosen, sensitive)
        return Table(
            tuple(chosen), tuple(sensitive), weight, (), rows=(x, rows[1], rows[2]), cells=cells, cell_rows=rows[3]
        )
    frame = _as_frame(
        data, extra, DEFAULT_CHUNK_ROWS if chunk_rows is None else int(chunk_rows), dict(read_options or {})
    )
    origin = f" in {data.url!r}" if isinstance(data, Location) else ""
    _require_columns(frame, sensitive, "sensitive feature", origin)
    if weight is not None:
        _require_columns(frame, [weight], "sample_weight", origin)
        if not pd.api.types.is_numeric_dtype(frame[weight].dtype):
            raise SchemaError(
                f"sample_weight column {weight!r}{origin} has dtype {frame[weight].dtype}, expected numeric"
            )

    keys = list(key_columns)
    _require_columns(frame, keys, "key", origin)
    _require_columns(frame, list(exclude), "excluded", origin)
    reserved = set(sensitive) | set(keys) | set(exclude) | ({weight} if weight else set())
    if isinstance(cells, str):
        _require_columns(frame, [cells], "cells", origin)
        if cells in set(sensitive) | {weight}:
            raise SchemaError(f"cells column {cells!r} is also the sensitive feature or sample_weight column")
        reserved.add(cells)
    elif isinstance(cells, HashCells):
        _require_columns(frame, list(cells.key_columns), "HashCells key", origin)
    dtypes = frame.dtypes  # once, from the metadata: frame[c] plans a selection per column (20,000: minutes)
    if features is None:
        hash_keys = set(_hash_keys(cells))
        chosen = [
            c
            for c, dtype in dtypes.items()
            if c not in reserved and c not in hash_keys and pd.api.types.is_numeric_dtype(dtype)
        ]
        if not chosen:
            raise SchemaError(f"no numeric feature columns found{origin} among {listed(frame.columns)}")
    else:
        chosen = list(features)
        _require_columns(frame, chosen, "feature", origin)
        if isinstance(cells, str) and cells in chosen:
            raise SchemaError(f"column {cells!r} is used both as a feature and as the cells column")
        clash = [c for c in chosen if c in reserved]
        if clash:
            raise SchemaError(f"column(s) {clash} are used both as features and as sensitive/weight/key columns")
        if len(set(chosen)) != len(chosen):
            raise SchemaError(f"feature columns listed more than once: {chosen}")
        for c in chosen:
            dtype = dtypes[c]
            if not pd.api.types.is_numeric_dtype(dtype):
                raise SchemaError(
                    f"feature column {c!r}{origin} has dtype {dtype}, expected a numeric dtype"
                    f"{_text_hint(frame[c], dict(read_options or {}))}"
                )
    if isinstance(cells, HashCells):
        cells = _resolved_hash_cells(cells, chosen, sensitive)
    if isinstance(data, Location):
        frame = _numbers_read_as_float(data, frame, [*chosen, *([weight] if weight else [])], dict(read_options or {}))
    return Table(tuple(str(c) for c in chosen), tuple(sensitive), weight, tuple(keys), frame=frame, cells=cells)


def _text_hint(column: dd.Series, read_options: dict[str, Any]) -> str:
    """What a feature column read as text holds in its first partition (``"; in its first
    partition: numbers but for '?'"``) and, when that is numbers and missing-value markers, the
    reader option that reads them as missing (and those of ``read_options``' ``na_values``);
    nothing when that partition cannot be read (the schema error stands on its own)."""
    try:
        profile = profile_text(column.partitions[0].compute())
    except Exception:  # noqa: BLE001 - a hint to an error, never a second error
        return ""
    markers = {str(column.name): profile.markers}
    hint = f"\n{na_values_hint(with_markers(read_options.get('na_values'), markers))}" if profile.markers else ""
    return f"; in its first partition: {profile.reason()}{hint}"


def _numbers_read_as_float(
    source: Location, frame: dd.DataFrame, columns: Sequence[str], read_options: dict[str, Any]
) -> dd.DataFrame:
    """``frame``, a CSV's planned read, planned again with its integer-typed ``columns`` parsed
    as float64 (other sources: ``frame`` itself).

    dask types a CSV's columns from a sample of the file's first rows. A column with only
    integers there and a decimal or an empty field further down (Bank Marketing's
    ``nr.employed``: 5191 in its first rows, 5099.1 later) would fail mid-read with "Mismatched
    dtypes". Features and weights become float64 anyway, so they are parsed as such from the
    start; a later text value then fails with pandas' message naming the value. A ``dtype``
    given in ``read_options`` wins.
    """
    given = read_options.get("dtype", {})
    if _source_format(source, read_options)[0] != "CSV" or not isinstance(given, dict):
        return frame
    integers = {c: "float64" for c in columns if c not in given and pd.api.types.is_integer_dtype(frame[c].dtype)}
    if not integers:
        return frame
    return _read_path(source, {**read_options, "dtype": {**integers, **given}})


def _hash_keys(cells: Any) -> tuple[str, ...]:
    """Hash key columns (identifiers: out of the default features, allowed as listed ones)."""
    return cells.key_columns if isinstance(cells, HashCells) else ()


def _resolved_hash_cells(cells: HashCells, features: Sequence[str], sensitive: Sequence[str]) -> HashCells:
    """``key_columns=()`` stands for every feature and sensitive column, each sorted by name (so
    the order of ``features`` does not change the cells)."""
    if cells.key_columns:
        return cells
    return replace(cells, key_columns=(*sorted(map(str, features)), *sorted(map(str, sensitive))))


def _is_column_reference(value: Any) -> bool:
    if isinstance(value, str):
        return True
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(v, str) for v in value)
        and len(value) < 64
    )


def read_chunk(
    part: pd.DataFrame,
    features: Sequence[str],
    sensitive: Sequence[str],
    sample_weight: str | None,
    partition: Partition,
    *,
    cells: str | HashCells | None = None,
) -> Chunk:
    """One partition as a :class:`Chunk`; labels, weights and cells are checked here, features
    by the consumer of :meth:`Chunk.rows`."""
    codes, groups = _group_codes(part, sensitive, partition)
    weights = None
    if sample_weight is not None:
        weights = _checked_weights(part[sample_weight].to_numpy(dtype=np.float64, na_value=np.nan), partition)
    chunk = Chunk(part[list(features)], codes, groups, weights, partition)
    if cells is None:
        return chunk
    return _with_cells(chunk, part[list(cells.key_columns if isinstance(cells, HashCells) else [cells])], cells)


def _with_cells(chunk: Chunk, columns: pd.DataFrame, cells: str | HashCells) -> Chunk:
    """``chunk`` with the cell of each row, read from ``columns`` (the hash key columns, or the
    one column of cell labels)."""
    if isinstance(cells, HashCells):
        cell_codes = cells.assign(columns, where=f" in {chunk.partition}")
        return replace(chunk, cell_codes=cell_codes, cells=tuple(range(cells.n_cells)))
    labels = columns[cells]
    missing = labels.isna()
    if missing.any():
        name = "cells" if cells == CELL_COLUMN else f"cells column {cells!r}"
        raise InputError(
            f"{name} has {int(missing.sum())} missing label(s) in {chunk.partition}; every row needs a cell"
        )
    cell_codes, cell_labels = _factorize(labels)
    return replace(chunk, cell_codes=cell_codes, cells=cell_labels)


def _array_cell_columns(
    x: np.ndarray, labels: np.ndarray, cell_labels: np.ndarray | None, features: Sequence[str], cells: str | HashCells
) -> pd.DataFrame:
    """The columns of an array block that cells are read from, as :func:`_with_cells` wants them."""
    if not isinstance(cells, HashCells):
        return pd.DataFrame({cells: np.asarray(cell_labels)})
    columns = {
        name: np.asarray(labels) if name == SENSITIVE_COLUMN else np.asarray(x)[:, features.index(name)]
        for name in cells.key_columns
    }
    return pd.DataFrame(columns)


def _checked_weights(weights: np.ndarray, partition: Partition) -> np.ndarray:
    bad = ~np.isfinite(weights) | (weights < 0)
    if bad.any():
        raise InputError(
            f"sample_weight has {int(bad.sum())} missing, infinite or negative value(s) in "
            f"{partition} (first: {weights[bad][0]!r})"
        )
    return weights


def feature_values(part: pd.DataFrame, features: Sequence[str], partition: Partition | str) -> np.ndarray:
    """The ``features`` of a partition as a float64 array (missing values become NaN).

    A value that is not a number (a string in one file of a folder whose first file typed the
    column as numeric, an object column of a DataFrame) raises :class:`SchemaError` naming the
    column, the partition (and file), the count and the first such value.
    """
    try:
        return part[list(features)].to_numpy(dtype=np.float64, na_value=np.nan)
    except (ValueError, TypeError):
        for name in features:
            column = part[name]
            numbers = pd.to_numeric(column, errors="coerce")
            bad = numbers.isna().to_numpy() & column.notna().to_numpy()
            if bad.any():
                first = column.to_numpy()[np.flatnonzero(bad)[0]]
                raise SchemaError(
                    f"feature column {name!r} in {partition} has {int(bad.sum())} value(s) that are not "
                    f"numbers (first: {first!r}); a feature must be numeric in every file and partition"
                ) from None
        raise


def check_finite(x: np.ndarray | Iterable[np.ndarray], features: Sequence[str], partition: Partition | str) -> None:
    """Raise :class:`InputError` naming each column with NaN/inf values and their counts.

    ``x``: the rows, as one array or as slabs of the same columns (read once). Callers run it
    only when a statistic computed from the rows came out non-finite, so clean data pay nothing
    for the check; rows without NaN or inf are those whose squares overflowed, and the error
    names the column of the largest value.
    """
    per_column = np.zeros(len(features), dtype=np.int64)
    has_nan = np.zeros(len(features), dtype=bool)
    big = np.zeros(len(features))
    for slab in [x] if isinstance(x, np.ndarray) else x:
        bad = ~np.isfinite(slab)
        if bad.any():
            per_column += bad.sum(axis=0)
            has_nan |= np.isnan(slab).any(axis=0)
        elif slab.size:
            np.maximum(big, np.abs(slab).max(axis=0), out=big)
    if not per_column.any():
        worst = features[int(np.argmax(big))]
        raise InputError(
            f"feature values in {partition} overflow float64 when squared "
            f"(largest |value| {big.max():.3g} in {worst!r}); rescale the column"
        )
    detail = ", ".join(
        f"{features[int(j)]!r}: {int(per_column[j])} ({'NaN' if has_nan[j] else 'inf'})"
        for j in np.flatnonzero(per_column)
    )
    raise InputError(f"non-finite feature values in {partition}: {detail}; clean or impute them first")


def _group_codes(
    part: pd.DataFrame, sensitive: Sequence[str], partition: Partition
) -> tuple[np.ndarray, tuple[Hashable, ...]]:
    for column in sensitive:
        missing = part[column].isna()
        if missing.any():
            apart = column == SENSITIVE_COLUMN  # labels given apart from the table
            name = "sensitive_features" if apart else repr(column)
            hint = (
                " (a Series of labels is aligned with the table by index: its index must hold the table's)"
                if apart
                else ""
            )
            raise GroupError(f"sensitive feature {name} has {int(missing.sum())} missing label(s) in {partition}{hint}")
    if len(sensitive) == 1:
        return _factorize(part[sensitive[0]])
    tuples = np.empty(len(part), dtype=object)
    tuples[:] = list(zip(*(part[c].tolist() for c in sensitive), strict=True))
    codes, uniques = pd.factorize(tuples, sort=False)
    return codes, tuple(uniques.tolist())
