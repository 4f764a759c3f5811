"""Write a whole folder or file so that readers see the old version or the new one, never
a half-written one, so that two runs never write the same output at once, and so that no
write touches an input.

Every writer names its inputs: before its first byte, :func:`check_output` resolves the
output and each input to real paths (symbolic links and ``..`` followed) and refuses, with
:class:`OutputPathError` naming both, an output that is an input, contains one or lies
inside one, and an output of the wrong kind (a file where a folder is to be written, or the
reverse). A writer holds the output's lock (:func:`output_lock`: ``flock`` on a hidden sibling
``.<name>.lock``, released by the operating system if the process dies) from its first byte
to the swap. Whoever takes the lock removes what a writer killed before its cleanup could
run left next to the output (``.<name>.staging-*``, ``.<name>.previous-*``).

That is the local disk. Outputs on an object store (any URL but ``file://``: no rename, no
lock) are versioned folders committed by a conditional pointer write
(:mod:`fairpca_dist.io.versions`); a single file is one object, written whole or not at all.
Every writer here yields a :class:`~fairpca_dist.io.storage.Location` to write into, on either.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from fairpca_dist.exceptions import FairPCAError, OutputBusyError, OutputPathError, WriteError
from fairpca_dist.io import versions
from fairpca_dist.io.storage import (
    Location,
    StorageOptions,
    is_url,
    local_path,
    locate,
    missing_bucket,
    service_errors_named,
)

__all__ = [
    "atomic_directory",
    "atomic_file",
    "output_lock",
    "check_output",
    "input_paths",
    "staging_folder",
    "swap_in",
    "write_errors_named",
]

# Errors of a write the user can act on (a full, read-only or forbidden disk, a parent that is
# a file, a looping link): reported as WriteError naming the output. Other OSErrors (a lost
# connection) pass through unchanged.
_WRITE_ERRNOS = {
    errno.ENOSPC: "no space left on the disk",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for the file system",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied: give this user write access to the folder, or write elsewhere",
    errno.EPERM: "operation not permitted: give this user write access to the folder, or write elsewhere",
    errno.ENOTDIR: "a parent in the path is a file, not a folder",
    errno.EEXIST: "a parent in the path is a file, not a folder",
    errno.EISDIR: "a folder is where a file is to be written",
    errno.ELOOP: "a symbolic link in the path points back to itself (a link loop)",
    errno.ENAMETOOLONG: "the path is too long",
}
# The same, for an object store's answers (s3fs turns them into these OSErrors)
_STORE_ERRNOS = {
    errno.EACCES: "access denied by the store: check the credentials (e.g. AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY) and that they may write this bucket",
    errno.EPERM: "access denied by the store: check the credentials and that they may write this bucket",
    errno.ENOENT: "its bucket does not exist: create it first, or write elsewhere",
}
_held = threading.local()  # .paths: {output: depth} locked by this thread

Kind = Literal["folder", "file"]
Paths = Iterable[str | os.PathLike[str]]
Target = str | os.PathLike[str] | Location


def check_output(
    target: Target,
    inputs: Paths,
    *,
    kind: Kind,
    marker: str | None = None,
    storage_options: StorageOptions | None = None,
) -> None:
    """Refuse an output that would touch an input or replace something not its writer's.

    ``target`` and every input are resolved to real paths (symbolic links and ``..``
    followed; a glob input stands for the files it matches). Raises :class:`OutputPathError`,
    naming both paths, when ``target`` is an input, contains one or lies inside one, when
    ``target`` exists as a file where a folder (``kind="folder"``) is to be written, or as a
    folder where a file is, and, with ``marker``, when it is a folder holding files but not
    ``marker`` (not a previous output of the same writer). Writes nothing. URLs (``s3://…``)
    are compared as given (a glob stands for its folder); an object store's folder is
    replaceable if its pointer commits a ``marker`` (:func:`fairpca_dist.io.versions.check_replaceable`).
    """
    location = locate(target, storage_options)
    output = _resolved(location)
    for given in inputs:
        for source in _expanded(given):
            relation = _overlap(output, source)
            if relation:
                raise OutputPathError(
                    f"output {location.url!r} {relation} the input {os.fspath(given)!r}"
                    f"{'' if os.fspath(given) == source else f' ({source})'}: writing it would destroy the "
                    "input; write the output somewhere else"
                )
    if not location.local:
        _check_remote_kind(location, kind, marker)
        return
    if kind == "folder" and os.path.isfile(output):
        raise OutputPathError(
            f"output {location.url!r} is an existing file, where a folder is to be written: "
            "remove the file or choose another output (nothing was written)"
        )
    if kind == "file" and os.path.isdir(output):
        raise OutputPathError(
            f"output {location.url!r} is an existing folder, where a file is to be written: "
            "remove the folder or choose another output (nothing was written)"
        )
    if marker is not None:
        _check_replaceable(Path(output), marker)


def _check_remote_kind(location: Location, kind: Kind, marker: str | None) -> None:
    with write_errors_named(location):
        _check_bucket(location)
        if kind == "folder" and location.isfile():
            raise OutputPathError(
                f"output {location} is an existing object, where a folder is to be written: "
                "remove it or choose another output (nothing was written)"
            )
        if kind == "file" and location.listdir() and not location.isfile():
            raise OutputPathError(
                f"output {location} is an existing folder, where a file is to be written: "
                "remove the folder or choose another output (nothing was written)"
            )
        if marker is not None:
            versions.check_replaceable(location, marker)


def _check_bucket(location: Location) -> None:
    """On S3, ask for the bucket of ``location`` before anything is computed: a missing bucket,
    credentials that are refused or an endpoint that cannot be reached fail now, naming the URL."""
    if not hasattr(location.fs, "call_s3"):
        return
    bucket = location.fs.split_path(location.path)[0]
    try:
        location.fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError as error:
        raise WriteError(
            errno.ENOENT,
            f"could not write {location}: its bucket {bucket!r} does not exist: create it "
            "first, or write elsewhere; nothing was written",
        ) from error


def input_paths(*sources: object) -> list[str | os.PathLike[str]]:
    """The paths among ``sources`` (a path, a list of paths, a DataFrame, None, …): what a
    writer passes as its ``inputs``; in-memory data has no path to protect."""
    paths: list[str | os.PathLike[str]] = []
    for source in sources:
        if isinstance(source, (str, os.PathLike)):
            paths.append(source)
        elif isinstance(source, (list, tuple)):
            paths.extend(input_paths(*source))
    return paths


def _resolved(path: str | os.PathLike[str] | Location) -> str:
    if isinstance(path, Location):
        return path.fs.unstrip_protocol(path.path).rstrip("/") if not path.local else _resolved(path.path)
    text = os.fspath(path)
    if is_url(text):  # as fsspec spells it (memory://a and memory:///a are one path); a glob stands for its folder
        return _resolved(locate(re.split(r"/[^/]*[*?\[]", text, maxsplit=1)[0]))
    return os.path.realpath(os.path.expanduser(local_path(text)))


def _expanded(path: str | os.PathLike[str]) -> list[str]:
    """The real paths an input stands for: itself, or the files its glob matches."""
    text = str(path) if isinstance(path, Location) else os.fspath(path)
    if not is_url(text) and any(ch in text for ch in "*?["):
        return [_resolved(match) for match in glob.glob(os.path.expanduser(local_path(text)))]
    return [_resolved(text)]


def _overlap(output: str, source: str) -> str:
    """How ``output`` overlaps ``source`` ("is", "contains", "lies inside"), or ""."""
    if output == source:
        return "is"
    if _inside(source, output):
        return "contains"
    if _inside(output, source):
        return "lies inside"
    return ""


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


@contextlib.contextmanager
def output_lock(
    target: Target,
    *,
    inputs: Paths,
    kind: Kind = "folder",
    marker: str | None = None,
    storage_options: StorageOptions | None = None,
) -> Iterator[Location]:
    """Hold the exclusive write lock of ``target`` (a ``kind`` of output) while inside.

    First :func:`check_output` refuses a ``target`` that overlaps one of ``inputs`` or exists as
    the other kind; with ``marker``, a folder ``target`` must also be new, empty or hold that
    file (a previous output of the same writer: :class:`OutputPathError` otherwise, so that no
    writer replaces files of a folder it did not write). A symbolic link as ``target`` is
    followed: the output is written where it points. Reentrant within a thread; another thread
    or process that holds it makes this raise :class:`OutputBusyError` at once, naming
    ``target``. On taking the lock, leftovers of a killed writer next to ``target`` are removed;
    a ``.previous-*`` folder is moved back into place if ``target`` itself is missing (a writer
    killed between the two renames of the swap). A parent that cannot be created or a lock that
    cannot be written (read-only disk, permission denied) raises :class:`WriteError` naming
    ``target``.

    On an object store there is no lock: this checks ``target`` and yields it; a concurrent
    writer is refused when it commits (:mod:`fairpca_dist.io.versions`).
    """
    check_output(target, inputs, kind=kind, marker=marker, storage_options=storage_options)
    location = locate(target, storage_options)
    if not location.local:
        yield location
        return
    target = Path(os.path.realpath(location.path))  # absolute: the staging folder is written by dask workers
    held: dict[Path, int] = _held.__dict__.setdefault("paths", {})  # this thread's locks
    if target in held:
        held[target] += 1
        try:
            yield locate(target)
        finally:
            held[target] -= 1
        return
    lock_path = target.parent / f".{target.name}.lock"
    with write_errors_named(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = _lock(lock_path, target)
    held[target] = 1
    try:
        _remove_leftovers(target)
        yield locate(target)
    finally:
        del held[target]
        with contextlib.suppress(FileNotFoundError):  # while still locked: an opener that got
            os.unlink(lock_path)  # this inode sees it is no longer the lock file, and retries
        os.close(fd)


def _lock(lock_path: Path, target: Path) -> int:
    """A descriptor of ``lock_path`` holding its flock (the file may be replaced between open
    and lock by a releasing holder's unlink: then lock the new file)."""
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
            os.close(fd)
            raise OutputBusyError(
                f"{target} is being written by another run (it holds {lock_path}); wait for it to finish "
                "or write to another output"
            ) from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)


def _try_lock(fd: int) -> bool:
    """Take an exclusive lock of the open file ``fd`` without waiting; False when another
    process holds it. POSIX: ``flock``; Windows (no ``fcntl``): ``msvcrt``'s lock of the first
    byte. Imported here, so the package imports on either."""
    try:
        import fcntl
    except ModuleNotFoundError:
        import msvcrt

        try:
            # msvcrt's stubs declare these on win32 only, and mypy checks as the platform it runs on
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _check_replaceable(target: Path, marker: str) -> None:
    """Refuse a folder ``target`` that holds files but not ``marker``: not this writer's output."""
    with contextlib.suppress(OSError):  # unreadable or missing: the write itself will say
        if target.is_dir() and not (target / marker).is_file() and any(target.iterdir()):
            raise OutputPathError(
                f"output {target} is a folder with other files in it (no {marker}: not an output this step wrote "
                "before); it is not replaced or written into: choose a new or empty folder"
            )


_SUFFIX = "[0-9a-f]" * 12  # what _unique() appends: a leftover is recognised by it, a user's file is not


def _unique() -> str:
    return uuid.uuid4().hex[:12]


def staging_folder(target: Path) -> Path:
    """Create and return a new hidden staging folder next to ``target`` (``.<name>.staging-*``:
    removed by the next writer if this one is killed before its cleanup)."""
    staging = target.parent / f".{target.name}.staging-{_unique()}"
    staging.mkdir()
    return staging


def _remove_leftovers(target: Path) -> None:
    pattern = glob.escape(str(target.parent / f".{target.name}."))
    for previous in sorted(glob.glob(pattern + "previous-" + _SUFFIX)):
        if not target.exists():
            os.replace(previous, target)
    for leftover in [*glob.glob(pattern + "previous-" + _SUFFIX), *glob.glob(pattern + "staging-" + _SUFFIX)]:
        _remove(Path(leftover))


def _remove(path: Path) -> None:
    """Remove a folder or a file, whatever is there (nothing if it is gone)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def write_errors_named(target: Target) -> Iterator[None]:
    """Within: an error of the disk, the store or the path the user can act on (full or
    read-only disk, permission denied, a parent that is a file, a looping link:
    ``_WRITE_ERRNOS``; a store's denied access or missing bucket: ``_STORE_ERRNOS``) raises
    :class:`WriteError` naming ``target``, and a store that cannot be reached
    :class:`~fairpca_dist.exceptions.ServiceError`, for a writer that removes its partial
    output and leaves the previous ``target`` as it was (every writer of this module, and
    :func:`fairpca_dist.assessment.report.write_report`). Other errors pass through unchanged."""
    remote = is_url(target)
    name = str(target) if isinstance(target, Location) else os.fspath(target)
    try:
        existed = False if remote else os.path.exists(locate(target).path)
    except OSError:  # a name too long, a link loop: the write below fails and says so
        existed = False
    reasons = _STORE_ERRNOS if remote else _WRITE_ERRNOS
    try:
        with service_errors_named(name):
            yield
    except OSError as error:
        code = _errno(error)
        if isinstance(error, FairPCAError) or code not in reasons:
            raise
        if code == errno.ENOENT and not missing_bucket(error):
            raise
        kept = (
            "the previous output, if any, is unchanged"
            if remote
            else f"any partial output was removed and the previous {name} is unchanged"
            if existed
            else f"nothing was left at {name}"
        )
        where = f" ({error.filename})" if not remote and error.filename and os.fspath(error.filename) != name else ""
        raise WriteError(code, f"could not write {name}: {reasons[code]}{where}; {kept}") from error


def _errno(error: OSError) -> int | None:
    """``error.errno``, or the one its type stands for (s3fs raises ``PermissionError("Forbidden")``
    without a number)."""
    if error.errno is not None:
        return error.errno
    return {PermissionError: errno.EACCES, FileNotFoundError: errno.ENOENT}.get(type(error))


@contextlib.contextmanager
def atomic_directory(
    target: Target, *, inputs: Paths, marker: str, storage_options: StorageOptions | None = None
) -> Iterator[Location]:
    """Yield an empty folder to write the output into; on success make it ``target``.

    Parameters
    ----------
    target : path or URL
        The output folder. Refused (:func:`check_output`, :class:`OutputPathError`) when it
        overlaps one of ``inputs`` or is an existing file, and when it is a folder holding
        anything but a previous output of this writer (no ``marker`` file in it): the swap
        replaces the whole folder, so it only ever replaces what this writer wrote.
    inputs : iterable of paths
        Every path the writer reads.
    marker : str
        A file every complete output of this writer holds (``_SUCCESS``, ``schema.json``, …).
    storage_options : mapping, optional
        Options of ``target``'s filesystem (:func:`fairpca_dist.io.storage.locate`).

    On the local disk the folder is a hidden staging sibling (same file system, so the swap
    is two renames) and ``target``'s lock (:func:`output_lock`) is held throughout. On an
    object store it is a new version of ``target``, committed by its pointer
    (:func:`fairpca_dist.io.versions.versioned_directory`). On any error the partial output is
    removed and ``target`` is left exactly as it was (or absent); a full, read-only or
    forbidden disk or store raises :class:`WriteError` naming ``target``.
    """
    with (
        output_lock(target, inputs=inputs, kind="folder", marker=marker, storage_options=storage_options) as target,
        write_errors_named(target),
    ):
        if not target.local:
            with versions.versioned_directory(target, marker=marker) as version:
                yield version
            return
        folder = Path(target.path)
        staging = staging_folder(folder)
        try:
            yield locate(staging)
            swap_in(staging, folder)
        except BaseException:
            _remove(staging)
            raise


def swap_in(staging: Path, folder: Path) -> None:
    """Make the complete folder ``staging`` (a :func:`staging_folder` of ``folder``) ``folder``,
    by two renames on one file system; the previous ``folder``, if any, is removed after. A
    reader sees the old folder or the new one; a writer killed between the renames leaves the
    old one as ``.previous-*``, which the next holder of the lock moves back. The caller holds
    ``folder``'s :func:`output_lock`."""
    previous = folder.parent / f".{folder.name}.previous-{_unique()}"
    if folder.exists():
        os.replace(folder, previous)
    os.replace(staging, folder)
    _remove(previous)


@contextlib.contextmanager
def atomic_file(target: Target, *, inputs: Paths, storage_options: StorageOptions | None = None) -> Iterator[Location]:
    """Yield where to write the file ``target``; it becomes ``target`` on success.

    ``target`` is first checked against ``inputs`` (:func:`check_output`: refused when it
    overlaps one or is an existing folder). On the local disk the yielded file is a temporary
    sibling renamed over ``target``; on an object store it is ``target`` itself, whose
    upload completes only when the block succeeds (:meth:`Location.open` discards it on
    error). On error nothing is left; a full, read-only or forbidden disk raises
    :class:`WriteError` naming ``target``. Takes no lock: a caller writing several files that
    belong together holds :func:`output_lock` on their folder.
    """
    check_output(target, inputs, kind="file", storage_options=storage_options)
    location = locate(target, storage_options)
    with write_errors_named(location):
        if not location.local:
            yield location
            return
        path = Path(location.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.parent / f".{path.name}.tmp-{_unique()}"
        try:
            yield locate(staging)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        os.replace(staging, path)
