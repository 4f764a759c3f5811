"""Write-back: apply a fitted projection to a table, chunk by chunk, as Parquet.

Each partition becomes ``part-NNNNN.parquet`` with the pass-through columns followed by the
projected columns ``<prefix>0 … <prefix>{r'−1}``. Files are written to a staging folder and
the folder is swapped into place with a ``_SUCCESS`` marker only when every partition is
done (on an object store: a new version, committed by its pointer; see
:mod:`fairpca_dist.io.atomic`): a failure leaves the previous output (or nothing), and a rerun
writes identical bytes. Dask workers write the partitions themselves, to a URL: they need no
disk shared with the driver.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairpca_dist.engine.kernels import RFFSums
from fairpca_dist.engine.passes import RFFWork, run_graph
from fairpca_dist.engine.sources import Partition, check_finite, feature_values, open_table
from fairpca_dist.exceptions import SchemaError
from fairpca_dist.io.atomic import atomic_directory, input_paths
from fairpca_dist.io.ingest import table_source
from fairpca_dist.io.model_io import load_model
from fairpca_dist.io.storage import Location, StorageOptions, as_given, write_parquet
from fairpca_dist.solvers.result import FairProjection

__all__ = ["project_table", "ProjectionResult", "SUCCESS_MARKER", "projected_columns"]

SUCCESS_MARKER = "_SUCCESS"


@dataclass(frozen=True)
class ProjectionResult:
    """What :func:`project_table` wrote: the output as given (a path or a URL), its rows,
    partitions (files) and columns; and the random-feature sums asked for (``rff=``), else None."""

    out_dir: str | Path
    rows: int
    partitions: int
    columns: tuple[str, ...]
    rff_sums: list[RFFSums] | None = None


def projected_columns(model: FairProjection, prefix: str = "fairpca") -> list[str]:
    """Names of the projected columns (as ``FairPCA.get_feature_names_out``)."""
    return [f"{prefix}{j}" for j in range(model.components.shape[1])]


def _project_partition(
    part: pd.DataFrame,
    partition: Partition,
    features: list[str],
    pass_through: list[str],
    names: list[str],
    model: FairProjection,
    folder: Location,
    rff: RFFWork | None,
) -> tuple[int, list[RFFSums] | None]:
    x = feature_values(part, features, partition)
    # a NaN or an infinity makes the sum non-finite, so a finite sum spares the n x p mask of the
    # exact check (~9 ms of a 100k x 50 partition on a worker, whose large temporaries are mapped
    # afresh; the sum makes none)
    with np.errstate(over="ignore", invalid="ignore"):
        total = x.sum()
    if not np.isfinite(total) and not np.isfinite(x).all():
        check_finite(x, features, partition)
    write_parquet(
        part[pass_through].reset_index(drop=True),
        folder / f"part-{partition.index:05d}.parquet",
        model.transform(x),
        names,
    )
    return len(x), None if rff is None else rff.of_partition(part, partition, x)


def project_table(
    model: FairProjection | str | os.PathLike[str],
    source: Any,
    out_dir: str | os.PathLike[str],
    *,
    pass_through: Sequence[str] = (),
    prefix: str = "fairpca",
    read_options: dict[str, Any] | None = None,
    rff: RFFWork | None = None,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> ProjectionResult:
    """Project every row of ``source`` with ``model`` and write Parquet to ``out_dir``.

    Rows map to ((x − mean) / scale) @ components. ``model`` is a fitted projection or the
    folder of a saved one (:func:`~fairpca_dist.io.model_io.load_model`); ``source`` is a table
    (as :func:`~fairpca_dist.engine.sources.open_table` takes it) or an ingested table's folder. It must have
    every feature the model was fitted on (by name); NaN/inf features raise
    :class:`InputError` naming the column and partition, and then nothing is written.
    ``out_dir`` is replaced atomically; it must not overlap ``source`` or the model's folder,
    and may be replaced only if it holds a previous projection (its ``_SUCCESS``)
    (:class:`~fairpca_dist.exceptions.OutputPathError` before anything is read or written).
    ``storage_options`` open every path and URL given (:func:`fairpca_dist.io.storage.locate`).
    With ``rff``, the same pass computes those random-feature sums of the rows (e.g. the
    report's RBF-kernel MMD² of both arms, :func:`fairpca_dist.fitting.report_rff_work`), which
    would otherwise cost a pass of their own.

    Parameters
    ----------
    model : FairProjection, str or path-like
        A fitted projection, or the folder of a saved one.
    source : DataFrame, array, path or URL
        The rows to project, or an ingested table's folder.
    out_dir : str or path-like
        The output folder (or URL): Parquet partitions and a ``_SUCCESS`` marker.
    pass_through : sequence of str, default ()
        Columns copied unchanged before the projected ones (e.g. a key).
    prefix : str, default "fairpca"
        The projected columns are ``fairpca0``, ``fairpca1``, ...
    read_options : dict, optional
        Options of the reader (CSV or Parquet).
    rff : RFFWork, optional
        Random-feature sums to compute in the same pass (returned in ``rff_sums``).
    client : None, distributed.Client or str, optional
        Where the pass runs.
    progress : bool, default False
        Show a progress bar.
    storage_options : dict, optional
        Options of the filesystem of URLs.

    Returns
    -------
    ProjectionResult
        ``out_dir`` as given, the rows and partitions written, and the columns.

    Raises
    ------
    SchemaError
        A feature of the model is missing from ``source``, or a pass-through column collides
        with a projected column's name.
    InputError
        NaN/inf features (naming the column and partition); nothing is written.
    OutputPathError
        ``out_dir`` overlaps an input, or holds something other than a previous projection.
    OutputBusyError, WriteError
        Another writer holds ``out_dir``; the output cannot be written.
    """
    inputs = input_paths(source, model)
    if not isinstance(model, FairProjection):
        model = load_model(model, storage_options=storage_options)
    if isinstance(source, (str, os.PathLike)):
        source = table_source(source, storage_options=storage_options)
    features = list(model.feature_names)
    table = open_table(
        source,
        features=features,
        key_columns=list(dict.fromkeys([*pass_through, *(rff.columns if rff is not None else [])])),
        read_options=read_options,
        storage_options=storage_options,
    )
    names = projected_columns(model, prefix)
    clash = sorted(set(names) & set(pass_through))
    if clash:
        raise SchemaError(f"pass-through column(s) {clash} collide with the projected column names")
    with atomic_directory(out_dir, inputs=inputs, marker=SUCCESS_MARKER, storage_options=storage_options) as staging:
        tasks = table.map_partitions(_project_partition, features, list(pass_through), names, model, staging, rff)
        done = run_graph(tasks, client=client, progress=progress, label="project")
        result = ProjectionResult(
            as_given(out_dir),
            int(sum(n for n, _ in done)),
            len(done),
            tuple([*pass_through, *names]),
            None if rff is None else RFFWork.merge([sums for _, sums in done]),
        )
        marker = {
            "rows": result.rows,
            "partitions": result.partitions,
            "columns": list(result.columns),
            "method": model.method,
            "n_components": model.n_components,
        }
        (staging / SUCCESS_MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    return result
