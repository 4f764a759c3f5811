"""The comparison's files: ``comparison.json`` / ``.csv`` / ``.md`` / ``.html`` and its PNGs.

Rendering only (the numbers are :class:`~fairpca_dist.assessment.comparison.Comparison`'s): the
comparison's summary in words (base rate of the downstream classifier, small groups, failures);
per rank r, a table of methods × criteria in sample and one out
of sample with the best of each column marked ★ (a degenerate downstream classifier marked
instead, never ★), the Pareto plots of explained variance against each fairness criterion (each
method's grid drawn as a curve, the front as a black line), the plain-language reading, and,
for all ranks, each method's per-group error against r. The Markdown and the HTML show the same
blocks (:mod:`fairpca_dist.assessment.rendering`). The folder is replaced as a whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from fairpca_dist.assessment import charts
from fairpca_dist.assessment.comparison import DOWNSTREAM_KEYS, Candidate, Comparison, one_line
from fairpca_dist.assessment.downstream import degenerate_mark
from fairpca_dist.assessment.rendering import Block, Heading, Image, Paragraph, Table, html_page, markdown, number
from fairpca_dist.assessment.scoring import Criterion
from fairpca_dist.io.atomic import atomic_directory, input_paths
from fairpca_dist.io.storage import Location, StorageOptions, as_given

__all__ = ["write_comparison", "COMPARISON_FILE", "COMPARISON_FILES"]

COMPARISON_FILE = "comparison.json"  # everything, written last: the mark of a comparison folder
COMPARISON_FILES = (COMPARISON_FILE, "comparison.csv", "comparison.md", "comparison.html")
"""The files :func:`write_comparison` always writes; PNGs ``pareto_r<r>_<criterion>.png`` and
``group_error_vs_r.png`` come beside them."""


def write_comparison(
    comparison: Comparison,
    out_dir: str | os.PathLike[str],
    *,
    source: str | None = None,
    storage_options: StorageOptions | None = None,
) -> Path | str:
    """Write the files of a comparison into ``out_dir``, replacing the folder as a whole.

    The files are ``comparison.md`` and ``comparison.html`` (the tables, the best of each column
    starred, the trade-offs in words, the charts), ``comparison.csv`` (``comparison.table()``),
    ``comparison.json`` (every number) and the PNG charts (explained variance against each
    fairness criterion, with the Pareto front). Readers see the old folder or the new one, never
    a mix.

    Parameters
    ----------
    comparison : Comparison
        What :func:`~fairpca_dist.assessment.table_comparison.compare` returned.
    out_dir : str or path-like
        The output folder (new, empty, or a previous comparison), or a URL (``s3://…``).
    source : str, optional
        The table compared: named in the title, and refused as an output (it must not overlap
        ``out_dir``).
    storage_options : dict, optional
        Options of the filesystem of a URL (e.g. ``endpoint_url``).

    Returns
    -------
    Path or str
        ``out_dir`` as given.

    Raises
    ------
    OutputPathError
        ``out_dir`` overlaps ``source``, or is a folder of other files.
    OutputBusyError
        Another writer holds ``out_dir``.
    WriteError
        The files cannot be written (full disk, permission); nothing is left behind.
    """
    title = f"Fair PCA methods compared{f' on {source}' if source else ''}"
    with atomic_directory(
        out_dir, inputs=input_paths(source), marker=COMPARISON_FILE, storage_options=storage_options
    ) as folder:
        images = _plots(comparison, folder)
        blocks = _blocks(comparison, title, images)
        (folder / "comparison.md").write_text(markdown(blocks), encoding="utf-8")
        (folder / "comparison.html").write_text(
            html_page(blocks, {name: (folder / f"{name}.png").read_bytes() for name in images}, title), encoding="utf-8"
        )
        with (folder / "comparison.csv").open("wb") as file:
            comparison.table().to_csv(file, index=False)
        (folder / COMPARISON_FILE).write_text(
            json.dumps({"source": source, **comparison.to_dict()}, indent=2, allow_nan=False, ensure_ascii=False)
            + "\n",
            encoding="utf-8",
        )
    return as_given(out_dir)


# ---------------------------------------------------------------------- document
def _blocks(comparison: Comparison, title: str, images: dict[str, str]) -> list[Block]:
    settings = comparison.settings
    groups = ", ".join(f"{g} ({n})" for g, n in zip(comparison.group_names, settings["group_counts"], strict=True))
    blocks: list[Block] = [
        Heading(1, title),
        Paragraph(
            f"{settings['n_samples']} rows, {settings['n_features']} features, groups "
            f"{groups}. "
            f"In sample: fitted and scored on every row. Out of sample: fitted on {len(comparison.split.train)} of "
            f"{settings['n_cells']} cells, scored on the other {len(comparison.split.test)}. Centre "
            f"'{settings['center']}', standardize {settings['standardize']}. ★ marks the best value of a column "
            f"(never a degenerate downstream classifier's). Took {comparison.seconds:.1f} s."
        ),
        Paragraph(_passes_sentence(comparison)),
        *(Paragraph(line) for line in comparison.summary()),
    ]
    for r in comparison.ranks:
        candidates = comparison.at(r)
        blocks += [
            Heading(2, f"r = {r}"),
            *(Paragraph(line) for line in comparison.reading(r)),
            Heading(3, "In sample"),
            _criteria_table(comparison, r, "in"),
            Heading(3, "Out of sample (test cells)"),
            _criteria_table(comparison, r, "test"),
            Heading(3, "Trade-off plots"),
            *(Image(name, caption) for name, caption in images.items() if name.startswith(f"pareto_r{r}_")),
            Heading(3, "Fits"),
            Table(
                ["method", "status", "out-of-sample status", "fit s", "passes over the rows", "message"],
                [
                    [
                        c.label,
                        c.status,
                        one_line(c.out_of_sample_status),
                        f"{c.seconds:.2f}",
                        str(c.passes),
                        one_line(c.message),
                    ]
                    for c in candidates
                ],
            ),
        ]
    if "group_error_vs_r" in images:
        blocks += [Heading(2, "Per-group error against r"), Image("group_error_vs_r", images["group_error_vs_r"])]
    blocks += [
        Heading(2, "Settings"),
        Paragraph(
            f"Grids and fixed options: {json.dumps(settings['methods'], sort_keys=True)}. "
            f"RBF MMD²: {_rbf_sentence(settings)}. Downstream: {_downstream_sentence(comparison)}."
        ),
    ]
    return blocks


def _criteria_table(comparison: Comparison, r: int, where: str) -> Table:
    criteria = [c for c in comparison.criteria() if where == "in" or c.out_of_sample]
    best = {c.key: {id(k) for k in comparison.best(r, c.key, where)} for c in criteria}
    header = ["method", *(f"{c.title} ({'↓' if c.better == 'lower' else '↑'})" for c in criteria)]
    rows = []
    for candidate in comparison.at(r):
        cells = [candidate.label]
        for criterion in criteria:
            value = candidate.value(criterion.key, where)
            cells.append(number(value) + _mark(candidate, criterion.key, id(candidate) in best[criterion.key]))
        rows.append(cells)
    return Table(header, rows)


def _mark(candidate: Candidate, key: str, best: bool) -> str:
    """`` ★`` for the best value, `` (constant)`` / `` (≈ base rate)`` for a degenerate
    classifier's downstream value, else nothing."""
    if key in DOWNSTREAM_KEYS and candidate.degenerate:
        return f" ({degenerate_mark(candidate.degenerate)})"
    return " ★" if best else ""


def _passes_sentence(comparison: Comparison) -> str:
    readers = [c for c in comparison.candidates if c.passes]
    passes = comparison.passes
    parts = [f"{passes.get('cell moments', 0)} for the cell moments (every moment-based method's fits and scores)"]
    if passes.get("rbf bandwidth samples") or passes.get("random-feature sums"):
        parts.append(
            f"{passes['rbf bandwidth samples']} for σ's row samples and {passes['random-feature sums']} "
            "for the random-feature sums of the RBF MMD²"
        )
    if passes.get("downstream sample"):
        parts.append(f"{passes['downstream sample']} for the downstream classifier's row sample")
    if readers:
        parts.append(
            "by the methods that read the rows: "
            + ", ".join(f"{c.label} at r = {c.n_components}: {c.passes}" for c in readers)
        )
    total = sum(passes.values())
    return f"Passes over the rows: {total} in all — " + "; ".join(parts) + "."


def _rbf_sentence(settings: dict) -> str:
    if not settings["rbf_mmd"]:
        return "not measured (the rows were not given, or it was switched off)"
    sigmas = ", ".join(f"r = {r}: {value:.4g}" for r, value in settings["sigma"].items())
    return (
        f"{settings['n_random_features']} random Fourier features over every row; σ by the median heuristic at "
        f"each r's PCA projection ({sigmas}), also given to mmd fits"
    )


def _downstream_sentence(comparison: Comparison) -> str:
    downstream = comparison.downstream
    if downstream is None:
        return "not measured (give a target column)"
    return (
        f"StandardScaler + LogisticRegression on each projection of a row sample, predicting "
        f"{downstream['target']!r} = {downstream['positive_class']!r}, trained on {downstream['n_train']} rows and "
        f"scored on {downstream['n_test']} held-out ones; DP difference is the largest minus the smallest "
        "per-group positive rate"
    )


# ---------------------------------------------------------------------- figures
def _plots(comparison: Comparison, folder: Location) -> dict[str, str]:
    """Write every PNG; returns name -> caption."""
    images = {}
    for r in comparison.ranks:
        for criterion in comparison.criteria():
            if criterion.fairness:
                name = f"pareto_r{r}_{criterion.key}"
                _pareto_plot(comparison, r, criterion, folder / f"{name}.png")
                images[name] = f"Explained variance against {criterion.title} at r = {r} (in sample); front in black"
    if len(comparison.ranks) > 1:
        _group_error_plot(comparison, folder / "group_error_vs_r.png")
        images["group_error_vs_r"] = (
            "Each method's per-group reconstruction error against r (in sample; the first point of its grid)"
        )
    return images


def _pareto_plot(comparison: Comparison, r: int, criterion: Criterion, path: Location) -> None:
    """Each method's grid points at r, its degenerate downstream classifiers (for a downstream
    criterion) flagged apart, and the front."""
    candidates = [c for c in comparison.at(r) if c.value(criterion.key) is not None]

    def point(c: Candidate) -> tuple[float, float]:
        x, y = c.value(criterion.key), c.value("explained_variance_ratio")
        return (np.nan if x is None else x), (np.nan if y is None else y)  # as the chart would read None

    def flagged(c: Candidate) -> bool:
        return criterion.key in DOWNSTREAM_KEYS and c.degenerate is not None

    methods = list(dict.fromkeys(c.method for c in candidates))
    sweeps = {m: [point(c) for c in candidates if c.method == m and not flagged(c)] for m in methods}
    marked = {m: [point(c) for c in candidates if c.method == m and flagged(c)] for m in methods}
    front = [point(c) for c in comparison.front(r, criterion.key)]
    charts.pareto(
        path,
        sweeps,
        front,
        xlabel=f"{criterion.title} ({criterion.better} is fairer)",
        title=f"r = {r}",
        flagged=marked,
    )


def _group_error_plot(comparison: Comparison, path: Location) -> None:
    missing = np.full(len(comparison.groups), np.nan)
    panels = {}
    for method in dict.fromkeys(c.method for c in comparison.candidates):
        curve = [_first_point(comparison, method, r) for r in comparison.ranks]
        panels[method] = np.array(
            [c.in_sample.group_error if c is not None and c.in_sample is not None else missing for c in curve]
        )
    charts.group_panels(path, comparison.ranks, panels, comparison.group_names, ylabel="group reconstruction error")


def _first_point(comparison: Comparison, method: str, r: int) -> Candidate | None:
    return next((c for c in comparison.at(r) if c.method == method), None)
