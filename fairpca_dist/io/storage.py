"""The one storage layer: every path the library reads or writes, as an fsspec URL.

A path is a plain local path, a ``file://`` URL, or the URL of any filesystem fsspec knows
(``s3://``, ``gs://``, ``abfs://``, ``memory://``, chained ``simplecache::s3://``, …), opened
with the user's ``storage_options`` (keyword arguments of that filesystem: ``endpoint_url``,
``anon``, …; credentials come from each filesystem's usual environment variables and files,
e.g. ``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``). :func:`locate` turns one into a
:class:`Location`; everything in the package that touches user data goes through it, so no
code path can turn a URL into a local folder, and Dask workers on other machines get a URL
(and the filesystem to open it), never a path of the driver's disk.

Errors a person can act on are raised naming the URL, never the options (which may hold
secrets): an unknown scheme or a scheme whose package is missing (:class:`InputError`, with
the package to install), a missing bucket, denied access (:class:`AccessError`), an
unreachable endpoint (:class:`ServiceError`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

from fairpca_dist.exceptions import AccessError, FairPCAError, InputError, ServiceError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = [
    "Location",
    "locate",
    "write_parquet",
    "as_given",
    "local_path",
    "StorageOptions",
    "is_url",
    "service_errors_named",
    "missing_bucket",
]

StorageOptions = Mapping[str, Any]

# The package each scheme needs, for the message when it is missing (fsspec's registry names
# the class to import; this names what to pip install).
_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
    "adl": "adlfs",
    "hdfs": "pyarrow",
    "sftp": "paramiko",
    "http": "aiohttp",
    "https": "aiohttp",
}


def is_url(path: object) -> bool:
    """Whether ``path`` names a filesystem other than the local disk (``s3://…``; ``file://``
    and plain paths are local)."""
    if isinstance(path, Location):
        return not path.local
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else ""
    return "://" in text and not text.startswith(("file://", "local://"))


def local_path(path: str | os.PathLike[str]) -> str:
    """A local path or URL (``file://``, ``local://``) as a path of the local disk."""
    return os.fspath(path).removeprefix("file://").removeprefix("local://")


def as_given(path: str | os.PathLike[str]) -> Path | str:
    """What a writer returns for the output ``path``: a :class:`~pathlib.Path` on the local
    disk (as before URLs existed; ``file://`` stripped), the URL itself for a store."""
    return os.fspath(path) if is_url(path) else Path(local_path(path))


@dataclass(frozen=True, order=True)
class Location:
    """A file or folder on some filesystem: what the user called it (``url``), the fsspec
    filesystem that holds it (``fs``, built with the user's storage options) and its path
    there (``path``: absolute for the local disk, ``bucket/key`` for object stores).

    Picklable (fsspec filesystems are), so a Dask task can write to it on any worker. ``str``
    gives ``url``, which never contains the storage options."""

    url: str
    fs: fsspec.AbstractFileSystem = field(repr=False, compare=False)
    path: str

    def __str__(self) -> str:
        return self.url

    def __truediv__(self, name: str) -> Location:
        url = posixpath.join(self.url.rstrip("/") or "/", name) if self.url not in ("", ".") else name
        return Location(url, self.fs, posixpath.join(self.path.rstrip("/") or "/", name))

    @property
    def local(self) -> bool:
        """Whether this is on the local disk (rename and ``flock`` work; everything else is
        treated as an object store)."""
        return isinstance(self.fs, LocalFileSystem)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    @property
    def parent(self) -> Location:
        """The folder that holds this one, named as the user would: ``.`` for a relative
        local path of one part (``lateq``), ``..`` for ``.``; a bucket's root and the local
        disk's root are their own parents."""
        if not self.local and "/" not in self.path.strip("/"):
            return self
        scheme, _, rest = self.url.rpartition("://")
        prefix = f"{scheme}://" if scheme else ""
        if self.local:
            rest = rest.rstrip("/") or ("/" if rest else ".")
            up = posixpath.basename(rest) in ("", ".", "..")  # "/", ".", "..", "a/..": no name to strip
            head = posixpath.normpath(posixpath.join(rest, "..")) if up else posixpath.dirname(rest) or "."
        else:
            rest = rest.rstrip("/")
            head = rest.rsplit("/", 1)[0] if "/" in rest else rest
        return Location(prefix + head, self.fs, posixpath.dirname(self.path.rstrip("/")) or "/")

    @property
    def storage_options(self) -> dict[str, Any]:
        """The options the filesystem was made with, for Dask's readers and writers."""
        return dict(getattr(self.fs, "storage_options", {}) or {})

    @property
    def dask_url(self) -> str:
        """The URL to give a Dask reader or writer (with ``storage_options``)."""
        return self.path if self.local else self.fs.unstrip_protocol(self.path)

    def exists(self) -> bool:
        with service_errors_named(self):
            return bool(self.fs.exists(self.path))

    def isdir(self) -> bool:
        with service_errors_named(self):
            return bool(self.fs.isdir(self.path))

    def isfile(self) -> bool:
        with service_errors_named(self):
            return bool(self.fs.isfile(self.path))

    def listdir(self) -> list[Location]:
        """The entries of this folder (none if it does not exist)."""
        with service_errors_named(self):
            self.forget_listings()
            try:
                names = self.fs.ls(self.path, detail=False)
            except FileNotFoundError:
                return []
        base = self.path.rstrip("/")
        return [self / posixpath.basename(n.rstrip("/")) for n in names if n.rstrip("/") != base]

    def glob(self) -> list[Location]:
        """The files this pattern matches, sorted (``*``, ``?``, ``[…]``)."""
        with service_errors_named(self):
            self.forget_listings()
            matches = sorted(self.fs.glob(self.path))
        return [Location(m if self.local else self.fs.unstrip_protocol(m), self.fs, m) for m in matches]

    def forget_listings(self) -> None:
        """Drop the filesystem's cached listings under this path: another process (a Dask
        worker, another run) may have written there since."""
        if not self.local:
            with contextlib.suppress(Exception):
                self.fs.invalidate_cache(self.path)

    def open(self, mode: str = "rb", **options: Any) -> IO[Any]:
        """Open the file (``"xb"``: create it only if absent, where the filesystem can say).

        Use it in a ``with`` block. Written to an object store, the file is uploaded when the
        block ends without error; an error discards it (fsspec's own files would upload what
        was written so far), so an object is complete or absent."""
        with service_errors_named(self):
            file = self.fs.open(self.path, mode, **options)
        if self.local or "r" in mode:
            return file
        return _WholeOrNothing(file, self)  # type: ignore[return-value]

    def read_bytes(self) -> bytes:
        with self.open("rb") as file:
            return file.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> None:
        with self.open("wb") as file:
            file.write(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> None:
        self.write_bytes(text.encode(encoding))

    def makedirs(self) -> None:
        """Create this folder and its parents (nothing to do on an object store)."""
        self.fs.makedirs(self.path, exist_ok=True)

    def remove(self) -> None:
        """Remove this file or folder and all it holds; nothing if it is gone."""
        with contextlib.suppress(FileNotFoundError):
            if self.local and os.path.islink(self.path):
                os.unlink(self.path)
            else:
                self.fs.rm(self.path, recursive=True)


class _WholeOrNothing:
    """A file being uploaded to an object store, in a ``with`` block: completed if the block
    succeeds, discarded (nothing uploaded, a multipart upload aborted) if it raises."""

    def __init__(self, file: Any, location: Location) -> None:
        self._file = file
        self._location = location

    def __enter__(self) -> Any:
        return self._file

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self._file.close()
            return
        if isinstance(self._file, AbstractBufferedFile):  # s3fs, gcsfs, adlfs: nothing uploaded yet
            with contextlib.suppress(Exception):
                self._file.discard()
            self._file.closed = True  # so that neither close() nor the finaliser uploads it
            return
        with contextlib.suppress(Exception):  # a file stored only when closed (memory://): close, remove
            self._file.close()
            self._location.remove()


def write_parquet(
    frame: pd.DataFrame, path: Location, values: np.ndarray | None = None, names: Sequence[str] = ()
) -> None:
    """Write the columns of the pandas DataFrame ``frame`` (without its index), then the float64
    columns ``values[:, j]`` named ``names``, to ``path`` as one Parquet file (pyarrow's defaults:
    snappy, statistics).

    The float columns are written without dictionary encoding: features and projections, whose
    dictionary of mostly distinct values makes the file larger and costs ~4× the time of the
    rest of the write (pyarrow tries it page by page). They go to pyarrow as they are: not copied
    when ``values`` is column-major, and not scanned for NaN, which a conversion from pandas
    would store as nulls (the callers' values are finite); the DataFrame way, features
    converted and scanned column by column, took a quarter of ingest's time per partition."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    dictionary = table.column_names  # the frame's columns, named as pyarrow names them (strings)
    if values is not None:
        columns = [pa.array(values[:, j]) for j in range(values.shape[1])]
        fields = [*table.schema, *(pa.field(name, pa.float64()) for name in names)]
        table = pa.Table.from_arrays(
            [*table.columns, *columns], schema=pa.schema(fields, metadata=table.schema.metadata)
        )
    with path.open("wb") as file:
        pq.write_table(table, file, use_dictionary=dictionary)


def locate(path: str | os.PathLike[str] | Location, storage_options: StorageOptions | None = None) -> Location:
    """The :class:`Location` of ``path`` (a local path or any fsspec URL).

    ``storage_options`` are keyword arguments of the URL's filesystem (e.g. ``endpoint_url``
    for s3fs); ignored for a :class:`Location`, which has its own. Raises
    :class:`InputError` for an unknown scheme or one whose package is not installed (naming
    the package), or for options the filesystem does not accept. Nothing is contacted."""
    if isinstance(path, Location):
        return path
    text = os.fspath(path)
    if not is_url(text):
        return Location(text, LocalFileSystem(), os.path.abspath(os.path.expanduser(local_path(text))))
    for part in text.split("::"):  # a chained URL (simplecache::s3://…) names several
        _check_scheme(part.split("://", 1)[0], text)
    try:
        fs, fs_path = fsspec.core.url_to_fs(text, **dict(storage_options or {}))
    except TypeError as error:
        raise InputError(
            f"storage options {sorted(storage_options or {})} are not accepted for {text!r}: {error}"
        ) from error
    except ImportError as error:
        raise InputError(f"{text!r} needs a package that is not installed: {error}") from error
    return Location(text.rstrip("/") if text.endswith("/") and len(text) > 1 else text, fs, fs_path)


def _check_scheme(scheme: str, url: str) -> None:
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        raise InputError(
            f"{url!r}: unknown storage scheme '{scheme}://' (known: a local path, file://, s3://, "
            "gs://, abfs://, memory:// and the others fsspec lists)"
        ) from None
    except ImportError:
        package = _PACKAGES.get(scheme, "the package fsspec names for it")
        extra = {"s3fs": "s3", "gcsfs": "gcs", "adlfs": "azure"}.get(package, "cloud")
        raise InputError(
            f"{url!r} needs {package}, which is not installed: pip install {package} "
            f"(or pip install 'fairpca_dist[{extra}]')"
        ) from None


def missing_bucket(error: BaseException) -> bool:
    """Whether ``error`` says the bucket (container) itself does not exist."""
    return isinstance(error, FileNotFoundError) and "bucket" in str(error).lower()


def _connection_error(error: BaseException) -> bool:
    """Whether ``error`` is a failure to reach a storage service (not an answer from it)."""
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(
        names
        & {
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ReadTimeoutError",
            "ClientConnectorError",
            "ServerDisconnectedError",
            "ConnectionClosedError",
            "ConnectionError",
            "TimeoutError",
        }
    ) and not isinstance(error, FairPCAError)


def _credentials_error(error: BaseException) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(
        names
        & {
            "NoCredentialsError",
            "PartialCredentialsError",
            "CredentialRetrievalError",
            "DefaultCredentialsError",
            "ClientAuthenticationError",
        }
    )


@contextlib.contextmanager
def service_errors_named(location: Location | str) -> Iterator[None]:
    """Within: an object store that cannot be reached raises :class:`ServiceError`, and
    missing credentials :class:`AccessError`, naming the URL (never the storage options).
    Other errors pass unchanged."""
    try:
        yield
    except FairPCAError:
        raise
    except Exception as error:  # noqa: BLE001 - classified below, re-raised unchanged otherwise
        url = str(location)
        if _credentials_error(error):
            raise AccessError(
                errno.EACCES,
                f"cannot access {url!r}: no valid credentials were found "
                f"({type(error).__name__}); set them the usual way for the store "
                "(e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
                url,
            ) from error
        if _connection_error(error):
            raise ServiceError(
                f"cannot reach the storage service for {url!r}: {_endpoint_reason(error)}; "
                "check the endpoint (e.g. AWS_ENDPOINT_URL or storage option endpoint_url) "
                "and the network"
            ) from error
        raise


def _endpoint_reason(error: BaseException) -> str:
    """The first line of ``error`` without the request's query string (which may be long)."""
    text = " ".join(str(error).split())
    return text.split("?", 1)[0] + ('"' if "?" in text else "")
