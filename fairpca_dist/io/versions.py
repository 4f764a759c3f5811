"""Folder outputs on object stores, which have no rename and no lock: versions and a pointer.

An object store (S3, GCS, Azure, ``memory://``) writes each object whole or not at all, but
cannot rename a folder or lock one. A folder output ``<out>`` written there is therefore
versioned::

    <out>/_CURRENT            {"version": "v-3f2a9c01be44", "marker": "_SUCCESS", ...}
    <out>/v-3f2a9c01be44/     the files of the committed output (parts, marker, …)

A writer puts every file of its output under a new version folder ``v-<12 hex>`` (never
overwriting an object anyone reads), then commits by writing ``_CURRENT`` — one object,
written *conditionally*: only if it still is the pointer the writer saw when it began
(S3's ``If-Match``/``If-None-Match``; elsewhere a re-read just before the write). Then it
removes the previous output's version and the version folders written before its commit (a
dead writer's leftovers; a version with objects newer than the commit, to the store's second,
may belong to a live writer that began after it, and stays for a later writer to judge).

What this guarantees:

* The library's readers (:func:`committed`) read the version ``_CURRENT`` names: they see
  the previous output until the new one is complete, then the new one; never a mix.
* A writer that fails or is killed leaves a version folder no pointer names: nothing a
  reader takes for an output; the next writer removes it.
* Two writers of one output: the first to commit wins; the other's commit is refused
  (:class:`~fairpca_dist.exceptions.OutputBusyError`) and its version removed. Never mixed.
* A plain reader of the prefix (``dd.read_parquet("s3://…/out")``) sees every version folder
  present: the committed output outside a write (and a dead writer's version, until the next
  writer removes it), the previous output plus the new one's finished parts while a write is
  in progress. Read ``<out>/<version>`` (or use :func:`committed`) to be safe.
* A reader still reading the previous version when the next write commits may find its files
  gone (a clear error naming them); rerunning reads the new version.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from fairpca_dist.exceptions import InputError, OutputBusyError, OutputPathError, reading
from fairpca_dist.io.storage import Location, service_errors_named

__all__ = ["POINTER", "committed", "versioned_directory", "check_replaceable", "is_version_name"]

POINTER = "_CURRENT"
_VERSION = re.compile(r"v-[0-9a-f]{12}")  # a version folder: removed by a writer, a user's folder is not


def is_version_name(name: str) -> bool:
    """Whether ``name`` is a version folder's name (``v-`` and 12 hex digits)."""
    return bool(_VERSION.fullmatch(name))


@dataclass(frozen=True)
class _Pointer:
    """What ``_CURRENT`` held when read: the committed version and the token a conditional
    write must match (the object's ETag on S3, else the version)."""

    version: str
    marker: str | None
    token: str


def _read_pointer(folder: Location) -> _Pointer | None:
    """The pointer of ``folder``, or None when it has none (not a versioned output)."""
    pointer = folder / POINTER
    with service_errors_named(pointer):
        with contextlib.suppress(AttributeError):
            folder.fs.invalidate_cache(pointer.path)
        try:
            info = folder.fs.info(pointer.path)
            text = pointer.read_text()
        except FileNotFoundError:
            return None
    try:
        record = json.loads(text)
        version = record["version"]
    except (ValueError, KeyError, TypeError) as error:
        raise InputError(
            f"{pointer} is damaged (it must name the committed version): {error}; "
            "remove it, or write the output to a new folder"
        ) from error
    if not isinstance(version, str) or not is_version_name(version):
        raise InputError(f"{pointer} names {version!r}, which is not a version folder of this library")
    return _Pointer(version, record.get("marker"), str(info.get("ETag") or version))


def committed(folder: Location) -> Location:
    """The folder a reader of ``folder`` reads: on an object store, the version its
    ``_CURRENT`` names (the committed output); otherwise, or without a pointer (a folder
    the library did not write, e.g. a user's Parquet dataset), ``folder`` itself."""
    if folder.local:
        return folder
    with reading(folder):  # denied access, a missing bucket: named as reading errors
        pointer = _read_pointer(folder)
    return folder if pointer is None else folder / pointer.version


def check_replaceable(folder: Location, marker: str) -> None:
    """Refuse (:class:`OutputPathError`) an object-store ``folder`` that holds objects but is
    not an output of this writer: no pointer, or a pointer whose version has no ``marker``.
    Leftovers of dead writers (version folders without a pointer) do not count."""
    pointer = _read_pointer(folder)
    if pointer is not None:
        if pointer.marker == marker:
            return
        raise OutputPathError(
            f"output {folder} holds another kind of output (its {POINTER} commits a "
            f"{pointer.marker}, not a {marker}); it is not replaced: choose another folder"
        )
    others = [entry for entry in folder.listdir() if not is_version_name(entry.name)]
    if others:
        raise OutputPathError(
            f"output {folder} is a folder with other files in it ({others[0].name}, …; no {POINTER}: not an "
            "output this step wrote before); it is not replaced or written into: choose a new or empty folder"
        )


@contextlib.contextmanager
def versioned_directory(target: Location, *, marker: str) -> Iterator[Location]:
    """Yield a new, empty version folder of ``target``; commit it when the block ends.

    On success ``_CURRENT`` is written conditionally (see the module) and every other version
    folder removed; if another writer committed meanwhile, :class:`OutputBusyError` is raised
    and this version removed. On any error this version is removed and ``target`` is left as
    it was. The caller has checked ``target`` (:func:`check_replaceable`:
    :func:`fairpca_dist.io.atomic.atomic_directory` does, with the overlap checks).
    """
    base = _read_pointer(target)
    version = target / f"v-{uuid.uuid4().hex[:12]}"
    try:
        yield version
        _commit(target, version.name, marker, base)
    except BaseException:
        if not _points_to(target, version.name):  # a commit that landed (its answer lost, or an interrupt just
            with contextlib.suppress(Exception):  # after it) stands: never remove a version the pointer names
                version.remove()
        raise
    _remove_other_versions(target, keep=version.name, previous=base.version if base else None)


def _commit(target: Location, version: str, marker: str, base: _Pointer | None) -> None:
    record = {
        "version": version,
        "marker": marker,
        "committed": datetime.datetime.now(datetime.UTC).isoformat(),
        "format": "fairpca_dist versioned folder: read the version named here",
    }
    data = (json.dumps(record, indent=2) + "\n").encode()
    pointer = target / POINTER
    busy = OutputBusyError(
        f"{target} was written by another run while this one was writing (its {POINTER} "
        "changed); this run's output was discarded and the other run's output stands: run again "
        "to replace it, or write to another output"
    )
    with service_errors_named(pointer):
        if hasattr(target.fs, "call_s3"):  # S3: the store checks the condition
            bucket, key, _ = target.fs.split_path(pointer.path)
            condition = {"IfMatch": base.token} if base else {"IfNoneMatch": "*"}
            try:
                target.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition)
            except OSError as error:  # FileExistsError, or "At least one of the pre-conditions ... did not hold"
                if not (isinstance(error, FileExistsError) or "condition" in str(error)):
                    raise
                if not _points_to(target, version):  # else: a retried PUT whose first try had landed
                    raise busy from error
            target.fs.invalidate_cache(pointer.path)
            return
        if base is None:
            try:
                with pointer.open("xb") as file:  # exclusive create where the filesystem offers it
                    file.write(data)
                return
            except FileExistsError as error:
                raise busy from error
            except (ValueError, NotImplementedError):  # a filesystem without "x": re-read, as below
                pass
        now = _read_pointer(target)
        if (now.version if now else None) != (base.version if base else None):
            raise busy
        pointer.write_bytes(data)


def _points_to(target: Location, version: str) -> bool:
    """Whether the pointer of ``target`` names ``version`` now (False if it cannot be read)."""
    try:
        pointer = _read_pointer(target)
    except Exception:  # noqa: BLE001 - unknown: the caller keeps to its own error
        return False
    return pointer is not None and pointer.version == version


def _remove_other_versions(target: Location, keep: str, previous: str | None) -> None:
    """Remove ``previous`` (the output this commit replaced: nobody writes into a committed
    version) and the version folders of ``target`` written before the commit of ``keep``: dead
    or outrun writers' leftovers. A version with an object written since (the store's clock, to
    the second) may be a live writer's that began after this commit: it is left for a later
    writer. Best effort: a failure leaves garbage the next writer removes."""
    with contextlib.suppress(Exception):
        if previous is not None:
            (target / previous).remove()
        target.forget_listings()  # the listing cached before the commit holds the old pointer
        committed_at = _modified(target.fs.info((target / POINTER).path))
        for entry in target.listdir():
            if not is_version_name(entry.name) or entry.name in (keep, previous):
                continue
            written = [_modified(info) for info in entry.fs.find(entry.path, detail=True).values()]
            if all(when < committed_at for when in written):
                entry.remove()


def _modified(info: dict) -> datetime.datetime:
    """When the store last wrote the object ``info`` describes (UTC)."""
    when = info.get("LastModified") or info.get("mtime") or info.get("created")
    if isinstance(when, (int, float)):
        return datetime.datetime.fromtimestamp(when, datetime.UTC)
    if not isinstance(when, datetime.datetime):
        raise ValueError(f"no modification time for {info.get('name')}")
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)
