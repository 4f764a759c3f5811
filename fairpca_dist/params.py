"""Checks of run parameters that need no data (:func:`check_run_parameters`), and of a source
table from its header and first rows (:func:`check_source_table`): flows and the CLI call them
before reading rows, the pipeline command before it starts Prefect."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from fairpca_dist.engine.cluster import check_scheduler
from fairpca_dist.engine.memory import moments_held
from fairpca_dist.engine.moments import BINNING_ADVICE, MANY_GROUPS, GroupMoments, sorted_labels
from fairpca_dist.exceptions import GroupError, InputError, SchemaError, reading
from fairpca_dist.io.storage import Location, StorageOptions, locate
from fairpca_dist.solvers import CENTERS, SOLVERS
from fairpca_dist.wording import listed, size_text

__all__ = [
    "check_run_parameters",
    "check_source_table",
    "RBF_MMD_CHOICES",
    "RBF_EXACT_MAX_ROWS",
    "RBF_RFF_MAX_ROWS",
    "RBF_RFF_GROUP_ROWS",
    "SAMPLE_ROWS",
    "MOMENTS_BUDGET",
    "WideChoice",
    "choose_wide",
    "check_wide_method",
    "check_narrow",
]

RBF_MMD_CHOICES = ("auto", "exact", "rff", "none")
"""How a report computes the RBF-kernel MMD² (:func:`fairpca_dist.assessment.report.build_report`)."""

RBF_EXACT_MAX_ROWS = 50_000
"""Largest table ``rbf_mmd="auto"`` evaluates on every pair of rows (N²/2 kernel values per
arm, seconds at this size); above it, random Fourier features (one pass per arm)."""

RBF_RFF_MAX_ROWS = 200_000
"""Largest table whose every row a report's random-feature RBF-kernel MMD² sums; above it, a
stratified Bernoulli subsample of about this many rows (at least :data:`RBF_RFF_GROUP_ROWS`
per group, every row of a smaller group). The features' cos costs D = 1000 values per row and
arm, several times the cost of reading the row (1,000,000 such rows added 11-18 s to the
18 s write-back of a 20M × 50 table), while the subsample's error stays below the features' own: the
plug-in estimate of MMD² between groups a and b is biased up by about 1/n_a + 1/n_b
(‖φ(x)‖² ≈ k(x, x) = 1) and scatters by ~1/√n, against the features' O(1/√D) error; with
n ≥ 50,000 rows per group that is ≤ 4·10⁻⁵ and ~0.005 against ~0.03 at D = 1000."""

RBF_RFF_GROUP_ROWS = 50_000
"""Rows per group the subsample of :data:`RBF_RFF_MAX_ROWS` keeps at least."""


MOMENTS_BUDGET = 10**9
"""Bytes the p × p moments of a table may take, k·p² float64 (1 GB: p ≈ 7,900 for two groups).
Above it a fit takes the wide path (:func:`choose_wide`)."""

MOMENTS_WORKER_SHARE = moments_held()
"""On a cluster, the budget is at most the smallest worker memory limit over this (11): the
partitions' moments a worker of the moments pass holds at once
(:func:`fairpca_dist.engine.memory.moments_held`, which
:func:`fairpca_dist.engine.passes.check_moments_memory` also counts; 1 GB workers: p ≈ 2,380
for two groups)."""


@dataclass(frozen=True)
class WideChoice:
    """Whether a table is fitted the wide way (moments that keep only their diagonal, k × p
    numbers; only methods that read the rows, ``fnpm-streaming``) and why, in one sentence."""

    wide: bool
    reason: str


def choose_wide(
    n_features: int,
    n_groups: int,
    *,
    wide: bool | None = None,
    budget: int | None = None,
    worker_limit: int | None = None,
) -> WideChoice:
    """The wide path when asked (``wide=True``), or by default (``wide=None``) when the p × p
    moments of ``n_groups`` groups (at least 2) and ``n_features`` features would exceed
    ``budget`` bytes: by default :data:`MOMENTS_BUDGET`, or a :data:`MOMENTS_WORKER_SHARE`
    of ``worker_limit`` (the smallest worker memory limit of the cluster) when that is less.

    >>> print(choose_wide(20_000, 2).reason)  # doctest: +NORMALIZE_WHITESPACE
    wide table: the p × p moments of 2 groups × 20,000 features would take 6.4 GB (budget 1 GB),
    so only their diagonal is kept and the fit reads the rows
    >>> choose_wide(50, 2).wide
    False
    """
    if budget is None:
        budget = MOMENTS_BUDGET if worker_limit is None else min(MOMENTS_BUDGET, worker_limit // MOMENTS_WORKER_SHARE)
        share = f"1/{MOMENTS_WORKER_SHARE} of the workers' {size_text(worker_limit or 0)}"
        of_workers = f": {share}" if budget < MOMENTS_BUDGET else ""
    else:
        of_workers = ""
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget <= 0:
        raise InputError(f"the moments budget must be a positive number of bytes, got {budget!r}")
    k = max(n_groups, 2)
    size = 8.0 * k * n_features**2
    sizes = (
        f"the p × p moments of {k} groups × {n_features:,} features would take {size_text(size)} "
        f"(budget {size_text(budget)}{of_workers})"
    )
    if wide is None:
        wide = size > budget
        if not wide:
            return WideChoice(False, f"{sizes}: the moments pass")
        return WideChoice(True, f"wide table: {sizes}, so only their diagonal is kept and the fit reads the rows")
    if wide:
        return WideChoice(True, f"wide path on request: only the diagonal of the moments is kept ({sizes})")
    return WideChoice(False, f"the moments pass on request ({sizes})")


def check_wide_method(method: str, choice: WideChoice, n_groups: int = 2, *, recorded: bool = False) -> WideChoice:
    """``choice`` (:func:`choose_wide`), refusing when the wide path is taken a registered method
    that needs the p × p moments, or ``n_groups`` > 2 (the methods that fit a wide table take
    two), with :class:`InputError` naming the way out: ``--no-wide``, and a larger
    ``--moments-budget`` unless the choice is the one ``recorded`` by ingest."""
    from fairpca_dist.solvers import wide_methods

    if not choice.wide:
        return choice
    way = "--no-wide (wide=False)" if recorded else "--no-wide (wide=False) or a larger --moments-budget"
    if n_groups > 2:
        raise InputError(
            f"no method fits a wide table of {n_groups} groups ({', '.join(wide_methods())} compares two; "
            f"{choice.reason}): merge the groups into two, or fit from the p × p moments: {way}"
        )
    if method in SOLVERS and not SOLVERS[method].wide:
        raise InputError(
            f"method {method!r} needs the p × p moments, and this table is fitted the wide way ({choice.reason}); "
            f"use {', '.join(wide_methods())}, or {way}"
        )
    return choice


def check_narrow(what: str, choice: WideChoice, way: str = "") -> None:
    """Refuse a wide table (``choice``) to ``what`` needs the p × p moments of every cell
    (evaluate, compare), in one line naming what fits a wide table, and ``way`` (another way out)."""
    from fairpca_dist.solvers import wide_methods

    if choice.wide:
        raise InputError(
            f"{what}: the p × p moments of every cell are needed, and this table is wide ({choice.reason}); "
            f"fit and report it with {', '.join(wide_methods())} instead{way}"
        )


def check_run_parameters(
    *,
    source: Any = None,
    method: str | None = None,
    n_components: Any = None,
    center: str | None = None,
    on_bad_rows: str | None = None,
    options: Mapping[str, Any] | None = None,
    rbf_mmd: str | None = None,
    run_id: Any = None,
    dask_address: str | None = None,
    storage_options: StorageOptions | None = None,
) -> None:
    """Raise :class:`InputError` for the first bad parameter among those given.

    ``dask_address`` must be a scheduler's address, and one must answer there within 10 s
    (:func:`fairpca_dist.engine.cluster.check_scheduler`: :class:`ServiceError` otherwise), so that
    a flow fails before its first task rather than retrying a task that cannot connect.

    ``source`` (a path, a URL opened with ``storage_options``, or a pattern) must name a
    file or folder. ``storage_options`` may not hold credentials: Prefect stores a flow's
    parameters and shows them in its UI; workers take credentials from their environment.

    ``run_id`` names a folder inside ``runs_dir``: a plain name, so that a run cannot be
    written anywhere else (``../../somewhere``, ``a/b``) nor hidden among the staging and lock
    files the writers keep beside their outputs (a leading dot).
    """
    _check_no_secrets(storage_options)
    if isinstance(source, (str, os.PathLike, Location)):
        _check_source(locate(source, storage_options))
    if method is not None and method not in SOLVERS:
        raise InputError(f"unknown method {method!r}; available: {sorted(SOLVERS)}")
    if n_components is not None and (
        isinstance(n_components, bool) or not isinstance(n_components, int) or n_components < 1
    ):
        raise InputError(f"n_components must be a positive integer, got {n_components!r}")
    if center is not None and center not in CENTERS:
        raise InputError(f"center={center!r} is not one of {CENTERS}")
    if rbf_mmd is not None and rbf_mmd not in RBF_MMD_CHOICES:
        raise InputError(f"rbf_mmd={rbf_mmd!r} is not one of {RBF_MMD_CHOICES}")
    if run_id is not None and not _is_plain_name(run_id):
        raise InputError(
            f"run_id={run_id!r} (command line: --run-id) must be a plain folder name: no '/' or '\\', "
            "not '.' or '..', not starting with '.'; the run is written to <runs_dir>/<run_id>"
        )
    if on_bad_rows is not None and on_bad_rows not in ("fail", "drop"):
        raise InputError(f"on_bad_rows={on_bad_rows!r} must be 'fail' or 'drop'")
    if options and method is not None:
        unknown = sorted(set(options) - SOLVERS[method].options)
        if unknown:
            raise InputError(
                f"unknown option(s) {unknown} for method {method!r}; "
                f"valid options: {sorted(SOLVERS[method].options) or 'none'}"
            )
    check_scheduler(dask_address)


SAMPLE_ROWS = 10_000
"""Rows of a source's first partition :func:`check_source_table` looks at: all its rows when the
source is one partition of no more rows."""


def check_source_table(
    source: Any,
    *,
    sensitive_feature: str | Sequence[str],
    features: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    key_columns: Sequence[str] = (),
    pass_through: Sequence[str] = (),
    target: str | None = None,
    read_options: dict[str, Any] | None = None,
    storage_options: StorageOptions | None = None,
) -> int:
    """Raise what :func:`fairpca_dist.io.ingest.ingest_table`, the fit and the report would raise
    about ``source`` from its header and first rows, having read no more than those; return
    the number of features the header gives (at most what ingest keeps).

    From the header: an unknown file format, a missing column or a non-numeric feature
    (:func:`fairpca_dist.engine.sources.open_table`, given the roles ``ingest_table`` gives it;
    parameters as there; ``target``, the report's downstream label, is a ``pass_through``
    column).

    From the first :data:`SAMPLE_ROWS` rows of the first partition, those ingest keeps (a group
    label and a finite value in every feature):

    - when they are the whole source (one partition of no more rows), exactly the fit's check
      of the groups (:meth:`GroupMoments.check_groups`: ≥ 2 groups of ≥ 2 rows each, with
      :data:`~fairpca_dist.engine.moments.BINNING_ADVICE` for a number of many values), unless
      leaving out the rows ingest rejects leaves fewer than 2 groups (ingest's own refusal
      then names the bad values), and the report's check of the classes of ``target``
      (:func:`fairpca_dist.assessment.downstream.check_binary_target`: 2 classes of ≥ 2 rows each);
    - otherwise, what a part shows: a sensitive feature that is a number rather than a
      category (more than :data:`~fairpca_dist.engine.moments.MANY_GROUPS` values, most labelled
      rows holding a value no other of them holds; a category of any number of groups smaller
      than half the sample passes, whatever its rare groups), and, for certain, a ``target``
      of more than 2 classes.

    A target missing in some rows is left to ingest, which names them.

    Raises :class:`GroupError` about the groups, :class:`InputError` about the target.
    """
    from dask.threaded import get

    from fairpca_dist.engine.sources import map_partitions, open_table

    labels = [target] if target else []
    table = open_table(
        source,
        sensitive_feature=sensitive_feature,
        features=features,
        exclude=exclude,
        key_columns=[*key_columns, *pass_through, *labels],
        read_options=read_options,
        storage_options=storage_options,
    )
    if table.frame is None:  # arrays (with labels per row), which ingest refuses
        raise SchemaError("ingest needs named columns: pass a DataFrame or a path, not an array")
    sensitive, features_ = list(table.sensitive), list(table.features)
    parts = map_partitions(
        table.frame[list(dict.fromkeys([*sensitive, *labels, *features_]))],
        _first_rows,
        SAMPLE_ROWS,
        sensitive,
        target,
        features_,
    )
    for first in parts[:1]:
        # Read here, in threads; read errors name the file, as ingest's (map_partitions). Not by dask.compute,
        # which imports distributed: imported before Prefect, distributed keeps its own log handler, which
        # a LocalCluster then silences (fairpca pipeline -v would show none of its lines).
        sample = get(first.__dask_graph__(), first.key)
        sample = replace(sample, whole=sample.whole and len(parts) == 1)
        where = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "the table"
        kept = sample.kept(default_features=features is None)
        _check_sample_groups(sample, kept, where)
        if sample.target is not None:
            _check_sample_target(sample.target[kept], sample.whole)
    return len(features_)


@dataclass(frozen=True)
class _Sample:
    """The first rows of a source's first partition, as :func:`check_source_table` reads them."""

    labels: pd.DataFrame
    """Their sensitive column(s)."""
    target: pd.Series | None
    """Their target, if any."""
    finite: np.ndarray
    """rows × features: whether the row holds a finite number there."""
    whole: bool
    """Whether they are all the source's rows."""

    def kept(self, *, default_features: bool) -> np.ndarray:
        """Which rows ingest keeps (a group label and a finite value in every feature): in a
        part of the source, those it keeps for sure; in the whole source, exactly those, a
        default feature without a value in any row being left out as ingest leaves it out
        (unless every feature is)."""
        finite = self.finite
        if self.whole and default_features and finite.any():
            finite = finite[:, finite.any(axis=0)]
        return finite.all(axis=1) & self.labels.notna().all(axis=1).to_numpy()


def _first_rows(
    part: pd.DataFrame, partition: Any, rows: int, sensitive: list[str], target: str | None, features: list[str]
) -> _Sample:
    """The first ``rows`` of ``part`` as a :class:`_Sample` (whole: ``part`` has no more rows)."""
    from fairpca_dist.engine.sources import feature_values

    head = part.head(rows)
    return _Sample(
        labels=head[sensitive],
        target=head[target] if target else None,
        finite=np.isfinite(feature_values(head, features, partition)),
        whole=len(part) <= rows,
    )


def _check_sample_groups(sample: _Sample, kept: np.ndarray, where: str) -> None:
    """:class:`GroupError` when the groups of ``sample`` are those the fit refuses (the whole
    source), or look like a number's values (a part; see :func:`check_source_table`)."""
    sensitive = list(sample.labels.columns)
    if sample.whole:
        groups = _group_rows(sample.labels[kept])
        if groups.n_groups >= 2 or kept.all():  # else ingest refuses, naming the rows' bad values
            try:
                groups.check_groups()
            except GroupError as error:
                raise GroupError(f"sensitive feature {listed(sensitive)} in {where}: {error}") from None
        return
    counts = sample.labels.value_counts(dropna=True).to_numpy()
    rows, alone = int(counts.sum()), int((counts == 1).sum())
    if len(counts) > MANY_GROUPS and 2 * alone > rows:
        raise GroupError(
            f"sensitive feature {listed(sensitive)} has {len(counts):,} distinct values in the first "
            f"{rows:,} rows of {where}, {alone:,} of them in one row only: {BINNING_ADVICE}"
        )


def _group_rows(labels: pd.DataFrame) -> GroupMoments:
    """The groups of rows with these (non-missing) ``labels`` and their row counts, as the
    statistics of no feature: what :meth:`GroupMoments.check_groups` reads, with the fit's
    labels (a tuple per row for several columns)."""
    counts = labels.iloc[:, 0].value_counts() if labels.shape[1] == 1 else labels.value_counts()
    rows = dict(zip(counts.index.tolist(), counts.tolist(), strict=True))
    groups = sorted_labels(list(rows))
    count = np.array([rows[g] for g in groups], dtype=np.int64)
    k = len(groups)
    return GroupMoments(
        groups=groups,
        count=count,
        weight=count.astype(np.float64),
        mean_offset=np.zeros((k, 0)),
        scatter=np.zeros((k, 0, 0)),
        feature_names=(),
    )


def _check_sample_target(values: pd.Series, whole: bool) -> None:
    """:class:`InputError` when the classes of the target ``values`` of the kept rows of a
    sample are those the report refuses (the whole source), or show for certain that it will
    (a part: more than 2)."""
    from fairpca_dist.assessment.downstream import check_binary_target  # only with a target

    counts = values.value_counts()  # missing labels: refused by ingest, naming the rows
    if whole or len(counts) > 2:
        check_binary_target(counts, str(values.name))


# Keys of the fsspec filesystems' keyword arguments that hold secrets (s3fs, gcsfs, adlfs, and
# botocore's own names under client_kwargs)
_SECRET_KEYS = frozenset(
    {
        "key",
        "secret",
        "token",
        "password",
        "session_token",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "account_key",
        "sas_token",
        "connection_string",
        "client_secret",
        "credentials",
    }
)


def _check_no_secrets(storage_options: StorageOptions | None, within: str = "") -> None:
    """:class:`InputError` naming the first credential among ``storage_options`` (nested
    mappings too, e.g. ``client_kwargs``); its value is never shown."""
    for name, value in (storage_options or {}).items():
        path = f"{within}{name}"
        if str(name).lower() in _SECRET_KEYS:
            raise InputError(
                f"storage option {path!r} holds a credential: a flow's parameters are stored by Prefect "
                "and shown in its UI; give it in the environment of the driver and the workers instead "
                "(e.g. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), and leave it out of storage_options"
            )
        if isinstance(value, Mapping):
            _check_no_secrets(value, f"{path}.")


def _check_source(source: Location) -> None:
    """:class:`InputError` when ``source`` (a path or URL, or a pattern) names no file or
    folder; denied access (:class:`AccessError`) and a store that cannot be reached
    (:class:`ServiceError`) raise naming it."""
    with reading(source.url):
        found = source.exists() or (any(c in source.path for c in "*?[") and source.glob())
    if not found:
        raise InputError(f"input path {source.url!r} does not exist")


def _is_plain_name(name: Any) -> bool:
    """A string usable as one folder name on every platform the runs may be read on."""
    return isinstance(name, str) and bool(name) and not name.startswith(".") and not any(c in name for c in "/\\\0")
