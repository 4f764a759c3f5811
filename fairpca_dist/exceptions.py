"""The exceptions fairpca_dist raises.

Every error derives from :class:`FairPCAError` and also from the builtin type callers
already catch (as ``sklearn.exceptions.NotFittedError`` does), so ``except ValueError``
keeps working. Input errors are deterministic: pipelines must not retry them.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # storage imports this module
    from fairpca_dist.io.storage import Location

__all__ = [
    "FairPCAError",
    "InputError",
    "SchemaError",
    "GroupError",
    "ReadError",
    "OutputPathError",
    "AccessError",
    "SolverError",
    "WriteError",
    "OutputBusyError",
    "ServiceError",
    "ResourceError",
    "MissingDependencyError",
    "ConvergenceWarning",
    "ModelWarning",
    "READ_ERRORS",
    "error_line",
    "read_error",
    "reading",
]


class FairPCAError(Exception):
    """Base class of every error raised by fairpca_dist."""


class _NamedOSError(OSError):
    """An ``OSError`` whose text is its message alone (``OSError`` puts ``[Errno N]`` before it
    and the file name after it, which the message already names)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class InputError(FairPCAError, ValueError):
    """Bad arguments or bad data values (NaN, inf, out-of-range parameters)."""


class SchemaError(InputError):
    """A column is missing, misspelt or has a dtype that cannot be used."""


class GroupError(InputError):
    """The sensitive feature defines unusable groups (one group, a group with too few rows)."""


class ReadError(InputError):
    """A file or partition could not be read as the table it claims to be (a corrupt file,
    values that do not parse as their column's type, a column missing from one file).
    The message names the partition and, for files, the file."""


class OutputPathError(InputError):
    """An output path cannot be written as asked: it is one of the inputs, contains one or lies
    inside one (also through a symbolic link or ``..``), or it is an existing file where a
    folder is to be written (or the reverse). Nothing was written; the message names both paths."""


class AccessError(FairPCAError, _NamedOSError):
    """An input cannot be opened: it does not exist, permission is denied, a symbolic link
    loops, or a parent in its path is a file. The message names the path; ``errno`` and
    ``filename`` are the operating system's. Deterministic: retrying does not help."""


class SolverError(FairPCAError, RuntimeError):
    """A solver failed on valid input (infeasible problem, non-finite objective)."""


class WriteError(FairPCAError, _NamedOSError):
    """An output could not be written: its disk is full or read-only, permission is denied, or
    a parent in its path is a file. The message names the output; the partial output was
    removed and the previous version, if any, is intact. ``errno`` is the operating system's
    (e.g. ``ENOSPC``)."""


class OutputBusyError(FairPCAError, RuntimeError):
    """Another run (thread or process) is writing the same output; the message names it.
    Nothing was written: rerun when that run has finished, or write elsewhere."""


class ServiceError(FairPCAError, ConnectionError):
    """A service the work needs cannot be reached or answers wrongly: a Dask scheduler, a
    Prefect API, an object store. The message names the service and its address. A lost
    connection mid-run may succeed on retry; a malformed address is an :class:`InputError`."""


class ResourceError(FairPCAError, MemoryError):
    """The work needs more of a resource than the machine or cluster has, e.g. a partition
    that does not fit in a Dask worker's memory. The message gives the amount needed and how
    to get it (larger workers, smaller partitions)."""


class MissingDependencyError(FairPCAError, ImportError):
    """A feature needs a package of an optional extra that is not installed; the message names
    the package, the feature and the command that installs the extra
    (``pip install "fairpca_dist[conic]"``). See :mod:`fairpca_dist.extras`."""


# A compressed file cut short or damaged, as the decompressors say it
_DAMAGED = (EOFError, zlib.error, zipfile.BadZipFile, gzip.BadGzipFile)
READ_ERRORS = (OSError, *_DAMAGED)
"""What reading a file can raise that :func:`read_error` may name."""

_READ_REASONS = {
    errno.ENXIO: "it is not a regular file (a socket or a device)",
    errno.EACCES: "permission denied: give this user read access, or copy the input somewhere readable",
    errno.EPERM: "operation not permitted: give this user read access, or copy the input somewhere readable",
    errno.ELOOP: "a symbolic link in the path points back to itself (a link loop): fix or remove the link",
    errno.ENOTDIR: "a parent in the path is a file, not a folder",
    errno.ENAMETOOLONG: "the path is too long",
}

_REMOTE_DENIED = (
    "access denied by the store: check the credentials (e.g. AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY) and that they may read this bucket"
)


def error_line(error: BaseException) -> str:
    """``"<type>: <message>"`` on one line, without the sentence dask puts before a reader's own
    message ("An error occurred while calling the read_csv method ...")."""
    text = re.sub(
        r"^An error occurred while calling the \w+ method registered to the \w+ backend\.\s*"
        r"Original Message:\s*",
        "",
        " ".join(str(error).split()),
    )
    return f"{type(error).__name__}: {text}"


def read_error(error: BaseException, path: str | os.PathLike[str] | Location | None = None) -> FairPCAError | None:
    """The error to raise when reading ``path`` failed with ``error`` (one of
    :data:`READ_ERRORS`): :class:`InputError` for a missing path, :class:`ReadError` for a
    compressed file cut short or damaged, :class:`AccessError` for a path that cannot be opened
    (permission, a looping link, a parent that is a file); None for errors that may pass on
    retry (a lost connection, a timeout)."""
    if isinstance(error, FairPCAError):
        return error
    given = path if path is not None else getattr(error, "filename", None) or "the input"
    name = os.fspath(given) if isinstance(given, (str, os.PathLike)) else str(given)  # a path, or a storage Location
    if isinstance(error, _DAMAGED):
        return ReadError(
            f"cannot read {name!r}: the compressed file is truncated or damaged ({error_line(error)}); "
            "copy it again from its origin"
        )
    remote = "://" in name and not name.startswith("file://")
    if isinstance(error, FileNotFoundError):
        if remote and "bucket" in str(error).lower():
            return InputError(f"input path {name!r} does not exist: its bucket does not exist")
        return InputError(f"input path {name!r} does not exist")
    number = getattr(error, "errno", None)
    if isinstance(error, PermissionError) and number is None:  # an object store's refusal (s3fs: 'Forbidden')
        number = errno.EACCES
    if number not in _READ_REASONS:
        return None
    reason = _REMOTE_DENIED if remote and number in (errno.EACCES, errno.EPERM) else _READ_REASONS[number]
    return AccessError(number, f"cannot read {name!r}: {reason}", name)


@contextlib.contextmanager
def reading(path: str | os.PathLike[str] | Location) -> Iterator[None]:
    """Within: an error of reading ``path`` a person can act on raises the error
    :func:`read_error` gives, naming ``path``; other errors pass unchanged."""
    try:
        yield
    except READ_ERRORS as error:
        named = read_error(error, path)
        if named is None or named is error:
            raise
        raise named from error


class ConvergenceWarning(UserWarning):
    """A solver stopped before meeting its tolerance; also recorded as ``converged=False``."""


class ModelWarning(UserWarning):
    """The data violate a premise of the method as published (e.g. the conditions of a
    closed form); the fit goes on with what is right and says which premise failed."""
