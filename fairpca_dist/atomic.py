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
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from fairpca_dist.exceptions import FairPCAError, OutputBusyError, OutputPathError, WriteError

__all__ = ["atomic_directory", "atomic_file", "output_lock", "check_output", "input_paths", "staging_folder",
           "disk_errors_named"]

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
_held = threading.local()  # .paths: {output: depth} locked by this thread

Kind = Literal["folder", "file"]
Paths = Iterable[str | os.PathLike[str]]


def check_output(target: str | os.PathLike[str], inputs: Paths, *, kind: Kind, marker: str | None = None) -> None:
    """Refuse an output that would touch an input or replace something not its writer's.

    ``target`` and every input are resolved to real paths (symbolic links and ``..``
    followed; a glob input stands for the files it matches). Raises :class:`OutputPathError`,
    naming both paths, when ``target`` is an input, contains one or lies inside one, when
    ``target`` exists as a file where a folder (``kind="folder"``) is to be written, or as a
    folder where a file is, and, with ``marker``, when it is a folder holding files but not
    ``marker`` (not a previous output of the same writer). Writes nothing. URLs (``s3://…``)
    are compared as given.
    """
    output = _resolved(target)
    for given in inputs:
        for source in _expanded(given):
            relation = _overlap(output, source)
            if relation:
                raise OutputPathError(
                    f"output {os.fspath(target)!r} {relation} the input {os.fspath(given)!r}"
                    f"{'' if os.fspath(given) == source else f' ({source})'}: writing it would destroy the "
                    "input; write the output somewhere else"
                )
    if kind == "folder" and os.path.isfile(output):
        raise OutputPathError(f"output {os.fspath(target)!r} is an existing file, where a folder is to be written: "
                              "remove the file or choose another output (nothing was written)")
    if kind == "file" and os.path.isdir(output):
        raise OutputPathError(f"output {os.fspath(target)!r} is an existing folder, where a file is to be written: "
                              "remove the folder or choose another output (nothing was written)")
    if marker is not None:
        _check_replaceable(Path(output), marker)


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


def _resolved(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if "://" in text and not text.startswith("file://"):
        return text.rstrip("/")
    return os.path.realpath(os.path.expanduser(text.removeprefix("file://")))


def _expanded(path: str | os.PathLike[str]) -> list[str]:
    """The real paths an input stands for: itself, or the files its glob matches."""
    text = os.fspath(path)
    if "://" not in text and any(ch in text for ch in "*?["):
        return [_resolved(match) for match in glob.glob(os.path.expanduser(text))]
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
    target: str | os.PathLike[str], *, inputs: Paths, kind: Kind = "folder", marker: str | None = None
) -> Iterator[Path]:
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
    """
    check_output(target, inputs, kind=kind, marker=marker)
    target = Path(os.path.realpath(target))  # absolute: the staging folder is written by dask workers
    held: dict[Path, int] = _held.__dict__.setdefault("paths", {})  # this thread's locks
    if target in held:
        held[target] += 1
        try:
            yield target
        finally:
            held[target] -= 1
        return
    lock_path = target.parent / f".{target.name}.lock"
    with disk_errors_named(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = _lock(lock_path, target)
    held[target] = 1
    try:
        _remove_leftovers(target)
        yield target
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
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputBusyError(
                f"{target} is being written by another run (it holds {lock_path}); wait for it to finish "
                "or write to another output"
            ) from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)


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
def disk_errors_named(target: str | os.PathLike[str]) -> Iterator[None]:
    """Within: an error of the disk or of the path the user can act on (full or read-only
    disk, permission denied, a parent that is a file, a looping link: ``_WRITE_ERRNOS``)
    raises :class:`WriteError` naming ``target``, for a writer that removes its partial output
    and leaves the previous ``target`` as it was (every writer of this module, and
    :func:`fairpca_dist.report.write_report`). Other errors pass through unchanged."""
    target = Path(target)
    try:
        existed = target.exists()
    except OSError:  # a name too long, a link loop: the write below fails and says so
        existed = False
    try:
        yield
    except OSError as error:
        if isinstance(error, FairPCAError) or error.errno not in _WRITE_ERRNOS:
            raise
        kept = (f"any partial output was removed and the previous {target} is unchanged" if existed
                else f"nothing was left at {target}")
        where = f" ({error.filename})" if error.filename and os.fspath(error.filename) != os.fspath(target) else ""
        raise WriteError(error.errno, f"could not write {target}: {_WRITE_ERRNOS[error.errno]}{where}; "
                                      f"{kept}") from error


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike[str], *, inputs: Paths, marker: str) -> Iterator[Path]:
    """Yield an empty staging folder next to ``target``; on success swap it into place.

    Parameters
    ----------
    target : path
        The output folder. Refused (:func:`check_output`, :class:`OutputPathError`) when it
        overlaps one of ``inputs`` or is an existing file, and when it is a folder holding
        anything but a previous output of this writer (no ``marker`` file in it): the swap
        replaces the whole folder, so it only ever replaces what this writer wrote.
    inputs : iterable of paths
        Every path the writer reads.
    marker : str
        A file every complete output of this writer holds (``_SUCCESS``, ``schema.json``, …).

    The staging folder is a hidden sibling (same file system, so the swap is two renames).
    ``target``'s lock (:func:`output_lock`) is held throughout. On any error the staging
    folder is removed and ``target`` is left exactly as it was (or absent); a full, read-only
    or forbidden disk raises :class:`WriteError` naming ``target``.
    """
    with output_lock(target, inputs=inputs, kind="folder", marker=marker) as target, disk_errors_named(target):
        existed = target.exists()
        staging = staging_folder(target)
        try:
            yield staging
            previous = target.parent / f".{target.name}.previous-{_unique()}"
            if existed:
                os.replace(target, previous)
            os.replace(staging, target)
        except BaseException:
            _remove(staging)
            raise
        _remove(previous)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike[str], *, inputs: Paths) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it over ``target`` on success.

    ``target`` is first checked against ``inputs`` (:func:`check_output`: refused when it
    overlaps one or is an existing folder). On error the temporary file is removed; a full,
    read-only or forbidden disk raises :class:`WriteError` naming ``target``. Takes no lock:
    a caller writing several files that belong together holds :func:`output_lock` on their
    folder.
    """
    check_output(target, inputs, kind="file")
    target = Path(target)
    with disk_errors_named(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.parent / f".{target.name}.tmp-{_unique()}"
        try:
            yield staging
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        os.replace(staging, target)
