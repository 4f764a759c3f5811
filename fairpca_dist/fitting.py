"""Fit a model on a Parquet table, with moments cached per file; report on it.

The moments of every Parquet file are cached (:mod:`fairpca_dist.io.moments_cache`): a refit
with another method or ``n_components`` reads no rows, nor does the first fit of a table that
ingest wrote (it stored them in the table); a table that gained files reads only the new ones.

The report of a model on its table reads the rows only for what the moments do not give: a
row sample (ingest's, else one pass) and the RBF-kernel MMD² (a pass of its own, or sums the
projection's write-back computed on the way: :func:`report_rff_work`).
"""

from __future__ import annotations

import functools
import hashlib
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.engine.passes import (
    RFFWork,
    TablePasses,
    compute_file_moments,
    rff_pass,
    smallest_worker_limit,
    table_passes,
    table_sample,
    value_counts,
)
from fairpca_dist.engine.sampling import RowSample, SampleSpec
from fairpca_dist.exceptions import InputError, SchemaError, reading
from fairpca_dist.io.atomic import atomic_directory, check_output
from fairpca_dist.io.ingest import SCHEMA_FILE, read_schema, read_table_sample, table_source
from fairpca_dist.io.model_io import MODEL_FILE, load_model, read_model_file, write_model_files
from fairpca_dist.io.moments_cache import (
    MOMENTS_CACHE,
    TABLE_MOMENTS,
    cached_keys,
    file_fingerprint,
    file_keys,
    moments_cache,
    roles_key,
    store_moments,
)
from fairpca_dist.io.storage import Location, StorageOptions, is_url, locate
from fairpca_dist.io.versions import committed
from fairpca_dist.params import WideChoice, check_wide_method, choose_wide
from fairpca_dist.solvers import SOLVERS, fit_projection
from fairpca_dist.solvers.result import FairProjection

if TYPE_CHECKING:  # scikit-learn and matplotlib: imported when a report is written
    from fairpca_dist.assessment.report import RBFPlan, RBFSums, ReportFiles

__all__ = [
    "table_files",
    "file_fingerprint",
    "cached_table_moments",
    "fit_table",
    "report_passes",
    "report_rff_work",
    "report_sample",
    "check_report_target",
    "moments_cache",
    "MOMENTS_CACHE",
    "load_fitted",
    "write_table_report",
    "MOMENTS_FILE",
]

MOMENTS_FILE = "moments.npz"


def table_files(table_dir: str | os.PathLike[str], storage_options: StorageOptions | None = None) -> list[Location]:
    """The Parquet files of a table folder (an ingested table's ``parts/``), sorted by name."""
    folder = locate(table_source(table_dir, storage_options), storage_options)
    with reading(folder):
        if not folder.isdir():
            raise InputError(f"table folder {folder} does not exist")
        files = sorted(
            (p for p in folder.listdir() if p.name.endswith((".parquet", ".pq")) and not p.name.startswith(".")),
            key=lambda p: p.name,
        )
    if not files:
        raise InputError(f"no Parquet files in {folder}")
    return files


def cached_table_moments(
    table_dir: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str] | Location | None,
    *,
    sensitive_feature: str | Sequence[str],
    features: Sequence[str],
    sample_weight: str | None = None,
    diagonal: bool = False,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> tuple[GroupMoments, str, int]:
    """Moments of every file of ``table_dir``, computing only files missing from the cache and
    from the table's own ``moments/`` (written by ingest); with ``diagonal``, those that keep
    only their diagonal (a wide table, :attr:`~fairpca_dist.engine.moments.GroupMoments.is_diagonal`).

    Returns ``(moments, fingerprint, files_read)``: the merged statistics (files merged in name
    order), a fingerprint of the data (all file keys), and how many files were read now. A
    cache that cannot be written (a read-only disk, another user's folder) is skipped with a
    warning: the moments are the same, a later fit reads the rows again.
    """
    files = table_files(table_dir, storage_options)
    keys = file_keys(files, roles_key(features, sensitive_feature, sample_weight, diagonal))
    cache = locate(cache_dir, storage_options) if cache_dir is not None else None
    own = committed(locate(table_dir, storage_options)) / TABLE_MOMENTS  # what ingest computed
    found = {key: folder for folder in (own, cache) if folder is not None for key in cached_keys(folder)}
    missing = [(f, k) for f, k in zip(files, keys, strict=True) if k not in found]
    fresh = compute_file_moments(
        [f.url for f, _ in missing],
        sensitive_feature=sensitive_feature,
        features=features,
        sample_weight=sample_weight,
        client=client,
        progress=progress,
        diagonal=diagonal,
        storage_options=storage_options,
    )
    computed = {key: moments for (_, key), moments in zip(missing, fresh, strict=True)}
    if computed:
        store_moments(cache, computed, [table_dir], table_dir)
    merged = functools.reduce(
        operator.add, (computed[k] if k in computed else GroupMoments.load(found[k] / f"{k}.npz") for k in keys)
    )
    fingerprint = hashlib.sha256(":".join(keys).encode()).hexdigest()
    return merged, fingerprint, len(missing)


def fit_table(
    table_dir: str | os.PathLike[str],
    model_dir: str | os.PathLike[str],
    *,
    method: str = "fair-eig",
    n_components: int = 2,
    center: str = "group",
    standardize: bool = False,
    ddof: int = 0,
    sensitive_feature: str | Sequence[str] | None = None,
    features: Sequence[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    random_state: int | None = None,
    options: dict[str, Any] | None = None,
    wide: bool | None = None,
    moments_budget: int | None = None,
    announce: Callable[[str], None] | None = None,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> FairProjection:
    """Fit ``method`` on a Parquet table and write ``moments.npz`` + the model to ``model_dir``.

    A table ingested by :func:`ingest_table` is fitted the way ingest chose (``schema.json``'s
    ``wide``) unless ``wide`` or ``moments_budget`` is given; another, or with
    ``moments_budget``, is fitted the wide way when its p × p moments would exceed that many
    bytes for its groups (or on request, ``wide=True``; :func:`~fairpca_dist.params.choose_wide`):
    moments that keep only their diagonal (k × p numbers), by a method that reads the rows for
    every product with a covariance (``fnpm-streaming``; the others are refused, by name).

    Column roles come from the table's ``schema.json`` (written by :func:`ingest_table`) unless
    given. Moments are cached per file in ``cache_dir`` (default ``<table_dir>/../.moments-cache``).
    Methods that read the rows at every iteration (``mm-robust``) read the table again, where
    ``client`` says, one pass per iteration. ``model_dir`` is written as a whole
    (:func:`~fairpca_dist.io.atomic.atomic_directory`: ``moments.npz``, ``model.npz`` and
    ``model.json`` of one fit, or the previous model untouched); it is locked from the first
    pass, so a concurrent fit into it raises :class:`~fairpca_dist.exceptions.OutputBusyError`,
    and a folder holding other files than a model is refused. A moments cache that cannot be
    written (a read-only table) is skipped with a warning. Paths may be URLs (``s3://…``),
    opened with ``storage_options``. The model records the sensitive column(s)
    (:attr:`~fairpca_dist.solvers.result.FairProjection.group_columns`), by which reports name
    the groups.

    Parameters
    ----------
    table_dir : str or path-like
        An ingested table's folder (or URL).
    model_dir : str or path-like
        The model folder to write.
    method : str, default "fair-eig"
        A method of :data:`~fairpca_dist.solvers.SOLVERS`.
    n_components : int, default 2
        The rank r.
    center : {"group", "global", "origin"}, default "group"
        About which point each group's error is measured.
    standardize : bool, default False
        Divide each feature by its standard deviation before fitting.
    ddof : int, default 0
        Delta degrees of freedom of that standard deviation.
    sensitive_feature, features : optional
        Column roles; default: the table's ``schema.json``.
    cache_dir : str or path-like, optional
        Where the per-file moments are cached.
    random_state : int, optional
        Seed of the methods with random starts.
    options : dict, optional
        The method's options.
    wide : bool, optional
        Take the wide path (True), the moments pass (False), or decide by ``moments_budget``
        (None).
    moments_budget : int, optional
        Bytes the p × p moments may take (default :data:`~fairpca_dist.params.MOMENTS_BUDGET`, or
        a tenth of the smallest worker memory limit of ``client`` when that is less).
    announce : callable, optional
        Receives one line when the fit takes the wide path, saying why.
    client : None, distributed.Client or str, optional
        Where the passes run.
    progress : bool, default False
        Show a progress bar per pass.
    storage_options : dict, optional
        Options of the filesystem of URLs.

    Returns
    -------
    FairProjection
        The fitted model (also written to ``model_dir``).

    Raises
    ------
    InputError
        No ingested table at ``table_dir``, a bad method, option or rank.
    GroupError, SchemaError
        Too few groups or rows per group; constant columns with ``standardize``.
    OutputPathError, OutputBusyError, WriteError
        ``model_dir`` overlaps the table or holds other files; another writer holds it; it
        cannot be written.
    """
    table = table_dir if is_url(table_dir) else Path(locate(table_dir).path)
    if sensitive_feature is None or features is None:
        folder = committed(locate(table, storage_options))
        with reading(folder):
            if not folder.exists():
                raise InputError(
                    f"table folder {table} does not exist (ingest_table, on the command line "
                    "`fairpca ingest`, writes one)"
                )
            if not (folder / SCHEMA_FILE).isfile():
                raise InputError(
                    f"{table} has no {SCHEMA_FILE}: it is not an ingested table (ingest it first: "
                    "ingest_table, on the command line `fairpca ingest`), or pass sensitive_feature "
                    "and features to fit_table"
                )
        schema = read_schema(table, storage_options)
        sensitive_feature = sensitive_feature or schema["sensitive_feature"]
        features = features or schema["features"]
        sample_weight = schema.get("sample_weight")
        n_groups, recorded = len(schema.get("groups", [])), schema.get("wide")
    else:
        sample_weight, n_groups, recorded = None, 2, None
    follow = wide is None and moments_budget is None and recorded is not None
    if follow:  # ingest's choice, both ways: its moments are there (on request, or by its budget)
        choice = WideChoice(bool(recorded), f"as ingested: {schema['wide_reason']}")
    else:
        limit = smallest_worker_limit(client) if wide is None and moments_budget is None else None
        choice = choose_wide(len(features), n_groups, wide=wide, budget=moments_budget, worker_limit=limit)
    check_wide_method(method, choice, n_groups, recorded=follow)
    if choice.wide and announce is not None:
        announce(f"fit: {choice.reason}")
    cache = moments_cache(table, cache_dir, storage_options)
    with atomic_directory(
        model_dir, inputs=[table], marker=MODEL_FILE, storage_options=storage_options
    ) as staging:  # locked from the first pass
        moments, fingerprint, _ = cached_table_moments(
            table,
            cache,
            sensitive_feature=sensitive_feature,
            features=features,
            sample_weight=sample_weight,
            diagonal=choice.wide,
            client=client,
            progress=progress,
            storage_options=storage_options,
        )
        passes = None
        if method in SOLVERS and SOLVERS[method].reads_rows(options or {}):  # mm-robust, RBF mmd: passes on the cluster
            passes = table_passes(
                table_source(table, storage_options),
                moments,
                sensitive_feature=sensitive_feature,
                sample_weight=sample_weight,
                client=client,
                progress=progress,
                storage_options=storage_options,
            )
        model = replace(
            fit_projection(
                moments,
                n_components,
                method=method,
                center=cast(Center, center),  # checked there
                standardize=standardize,
                ddof=ddof,
                random_state=random_state,
                passes=passes,
                **(options or {}),
            ),
            group_columns=_columns(sensitive_feature),
        )
        write_model_files(model, staging, fingerprint=fingerprint)  # into the empty staging folder
        moments.save(staging / MOMENTS_FILE)
    return model


def _columns(names: str | Sequence[str]) -> tuple[str, ...]:
    return (names,) if isinstance(names, str) else tuple(names)


def load_fitted(
    model_dir: str | os.PathLike[str], storage_options: StorageOptions | None = None
) -> tuple[FairProjection, GroupMoments]:
    """The model in ``model_dir`` and the moments it was fitted on (``moments.npz``, written
    by :func:`fit_table`); a folder without them raises :class:`InputError` naming the file."""
    model = load_model(model_dir, storage_options)
    moments = read_model_file(
        model_dir,
        MOMENTS_FILE,
        GroupMoments.load,
        storage_options=storage_options,
        missing=(
            ": the report needs the moments fit_table writes beside the model (a model saved by save_model alone has "
            "none); refit it with fit_table (command line: `fairpca fit TABLE MODEL_DIR`)"
        ),
    )
    return model, moments


def write_table_report(
    model_dir: str | os.PathLike[str],
    table_dir: str | os.PathLike[str],
    report_dir: str | os.PathLike[str],
    *,
    target: str | None = None,
    max_components: int | None = None,
    sample_size: int = 50_000,
    rbf_mmd: str = "auto",
    group_names: Mapping[Any, str] | None = None,
    rbf_sums: RBFSums | None = None,
    client: Any = None,
    progress: bool = False,
    announce: Callable[[str], None] | None = None,
    storage_options: StorageOptions | None = None,
) -> tuple[dict, ReportFiles]:
    """Build the fairness report of the model in ``model_dir`` on its ingested table and write
    it to ``report_dir`` (:func:`~fairpca_dist.assessment.report.build_report`, then
    :func:`~fairpca_dist.assessment.report.write_report`).

    ``report_dir`` is checked against both inputs before any work (it must not overlap them:
    :class:`~fairpca_dist.exceptions.OutputPathError`). ``announce`` receives one line saying
    what the report refits (the curves cost a fit per r) before it starts. With ``target``, a
    sample of ``sample_size`` rows feeds the downstream parity check. ``group_names`` names
    values of the sensitive column(s) (:func:`~fairpca_dist.assessment.report.build_report`); a model
    that did not record its sensitive column(s) (saved by an older version) takes them from
    the table's ``schema.json``. ``progress``: a bar for every pass over the rows. Returns the
    report (a dict of JSON values) and its :class:`~fairpca_dist.assessment.report.ReportFiles`.

    Parameters
    ----------
    model_dir : str or path-like
        A model folder written by :func:`fit_table` (with its ``moments.npz``).
    table_dir : str or path-like
        The ingested table the model was fitted on.
    report_dir : str or path-like
        The report folder to write.
    target : str, optional
        A binary column of the table for the downstream classifier check.
    max_components : int, optional
        The largest r of the curves (default: max(10, r), at most the number of features).
    sample_size : int, default 50000
        Rows sampled for the downstream check.
    rbf_mmd : {"auto", "exact", "rff", "none"}, default "auto"
        How the RBF-kernel MMD² is measured.
    group_names : mapping, optional
        Display names of values of the sensitive column(s), e.g. ``{1: "female"}``.
    rbf_sums : RBFSums, optional
        The random-feature sums of the RBF-kernel MMD² and their plan, computed by the
        projection's write-back (:func:`report_rff_work`): the report then reads no rows and
        measures no bandwidth for it.
    client : None, distributed.Client or str, optional
        Where the passes run.
    progress : bool, default False
        Show a progress bar per pass.
    announce : callable, optional
        Receives one line saying what the report refits, before it starts.
    storage_options : dict, optional
        Options of the filesystem of URLs.

    Returns
    -------
    tuple of (dict, ReportFiles)
        The report (the content of ``report.json``) and the files written.

    Raises
    ------
    InputError
        A model without its moments, a bad target, option or group name.
    OutputPathError, OutputBusyError, WriteError
        ``report_dir`` overlaps an input or holds other files; another writer holds it; it
        cannot be written.
    """
    from fairpca_dist.assessment.report import (  # scikit-learn, matplotlib
        REPORT_FILE,
        RBFSums,
        build_report,
        curve_length,
        refitted_methods,
        write_report,
    )

    inputs = [model_dir, table_dir]
    check_output(report_dir, inputs, kind="folder", marker=REPORT_FILE, storage_options=storage_options)
    model, moments = _fitted_for_report(model_dir, table_dir, storage_options)
    largest = curve_length(max_components, moments.n_features, model)
    if announce is not None and moments.is_diagonal:
        announce(
            f"report: a wide table: PCA fitted by passes over the rows, curves at r = {model.n_components}.."
            f"{largest} (--max-components sets the largest r), no RBF-kernel MMD² or downstream check"
        )
    elif announce is not None:
        announce(
            f"report: {refitted_methods(model.method)} refitted at r = 1..{largest} for the curves "
            f"(--max-components sets the largest r), RBF-kernel MMD² {rbf_mmd} (--rbf-mmd none skips it)"
        )
    sample, bandwidth = None, None
    if not moments.is_diagonal:  # a wide table's report holds no rows in memory (WIDE_SKIPPED)
        rows = _report_rows(
            table_dir,
            model,
            moments,
            target,
            sample_size,
            client=client,
            progress=progress,
            storage_options=storage_options,
        )
        sample = None if target is None else rows.uniform(sample_size)
        bandwidth = _bandwidth_rows(rows, model, moments)
        if rbf_sums is None:
            planned = _rff_work(table_dir, model, moments, rbf_mmd, bandwidth, storage_options)
            if planned is not None:
                plan, work = planned
                source = table_source(table_dir, storage_options)
                sums = rff_pass(source, work, client=client, progress=progress, storage_options=storage_options)
                rbf_sums = RBFSums(plan, sums)
    passes = report_passes(table_dir, moments, client=client, progress=progress, storage_options=storage_options)
    report = build_report(
        moments,
        model,
        max_components=max_components,
        sample=sample,
        target=target,
        passes=passes,
        rbf_mmd=rbf_mmd,
        group_names=group_names,
        bandwidth_rows=bandwidth,
        rbf_sums=rbf_sums,
    )
    return report, write_report(report, report_dir, inputs=inputs, storage_options=storage_options)


def report_rff_work(
    model_dir: str | os.PathLike[str],
    table_dir: str | os.PathLike[str],
    *,
    rbf_mmd: str = "auto",
    client: Any = None,
    storage_options: StorageOptions | None = None,
) -> tuple[RBFPlan, RFFWork] | None:
    """The plan of the RBF-kernel MMD² :func:`write_table_report` of this model and table would
    make, and the random-feature sums it would read the rows for, as a pass that reads them for
    another reason computes them: give the work to
    :func:`~fairpca_dist.projection.project_table` (``rff=``), then
    ``RBFSums(plan, result.rff_sums)`` (:class:`~fairpca_dist.assessment.report.RBFSums`) to
    :func:`write_table_report` (``rbf_sums=``): the report's RBF-kernel MMD² reads no rows and
    measures no bandwidth of its own.
    None when the report measures it otherwise (``rbf_mmd`` "none", a wide table, or "exact": every pair of
    rows, on tables of at most :data:`~fairpca_dist.params.RBF_EXACT_MAX_ROWS` rows by default).
    The bandwidth comes from the table's row sample (ingest's, else one pass); above
    :data:`~fairpca_dist.params.RBF_RFF_MAX_ROWS` rows the sums are of a stratified subsample
    (:meth:`~fairpca_dist.assessment.report.rbf_plan`)."""
    model, moments = _fitted_for_report(model_dir, table_dir, storage_options)
    if moments.is_diagonal:  # a wide table's report measures no RBF-kernel MMD²
        return None
    rows = _report_rows(table_dir, model, moments, None, 0, client=client, storage_options=storage_options)
    return _rff_work(table_dir, model, moments, rbf_mmd, _bandwidth_rows(rows, model, moments), storage_options)


def _rff_work(
    table_dir: str | os.PathLike[str],
    model: FairProjection,
    moments: GroupMoments,
    rbf_mmd: str,
    bandwidth: ArrayPasses,
    storage_options: StorageOptions | None,
) -> tuple[RBFPlan, RFFWork] | None:
    from fairpca_dist.assessment.report import rbf_plan  # scikit-learn, matplotlib

    plan = rbf_plan(moments, model, rbf_mmd=rbf_mmd, bandwidth_rows=bandwidth)
    if plan is None or plan.requests is None:
        return None
    weight = read_schema(table_dir, storage_options).get("sample_weight")
    return plan, plan.rff_work(moments, model, model.group_columns, weight)


def _fitted_for_report(
    model_dir: str | os.PathLike[str], table_dir: str | os.PathLike[str], storage_options: StorageOptions | None
) -> tuple[FairProjection, GroupMoments]:
    """The model and its moments; a model that did not record its sensitive column(s) (saved by
    an older version) takes them from the table's ``schema.json``."""
    model, moments = load_fitted(model_dir, storage_options)
    if not model.group_columns:  # the report's passes read the groups from these columns too
        model = replace(model, group_columns=_columns(read_schema(table_dir, storage_options)["sensitive_feature"]))
    return model, moments


BANDWIDTH_ROWS_PER_GROUP = 2000
"""Rows per group of the sample the RBF kernel's bandwidth is taken from (median heuristic)."""


def _report_rows(
    table_dir: str | os.PathLike[str],
    model: FairProjection,
    moments: GroupMoments,
    target: str | None,
    sample_size: int,
    *,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> RowSample:
    """The report's row sample of the table: ``sample_size`` rows of the features, group
    column(s) and ``target`` for the downstream check, and :data:`BANDWIDTH_ROWS_PER_GROUP` per
    group for the bandwidth; from the sample ingest drew, else by one pass (the same rows)."""
    if target is not None:
        _schema_with_target(table_dir, target, storage_options)
    group_columns = tuple(model.group_columns)
    columns = tuple(dict.fromkeys([*moments.feature_names, *group_columns, *([target] if target else [])]))
    spec = SampleSpec(columns, group_columns, sample_size, BANDWIDTH_ROWS_PER_GROUP)
    stored = read_table_sample(table_dir, spec, storage_options)
    if stored is not None:
        return stored
    files = [f.url for f in table_files(table_dir, storage_options)]
    return table_sample(files, spec, client=client, progress=progress, storage_options=storage_options)


def _bandwidth_rows(rows: RowSample, model: FairProjection, moments: GroupMoments) -> ArrayPasses:
    """The per-group rows of the sample, as rows of ``moments`` in the model's units."""
    sampled = rows.per_group(BANDWIDTH_ROWS_PER_GROUP)
    columns = list(model.group_columns)
    labels = sampled[columns[0]] if len(columns) == 1 else list(sampled[columns].itertuples(index=False, name=None))
    x = sampled[list(moments.feature_names)].to_numpy(dtype=np.float64)
    return ArrayPasses(x, list(labels), moments.groups, scale=model.scale)


def report_passes(
    table_dir: str | os.PathLike[str],
    moments: GroupMoments,
    *,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> TablePasses:
    """The rows of an ingested table (roles from its ``schema.json``) for the report: its
    RBF-kernel MMD² reads them, and so does refitting a method that reads rows (``mm-robust``,
    ``mmd`` with the RBF kernel). Nothing is read until a pass is asked for; with ``progress``
    each pass draws a bar."""
    schema = read_schema(table_dir, storage_options)
    return table_passes(
        table_source(table_dir, storage_options),
        moments,
        sensitive_feature=schema["sensitive_feature"],
        sample_weight=schema.get("sample_weight"),
        client=client,
        progress=progress,
        storage_options=storage_options,
    )


def report_sample(
    table_dir: str | os.PathLike[str],
    target: str,
    *,
    max_rows: int,
    client: Any = None,
    storage_options: StorageOptions | None = None,
) -> pd.DataFrame:
    """A uniform sample of ``max_rows`` rows of an ingested table's features, sensitive column(s)
    and ``target``, for the report's downstream check: the rows of smallest priority key
    (:mod:`fairpca_dist.engine.sampling`), from the sample ingest drew while it wrote the table,
    else by one pass over it (the same rows). The target must be among the columns ingest kept
    beside the features (``pass_through`` or ``key_columns``)."""
    schema = _schema_with_target(table_dir, target, storage_options)
    sensitive = tuple(schema["sensitive_feature"])
    columns = tuple(dict.fromkeys([*schema["features"], *sensitive, target]))
    spec = SampleSpec(columns, sensitive, max_rows, 0)
    rows = read_table_sample(table_dir, spec, storage_options) or table_sample(
        [f.url for f in table_files(table_dir, storage_options)], spec, client=client, storage_options=storage_options
    )
    return rows.uniform(max_rows)


def check_report_target(
    table_dir: str | os.PathLike[str],
    target: str,
    *,
    counts: pd.Series | None = None,
    client: Any = None,
    storage_options: StorageOptions | None = None,
) -> None:
    """Raise now what the report's downstream check would raise at its end: ``target`` not kept
    by ingest, missing in some rows, or not binary with >= 2 rows per class. ``counts``: the
    target's value counts over the table's rows, missing values under NaN, when the pass that
    wrote the table counted them (:func:`~fairpca_dist.io.ingest.ingest_table` ``count_values``);
    otherwise one pass over that column alone counts them."""
    from fairpca_dist.assessment.downstream import check_binary_target  # scikit-learn: not for every fit

    _schema_with_target(table_dir, target, storage_options)
    if counts is None:
        counts = value_counts(
            table_source(table_dir, storage_options),
            target,
            dropna=False,
            client=client,
            storage_options=storage_options,
        )
    missing = int(counts[counts.index.isna()].sum())
    if missing:
        raise InputError(
            f"target {target!r} is missing in {missing} row(s) of the ingested table {table_dir}; the "
            "report's downstream check needs a label in every row: fill them or leave those rows out of "
            "the source"
        )
    check_binary_target(counts, target)


def _schema_with_target(
    table_dir: str | os.PathLike[str], target: str, storage_options: StorageOptions | None = None
) -> dict[str, Any]:
    schema = read_schema(table_dir, storage_options)
    kept = [*schema.get("pass_through", []), *schema.get("key_columns", [])]
    if target not in kept and target not in schema["features"] and target not in schema["sensitive_feature"]:
        raise SchemaError(
            f"target {target!r} is not a column of the ingested table {table_dir} (it kept {kept or 'no columns'} "
            f"beside the features and {schema['sensitive_feature']}): ingest it with pass_through=[{target!r}] "
            f"(command line: --pass-through {target})"
        )
    return schema
