"""The library's charts, drawn from numbers computed before and written as PNG.

Three kinds, used by the report (:mod:`fairpca_dist.assessment.report`) and the comparison
(:mod:`fairpca_dist.assessment.comparison_report`):

* :func:`group_curves`: a per-group quantity against r, one line style per arm;
* :func:`pareto`: explained variance against a fairness criterion, one sweep per method, the
  Pareto front as a black line, flagged points (degenerate classifiers) with their own marker;
* :func:`group_panels`: one small panel per method, a per-group quantity against r.

**Any number of groups.** Up to :data:`ALL_NAMED` groups, every group has its own colour
(matplotlib's ``tab10``, in the groups' order) and its own legend entry. With more groups, the
:data:`NAMED_GROUPS` worst ones are drawn and named (worst first, each in its own colour), and
the others are summarised, for each r and each arm, by their median (a grey line in the arm's
style) and their min–max range (a grey band), labelled "other N groups". *Worst* is measured on
the plotted quantity: a group's score is, at each r, its worst value over the arms (or the
panels), averaged over the r where it has a value; worse is higher (errors, losses) or lower
(explained variance), as the caller says. Ties keep the groups' order.

**Pareto charts.** Each method has its own colour (``tab20``: its ten strong colours, then
their ten light ones, so up to 20 methods never share one; the marker changes every ten
methods too). A method's grid points are joined in the order of the criterion (x), so the line
is the method's trade-off as fairness improves, whatever the shape of its grid (dro's 2 × 3
grid of α and λ has no order of its own; joined in grid order it drew a meaningless polygon).
Points the caller flags (a degenerate downstream classifier, whose DP difference of 0 is no
fairness) are not joined: they are drawn as an ``x`` in the method's colour, with one legend
entry saying why.

**Pareto axes zoom on the bulk.** Along each axis separately, a few points (at most a quarter,
at least one) lying apart at either end are drawn at the edge of the axes instead of in place,
as a triangle pointing towards them with their method and value: those whose gap to the rest
is wider than both their own range and the rest's range, when the rest would otherwise fill
less than a quarter of the axis (:func:`_bulk`). One degenerate fit with explained variance
0.07 thus no longer squeezes every other method into a corner, while a sweep that spreads
evenly (a real trade-off curve) is drawn in full. A point of the Pareto front is never pushed
to the edge: the window always spans the front, only off-front outliers leave it. Lines to
such points leave the axes.

**Layout.** Legends sit outside the axes, on the right; matplotlib's constrained layout makes
room for them, the titles and the tick labels, so nothing is cut and no layout warning is
raised. Long group names are wrapped on two lines. Figures are drawn with matplotlib's object
API on the Agg canvas (no pyplot state, nothing shown); each chart is built by a private
``_*_figure`` function that returns the :class:`~matplotlib.figure.Figure`, and saved without
the ``Software`` metadata, so the same numbers give the same bytes.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fairpca_dist.extras import missing_dependency
from fairpca_dist.io.storage import Location

try:  # the [report] extra
    import matplotlib
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.markers import MarkerStyle
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator
except ImportError as error:
    raise missing_dependency(error, extra="report", feature="the charts of reports and evaluations") from error

__all__ = ["ALL_NAMED", "FLAGGED_LABEL", "NAMED_GROUPS", "group_curves", "pareto", "group_panels"]

ALL_NAMED = 10
"""Up to this many groups, every group is drawn and named."""
NAMED_GROUPS = 8
"""With more than :data:`ALL_NAMED` groups, how many of the worst are drawn and named."""

Worse = Literal["higher", "lower"]

# colormaps[] is typed Colormap; tab10 and tab20 are ListedColormaps, which have .colors
_TAB10 = matplotlib.colormaps["tab10"].colors  # type: ignore[attr-defined]
_TAB20 = matplotlib.colormaps["tab20"].colors  # type: ignore[attr-defined]
_METHOD_PALETTE = _TAB20[0::2] + _TAB20[1::2]  # ten strong colours, then their light shades
_NAMED_PALETTE = tuple(colour for i, colour in enumerate(_TAB10) if i != 7)  # tab10 without its grey
_OTHERS = "0.55"  # the grey of the aggregated groups
_ARM_STYLES: tuple[tuple[str, Literal["-", "--", ":", "-."]], ...] = (("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."))
_LEGEND: dict[str, Any] = {"loc": "outside right upper", "fontsize": 7}
_LEGEND_ROWS = 20
_EDGE_LABEL_POINTS = 7.0


# ---------------------------------------------------------------------- groups
@dataclass(frozen=True)
class _Groups:
    """Which groups are drawn by name (columns, legend order, colours, labels) and which are
    aggregated, and which values are worse."""

    worse: Worse
    named: tuple[int, ...]
    colours: tuple[tuple[float, float, float], ...]
    labels: tuple[str, ...]
    others: tuple[int, ...]


def _choose_groups(values: np.ndarray, group_names: Sequence[str], worse: Worse) -> _Groups:
    """Name every group, or the :data:`NAMED_GROUPS` worst and aggregate the rest.

    ``values`` has shape (arms, len(ranks), n_groups), NaN where missing; the score is the
    module docstring's (worst over the arms at each r, averaged over r).
    """
    labels = [_wrapped(name) for name in group_names]
    if len(group_names) <= ALL_NAMED:
        every = tuple(range(len(group_names)))
        return _Groups(worse, every, tuple(_TAB10[: len(every)]), tuple(labels), ())
    order = np.argsort(-_badness(values, worse), kind="stable")
    named = tuple(int(g) for g in order[:NAMED_GROUPS])
    return _Groups(
        worse,
        named,
        _NAMED_PALETTE[: len(named)],
        tuple(labels[g] for g in named),
        tuple(sorted(int(g) for g in order[NAMED_GROUPS:])),
    )


def _badness(values: np.ndarray, worse: Worse) -> np.ndarray:
    """Per group: the mean over r of the worst value over the arms, signed so that larger is
    worse; −inf for a group without any value."""
    signed = np.where(np.isnan(values), -np.inf, values if worse == "higher" else -values)
    per_rank = signed.max(axis=0)
    present = np.isfinite(per_rank)
    counts = present.sum(axis=0)
    totals = np.where(present, per_rank, 0.0).sum(axis=0)
    return np.where(counts > 0, totals / np.maximum(counts, 1), -np.inf)


def _wrapped(name: str) -> str:
    return textwrap.fill(name, width=30, max_lines=2, placeholder="…")


def _draw_groups(
    axes: Axes, ranks: Sequence[int], values: np.ndarray, groups: _Groups, style: tuple[str, str], markersize: float
) -> None:
    """The named groups' lines and the others' band and median, for one arm."""
    marker, linestyle = style
    if groups.others:
        others = np.ma.masked_invalid(values[:, list(groups.others)])
        low, high = (others.min(axis=1).filled(np.nan), others.max(axis=1).filled(np.nan))
        axes.fill_between(ranks, low, high, color=_OTHERS, alpha=0.2, linewidth=0, zorder=1)
        axes.plot(
            ranks,
            np.ma.median(others, axis=1).filled(np.nan),
            linestyle=linestyle,
            color=_OTHERS,
            linewidth=1.3,
            zorder=2,
        )
    for g, colour in zip(groups.named, groups.colours, strict=True):
        axes.plot(
            ranks, values[:, g], marker=marker, linestyle=linestyle, color=colour, markersize=markersize, zorder=3
        )


def _group_entries(groups: _Groups) -> list[tuple[object, str]]:
    """Legend entries (handle, label) of the named groups, then of the aggregated ones (a band
    under a line), after a line saying which groups are named when some are not."""
    entries: list[tuple[object, str]] = [
        (Line2D([], [], color=colour, linewidth=2), label)
        for colour, label in zip(groups.colours, groups.labels, strict=True)
    ]
    if groups.others:
        extreme = "highest" if groups.worse == "higher" else "lowest"
        heading = f"the {len(groups.named)} {extreme} of {len(groups.named) + len(groups.others)} groups:"
        entries.insert(0, (Line2D([], [], linestyle="none"), heading))
        band = Patch(facecolor=_OTHERS, alpha=0.2, linewidth=0)
        median = Line2D([], [], color=_OTHERS, linewidth=1.3)
        entries.append(((band, median), f"other {len(groups.others)} groups (median, min–max)"))
    return entries


def _legend(figure: Figure, entries: Sequence[tuple[object, str]]) -> None:
    """One legend outside the axes, on the figure's right, from (handle, label) pairs, in as
    many columns of at most :data:`_LEGEND_ROWS` entries as needed."""
    handles, labels = zip(*entries, strict=True)
    figure.legend(list(handles), list(labels), ncols=_legend_columns(len(entries)), **_LEGEND)


def _legend_columns(n_entries: int) -> int:
    return max(1, -(-n_entries // _LEGEND_ROWS))


def _legend_height(labels: Sequence[str]) -> float:
    """Inches a one-column legend of ``labels`` takes: 7-point lines (8.4 pt apart), 3.5 pt
    between entries, and the frame's padding."""
    lines = sum(label.count("\n") + 1 for label in labels)
    return (8.4 * lines + 3.5 * max(len(labels) - 1, 0) + 14.0) / 72.0


def _new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


# ---------------------------------------------------------------------- group curves
def group_curves(
    path: Location,
    ranks: Sequence[int],
    arms: Mapping[str, np.ndarray],
    group_names: Sequence[str],
    *,
    ylabel: str,
    title: str,
    worse: Worse = "higher",
) -> None:
    """Per-group values against r: one colour per group, one line style per arm.

    With more than :data:`ALL_NAMED` groups, the worst are named and the others aggregated
    (module docstring).

    Parameters
    ----------
    path : Location
        The PNG to write.
    ranks : sequence of int
        The r of the x axis.
    arms : mapping of str to ndarray of shape (len(ranks), n_groups)
        Arm label (``"PCA"``, the method; at most four arms) -> values; NaN where a value is
        missing.
    group_names : sequence of str
        Display names of the groups, in the columns' order.
    ylabel, title : str
        Axis label and title.
    worse : {"higher", "lower"}
        Which values of the quantity are worse, to pick the groups named.
    """
    _save(_group_curves_figure(ranks, arms, group_names, ylabel=ylabel, title=title, worse=worse), path, dpi=110)


def _group_curves_figure(
    ranks: Sequence[int],
    arms: Mapping[str, np.ndarray],
    group_names: Sequence[str],
    *,
    ylabel: str,
    title: str,
    worse: Worse = "higher",
) -> Figure:
    """:func:`group_curves`' figure."""
    groups = _choose_groups(np.stack(list(arms.values())), group_names, worse)
    # strict=False: _ARM_STYLES has a style for up to four arms; fewer arms use the first ones.
    entries = [
        *(
            (Line2D([], [], color="black", marker=marker, linestyle=linestyle, markersize=4), arm)
            for arm, (marker, linestyle) in zip(arms, _ARM_STYLES, strict=False)
        ),
        *_group_entries(groups),
    ]
    figure = _new_figure(8.0, max(4.4, _legend_height([label for _, label in entries]) + 0.3))
    axes = figure.add_subplot()
    for values, style in zip(arms.values(), _ARM_STYLES, strict=False):
        _draw_groups(axes, ranks, values, groups, style, markersize=4)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("number of components r")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    _legend(figure, entries)
    return figure


# ---------------------------------------------------------------------- group panels
def group_panels(
    path: Location,
    ranks: Sequence[int],
    panels: Mapping[str, np.ndarray],
    group_names: Sequence[str],
    *,
    ylabel: str,
    worse: Worse = "higher",
) -> None:
    """One panel per method (its title): the method's per-group values against r.

    Every panel names the same groups: all of them, or the worst over every panel and the
    others aggregated (module docstring). The legend is shared, on the right.

    Parameters
    ----------
    path : Location
        The PNG to write.
    ranks : sequence of int
        The r of the x axes.
    panels : mapping of str to ndarray of shape (len(ranks), n_groups)
        Method -> values; NaN where missing (a panel without any value says so).
    group_names : sequence of str
        Display names of the groups, in the columns' order.
    ylabel : str
        The shared y label.
    worse : {"higher", "lower"}
        Which values of the quantity are worse, to pick the groups named.
    """
    _save(_group_panels_figure(ranks, panels, group_names, ylabel=ylabel, worse=worse), path, dpi=100)


def _group_panels_figure(
    ranks: Sequence[int],
    panels: Mapping[str, np.ndarray],
    group_names: Sequence[str],
    *,
    ylabel: str,
    worse: Worse = "higher",
) -> Figure:
    """:func:`group_panels`' figure."""
    groups = _choose_groups(np.stack(list(panels.values())), group_names, worse)
    entries = _group_entries(groups)
    columns = min(4, len(panels))
    rows = -(-len(panels) // columns)
    height = max(2.5 * rows + 0.5, _legend_height([label for _, label in entries]) + 0.3)
    figure = _new_figure(3.0 * columns + 2.2, height)
    for m, (method, values) in enumerate(panels.items()):
        axes = figure.add_subplot(rows, columns, m + 1)
        _draw_groups(axes, ranks, values, groups, _ARM_STYLES[0], markersize=3)
        axes.set_title(method, fontsize=8)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.tick_params(labelsize=7)
        if np.isnan(values).all():
            axes.text(0.5, 0.5, "no result", transform=axes.transAxes, ha="center", va="center", fontsize=8)
            axes.set_xticks([])
            axes.set_yticks([])
    figure.supxlabel("number of components r", fontsize=9)
    figure.supylabel(ylabel, fontsize=9)
    _legend(figure, entries)
    return figure


# ---------------------------------------------------------------------- Pareto
FLAGGED_LABEL = "degenerate classifier (left off the front)"
"""The legend entry of :func:`pareto`'s flagged points, unless the caller names them."""


def pareto(
    path: Location,
    sweeps: Mapping[str, Sequence[tuple[float, float]]],
    front: Sequence[tuple[float, float]],
    *,
    xlabel: str,
    title: str,
    flagged: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    flagged_label: str = FLAGGED_LABEL,
) -> None:
    """Explained variance (y) against a fairness criterion (x).

    The axes zoom on the bulk of the points, always spanning the front; off-front points lying
    far apart are drawn at the edge with their value (module docstring).

    Parameters
    ----------
    path : Location
        The PNG to write.
    sweeps : mapping of str to sequence of (x, y)
        Method -> its grid's points that are not flagged, drawn as a curve in the order of x
        when there are several.
    front : sequence of (x, y)
        The Pareto front, drawn as a dashed black line (nothing when empty); never pushed to
        the edge.
    xlabel, title : str
        The criterion's axis label, and the title.
    flagged : mapping of str to sequence of (x, y), optional
        Method -> its flagged points (a method may have only those), drawn as an ``x`` in the
        method's colour, not joined, under one legend entry ``flagged_label``.
    flagged_label : str
        That legend entry.
    """
    _save(
        _pareto_figure(sweeps, front, xlabel=xlabel, title=title, flagged=flagged, flagged_label=flagged_label),
        path,
        dpi=110,
    )


def _pareto_figure(
    sweeps: Mapping[str, Sequence[tuple[float, float]]],
    front: Sequence[tuple[float, float]],
    *,
    xlabel: str,
    title: str,
    flagged: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    flagged_label: str = FLAGGED_LABEL,
) -> Figure:
    """:func:`pareto`'s figure."""
    flagged = {method: points for method, points in (flagged or {}).items() if points}
    methods = list(dict.fromkeys([*sweeps, *flagged]))
    figure = _new_figure(6.6 + 1.8 * _legend_columns(len(methods) + 3), 4.6)
    axes = figure.add_subplot()
    entries: list[tuple[object, str]] = []
    for i, method in enumerate(methods):
        points = sorted(sweeps.get(method, ()))
        colour, marker = _method_style(i)
        x, y = _columns(points)
        (line,) = axes.plot(
            x, y, linestyle="-" if len(points) > 1 else "none", marker=marker, color=colour, markersize=5, alpha=0.85
        )
        if method in flagged:
            axes.plot(
                *_columns(flagged[method]),
                linestyle="none",
                marker="x",
                color=colour,
                markersize=7,
                markeredgewidth=1.6,
                zorder=4,
            )
        entries.append((line, method))
    if flagged:
        entries.append(
            (
                Line2D([], [], marker="x", color="0.3", linestyle="none", markersize=7, markeredgewidth=1.6),
                flagged_label,
            )
        )
    if front:
        x, y = _columns(front)
        entries.append(
            (axes.plot(x, y, "--", color="black", linewidth=1.0, zorder=3)[0], "Pareto front (converged fits)")
        )
    every = {method: [*sweeps.get(method, ()), *flagged.get(method, ())] for method in methods}
    if _mark_off_axes(axes, every, front):
        entries.append(
            (Line2D([], [], marker=">", color="0.3", linestyle="none"), "beyond the axes: at the edge, with its value")
        )
    axes.set_xlabel(xlabel)
    axes.set_ylabel("explained-variance ratio")
    axes.set_title(title)
    _legend(figure, entries)
    return figure


def _method_style(i: int) -> tuple[tuple[float, float, float], str]:
    """The i-th method's colour and marker: :data:`_METHOD_PALETTE` (``tab20``, strong colours
    first) in turn, a new marker every ten methods."""
    return _METHOD_PALETTE[i % len(_METHOD_PALETTE)], "os^vD"[i // 10 % 5]


def _columns(points: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    xy = np.array(points, dtype=np.float64).reshape(-1, 2)
    return xy[:, 0], xy[:, 1]


@dataclass(frozen=True)
class _Window:
    """One axis's limits (the bulk and a margin) and where points beyond them are drawn."""

    low: float
    high: float

    @classmethod
    def around(cls, bulk: tuple[float, float]) -> _Window:
        margin = 0.08 * (bulk[1] - bulk[0])
        return cls(bulk[0] - margin, bulk[1] + margin)

    def side(self, value: float) -> int:
        """−1 below the limits, +1 above, 0 inside (or NaN)."""
        return -1 if value < self.low else 1 if value > self.high else 0

    def edge(self, side: int) -> float:
        """The position just inside the limit on ``side``."""
        inset = 0.025 * (self.high - self.low)
        return self.low + inset if side < 0 else self.high - inset


def _bulk(values: np.ndarray) -> tuple[float, float] | None:
    """The range of the finite values without their far-apart ends; None when no end is far apart.

    Sorted finite values v₀ ≤ … ≤ vₙ₋₁ (n ≥ 3). At the low end, the smallest t ≤ max(1, n // 4)
    with gap v_t − v_{t−1} wider than the tail's range v_{t−1} − v₀ and than the rest's range,
    where the rest fills less than a quarter of v_{n−1} − v₀, is cut off; then likewise at the
    high end of what remains.
    """
    ordered = np.sort(values[np.isfinite(values)])
    if ordered.size < 3:
        return None
    low = _far_tail(ordered)
    high = ordered.size - _far_tail(-ordered[low:][::-1])
    if low == 0 and high == ordered.size:
        return None
    return float(ordered[low]), float(ordered[high - 1])


def _spanning(bulk: tuple[float, float] | None, values: np.ndarray, kept: np.ndarray) -> tuple[float, float] | None:
    """``bulk`` widened to span the finite ``kept`` values (the front's); None when it then
    spans every finite value (nothing left to push to the edge)."""
    kept = kept[np.isfinite(kept)]
    if bulk is None or kept.size == 0:
        return bulk
    low, high = min(bulk[0], float(kept.min())), max(bulk[1], float(kept.max()))
    finite = values[np.isfinite(values)]
    return None if low <= finite.min() and high >= finite.max() else (low, high)


def _far_tail(ordered: np.ndarray) -> int:
    """How many of the smallest of ``ordered`` (sorted) lie far apart (:func:`_bulk`), or 0."""
    full = ordered[-1] - ordered[0]
    for t in range(1, max(1, ordered.size // 4) + 1):
        gap, tail, rest = ordered[t] - ordered[t - 1], ordered[t - 1] - ordered[0], ordered[-1] - ordered[t]
        if 0 < rest < full / 4 and gap > max(tail, rest):
            return t
    return 0


def _mark_off_axes(
    axes: Axes, sweeps: Mapping[str, Sequence[tuple[float, float]]], front: Sequence[tuple[float, float]] = ()
) -> bool:
    """Zoom ``axes`` on the bulk of the points, spanning the ``front``, and draw the points
    beyond it at the edge, one label per method and side with its value(s); True when any
    point is beyond."""
    windows = _zoom_on_bulk(axes, [point for points in sweeps.values() for point in points], front)
    if windows == [None, None]:
        return False
    limits = axes.get_xlim(), axes.get_ylim()
    labels: list[tuple[tuple[int, int], float, float, str]] = []
    for i, (method, points) in enumerate(sweeps.items()):
        beyond: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for point in points:
            x_side, y_side = (0 if window is None else window.side(v) for window, v in zip(windows, point, strict=True))
            sides = (x_side, y_side)
            if sides != (0, 0):
                beyond.setdefault(sides, []).append(point)
        for sides, off in beyond.items():
            shown = [
                [
                    window.edge(side) if side and window is not None else v
                    for window, side, v in zip(windows, sides, point, strict=True)
                ]
                for point in off
            ]
            axes.plot(
                *np.array(shown).T,
                linestyle="none",
                color=_method_style(i)[0],
                markersize=7,
                zorder=4,
                marker=MarkerStyle(">").rotated(deg=math.degrees(math.atan2(sides[1], sides[0]))),
            )
            x, y = shown[0]
            labels.append((sides, x, y, f"{method}: {_beyond_text(off, sides)}"))
    _place_edge_labels(axes, labels, limits)
    return bool(labels)


def _zoom_on_bulk(
    axes: Axes, points: Sequence[tuple[float, float]], front: Sequence[tuple[float, float]] = ()
) -> list[_Window | None]:
    """Per axis (x, y), the window set on ``axes`` around the bulk widened to span the
    ``front`` (:func:`_spanning`), or None (autoscaled)."""
    xy = np.array(points, dtype=np.float64).reshape(-1, 2)
    kept = np.array(front, dtype=np.float64).reshape(-1, 2)
    windows = [
        None if bulk is None else _Window.around(bulk)
        for bulk in (_spanning(_bulk(xy[:, axis]), xy[:, axis], kept[:, axis]) for axis in (0, 1))
    ]
    setters: tuple[Callable[[float, float], object], ...] = (axes.set_xlim, axes.set_ylim)
    for window, set_limits in zip(windows, setters, strict=True):
        if window is not None:
            set_limits(window.low, window.high)
    return windows


def _beyond_text(points: Sequence[tuple[float, float]], sides: tuple[int, int]) -> str:
    parts = []
    for axis, (name, side) in enumerate(zip("xy", sides, strict=True)):
        if side:
            values = sorted(point[axis] for point in points)
            shown = f"{values[0]:.3g}" if values[0] == values[-1] else f"{values[0]:.3g}–{values[-1]:.3g}"
            parts.append(f"{name} = {shown}")
    return ", ".join(parts)


def _place_edge_labels(
    axes: Axes,
    labels: Sequence[tuple[tuple[int, int], float, float, str]],
    limits: tuple[tuple[float, float], tuple[float, float]],
) -> None:
    """Write each label next to its marker, towards the inside of the axes, on a pale box over
    the lines; labels on the same side near each other are stacked."""
    placed: list[tuple[tuple[int, int], float]] = []
    for sides, x, y, text in labels:
        fx, fy = ((v - low) / (high - low) for v, (low, high) in zip((x, y), limits, strict=True))
        along = fy if sides[1] == 0 else fx
        level = sum(1 for s, a in placed if s == sides and abs(a - along) < (0.08 if sides[1] == 0 else 0.3))
        placed.append((sides, along))
        ha = "left" if (sides[0] < 0 or (sides[0] == 0 and fx < 0.5)) else "right"
        va = "bottom" if (sides[1] < 0 or (sides[1] == 0 and fy < 0.5)) else "top"
        dx = _EDGE_LABEL_POINTS * (1 if ha == "left" else -1)
        dy = (_EDGE_LABEL_POINTS * abs(sides[1]) + 11.0 * level) * (1 if va == "bottom" else -1)
        axes.annotate(
            text,
            (x, y),
            xytext=(dx, dy),
            textcoords="offset points",
            ha=ha,
            va=va,
            fontsize=7,
            zorder=5,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 1.0},
        )


def _save(figure: Figure, path: Location, *, dpi: int) -> None:
    with path.open("wb") as file:
        figure.savefig(file, format="png", dpi=dpi, metadata={"Software": None})
