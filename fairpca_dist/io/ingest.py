"""Ingestion: a source table (CSV, Parquet, folder, glob, DataFrame) → validated, partitioned
Parquet plus ``schema.json``.

Rows whose features are NaN/inf or whose group label is missing are counted per column and
sampled into a rejects file; with ``on_bad_rows="fail"`` (the default) their presence is an
error and nothing is written, with ``"drop"`` they are left out and recorded. Columns left out
of the features are named with the reason in the summary and in ``schema.json``
(``dropped_columns``); a column of numbers with a missing-value marker (``?``) is told from text
and the reader option that reads it offered (with the ``na_values`` given), or, for a column
that is mostly markers, leaving it out (``suggested_exclude``). Nothing is dropped silently. The output folder
appears complete or not at all.
"""

from __future__ import annotations

import json
import operator
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fairpca_dist.engine.moments import label_from_json, label_to_json, sorted_labels
from fairpca_dist.engine.passes import partition_moments, run_graph, smallest_worker_limit, tree_sum
from fairpca_dist.engine.sampling import RowSample, SampleSpec
from fairpca_dist.engine.sources import Partition, feature_values, map_partitions, open_table, read_chunk
from fairpca_dist.exceptions import GroupError, InputError, OutputPathError, SchemaError, reading
from fairpca_dist.io.atomic import atomic_directory, atomic_file, input_paths
from fairpca_dist.io.markers import (
    ALL_MISSING,
    MOSTLY_MARKERS,
    TextProfile,
    exclude_hint,
    na_values_hint,
    profile_text,
    with_markers,
)
from fairpca_dist.io.moments_cache import TABLE_MOMENTS, file_keys, roles_key
from fairpca_dist.io.storage import Location, StorageOptions, as_given, locate, write_parquet
from fairpca_dist.io.versions import committed
from fairpca_dist.params import choose_wide
from fairpca_dist.wording import listed, listed_counts

__all__ = [
    "ingest_table",
    "IngestResult",
    "read_schema",
    "read_table_sample",
    "table_source",
    "failed_rejects_path",
    "SCHEMA_FILE",
    "REJECTS_SAMPLE_ROWS",
]

SCHEMA_FILE = "schema.json"
REJECTS_FILE = "rejects.csv"
SAMPLE_FILE = "sample.parquet"  # the priority sample of the rows, drawn while they are written
PARTS_DIR = "parts"  # the Parquet files, alone in their folder so any Parquet reader can open it
REJECTS_SAMPLE_ROWS = 1000
_SCHEMA_VERSION = 1
BadRowPolicy = Literal["fail", "drop"]

# Why a column of the source is not in the ingested table (schema.json's "dropped_columns");
# columns read as text get their reason from their values (TextProfile.reason).
EXCLUDED = "excluded by the user"
NOT_LISTED = "not among the listed features"


@dataclass(frozen=True)
class IngestResult:
    """Where the table was written and what was found."""

    table_dir: str | Path
    rows: int
    rejected: int
    schema: dict[str, Any]
    value_counts: dict[str, pd.Series] = field(default_factory=dict)
    """The counts of the values of the columns ``count_values`` named (each value's rows, missing
    values under NaN), for those of few values (:data:`COUNTED_VALUES` at most per partition)."""

    def summary(self) -> str:
        """For a person: one line with the rows, rejected rows, the features used and the groups
        found; for a wide table, a line saying why it is one; when columns were left out, a line
        naming a few of them per reason; when some
        hold numbers but for a missing-value marker, a line with the option that reads them
        (with the ``na_values`` given, if any) and one offering to leave out those that are
        mostly markers; when more than half of the rows were rejected, a line naming the
        columns that rejected most."""
        features = self.schema["features"]
        shown = ", ".join(features if len(features) <= 10 else [*features[:8], "…"])
        groups = len(self.schema["groups"])
        lines = [
            f"{self.rows:,} rows ({self.rejected:,} rejected), {len(features)} features ({shown}), "
            f"{groups} groups by {', '.join(self.schema['sensitive_feature'])}"
        ]
        dropped = self.schema["dropped_columns"]
        if dropped:
            lines.append(_dropped_line(dropped))
        markers = self.schema["suggested_read_options"].get("na_values")
        if markers:
            lines.append(na_values_hint(markers))
        mostly = self.schema.get("suggested_exclude")
        if mostly:
            lines.append(
                f"{_columns_named(mostly)} mostly missing-value markers: read as missing, they would "
                f"reject most rows; leave them out ({exclude_hint(mostly)})"
            )
        if self.rejected > self.rows:
            lines.append(_rejected_line(self.schema["rejected_by_column"], self.rows, self.rejected, features))
        if self.schema.get("wide"):
            lines.append(self.schema["wide_reason"])
        return "\n".join(lines)


def _columns_named(columns: Sequence[str]) -> str:
    """``"Column '10' is"`` / ``"Columns '10', '11' are"``."""
    return f"Column {columns[0]!r} is" if len(columns) == 1 else f"Columns {listed(columns, len(columns))} are"


def _mostly_bad(bad_by_column: Mapping[str, int], total: int, features: Sequence[str]) -> list[str]:
    """The ``features`` bad in more than :data:`~fairpca_dist.io.markers.MOSTLY_MARKERS` of the
    ``total`` rows, the worst first."""
    bad = [c for c in features if bad_by_column.get(c, 0) > MOSTLY_MARKERS * total]
    return sorted(bad, key=lambda c: -bad_by_column[c])


def _rejected_line(bad_by_column: Mapping[str, int], rows: int, rejected: int, features: Sequence[str]) -> str:
    """``"293 of 294 rows (99.7 %) were rejected (per column: '11': 291, ...); leave out ..."``:
    what dropping the bad rows cost, and the columns to leave out to keep more of them."""
    total = rows + rejected
    line = (
        f"{rejected:,} of {total:,} rows ({rejected / total:.1%}) were rejected (per column: "
        f"{listed_counts(bad_by_column, 3, show=repr)})"
    )
    worst = _mostly_bad(bad_by_column, total, features)
    return f"{line}; to keep more rows leave out the worst ({exclude_hint(worst)})" if worst else line


def _dropped_line(dropped: dict[str, str]) -> str:
    """``"24 columns left out of the features: 'a', 'b', 'c' and 19 more (numbers but for '?');
    'state' (not numeric)"``: a few columns per reason, the most frequent reason first."""
    by_reason: dict[str, list[str]] = {}
    for column, reason in dropped.items():
        by_reason.setdefault(reason, []).append(column)
    ranked = sorted(by_reason.items(), key=lambda item: -len(item[1]))
    columns = "column" if len(dropped) == 1 else "columns"
    return f"{len(dropped)} {columns} left out of the features: " + "; ".join(
        f"{listed(names, 3)} ({reason})" for reason, names in ranked
    )


@dataclass(frozen=True)
class _PartitionReport:
    rows: int
    rejected: int
    bad_by_column: dict[str, int]
    sample: pd.DataFrame
    groups: dict[Any, int]
    profiles: dict[str, TextProfile] = field(default_factory=dict)
    counts: dict[str, pd.Series | None] = field(default_factory=dict)


@dataclass(frozen=True)
class _Pass:
    """The partitions' reports merged: what one pass over the table found, and the sample of the
    rows written (each file's moments are written beside it by the task that wrote it)."""

    reports: list[_PartitionReport]
    bad_by_column: Counter
    groups: Counter
    profiles: dict[str, TextProfile]
    row_sample: RowSample

    @classmethod
    def of(cls, reports: list[_PartitionReport], row_sample: RowSample) -> _Pass:
        bad_by_column: Counter = Counter()
        groups: Counter = Counter()
        profiles: dict[str, TextProfile] = {}
        for report in reports:
            bad_by_column.update(report.bad_by_column)
            groups.update(report.groups)
            for column, profile in report.profiles.items():
                profiles[column] = profiles.get(column, TextProfile()) + profile
        return cls(reports, bad_by_column, groups, profiles, row_sample)

    def value_counts(self) -> dict[str, pd.Series]:
        """The counts of the counted columns' values over the rows written (missing values under
        NaN, as ``value_counts(dropna=False)``), for the columns whose every partition held at
        most :data:`COUNTED_VALUES` distinct values."""
        counted: dict[str, pd.Series] = {}
        for column in self.reports[0].counts if self.reports else {}:
            parts = [report.counts[column] for report in self.reports]
            if all(part is not None for part in parts):
                counted[column] = pd.concat(parts).groupby(level=0, dropna=False).sum()
        return counted

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.reports)

    @property
    def rejected(self) -> int:
        return sum(r.rejected for r in self.reports)

    def rejects(self) -> pd.DataFrame | None:
        """The first :data:`REJECTS_SAMPLE_ROWS` rejected rows, ``None`` when none was."""
        return pd.concat([r.sample for r in self.reports]).head(REJECTS_SAMPLE_ROWS) if self.rejected else None

    def empty(self, features: Sequence[str]) -> list[str]:
        """The ``features`` without a usable (finite) value in any row."""
        total = self.rows + self.rejected
        return [c for c in features if total and self.bad_by_column[c] == total]


COUNTED_VALUES = 1000
"""Most distinct values of a counted column (:func:`ingest_table` ``count_values``) a partition
reports; a column with more is left to a pass of its own."""


def _few_values(column: pd.Series) -> pd.Series | None:
    """How many rows hold each value (NaN counted), or None above :data:`COUNTED_VALUES` values."""
    counts = column.value_counts(dropna=False, sort=False)
    return counts if len(counts) <= COUNTED_VALUES else None


def _clean_partition(
    part: pd.DataFrame,
    partition: Partition,
    columns: list[str],
    features: list[str],
    sensitive: list[str],
    profiled: list[str],
    folder: Location,
    sample_weight: str | None,
    sample: SampleSpec,
    share: float,
    wide: bool,
    roles: str,
    counted: list[str],
) -> tuple[_PartitionReport, RowSample]:
    """Write the good rows of one partition; report what was found, and compute from the good
    rows (in the file's order) their moments and their row sample: what a pass over the file
    would compute, without reading it again. The moments are written here, to ``moments/``
    beside ``folder`` under the file's key (``roles`` from
    :func:`~fairpca_dist.io.moments_cache.roles_key`): k·p² numbers per file stay on no worker
    and travel to no driver (at p = 3,000, 144 MB a file); moments that cannot be computed
    (values whose squares overflow) are left to the fit, which says why."""
    values = feature_values(part, features, partition)
    bad_values = ~np.isfinite(values)
    missing_group = part[sensitive].isna().to_numpy()
    bad = bad_values.any(axis=1) | missing_group.any(axis=1)
    clean = not bad.any()
    listed = set(features)
    others = [c for c in columns if c not in listed]  # the roles: columns come as [*roles, *features]
    kept = (part[others] if clean else part.loc[~bad, others]).reset_index(drop=True)
    if not clean:
        values = np.asfortranarray(values[~bad])  # column-major, as read: each column written without a copy
    written = folder / f"part-{partition.index:05d}.parquet"
    write_parquet(kept, written, values, features)
    good = pd.concat([kept, pd.DataFrame(values, columns=features, copy=False)], axis=1)  # no copy: a view
    counts = {features[j]: int(n) for j, n in enumerate(bad_values.sum(axis=0)) if n}
    counts.update(
        {
            f"{column} (missing group)": int(n)
            for column, n in zip(sensitive, missing_group.sum(axis=0), strict=True)
            if n
        }
    )
    codes = read_chunk(kept, [], sensitive, None, partition)  # each row's group: for the counts and the sample
    report = _PartitionReport(
        rows=int((~bad).sum()),
        rejected=int(bad.sum()),
        bad_by_column=counts,
        sample=part.loc[bad, columns].head(REJECTS_SAMPLE_ROWS),
        groups=dict(zip(codes.groups, np.bincount(codes.codes, minlength=len(codes.groups)).tolist(), strict=True)),
        profiles={column: profile_text(part[column]) for column in profiled},
        counts={column: _few_values(kept[column]) for column in counted},
    )
    try:
        moments = partition_moments(
            good,
            partition,
            features=features,
            sensitive=sensitive,
            sample_weight=sample_weight,
            values=values,
            diagonal=wide,
        )
    except InputError:  # finite values whose squares overflow: the fit will say so, ingest keeps them
        pass
    else:
        (key,) = file_keys([written], roles)
        moments.save(folder.parent / TABLE_MOMENTS / f"{key}.npz")
    return report, sample.of_rows(
        good, sample.keys(partition.index), share=share, group_codes=(codes.codes, codes.groups)
    )


def ingest_table(
    source: Any,
    out_dir: str | os.PathLike[str],
    *,
    sensitive_feature: str | Sequence[str],
    features: Sequence[str] | None = None,
    key_columns: Sequence[str] = (),
    pass_through: Sequence[str] = (),
    sample_weight: str | None = None,
    exclude: Sequence[str] = (),
    on_bad_rows: BadRowPolicy = "fail",
    read_options: dict[str, Any] | None = None,
    wide: bool | None = None,
    moments_budget: int | None = None,
    count_values: Sequence[str] = (),
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> IngestResult:
    """Validate ``source`` and write it to ``out_dir`` as Parquet partitions + ``schema.json``.

    The one pass over the source also computes, from the rows it writes, what later steps
    would otherwise read the table again for: the moments of each file, written to ``moments/``
    in the table (:mod:`fairpca_dist.io.moments_cache`: a fit of the table with these column
    roles reads no rows), and a priority sample of the rows (:mod:`fairpca_dist.engine.sampling`:
    50,000 rows plus 2,000 per group, seed 0), written to ``sample.parquet``, from which a report
    draws its downstream sample and its kernel bandwidth (:func:`read_table_sample`).

    Parameters
    ----------
    source : path or DataFrame
        CSV or Parquet file, folder or glob, or a pandas/dask DataFrame.
    out_dir : path
        Output folder: ``parts/part-NNNNN.parquet`` (one per source partition; the ``parts``
        folder opens in any Parquet reader), ``schema.json`` and, when rows were dropped,
        ``rejects.csv`` (a sample of at most 1000 rejected rows).
    sensitive_feature, features, key_columns, sample_weight, exclude
        Column roles, as in :func:`fairpca_dist.engine.sources.open_table`. With the default
        features (every numeric column), a column with no value in any row is left out (the
        rows are written again without it). Every column left out of the table is recorded
        in ``schema.json``'s ``dropped_columns`` with the reason ("excluded by the user",
        "not among the listed features", "all missing", "not numeric", "numbers but for
        '?'", ...) and named in :meth:`IngestResult.summary`; a column of numbers but for
        a few missing-value markers (profiled while its rows are read: no extra pass) also
        puts the reader option that reads them in ``suggested_read_options``
        (``{"na_values": ["?"]}``, with the markers of ``read_options``' ``na_values``: it
        replaces that option), and a column whose values are more than half markers is
        named in ``suggested_exclude`` instead (read as missing, it would reject most rows).
    pass_through : list of str
        Further columns kept unchanged (e.g. a target for the downstream fairness report).
    wide : bool, optional
        Keep only the diagonal of each file's moments and draw no row sample (a table too
        wide for k·p² numbers, fitted by ``fnpm-streaming``); default: when the p × p moments
        of two groups would exceed ``moments_budget`` (:func:`~fairpca_dist.params.choose_wide`;
        by default 1 GB, or a tenth of the smallest worker memory limit of ``client``).
        ``schema.json`` records it (``wide``) and why (``wide_reason``).
    moments_budget : int, optional
        Bytes the p × p moments may take (default :data:`~fairpca_dist.params.MOMENTS_BUDGET`).
    count_values : list of str
        Columns among the key, pass-through and sensitive ones whose values the pass also
        counts over the rows it writes (:attr:`IngestResult.value_counts`): e.g. the target of
        a later report's downstream check, checked now without a pass of its own
        (:func:`fairpca_dist.fitting.check_report_target`).
    on_bad_rows : {"fail", "drop"}
        ``"fail"``: any row with a NaN/inf feature or a missing group label raises
        :class:`InputError` (counts per column and a sample), and nothing is written except
        ``<out_dir>.rejects.csv`` next to it (the message offers to leave out the features
        missing in more than half of the rows). ``"drop"``: such rows are left out, counted
        in ``schema.json`` and sampled in ``rejects.csv``; leaving out every row is an error as
        with ``"fail"``, leaving fewer than 2 groups raises :class:`GroupError` naming the
        sensitive feature (a table of one group without bad rows is ingested as before: the
        fit refuses it), and leaving out more than half of the rows adds a line to the
        summary naming the columns that cost most.
    client : None, distributed.Client or address
        Where the pass runs (see :func:`fairpca_dist.compute_moments`). Workers write the
        partitions, so ``out_dir`` must be on storage they share: an object store's URL, or
        a disk mounted on every worker.
    storage_options : mapping, optional
        Options of the filesystems of ``source`` and ``out_dir``
        (:func:`fairpca_dist.io.storage.locate`).
    """
    if on_bad_rows not in ("fail", "drop"):
        raise InputError(f"on_bad_rows={on_bad_rows!r} must be 'fail' or 'drop'")
    if isinstance(source, np.ndarray):
        raise SchemaError("ingest needs named columns: pass a DataFrame or a path, not an array")
    table = open_table(
        source,
        sensitive_feature=sensitive_feature,
        features=features,
        sample_weight=sample_weight,
        key_columns=[*key_columns, *pass_through],
        exclude=exclude,
        read_options=read_options,
        storage_options=storage_options,
    )
    frame = table.frame
    if frame is None:
        raise SchemaError("ingest needs named columns: pass a DataFrame or a path, not an array")
    features_ = list(table.features)
    sensitive = list(table.sensitive)
    roles = list(dict.fromkeys([*key_columns, *sensitive, *pass_through, *([sample_weight] if sample_weight else [])]))
    dropped = _left_out(frame, {*roles, *features_}, exclude, listed_features=features is not None)
    profiled = [c for c, reason in dropped.items() if reason is None]
    uncountable = [c for c in count_values if c not in roles]
    if uncountable:
        raise InputError(
            f"count_values {uncountable} must be among the key, pass-through and sensitive columns {roles}"
        )
    limit = smallest_worker_limit(client) if wide is None and moments_budget is None else None
    choice = choose_wide(
        len(features_), 2, wide=wide, budget=moments_budget, worker_limit=limit
    )  # groups: not yet known
    out = locate(out_dir, storage_options)
    inputs = input_paths(source)
    with atomic_directory(out, inputs=inputs, marker=SCHEMA_FILE) as staging:
        (staging / PARTS_DIR).makedirs()

        def clean(feature_columns: list[str], text_columns: list[str], label: str) -> _Pass:
            """One pass: write the good rows of the roles and ``feature_columns`` and the moments
            of each file, profile ``text_columns``; the row sample of all of them."""
            columns = [*roles, *feature_columns]
            moments_folder = staging / TABLE_MOMENTS
            if moments_folder.exists():  # a pass again without the empty columns: other keys
                moments_folder.remove()
            moments_folder.makedirs()
            tasks = map_partitions(
                frame[[*columns, *text_columns]],
                _clean_partition,
                columns,
                feature_columns,
                sensitive,
                text_columns,
                staging / PARTS_DIR,
                sample_weight,
                # a wide table's rows are too wide for a sample in memory: the report needs none
                SampleSpec(tuple(columns), tuple(sensitive), *((0, 0) if choice.wide else ())),
                1 / max(frame.npartitions, 1),  # each partition's share of the rows, roughly
                choice.wide,
                roles_key(feature_columns, sensitive, sample_weight, choice.wide),
                list(count_values),
            )
            item = dask.delayed(operator.getitem, pure=True)  # a partition's report or row sample
            reports, row_sample = run_graph(
                ([item(t, 0) for t in tasks], tree_sum([item(t, 1) for t in tasks], _SPLIT_EVERY)),
                client=client,
                progress=progress,
                label=label,
            )
            return _Pass.of(reports, row_sample)

        found = clean(features_, profiled, "ingest")
        if found.rows + found.rejected == 0:
            origin = os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"the {type(source).__name__}"
            raise InputError(f"{origin} has no rows (only a header or empty files): nothing to ingest")
        dropped.update({c: found.profiles[c].reason() for c in profiled})
        empty = found.empty(features_)
        if empty and features is None and len(empty) < len(features_):
            # Every row was rejected for them: the partitions are written again without them.
            features_ = [c for c in features_ if c not in empty]
            found = replace(clean(features_, [], "ingest without the empty columns"), profiles=found.profiles)
            dropped.update({c: ALL_MISSING for c in empty})
        sample = found.rejects()
        if found.rejected and (on_bad_rows == "fail" or found.rows == 0):  # dropping all would leave nothing
            assert sample is not None
            kept = _write_failed_rejects(sample, failed_rejects_path(out), inputs)
            raise InputError(_rejected_message(found, sample, kept, features_, sensitive, list(key_columns)))
        if found.rejected and len(found.groups) < 2:
            raise GroupError(_groups_left_message(found, features_, sensitive))
        if sample is not None:
            with (staging / REJECTS_FILE).open("wb") as file:
                sample.to_csv(file, index=False)
        if not choice.wide and found.row_sample.exact():  # else (partitions far from equal) a report draws it
            _write_table_sample(found.row_sample, staging / SAMPLE_FILE)
        columns = [*roles, *features_]
        marked = {c: found.profiles[c].markers for c in profiled if found.profiles[c].markers}
        mostly = [c for c in marked if found.profiles[c].mostly_markers]
        markers = {c: found.profiles[c].markers for c in marked if c not in mostly}
        suggested = {"na_values": with_markers((read_options or {}).get("na_values"), markers)} if markers else {}
        schema: dict[str, Any] = {
            "format_version": _SCHEMA_VERSION,
            "source": os.fspath(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__,
            "features": features_,
            "sensitive_feature": sensitive,
            "sample_weight": sample_weight,
            "key_columns": list(key_columns),
            "pass_through": list(pass_through),
            "dtypes": {c: str(frame[c].dtype) if c not in features_ else "float64" for c in columns},
            "rows": found.rows,
            "rejected": found.rejected,
            "rejected_by_column": dict(sorted(found.bad_by_column.items())),
            "on_bad_rows": on_bad_rows,
            "dropped_columns": {str(c): reason for c, reason in dropped.items()},
            "suggested_read_options": suggested,
            "suggested_exclude": [str(c) for c in mostly],
            "groups": [{"label": label_to_json(g), "rows": found.groups[g]} for g in sorted_labels(list(found.groups))],
            "wide": choice.wide,
            "wide_reason": choice.reason,
            "partitions": [
                {"file": f"{PARTS_DIR}/part-{i:05d}.parquet", "rows": r.rows} for i, r in enumerate(found.reports)
            ],
        }
        with atomic_file(staging / SCHEMA_FILE, inputs=inputs) as path:
            path.write_text(json.dumps(schema, indent=2, default=str) + "\n")
    return IngestResult(as_given(out_dir), schema["rows"], found.rejected, schema, found.value_counts())


_SPLIT_EVERY = 4  # fan-in of the tree that merges the partitions' row samples (each up to ~60k rows)


def _write_table_sample(sample: RowSample, path: Location) -> None:
    """The row sample as Parquet, its spec in the file's metadata."""
    spec = sample.spec
    meta = {"columns": spec.columns, "group_columns": spec.group_columns, "max_rows": spec.max_rows}
    meta |= {"rows_per_group": spec.rows_per_group, "seed": spec.seed}
    table = pa.Table.from_pandas(sample.rows, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"fairpca_sample": json.dumps(meta)})
    with path.open("wb") as file:
        pq.write_table(table, file)


def read_table_sample(
    table_dir: str | os.PathLike[str], spec: SampleSpec, storage_options: StorageOptions | None = None
) -> RowSample | None:
    """The row sample ingest drew while it wrote the table (``sample.parquet``), if it holds
    the sample ``spec`` asks for (:meth:`~fairpca_dist.engine.sampling.SampleSpec.covers`),
    restricted to that spec; None otherwise (a table ingested by an older version, or a
    larger sample asked for): the caller then draws it by a pass
    (:func:`~fairpca_dist.engine.passes.table_sample`), with the same result."""
    path = committed(locate(table_dir, storage_options)) / SAMPLE_FILE
    if not path.isfile():
        return None
    with reading(path), path.open("rb") as file:
        table = pq.read_table(file)
    meta = json.loads((table.schema.metadata or {}).get(b"fairpca_sample", b"null"))
    if not isinstance(meta, dict):
        return None
    stored = SampleSpec(
        tuple(meta["columns"]), tuple(meta["group_columns"]), meta["max_rows"], meta["rows_per_group"], meta["seed"]
    )
    if not stored.covers(spec):
        return None
    return RowSample(stored, table.to_pandas()).restricted(spec)


def _left_out(
    frame: dd.DataFrame, kept: set[str], exclude: Sequence[str], *, listed_features: bool
) -> dict[str, str | None]:
    """Each column of ``frame`` not in ``kept`` and why: excluded, not listed (when the user
    listed the features), not numeric for a dtype such as a date, or ``None`` for a column read
    as text, whose values say why (profiled while the rows are read)."""
    reasons: dict[str, str | None] = {}
    for column, dtype in frame.dtypes.items():
        if column in kept:
            continue
        if column in exclude:
            reasons[column] = EXCLUDED
        elif listed_features:
            reasons[column] = NOT_LISTED
        elif pd.api.types.is_string_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype):
            reasons[column] = None
        else:
            reasons[column] = f"not numeric ({dtype})"
    return reasons


def _rejected_message(
    found: _Pass, sample: pd.DataFrame, kept: str, features: list[str], sensitive: list[str], keys: list[str]
) -> str:
    """Why a failed ingest wrote nothing, in a few short lines: the count of rejected rows and
    the columns with the most bad values, where the sample is, the first row's key and bad
    values, and the remedies (leaving the rows out only when some would remain)."""
    empty = found.empty(features)
    leave_out = (
        f"Feature(s) {empty} have no usable value in any row: leave them out ({exclude_hint(empty)}).\n"
        if empty
        else ""
    )
    mostly = [c for c in _mostly_bad(found.bad_by_column, found.rows + found.rejected, features) if c not in empty]
    if mostly:
        leave_out += (
            f"{_columns_named(mostly)} missing in more than half of the rows: leave them out to keep "
            f"those rows ({exclude_hint(mostly)}).\n"
        )
    drop = (
        ", or ingest with on_bad_rows='drop' (command line: --on-bad-rows drop) to leave the rows out"
        if found.rows
        else " (every row has a bad value: leaving them out would leave none)"
    )
    rows = f"{found.rejected:,} row(s)" if found.rows else f"all {found.rejected:,} row(s)"
    counts = dict(sorted(found.bad_by_column.items()))
    return (
        f"{rows} have bad values (per column: {listed_counts(counts, show=repr)}); {kept}; "
        f"the first: {_first_rejected(sample, features, sensitive, keys)}.\n"
        f"Nothing was written. {leave_out}Clean the source{drop}"
    )


def _groups_left_message(found: _Pass, features: list[str], sensitive: list[str]) -> str:
    """Why dropping the bad rows left too few groups to compare: the groups left and the
    columns that rejected most."""
    left = listed_counts({str(label): n for label, n in found.groups.items()}, show=str) if found.groups else "none"
    return (
        f"dropping the rows with bad values left fewer than 2 groups of sensitive feature "
        f"{', '.join(map(repr, sensitive))} (rows per group: {left}): nothing to compare. "
        f"{_rejected_line(found.bad_by_column, found.rows, found.rejected, features)}. Nothing was written."
    )


def _first_rejected(sample: pd.DataFrame, features: list[str], sensitive: list[str], keys: list[str]) -> str:
    """``"id=3, b=nan"``: the first rejected row's key columns and its bad values."""
    row = sample.head(1)
    finite = np.isfinite(feature_values(row, features, "the first rejected row"))[0]
    bad = [c for c, ok in zip(features, finite, strict=True) if not ok] + [
        c for c in sensitive if row[c].isna().iloc[0]
    ]
    values = {c: row[c].iloc[0] for c in [*keys, *bad]}
    return listed([f"{c}={v!r}" if isinstance(v, str) else f"{c}={v}" for c, v in values.items()], show=str)


def _write_failed_rejects(sample: pd.DataFrame, path: Location, inputs: list[str | os.PathLike[str]]) -> str:
    """Write the sample of a failed ingest's rejected rows to ``path`` (by a rename: a link
    there is replaced, never written through), unless ``path`` is an input; say where it is."""
    try:
        with atomic_file(path, inputs=inputs) as staging, staging.open("wb") as file:
            sample.to_csv(file, index=False)
    except OutputPathError:
        return f"no sample of them was written ({path}, where it goes, is an input or a folder)"
    return f"a sample is in {path}"


def failed_rejects_path(
    table_dir: str | os.PathLike[str] | Location, storage_options: StorageOptions | None = None
) -> Location:
    """Where a failed ingest into ``table_dir`` leaves its sample of rejected rows (beside it:
    the failure writes nothing into ``table_dir``)."""
    out = locate(table_dir, storage_options)
    return out.parent / f"{out.name}.{REJECTS_FILE}"


def read_schema(table_dir: str | os.PathLike[str], storage_options: StorageOptions | None = None) -> dict[str, Any]:
    """The ``schema.json`` of an ingested table (group labels restored to Python values)."""
    path = committed(locate(table_dir, storage_options)) / SCHEMA_FILE
    if not path.isfile():
        raise InputError(f"{table_dir} is not an ingested table: {SCHEMA_FILE} is missing")
    damaged = f"{path} is damaged (truncated or edited?); ingest the table again"
    try:
        with reading(path):
            schema = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{damaged}: {error}") from error
    if not isinstance(schema, dict):
        raise InputError(f"{damaged}: it holds a {type(schema).__name__}, not a table's schema")
    if schema.get("format_version") != _SCHEMA_VERSION:
        raise InputError(f"{path}: unsupported schema version {schema.get('format_version')!r}")
    try:
        for group in schema["groups"]:
            group["label"] = label_from_json(group["label"])
    except (KeyError, TypeError) as error:
        raise InputError(f"{damaged}: its groups are malformed ({type(error).__name__}: {error})") from error
    return schema


def table_source(table_dir: str | os.PathLike[str], storage_options: StorageOptions | None = None) -> str:
    """The Parquet folder of an ingested table (its ``parts/``, in the committed version on an
    object store), or ``table_dir`` itself for any other Parquet folder."""
    folder = committed(locate(table_dir, storage_options))
    parts = folder / PARTS_DIR
    if (folder / SCHEMA_FILE).isfile() and parts.isdir():
        return parts.url
    return os.fspath(table_dir)
