"""Evaluate methods on an ingested Parquet table: one cached pass for the per-cell moments, the
cross-validated protocol of :mod:`fairpca_dist.assessment.evaluation` on the driver, and its files.

The cell moments are cached under a key made of every Parquet file's fingerprint (size and
footer, as for the fit's moments cache), the column roles and the cell assignment: evaluating
other methods, grids or split settings on the same table reads no rows.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import IO, Any, cast

from fairpca_dist.assessment.evaluation import Evaluation, Methods, check_methods, evaluate, plan_splits
from fairpca_dist.engine.cells import CellMoments, HashCells
from fairpca_dist.engine.moments import Center
from fairpca_dist.engine.passes import compute_moments
from fairpca_dist.exceptions import InputError
from fairpca_dist.extras import missing_dependency
from fairpca_dist.fitting import file_fingerprint, moments_cache, table_files
from fairpca_dist.io.atomic import atomic_directory, atomic_file, check_output, input_paths
from fairpca_dist.io.ingest import read_schema, table_source
from fairpca_dist.io.storage import Location, StorageOptions, as_given
from fairpca_dist.params import WideChoice, check_narrow

try:  # the [report] extra
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
except ImportError as error:
    raise missing_dependency(error, extra="report", feature="the figures of fairpca evaluate") from error

__all__ = [
    "table_cells",
    "check_settings",
    "cell_moments_cache_path",
    "cached_cell_moments",
    "evaluate_table",
    "write_evaluation",
    "EVALUATION_FILE",
    "EVALUATION_FILES",
]

EVALUATION_FILE = "evaluation.json"  # everything: the mark of an evaluation folder
EVALUATION_FILES = (EVALUATION_FILE, "evaluation.csv", "evaluation.md", "tradeoff.png")
"""What :func:`write_evaluation` writes (``tradeoff.png`` only when some method has a grid)."""


def table_cells(
    table_dir: str | os.PathLike[str],
    *,
    n_cells: int = 10,
    cells_column: str | None = None,
    seed: int = 0,
    storage_options: StorageOptions | None = None,
) -> HashCells | str:
    """How the rows of an ingested table are assigned to cells: ``cells_column`` if given, else
    a hash of the table's key columns (all feature and group columns when it has none) into
    ``n_cells`` cells with ``seed``."""
    if cells_column is not None:
        return cells_column
    return HashCells(tuple(read_schema(table_dir, storage_options)["key_columns"]), n_cells, seed=seed)


def check_settings(
    methods: Methods, cells: HashCells | str, *, n_splits: int, train_fraction: float, n_folds: int
) -> None:
    """The checks of :func:`~fairpca_dist.assessment.evaluation.evaluate` that need no rows (methods, options,
    and for hash cells the split settings), to fail before the pass."""
    check_methods(methods)
    if isinstance(cells, HashCells):
        plan_splits(range(cells.n_cells), n_splits=n_splits, train_fraction=train_fraction, n_folds=n_folds)


def cell_moments_cache_path(
    table_dir: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str] | None,
    cells: HashCells | str,
    storage_options: StorageOptions | None = None,
) -> Location:
    """Where :func:`cached_cell_moments` keeps the per-cell moments of this table (its files'
    fingerprints, column roles and ``cells``); reading it costs no pass."""
    cache = moments_cache(table_dir, cache_dir, storage_options)
    if cache is None:
        raise InputError(
            f"{table_dir} is a bucket's root: the cell moments are cached beside a table, and nothing "
            "lies beside a bucket; give cache_dir= (a folder outside the table)"
        )
    schema = read_schema(table_dir, storage_options)
    roles = [
        schema["features"],
        schema["sensitive_feature"],
        schema.get("sample_weight"),
        cells.to_json() if isinstance(cells, HashCells) else {"column": cells},
    ]
    digest = hashlib.sha256(json.dumps(roles, sort_keys=True).encode())
    for path in table_files(table_dir, storage_options):
        digest.update(file_fingerprint(path).encode())
    return cache / f"cells-{digest.hexdigest()[:32]}.npz"


def cached_cell_moments(
    table_dir: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    cells: HashCells | str,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> tuple[CellMoments, Location]:
    """Per-cell moments of an ingested table (column roles from its ``schema.json``), from the
    cache when the table's files, roles and ``cells`` are unchanged, else in one pass.

    Returns the moments and the cache file they are in (``cache_dir`` defaults to
    ``<table_dir>/../.moments-cache``, next to the fit's per-file moments).
    """
    schema = read_schema(table_dir, storage_options)
    if schema.get("wide"):
        choice = WideChoice(True, f"as ingested: {schema['wide_reason']}")
        check_narrow("evaluate and compare", choice, ", or ingest it again with --no-wide (wide=False)")
    path = cell_moments_cache_path(table_dir, cache_dir, cells, storage_options)
    if path.isfile():
        return CellMoments.load(path), path
    moments = cast(  # compute_moments(cells=...) gives CellMoments
        CellMoments,
        compute_moments(
            table_source(table_dir, storage_options),
            sensitive_feature=schema["sensitive_feature"],
            features=schema["features"],
            sample_weight=schema.get("sample_weight"),
            cells=cells,
            client=client,
            progress=progress,
            min_group_size=1,
            storage_options=storage_options,
        ),
    )
    with atomic_file(path, inputs=[table_dir]) as staging:
        moments.save(staging)
    return moments, path


def evaluate_table(
    table_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    methods: Methods = ("pca", "fair-eig", "dro"),
    *,
    n_components: int = 3,
    n_cells: int = 10,
    cells_column: str | None = None,
    cell_seed: int = 0,
    n_splits: int = 10,
    train_fraction: float = 0.3,
    n_folds: int = 3,
    center: str = "group",
    standardize: bool = True,
    random_state: int | None = 0,
    cache_dir: str | os.PathLike[str] | None = None,
    client: Any = None,
    progress: bool = False,
    storage_options: StorageOptions | None = None,
) -> Evaluation:
    """Run :func:`~fairpca_dist.assessment.evaluation.evaluate` on an ingested table and write its files to
    ``out_dir`` (:func:`write_evaluation`). Settings are checked before the pass over the rows.
    The cell moments are cached (:func:`cached_cell_moments`). Paths may be URLs, opened with
    ``storage_options``.
    """
    check_output(out_dir, [table_dir], kind="folder", marker=EVALUATION_FILE, storage_options=storage_options)
    cells = table_cells(
        table_dir, n_cells=n_cells, cells_column=cells_column, seed=cell_seed, storage_options=storage_options
    )
    check_settings(methods, cells, n_splits=n_splits, train_fraction=train_fraction, n_folds=n_folds)
    moments, _ = cached_cell_moments(
        table_dir, cache_dir, cells=cells, client=client, progress=progress, storage_options=storage_options
    )
    evaluation = evaluate(
        moments,
        n_components,
        methods,
        n_splits=n_splits,
        train_fraction=train_fraction,
        n_folds=n_folds,
        center=cast(Center, center),  # checked there
        standardize=standardize,
        random_state=random_state,
        progress=progress,
    )
    write_evaluation(evaluation, out_dir, source=str(table_dir), storage_options=storage_options)
    return evaluation


def write_evaluation(
    evaluation: Evaluation,
    out_dir: str | os.PathLike[str],
    *,
    source: str | None = None,
    storage_options: StorageOptions | None = None,
) -> Path | str:
    """Write ``evaluation.json`` (everything), ``evaluation.csv`` (one row per method and split),
    ``evaluation.md`` (the summary) and, when a method has a grid, ``tradeoff.png`` (ABDiff
    against ARE of every grid point, cross-validated, and of the refits on the test parts).
    The folder is replaced as a whole: readers see the old one or the new one. ``source``, the
    table evaluated, must not overlap ``out_dir``."""
    document = {"source": source, **evaluation.to_dict()}
    with atomic_directory(
        out_dir, inputs=input_paths(source), marker=EVALUATION_FILE, storage_options=storage_options
    ) as folder:
        (folder / EVALUATION_FILE).write_text(
            json.dumps(document, indent=2, allow_nan=False, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        with (folder / "evaluation.csv").open("wb") as file:
            evaluation.table().to_csv(file, index=False)
        (folder / "evaluation.md").write_text(_markdown(evaluation, source), encoding="utf-8")
        if not evaluation.tradeoff().empty:
            with (folder / "tradeoff.png").open("wb") as file:
                plot_tradeoff(evaluation, file)
    return as_given(out_dir)


def _markdown(evaluation: Evaluation, source: str | None) -> str:
    settings = evaluation.settings
    lines = [
        f"# Evaluation{f' of {source}' if source else ''}",
        "",
        f"{settings['n_splits']} random train/test splits of {settings['n_cells']} cells "
        f"({settings['train_fraction']:g} of the cells for training), {settings['n_folds']}-fold cross-validation "
        f"of each grid on the training part minimising ABDiff + ARE; r = {settings['n_components']}, "
        f"center = {settings['center']}, standardize = {settings['standardize']}. Mean ± s.d. over splits; test is "
        "out of sample, train in sample. ARE: average reconstruction error; ABDiff: largest minus smallest "
        "group error.",
        "",
        evaluation.markdown(),
        "",
        f"Took {evaluation.seconds:.1f} s.",
        "",
    ]
    return "\n".join(lines)


def plot_tradeoff(evaluation: Evaluation, path: str | os.PathLike[str] | IO[bytes]) -> None:
    """ABDiff against ARE: each method's grid points (cross-validated, averaged over splits) and
    the mean test scores of its refits (a star)."""
    figure = Figure(figsize=(6.4, 4.6))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    tradeoff, summary = evaluation.tradeoff(), evaluation.summary()
    for i, method in enumerate(evaluation.methods):
        points = tradeoff[tradeoff["method"] == method]
        if len(points):
            axes.plot(
                points["are"],
                points["abdiff"],
                "o",
                color=f"C{i}",
                markersize=4,
                alpha=0.7,
                label=f"{method}: grid (CV)",
            )
        test_are, test_abdiff = summary.loc[method, ["test_are", "test_abdiff"]].to_numpy(dtype=float)
        axes.plot(
            test_are,
            test_abdiff,
            "*",
            color=f"C{i}",
            markersize=12,
            markeredgecolor="black",
            label=f"{method}: test",
        )
    axes.set_xlabel("ARE (average reconstruction error)")
    axes.set_ylabel("ABDiff (group error gap)")
    axes.set_title(f"ABDiff vs ARE, r = {evaluation.settings['n_components']}")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=110, metadata={"Software": None})
