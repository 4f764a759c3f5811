"""The library's charts, drawn from numbers computed before and written as PNG.

Three kinds, used by the report (:mod:`fairpca_dist.report`) and the comparison
(:mod:`fairpca_dist.comparison_report`):

* :func:`group_curves`: a per-group quantity against r, one line style per arm;
* :func:`pareto`: explained variance against a fairness criterion, one sweep per method, the
  Pareto front as a black line;
* :func:`group_panels`: one small panel per method, a per-group quantity against r.

Figures are drawn with matplotlib's object API on the Agg canvas (no pyplot state, nothing
shown), and saved without the ``Software`` metadata so the same numbers give the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fairpca_dist.storage import Location

__all__ = ["group_curves", "pareto", "group_panels"]

_STYLES = ("o-", "s--")


def group_curves(path: Location, ranks: Sequence[int], arms: Mapping[str, np.ndarray], group_names: Sequence[str],
                 *, ylabel: str, title: str) -> None:
    """Per-group values against r: one colour per group, one line style per arm.

    Parameters
    ----------
    path : Location
        The PNG to write.
    ranks : sequence of int
        The r of the x axis.
    arms : mapping of str to ndarray of shape (len(ranks), n_groups)
        Arm label (``"PCA"``, the method) -> values; NaN where a value is missing.
    group_names : sequence of str
        Display names of the groups, in the columns' order.
    ylabel, title : str
        Axis label and title.
    """
    figure = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for (arm, values), style in zip(arms.items(), _STYLES):
        for g, group in enumerate(group_names):
            axes.plot(ranks, values[:, g], style, color=f"C{g}", markersize=4, label=f"{arm}, {group}")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("number of components r")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize=7)
    figure.tight_layout()
    _save(figure, path, dpi=110)


def pareto(path: Location, sweeps: Mapping[str, Sequence[tuple[float, float]]],
           front: Sequence[tuple[float, float]], *, xlabel: str, title: str) -> None:
    """Explained variance (y) against a fairness criterion (x).

    Parameters
    ----------
    path : Location
        The PNG to write.
    sweeps : mapping of str to sequence of (x, y)
        Method -> its grid's points, drawn as a curve when there are several.
    front : sequence of (x, y)
        The Pareto front, drawn as a dashed black line (nothing when empty).
    xlabel, title : str
        The criterion's axis label, and the title.
    """
    figure = Figure(figsize=(6.8, 4.6))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for i, (method, points) in enumerate(sweeps.items()):
        x, y = zip(*points)
        axes.plot(x, y, linestyle="-" if len(points) > 1 else "none", marker="os^vD"[i // 10 % 5],
                  color=f"C{i % 10}", markersize=5, alpha=0.85, label=method)
    if front:
        x, y = zip(*front)
        axes.plot(x, y, "--", color="black", linewidth=1.0, zorder=3, label="Pareto front (converged fits)")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("explained-variance ratio")
    axes.set_title(title)
    axes.legend(fontsize=6, ncol=2)
    figure.tight_layout()
    _save(figure, path, dpi=110)


def group_panels(path: Location, ranks: Sequence[int], panels: Mapping[str, np.ndarray], group_names: Sequence[str],
                 *, ylabel: str) -> None:
    """One panel per method (title), its per-group values (len(ranks) × n_groups, NaN where
    missing) against r."""
    columns = min(4, len(panels))
    rows = -(-len(panels) // columns)
    figure = Figure(figsize=(3.2 * columns, 2.6 * rows))
    FigureCanvasAgg(figure)
    for m, (method, values) in enumerate(panels.items()):
        axes = figure.add_subplot(rows, columns, m + 1)
        for g, group in enumerate(group_names):
            axes.plot(ranks, values[:, g], "o-", color=f"C{g}", markersize=3, label=group)
        axes.set_title(method, fontsize=8)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.tick_params(labelsize=7)
        if m == 0:
            axes.legend(fontsize=6)
    figure.supxlabel("r")
    figure.supylabel(ylabel)
    figure.tight_layout()
    _save(figure, path, dpi=100)


def _save(figure: Figure, path: Location, *, dpi: int) -> None:
    with path.open("wb") as file:
        figure.savefig(file, format="png", dpi=dpi, metadata={"Software": None})
