"""Write a whole folder or file so that readers see the old version or the new one, never
a half-written one."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_directory", "atomic_file"]


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty staging folder next to ``target``; on success swap it into place.

    The staging folder is a hidden sibling (same file system, so the swap is two renames).
    On any error it is removed and ``target`` is left exactly as it was (or absent).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.staging-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    previous = target.parent / f".{target.name}.previous-{uuid.uuid4().hex[:12]}"
    if target.exists():
        os.replace(target, previous)
    os.replace(staging, target)
    shutil.rmtree(previous, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it over ``target`` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        yield staging
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    os.replace(staging, target)
