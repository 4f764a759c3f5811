"""Checks of run parameters that need no data (:func:`check_run_parameters`), and of a source
table from its header and first rows (:func:`check_source_table`): flows and the CLI call them
before reading rows, the pipeline command before it starts Prefect."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fairpca_dist.cluster import check_scheduler
from fairpca_dist.exceptions import GroupError, InputError, reading
from fairpca_dist.moments import BINNING_ADVICE, MANY_GROUPS
from fairpca_dist.solvers import CENTERS, SOLVERS
from fairpca_dist.storage import Location, StorageOptions, locate
from fairpca_dist.wording import listed

__all__ = ["check_run_parameters", "check_source_table", "RBF_MMD_CHOICES", "RBF_EXACT_MAX_ROWS", "SAMPLE_ROWS"]

RBF_MMD_CHOICES = ("auto", "exact", "rff", "none")
"""How a report computes the RBF-kernel MMD² (:func:`fairpca_dist.report.build_report`)."""

RBF_EXACT_MAX_ROWS = 50_000
"""Largest table ``rbf_mmd="auto"`` evaluates on every pair of rows (N²/2 kernel values per
arm, seconds at this size); above it, random Fourier features (one pass per arm)."""


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
    (:func:`fairpca_dist.cluster.check_scheduler`: :class:`ServiceError` otherwise), so that
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
        raise InputError(f"run_id={run_id!r} (command line: --run-id) must be a plain folder name: no '/' or '\\', "
                         "not '.' or '..', not starting with '.'; the run is written to <runs_dir>/<run_id>")
    if on_bad_rows is not None and on_bad_rows not in ("fail", "drop"):
        raise InputError(f"on_bad_rows={on_bad_rows!r} must be 'fail' or 'drop'")
    if options and method is not None:
        unknown = sorted(set(options) - SOLVERS[method].options)
        if unknown:
            raise InputError(
                f"unknown option(s) {unknown} for method {method!r}; valid options: {sorted(SOLVERS[method].options) or 'none'}"
            )
    check_scheduler(dask_address)


SAMPLE_ROWS = 10_000
"""Rows of a source's first partition :func:`check_source_table` looks at."""


def check_source_table(
    source: Any,
    *,
    sensitive_feature: str | Sequence[str],
    features: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    key_columns: Sequence[str] = (),
    pass_through: Sequence[str] = (),
    read_options: dict[str, Any] | None = None,
    storage_options: StorageOptions | None = None,
) -> None:
    """Raise what :func:`fairpca_dist.ingest.ingest_table` would raise about ``source`` from its
    header and first rows, having read no more than those: an unknown file format, a missing
    column or a non-numeric feature (:func:`fairpca_dist.sources.open_table`, given the roles
    ``ingest_table`` gives it; parameters as there), and a sensitive feature that is a number
    of many values rather than a category (:class:`GroupError`, the advice of
    :meth:`GroupMoments.check_groups`, which the fit would raise).

    The sensitive feature is judged on the first :data:`SAMPLE_ROWS` rows of the first
    partition: it is a number when it takes more than :data:`~fairpca_dist.moments.MANY_GROUPS`
    values there and most of those rows hold a value no other of them holds. A category of
    any number of groups smaller than half the sample passes, whatever its rare groups.
    """
    from dask.threaded import get

    from fairpca_dist.sources import map_partitions, open_table

    table = open_table(source, sensitive_feature=sensitive_feature, features=features, exclude=exclude,
                       key_columns=[*key_columns, *pass_through], read_options=read_options,
                       storage_options=storage_options)
    for first in map_partitions(table.frame[list(table.sensitive)], _label_counts, SAMPLE_ROWS)[:1]:
        # Read here, in threads; read errors name the file, as ingest's (map_partitions). Not by dask.compute,
        # which imports distributed: imported before Prefect, distributed keeps its own log handler, which
        # a LocalCluster then silences (fairpca pipeline -v would show none of its lines).
        _check_sample_groups(get(first.__dask_graph__(), first.key), table.sensitive, source)


def _label_counts(part: Any, partition: Any, rows: int) -> np.ndarray:
    """Rows per label (per combination, for several columns) among the first ``rows`` of ``part``
    that have one."""
    return part.head(rows).value_counts(dropna=True).to_numpy()


def _check_sample_groups(counts: np.ndarray, sensitive: Sequence[str], source: Any) -> None:
    """:class:`GroupError` when the labels of a sample of rows, ``counts`` rows each, look like a
    number's values (see :func:`check_source_table`)."""
    rows, alone = int(counts.sum()), int((counts == 1).sum())
    if len(counts) > MANY_GROUPS and 2 * alone > rows:
        where = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "the table"
        raise GroupError(f"sensitive feature {listed(sensitive)} has {len(counts):,} distinct values in the first "
                         f"{rows:,} rows of {where}, {alone:,} of them in one row only: {BINNING_ADVICE}")


# Keys of the fsspec filesystems' keyword arguments that hold secrets (s3fs, gcsfs, adlfs, and
# botocore's own names under client_kwargs)
_SECRET_KEYS = frozenset({
    "key", "secret", "token", "password", "session_token", "aws_access_key_id", "aws_secret_access_key",
    "aws_session_token", "account_key", "sas_token", "connection_string", "client_secret", "credentials",
})


def _check_no_secrets(storage_options: StorageOptions | None, within: str = "") -> None:
    """:class:`InputError` naming the first credential among ``storage_options`` (nested
    mappings too, e.g. ``client_kwargs``); its value is never shown."""
    for name, value in (storage_options or {}).items():
        path = f"{within}{name}"
        if str(name).lower() in _SECRET_KEYS:
            raise InputError(f"storage option {path!r} holds a credential: a flow's parameters are stored by Prefect "
                             "and shown in its UI; give it in the environment of the driver and the workers instead "
                             "(e.g. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), and leave it out of storage_options")
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
