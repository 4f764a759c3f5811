"""Ingestion: a source table (CSV, Parquet, folder, glob, DataFrame) → validated, partitioned
Parquet plus ``schema.json``.

Rows whose features are NaN/inf or whose group label is missing are counted per column and
sampled into a rejects file; with ``on_bad_rows="fail"`` (the default) their presence is an
error and nothing is written, with ``"drop"`` they are left out and recorded. Nothing is
dropped silently. The output folder appears complete or not at all.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fairpca_dist.atomic import atomic_directory, atomic_file, input_paths
from fairpca_dist.exceptions import InputError, OutputPathError, SchemaError, reading
from fairpca_dist.moments import label_from_json, label_to_json, sorted_labels
from fairpca_dist.passes import run_graph
from fairpca_dist.sources import Partition, feature_values, open_table
from fairpca_dist.storage import Location, StorageOptions, as_given, locate
from fairpca_dist.versions import committed

__all__ = ["ingest_table", "IngestResult", "read_schema", "table_source", "failed_rejects_path", "SCHEMA_FILE",
           "REJECTS_SAMPLE_ROWS"]

SCHEMA_FILE = "schema.json"
REJECTS_FILE = "rejects.csv"
PARTS_DIR = "parts"  # the Parquet files, alone in their folder so any Parquet reader can open it
REJECTS_SAMPLE_ROWS = 1000
_SCHEMA_VERSION = 1
BadRowPolicy = Literal["fail", "drop"]


@dataclass(frozen=True)
class IngestResult:
    """Where the table was written and what was found."""

    table_dir: str | Path
    rows: int
    rejected: int
    schema: dict[str, Any]

    def summary(self) -> str:
        """One line for a person: rows, rejected rows, the features used and the groups found."""
        features = self.schema["features"]
        shown = ", ".join(features if len(features) <= 10 else [*features[:8], "…"])
        groups = len(self.schema["groups"])
        return (f"{self.rows:,} rows ({self.rejected:,} rejected), {len(features)} features ({shown}), "
                f"{groups} groups by {', '.join(self.schema['sensitive_feature'])}")


@dataclass(frozen=True)
class _PartitionReport:
    rows: int
    rejected: int
    bad_by_column: dict[str, int]
    sample: pd.DataFrame
    groups: dict[Any, int]


def _group_label(key: Any, n_columns: int) -> Any:
    return tuple(key) if n_columns > 1 else (key[0] if isinstance(key, tuple) else key)


def _clean_partition(
    part: pd.DataFrame, partition: Partition, columns: list[str], features: list[str], sensitive: list[str],
    folder: Location,
) -> _PartitionReport:
    values = feature_values(part, features, partition)
    bad_values = ~np.isfinite(values)
    missing_group = part[sensitive].isna().to_numpy()
    bad = bad_values.any(axis=1) | missing_group.any(axis=1)
    good = part.loc[~bad, columns].astype({f: "float64" for f in features}).reset_index(drop=True)
    with (folder / f"part-{partition.index:05d}.parquet").open("wb") as file:
        pq.write_table(pa.Table.from_pandas(good, preserve_index=False), file)
    counts = {features[j]: int(n) for j, n in enumerate(bad_values.sum(axis=0)) if n}
    counts.update({f"{column} (missing group)": int(n) for column, n in zip(sensitive, missing_group.sum(axis=0)) if n})
    groups = good.groupby(sensitive, sort=False, dropna=False).size() if len(good) else pd.Series(dtype=int)
    return _PartitionReport(
        rows=int((~bad).sum()),
        rejected=int(bad.sum()),
        bad_by_column=counts,
        sample=part.loc[bad, columns].head(REJECTS_SAMPLE_ROWS),
        groups={_group_label(key, len(sensitive)): int(n) for key, n in groups.items()},
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
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> IngestResult:
    """Validate ``source`` and write it to ``out_dir`` as Parquet partitions + ``schema.json``.

    Parameters
    ----------
    source : path or DataFrame
        CSV or Parquet file, folder or glob, or a pandas/dask DataFrame.
    out_dir : path
        Output folder: ``parts/part-NNNNN.parquet`` (one per source partition; the ``parts``
        folder opens in any Parquet reader), ``schema.json`` and, when rows were dropped,
        ``rejects.csv`` (a sample of at most 1000 rejected rows).
    sensitive_feature, features, key_columns, sample_weight, exclude
        Column roles, as in :func:`fairpca_dist.sources.open_table`.
    pass_through : list of str
        Further columns kept unchanged (e.g. a target for the downstream fairness report).
    on_bad_rows : {"fail", "drop"}
        ``"fail"``: any row with a NaN/inf feature or a missing group label raises
        :class:`InputError` (counts per column and a sample), and nothing is written except
        ``<out_dir>.rejects.csv`` next to it. ``"drop"``: such rows are left out, counted in
        ``schema.json`` and sampled in ``rejects.csv``.
    client : None, distributed.Client or address
        Where the pass runs (see :func:`fairpca_dist.compute_moments`). Workers write the
        partitions, so ``out_dir`` must be on storage they share: an object store's URL, or
        a disk mounted on every worker.
    storage_options : mapping, optional
        Options of the filesystems of ``source`` and ``out_dir``
        (:func:`fairpca_dist.storage.locate`).
    """
    if on_bad_rows not in ("fail", "drop"):
        raise InputError(f"on_bad_rows={on_bad_rows!r} must be 'fail' or 'drop'")
    if isinstance(source, np.ndarray):
        raise SchemaError("ingest needs named columns: pass a DataFrame or a path, not an array")
    table = open_table(
        source, sensitive_feature=sensitive_feature, features=features, sample_weight=sample_weight,
        key_columns=[*key_columns, *pass_through], exclude=exclude, read_options=read_options,
        storage_options=storage_options,
    )
    if table.frame is None:
        raise SchemaError("ingest needs named columns: pass a DataFrame or a path, not an array")
    features_ = list(table.features)
    sensitive = list(table.sensitive)
    columns = list(dict.fromkeys([*key_columns, *sensitive, *pass_through, *([sample_weight] if sample_weight else []), *features_]))
    out = locate(out_dir, storage_options)
    inputs = input_paths(source)
    with atomic_directory(out, inputs=inputs, marker=SCHEMA_FILE) as staging:
        (staging / PARTS_DIR).makedirs()
        tasks = table.map_partitions(_clean_partition, columns, features_, sensitive, staging / PARTS_DIR)
        reports: list[_PartitionReport] = list(run_graph(tasks, client=client, progress=progress, label="ingest"))
        rejected = sum(r.rejected for r in reports)
        if not reports or sum(r.rows for r in reports) + rejected == 0:
            origin = os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"the {type(source).__name__}"
            raise InputError(f"{origin} has no rows (only a header or empty files): nothing to ingest")
        sample = pd.concat([r.sample for r in reports]).head(REJECTS_SAMPLE_ROWS) if rejected else None
        bad_by_column = Counter()
        for r in reports:
            bad_by_column.update(r.bad_by_column)
        if rejected and on_bad_rows == "fail":
            assert sample is not None
            kept = _write_failed_rejects(sample, failed_rejects_path(out), inputs)
            total = rejected + sum(r.rows for r in reports)
            empty = [c for c in features_ if bad_by_column[c] == total]
            leave_out = (f" Feature(s) {empty} have no usable value in any row: leave them out (exclude={empty}; "
                         f"command line: --exclude {' '.join(empty)})." if empty else "")
            raise InputError(
                f"{rejected} row(s) have bad values ({dict(sorted(bad_by_column.items()))}); {kept}; first: "
                f"{sample.head(1).to_dict(orient='records')}. Nothing was written.{leave_out} "
                "Clean the source, or ingest with on_bad_rows='drop' (command line: --on-bad-rows drop) "
                "to leave the rows out"
            )
        if sample is not None:
            with (staging / REJECTS_FILE).open("wb") as file:
                sample.to_csv(file, index=False)
        groups: Counter = Counter()
        for r in reports:
            groups.update(r.groups)
        schema = {
            "format_version": _SCHEMA_VERSION,
            "source": os.fspath(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__,
            "features": features_,
            "sensitive_feature": sensitive,
            "sample_weight": sample_weight,
            "key_columns": list(key_columns),
            "pass_through": list(pass_through),
            "dtypes": {c: str(table.frame[c].dtype) if c not in features_ else "float64" for c in columns},
            "rows": sum(r.rows for r in reports),
            "rejected": rejected,
            "rejected_by_column": dict(sorted(bad_by_column.items())),
            "on_bad_rows": on_bad_rows,
            "groups": [{"label": label_to_json(g), "rows": groups[g]} for g in sorted_labels(list(groups))],
            "partitions": [{"file": f"{PARTS_DIR}/part-{i:05d}.parquet", "rows": r.rows} for i, r in enumerate(reports)],
        }
        with atomic_file(staging / SCHEMA_FILE, inputs=inputs) as path:
            path.write_text(json.dumps(schema, indent=2, default=str) + "\n")
    return IngestResult(as_given(out_dir), schema["rows"], rejected, schema)


def _write_failed_rejects(sample: pd.DataFrame, path: Location, inputs: list[str | os.PathLike[str]]) -> str:
    """Write the sample of a failed ingest's rejected rows to ``path`` (by a rename: a link
    there is replaced, never written through), unless ``path`` is an input; say where it is."""
    try:
        with atomic_file(path, inputs=inputs) as staging, staging.open("wb") as file:
            sample.to_csv(file, index=False)
    except OutputPathError:
        return f"no sample of them was written ({path}, where it goes, is an input or a folder)"
    return f"a sample is in {path}"


def failed_rejects_path(table_dir: str | os.PathLike[str] | Location,
                        storage_options: StorageOptions | None = None) -> Location:
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
