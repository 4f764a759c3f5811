"""Embedded example tables: the diabetes table bundled with scikit-learn, and synthetic
tables with group-dependent covariance (written as Parquet, file by file, to any size)."""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fairpca_dist.exceptions import InputError
from fairpca_dist.io.storage import StorageOptions, as_given, locate

__all__ = [
    "DIABETES_FEATURES",
    "load_diabetes_table",
    "synthetic_group_table",
    "write_synthetic_parquet",
    "outlier_groups",
]


DIABETES_FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
"""The diabetes table's feature columns, as :func:`sklearn.datasets.load_diabetes` names them."""


def load_diabetes_table() -> pd.DataFrame:
    """scikit-learn's diabetes data in original units: 442 rows, 9 features, ``sex`` (1/2), ``target``.

    The rows are those of ``sklearn.datasets.load_diabetes(as_frame=True, scaled=False)``, read
    from the files scikit-learn ships them in (``sklearn/datasets/data/diabetes_*.csv.gz``) as it
    reads them (:func:`numpy.loadtxt`), without importing scikit-learn: its imports cost 0.8-1 s
    of a core, which ``fairpca demo`` spends while its Prefect server starts instead of before it
    writes this table. A scikit-learn that keeps them elsewhere is asked for them.

    Returns
    -------
    pandas.DataFrame
        Columns ``age``, ``sex`` (1 or 2, as integers), ``bmi``, ``bp``, ``s1`` … ``s6`` and
        ``target`` (disease progression after one year).

    Examples
    --------
    >>> from fairpca_dist.io.datasets import load_diabetes_table
    >>> table = load_diabetes_table()
    >>> table.shape, sorted(table["sex"].unique().tolist())
    ((442, 11), [1, 2])
    """
    files = _diabetes_files()
    if files is None:
        from sklearn.datasets import load_diabetes

        frame = load_diabetes(as_frame=True, scaled=False).frame
    else:
        data, target = (_read_gzip_rows(file) for file in files)
        frame = pd.DataFrame(data, columns=list(DIABETES_FEATURES))
        frame["target"] = target
    frame["sex"] = frame["sex"].astype(int)
    return frame


def _diabetes_files() -> tuple[Path, Path] | None:
    """The diabetes table's features and target in the installed scikit-learn's package data,
    found without importing it; None if they are not there."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"
    files = (folder / "diabetes_data_raw.csv.gz", folder / "diabetes_target.csv.gz")
    return files if all(file.is_file() for file in files) else None


def _read_gzip_rows(file: Path) -> np.ndarray:
    """The numbers of a gzipped whitespace-separated text file, as scikit-learn's loaders read them."""
    with gzip.open(file, mode="rt", encoding="utf-8") as text:
        return np.loadtxt(text)


def _check_count(name: str, value: object, minimum: int) -> None:
    """:class:`InputError` naming the parameter unless ``value`` is an integer ≥ ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an integer of at least {minimum}, got {value!r}")


def _group_mixing(n_features: int, n_groups: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-group means and mixing matrices: groups share half their principal directions and
    differ in the rest, so plain PCA serves the larger group better."""
    rng = np.random.default_rng(seed)
    shared = np.linalg.qr(rng.normal(size=(n_features, n_features)))[0]
    means = rng.normal(scale=0.5, size=(n_groups, n_features))
    mixing = np.empty((n_groups, n_features, n_features))
    for g in range(n_groups):
        own = np.linalg.qr(rng.normal(size=(n_features, n_features)))[0]
        basis = np.where(np.arange(n_features) < n_features // 2, shared, own)
        spectrum = np.sqrt(np.linspace(3.0, 0.2, n_features) * rng.uniform(0.5, 1.5, n_features))
        mixing[g] = basis * spectrum
    return means, mixing


def synthetic_group_table(
    n_rows: int,
    *,
    n_features: int = 10,
    n_groups: int = 2,
    group_shares: tuple[float, ...] | None = None,
    seed: int = 0,
    start_row: int = 0,
) -> pd.DataFrame:
    """Rows ``start_row … start_row + n_rows − 1`` of a table with columns ``row_id``,
    ``f0 … f{p−1}`` and ``group`` (``g0``, ``g1``, …). Group g draws x = μ_g + A_g z, z ~ N(0, I).
    The table is a deterministic function of ``seed``; any slice can be generated alone.

    Parameters
    ----------
    n_rows : int
        Rows to generate (≥ 0).
    n_features : int, default 10
        p ≥ 2.
    n_groups : int, default 2
        k ≥ 2.
    group_shares : tuple of float, optional
        Positive weights of the groups (default: 0.7 for ``g0``, the rest shared equally).
    seed : int, default 0
        The table's seed.
    start_row : int, default 0
        The first row's number (``row_id``).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    InputError
        A count below its minimum, or ``group_shares`` that are not k positive numbers.

    Examples
    --------
    >>> from fairpca_dist.io.datasets import synthetic_group_table
    >>> table = synthetic_group_table(1000, n_features=4, seed=1)
    >>> list(table.columns)
    ['row_id', 'f0', 'f1', 'f2', 'f3', 'group']
    >>> table.equals(synthetic_group_table(1000, n_features=4, seed=1))
    True
    """
    _check_count("n_rows", n_rows, 0)
    _check_count("n_features", n_features, 2)
    _check_count("n_groups", n_groups, 2)
    shares = np.asarray(group_shares or [0.7] + [0.3 / (n_groups - 1)] * (n_groups - 1), dtype=float)
    if shares.shape != (n_groups,) or np.any(shares <= 0):
        raise InputError(f"group_shares must be {n_groups} positive numbers")
    means, mixing = _group_mixing(n_features, n_groups, seed)
    rng = np.random.default_rng([seed, start_row])
    groups = rng.choice(n_groups, size=n_rows, p=shares / shares.sum())
    z = rng.standard_normal((n_rows, n_features))
    x = means[groups] + np.einsum("nij,nj->ni", mixing[groups], z)
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(n_features)])
    frame.insert(0, "row_id", np.arange(start_row, start_row + n_rows, dtype=np.int64))
    frame["group"] = pd.Series([f"g{g}" for g in range(n_groups)], dtype=object).to_numpy()[groups]
    return frame


def write_synthetic_parquet(
    directory: str | os.PathLike[str],
    n_rows: int,
    *,
    rows_per_file: int = 500_000,
    n_features: int = 10,
    n_groups: int = 2,
    seed: int = 0,
    storage_options: StorageOptions | None = None,
) -> Path | str:
    """Write :func:`synthetic_group_table` as a folder of Parquet files, one file at a time
    (memory stays bounded by one file whatever ``n_rows``). Returns the folder. ``directory``
    may be a URL (``s3://…``), opened with ``storage_options``.

    Parameters
    ----------
    directory : str or path-like
        The folder (or URL) to write ``part-00000.parquet``, ... into.
    n_rows : int
        Rows in all (≥ 1).
    rows_per_file : int, default 500000
        Rows per Parquet file.
    n_features, n_groups, seed
        As for :func:`synthetic_group_table`.
    storage_options : dict, optional
        Options of the filesystem of a URL.

    Returns
    -------
    Path or str
        ``directory`` as given.

    Raises
    ------
    InputError
        A count below its minimum.
    """
    _check_count("n_rows", n_rows, 1)
    _check_count("rows_per_file", rows_per_file, 1)
    folder = locate(directory, storage_options)
    folder.makedirs()
    for index, start in enumerate(range(0, n_rows, rows_per_file)):
        part = synthetic_group_table(
            min(rows_per_file, n_rows - start),
            n_features=n_features,
            n_groups=n_groups,
            seed=seed,
            start_row=start,
        )
        with (folder / f"part-{index:05d}.parquet").open("wb") as file:
            pq.write_table(pa.Table.from_pandas(part, preserve_index=False), file)
    return as_given(directory)


def outlier_groups(
    seed: int,
    alpha: float,
    *,
    spread: float = 2.0,
    n_features: int = 10,
    n_rows: int = 100,
    share: float = 0.1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Babu, Stoica & Saini's §5.4 outlier data (spec §A.8), with what the paper leaves open
    fixed here: two groups of ``n_rows / 2`` rows y = R_g^{1/2} e, e ~ N(0, I), R_g^{1/2} with
    N(0, spread²) entries; ``share`` of all rows, chosen at random, replaced by outliers
    α·1 + N(0, I). Returns ``(clean, contaminated, labels)`` (labels 0 and 1).

    Parameters
    ----------
    seed : int
        Seed of everything drawn.
    alpha : float
        The outliers' offset α.
    spread : float, default 2.0
        Standard deviation of the entries of R_g^{1/2}.
    n_features : int, default 10
    n_rows : int, default 100
    share : float, default 0.1
        Share of the rows replaced by outliers.

    Returns
    -------
    tuple of ndarray
        ``clean`` and ``contaminated`` of shape (n_rows, n_features), and ``labels`` (n_rows,).
    """
    rng = np.random.default_rng(seed)
    roots = [spread * rng.normal(size=(n_features, n_features)) for _ in range(2)]
    labels = np.repeat([0, 1], n_rows // 2)
    clean = np.concatenate([rng.normal(size=(n_rows // 2, n_features)) @ root.T for root in roots])
    contaminated = clean.copy()
    rows = rng.choice(n_rows, size=int(round(share * n_rows)), replace=False)
    contaminated[rows] = alpha + rng.normal(size=(rows.size, n_features))
    return clean, contaminated, labels
