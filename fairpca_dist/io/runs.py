"""The pipeline's run folders, ``<runs_dir>/<run_id>/`` (``table/``, ``model/``, ``projected/``,
``report/``), and the checks a run makes before it starts.

Nothing here needs Prefect: ``fairpca pipeline`` makes these checks before it starts Prefect's
server, so that bad input fails in seconds (:func:`check_run`); the pipeline flow
(:mod:`fairpca_dist.flows.pipeline`) makes them again first thing, and again under the run folder's lock.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from fairpca_dist.engine.passes import smallest_worker_limit
from fairpca_dist.exceptions import InputError
from fairpca_dist.fitting import MOMENTS_CACHE
from fairpca_dist.io.atomic import check_output, input_paths, output_lock
from fairpca_dist.io.ingest import failed_rejects_path
from fairpca_dist.io.storage import Location, is_url, locate
from fairpca_dist.params import check_run_parameters, check_source_table, check_wide_method, choose_wide
from fairpca_dist.wording import listed

__all__ = ["STEP_FOLDERS", "check_run", "check_run_folder", "previous_run", "remove_unfinished_run", "run_folder"]

STEP_FOLDERS = ("table", "model", "projected", "report")
"""What the pipeline's steps write, in the run folder."""

_STEP_OUTPUTS = (*STEP_FOLDERS, f"../{MOMENTS_CACHE}")  # and the moments cache beside the run folders


def run_folder(runs_dir: str, run_id: str, storage_options: dict[str, Any] | None) -> Location:
    """``<runs_dir>/<run_id>``, a local one as an absolute path (the steps run on Dask workers,
    whose working directory may not be this one)."""
    runs = locate(runs_dir, storage_options)
    return (runs if is_url(runs_dir) else locate(runs.path)) / run_id


def check_run(
    source: str,
    sensitive_feature: list[str],
    *,
    runs_dir: str = "runs",
    run_id: str | None = None,
    features: list[str] | None = None,
    exclude: list[str] | None = None,
    key_columns: list[str] | None = None,
    target: str | None = None,
    method: str = "fair-eig",
    n_components: int = 2,
    center: str = "group",
    options: dict[str, Any] | None = None,
    on_bad_rows: str = "fail",
    read_options: dict[str, Any] | None = None,
    dask_address: str | None = None,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool = False,
    wide: bool | None = None,
    moments_budget: int | None = None,
) -> None:
    """Every check of a pipeline run (:func:`fairpca_dist.flows.pipeline.pipeline`, same parameters) that
    needs no Prefect and no cluster, in seconds: its parameters
    (:func:`~fairpca_dist.params.check_run_parameters`), its run folder when ``run_id`` names
    one (:func:`check_run_folder`) and the source's header and first rows
    (:func:`~fairpca_dist.params.check_source_table`: format, columns, a sensitive feature of
    many values, a target that is not binary; on a source of one partition of at most
    :data:`~fairpca_dist.params.SAMPLE_ROWS` rows, exactly the fit's check of the groups and the
    report's of the target), and a method that cannot fit the table the wide way when it will be
    (:func:`~fairpca_dist.params.check_wide_method`)."""
    check_run_parameters(
        source=source,
        method=method,
        n_components=n_components,
        center=center,
        on_bad_rows=on_bad_rows,
        options=options,
        run_id=run_id or None,
        dask_address=dask_address,
        storage_options=storage_options,
    )
    if run_id:
        check_run_folder(run_folder(runs_dir, run_id, storage_options), source, overwrite, storage_options)
    n_features = check_source_table(
        source,
        sensitive_feature=sensitive_feature,
        features=features,
        exclude=exclude or [],
        key_columns=key_columns or [],
        target=target,
        read_options=read_options,
        storage_options=storage_options,
    )
    asked = dask_address and wide is None and moments_budget is None  # ingest will ask the workers too
    limit = smallest_worker_limit(dask_address) if asked else None
    check_wide_method(method, choose_wide(n_features, 2, wide=wide, budget=moments_budget, worker_limit=limit))


def check_run_folder(root: Location, source: str, overwrite: bool, storage_options: dict[str, Any] | None) -> None:
    """Refuse a run folder ``root`` whose steps' outputs would touch the source
    (:class:`~fairpca_dist.exceptions.OutputPathError`), and one that holds a previous run (any
    step's output) unless ``overwrite`` (:class:`InputError`; :class:`OutputBusyError` if a run
    is writing it now). The folder of a run to replace may not hold the source either: it is
    replaced whole."""
    for output in _STEP_OUTPUTS:  # the run folder may hold the source (the demo's): its steps' outputs may not
        check_output(
            f"{root.url}/{output}" if not root.local else os.path.join(root.path, output),
            input_paths(source),
            kind="folder",
            storage_options=storage_options,
        )
    previous = previous_run(root)
    if previous and not overwrite:
        with output_lock(root, inputs=()):  # a run writing it now is named as such
            pass
        raise InputError(
            f"run folder {root} holds a previous run ({listed(previous, show=str)}): choose another run "
            "id (command line: --run-id), or replace that run once this one completes with "
            "overwrite=True (command line: --overwrite)"
        )
    if previous:
        check_output(root, input_paths(source), kind="folder", storage_options=storage_options)


def previous_run(root: Location) -> list[str]:
    """The steps' outputs found in ``root`` (none: no previous run there)."""
    return [name for name in STEP_FOLDERS if (root / name).exists()]


def remove_unfinished_run(root: Location, outputs: tuple[str, ...] | None) -> None:
    """A failed run's outputs go, with the steps that finished before the failure (an ingested
    table without its model is half a run), except the sample of rejected rows that an ingest
    failure points to. ``outputs``: the entries of ``root`` to remove; None for everything (a
    folder of the run's own: new, or the staging folder of a replacement), and then the folder
    too if nothing is left."""
    kept = failed_rejects_path(root / "table").name
    for entry in root.listdir():
        if entry.name != kept and (outputs is None or entry.name in outputs):
            entry.remove()
    if outputs is None and root.local:
        with contextlib.suppress(OSError):
            os.rmdir(root.path)
