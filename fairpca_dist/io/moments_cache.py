"""The moments cache: per-file statistics of a Parquet table, keyed by content.

The moments of every Parquet file are cached under a key derived from the file's size and
Parquet footer (row counts, column statistics: a content fingerprint that costs a few KB of
reading) and from the column roles (features, sensitive columns, weight). A refit with another
method or ``n_components`` reads no rows; a table that gained files reads only the new ones;
Chan's merge makes the result equal to a full recompute. Ingest writes the moments of the files
it writes into the table itself (``moments/``, under the same keys: they ride on its pass), and
a fit looks there too, so the first fit of an ingested table reads no rows either.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence

from fairpca_dist.engine.moments import GroupMoments
from fairpca_dist.exceptions import WriteError, reading
from fairpca_dist.io.atomic import atomic_file
from fairpca_dist.io.storage import Location, StorageOptions, locate

__all__ = [
    "MOMENTS_CACHE",
    "TABLE_MOMENTS",
    "moments_cache",
    "file_fingerprint",
    "roles_key",
    "file_keys",
    "cached_keys",
    "store_moments",
]

MOMENTS_CACHE = ".moments-cache"
TABLE_MOMENTS = "moments"
"""The folder of an ingested table holding its files' moments, written by ingest."""


def moments_cache(
    table_dir: str | os.PathLike[str] | Location,
    cache_dir: str | os.PathLike[str] | Location | None = None,
    storage_options: StorageOptions | None = None,
) -> Location | None:
    """``cache_dir``, or by default ``.moments-cache`` in the folder that holds the table
    (found from its real path on the local disk: ``.`` as the table is the current folder, not
    inside it); None for a table at a bucket's root, beside which nothing lies."""
    if cache_dir is not None:
        return locate(cache_dir, storage_options)
    table = locate(table_dir, storage_options)
    if table.parent == table:
        return None
    return (locate(os.path.realpath(table.path)) if table.local else table).parent / MOMENTS_CACHE


def file_fingerprint(path: Location) -> str:
    """SHA-256 of a Parquet file's size and footer (its metadata: schema, row groups, statistics)."""
    with reading(path), path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(size - 8, 0))
        tail = f.read(8)
        footer = int.from_bytes(tail[:4], "little") if len(tail) == 8 and tail[4:] == b"PAR1" else 0
        f.seek(max(size - 8 - footer, 0))
        digest = hashlib.sha256(str(size).encode())
        digest.update(f.read(footer + 8))
    return digest.hexdigest()


def roles_key(
    features: Sequence[str], sensitive_feature: str | Sequence[str], sample_weight: str | None, diagonal: bool = False
) -> str:
    """The part of a cache key that names the column roles (and, for a wide table, that the
    moments keep only their diagonal: :attr:`~fairpca_dist.engine.moments.GroupMoments.is_diagonal`)."""
    roles = json.dumps(
        [
            list(features),
            [sensitive_feature] if isinstance(sensitive_feature, str) else list(sensitive_feature),
            sample_weight,
            *(["diagonal"] if diagonal else []),
        ]
    )
    return hashlib.sha256(roles.encode()).hexdigest()[:16]


def file_keys(files: Sequence[Location], roles: str) -> list[str]:
    """The cache key of each file's moments under the column roles ``roles`` (:func:`roles_key`)."""
    return [hashlib.sha256(f"{roles}:{file_fingerprint(f)}".encode()).hexdigest() for f in files]


def cached_keys(cache: Location | None) -> set[str]:
    """The keys the cache holds (none for no cache, or one that cannot be listed: a file there,
    no permission; its moments are then computed again)."""
    if cache is None:
        return set()
    try:
        return {entry.name.removesuffix(".npz") for entry in cache.listdir() if entry.name.endswith(".npz")}
    except OSError:
        return set()


def store_moments(
    cache: Location | None,
    moments: Mapping[str, GroupMoments],
    inputs: Sequence[str | os.PathLike[str]],
    table_dir: str | os.PathLike[str] | Location,
) -> None:
    """Write each ``key → moments`` into the cache (each file atomically, refused where it would
    overlap one of ``inputs``). A cache that cannot be written (a read-only disk, another user's
    folder) is skipped with a warning: the moments are the same, a later fit reads the rows of
    ``table_dir`` again."""
    if cache is None:
        warnings.warn(
            f"the moments of {table_dir} are not cached: it is a bucket's root, beside which no cache can "
            "go; a later fit reads its rows again (cache_dir= elsewhere keeps them)",
            stacklevel=3,
        )
        return
    try:
        for key, value in moments.items():
            with atomic_file(cache / f"{key}.npz", inputs=inputs) as path:
                value.save(path)
    except WriteError as error:
        warnings.warn(
            f"the moments were not cached ({error}); a later fit of {table_dir} reads its rows again "
            "(cache_dir= elsewhere keeps them)",
            stacklevel=3,
        )
