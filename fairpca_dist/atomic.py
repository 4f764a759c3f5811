"""Write a whole folder or file so that readers see the old version or the new one, never
a half-written one, and so that two runs never write the same output at once.

A writer holds the output's lock (:func:`output_lock`: ``flock`` on a hidden sibling
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
from collections.abc import Iterator
from pathlib import Path

from fairpca_dist.exceptions import FairPCAError, OutputBusyError, WriteError

__all__ = ["atomic_directory", "atomic_file", "output_lock", "disk_errors_named"]

# A full or read-only disk: reported as WriteError naming the output. Other OSErrors (a lost
# connection, a missing input file) pass through unchanged.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
_held = threading.local()  # .paths: {output: depth} locked by this thread


@contextlib.contextmanager
def output_lock(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the exclusive write lock of ``target`` (a file or folder) while inside.

    Reentrant within a thread; another thread or process that holds it makes this raise
    :class:`OutputBusyError` at once, naming ``target``. On taking the lock, leftovers of a
    killed writer next to ``target`` are removed; a ``.previous-*`` folder is moved back into
    place if ``target`` itself is missing (a writer killed between the two renames of the swap).
    """
    target = Path(target).absolute()
    held: dict[Path, int] = _held.__dict__.setdefault("paths", {})  # this thread's locks
    if target in held:
        held[target] += 1
        try:
            yield target
        finally:
            held[target] -= 1
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
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


def _remove_leftovers(target: Path) -> None:
    pattern = glob.escape(str(target.parent / f".{target.name}."))
    for previous in sorted(glob.glob(pattern + "previous-*")):
        if not target.exists():
            os.replace(previous, target)
    for leftover in [*glob.glob(pattern + "previous-*"), *glob.glob(pattern + "staging-*")]:
        shutil.rmtree(leftover, ignore_errors=True)


@contextlib.contextmanager
def disk_errors_named(target: str | os.PathLike[str]) -> Iterator[None]:
    """Within: a full or read-only disk (ENOSPC, EDQUOT, EFBIG, EROFS) raises
    :class:`WriteError` naming ``target``, for a writer that removes its partial output and
    leaves the previous ``target`` as it was (every writer of this module, and
    :func:`fairpca_dist.report.write_report`). Other errors pass through unchanged."""
    target = Path(target)
    existed = target.exists()
    try:
        yield
    except OSError as error:
        if isinstance(error, FairPCAError) or error.errno not in _DISK_ERRNOS:
            raise
        kept = f"the previous {target} is unchanged" if existed else f"nothing was written to {target}"
        raise WriteError(error.errno, f"could not write {target}: {error.strerror or error}; partial output "
                                      f"removed, {kept}") from error


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty staging folder next to ``target``; on success swap it into place.

    The staging folder is a hidden sibling (same file system, so the swap is two renames).
    ``target``'s lock (:func:`output_lock`) is held throughout. On any error the staging
    folder is removed and ``target`` is left exactly as it was (or absent); a full or
    read-only disk raises :class:`WriteError` naming ``target``.
    """
    target = Path(target).absolute()  # the staging folder is written by dask workers, whose cwd may differ
    with output_lock(target), disk_errors_named(target):
        existed = target.exists()
        staging = target.parent / f".{target.name}.staging-{uuid.uuid4().hex[:12]}"
        staging.mkdir()
        try:
            yield staging
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        previous = target.parent / f".{target.name}.previous-{uuid.uuid4().hex[:12]}"
        if existed:
            os.replace(target, previous)
        os.replace(staging, target)
        shutil.rmtree(previous, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it over ``target`` on success.

    On error the temporary file is removed; a full or read-only disk raises
    :class:`WriteError` naming ``target``. Takes no lock: a caller writing several files that
    belong together holds :func:`output_lock` on their folder.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:12]}"
    with disk_errors_named(target):
        try:
            yield staging
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        os.replace(staging, target)
