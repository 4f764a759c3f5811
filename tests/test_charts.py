"""Charts for any number of groups (issue 31, point 4): the worst groups named and the others
aggregated, legends outside the axes, every label inside the image, no warnings, the Pareto axes
zoomed on the bulk with far-apart points marked at the edge, and the same bytes for the same
numbers."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from unittest import mock

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from fairpca_dist.assessment import charts
from fairpca_dist.io.storage import locate

RANKS = list(range(1, 11))
GROUP_COUNTS = (2, 5, 26, 78)
METHODS = ("pca", "samadi-sdp", "mm", "dro", "mmd")


def group_names(n_groups: int) -> list[str]:
    """Short names for a few groups; long intersectional ones (wrapped in the legend) for many."""
    if n_groups <= 5:
        return [f"sex={g}" for g in range(n_groups)]
    races = ("White", "Black", "Asian", "Hispanic", "Other")
    return [f"sex={'female' if g % 2 else 'male'} & race={races[g // 2 % 5]} & age band={g}" for g in range(n_groups)]


def curves(n_groups: int, seed: int = 0) -> np.ndarray:
    """(len(RANKS), n_groups) errors decaying with r, one level per group."""
    rng = np.random.default_rng(seed)
    level, decay = rng.uniform(0.5, 3.0, n_groups), rng.uniform(0.1, 0.4, n_groups)
    return level * np.exp(-np.outer(RANKS, decay))


def build_curves(n_groups: int) -> Figure:
    values = curves(n_groups)
    values[-1, 0] = np.nan  # a missing value
    return charts._group_curves_figure(
        RANKS,
        {"PCA": values, "mm": values * 1.05},
        group_names(n_groups),
        ylabel="loss (error minus the group's best rank-r error)",
        title="Fair PCA (mm) on a table with a long name.csv",
    )


def build_panels(n_groups: int) -> Figure:
    panels = {method: curves(n_groups, seed=m) for m, method in enumerate(METHODS)}
    panels["mmd"] = np.full((len(RANKS), n_groups), np.nan)  # a failed method
    return charts._group_panels_figure(RANKS, panels, group_names(n_groups), ylabel="group reconstruction error")


def build_pareto(n_methods: int) -> Figure:
    rng = np.random.default_rng(n_methods)
    sweeps = {
        f"method-{m}": [tuple(point) for point in rng.uniform([1.0, 0.8], [3.0, 0.95], size=(1 + m % 3, 2))]
        for m in range(n_methods)
    }
    return charts._pareto_figure(
        sweeps,
        sorted(point for points in sweeps.values() for point in points)[:3],
        xlabel="max group loss (lower is fairer)",
        title="r = 2",
    )


OUTLIER_SWEEPS = {
    "pca": [(3.2, 0.91)],
    "samadi-sdp": [(2.1, 0.86)],
    "samadi-mw": [(2.15, 0.855)],
    "mm": [(2.6, 0.84)],
    "dro": [(2.4, 0.88), (2.2, 0.86), (2.05, 0.83)],
    "mmd": [(2.9, 0.87)],
    "kleindessner-cov": [(4.5, 0.07)],
    "jevd": [(2.7, 0.80)],
}
OUTLIER_FRONT = [(2.05, 0.83), (2.1, 0.86), (2.4, 0.88), (3.2, 0.91)]
#: The degenerate fit is also the fairest: it is on the front, at the far left.
FRONT_OUTLIER_SWEEPS = {**OUTLIER_SWEEPS, "kleindessner-cov": [(0.01, 0.07)]}
FRONT_OUTLIER_FRONT = [(0.01, 0.07), *OUTLIER_FRONT]


def build_outlier_pareto(on_front: bool = False) -> Figure:
    sweeps, front = (FRONT_OUTLIER_SWEEPS, FRONT_OUTLIER_FRONT) if on_front else (OUTLIER_SWEEPS, OUTLIER_FRONT)
    return charts._pareto_figure(sweeps, front, xlabel="max group loss (lower is fairer)", title="r = 2")


def drawn_quietly(build: Callable[[], Figure]) -> tuple[Figure, list[Text]]:
    """Build and draw the figure, with no warning of any kind on the way; the figure and the
    non-empty texts drawn (recorded as they are drawn: a figure also holds tick labels beyond
    the view limits, which are never drawn)."""
    drawn: list[Text] = []
    draw = Text.draw

    def recording(text: Text, renderer) -> None:
        drawn.append(text)
        draw(text, renderer)

    with warnings.catch_warnings(record=True) as caught, mock.patch.object(Text, "draw", recording):
        warnings.simplefilter("always")
        figure = build()
        figure.canvas.draw()
    assert [str(warning.message) for warning in caught] == []
    return figure, [text for text in drawn if text.get_visible() and text.get_text()]


def texts_outside(figure: Figure, texts: list[Text]) -> list[str]:
    """The texts (titles, axis and tick labels, legend, annotations) whose extent leaves the
    figure by more than a pixel."""
    renderer, bounds = figure.canvas.get_renderer(), figure.bbox
    assert len(texts) > 10
    return [
        text.get_text()
        for text in texts
        if not (
            bounds.x0 - 1 <= (box := text.get_window_extent(renderer)).x0
            and box.x1 <= bounds.x1 + 1
            and bounds.y0 - 1 <= box.y0
            and box.y1 <= bounds.y1 + 1
        )
    ]


def legend_labels(figure: Figure) -> list[str]:
    (legend,) = figure.legends
    return [text.get_text() for text in legend.get_texts()]


def legend_outside_axes(figure: Figure) -> bool:
    """Whether every legend (of the figure, or of an axes) stays clear of every axes."""
    renderer = figure.canvas.get_renderer()
    legends = [*figure.legends, *(axes.get_legend() for axes in figure.axes if axes.get_legend() is not None)]
    boxes = [legend.get_window_extent(renderer) for legend in legends]
    return bool(boxes) and not any(
        box.overlaps(axes.get_window_extent(renderer)) for box in boxes for axes in figure.axes
    )


@pytest.mark.parametrize("n", GROUP_COUNTS)
@pytest.mark.parametrize("build", [build_curves, build_panels, build_pareto], ids=["curves", "panels", "pareto"])
def test_charts_render_without_warnings_and_keep_every_label_inside(build, n):
    figure, texts = drawn_quietly(lambda: build(n))
    assert texts_outside(figure, texts) == []
    assert legend_outside_axes(figure)


@pytest.mark.parametrize("on_front", [False, True])
def test_outlier_pareto_renders_without_warnings_and_keeps_every_label_inside(on_front):
    figure, texts = drawn_quietly(lambda: build_outlier_pareto(on_front))
    assert texts_outside(figure, texts) == []
    assert legend_outside_axes(figure)


@pytest.mark.parametrize("n", [2, 5, 10])
@pytest.mark.parametrize("build", [build_curves, build_panels], ids=["curves", "panels"])
def test_few_groups_are_all_named_in_distinct_colours(build, n):
    figure, _ = drawn_quietly(lambda: build(n))
    (legend,) = figure.legends
    groups = [
        (handle, text.get_text())
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True)
        if text.get_text() not in ("PCA", "mm")
    ]
    assert [label.replace("\n", " ") for _, label in groups] == group_names(n)  # in their order, long ones wrapped
    assert len({str(handle.get_color()) for handle, _ in groups}) == n


def ranked_values(n_groups: int) -> tuple[np.ndarray, list[str]]:
    """Group g's values are 1 + g (every r), in a shuffled column order: the worst (highest)
    groups are the largest g."""
    order = np.random.default_rng(1).permutation(n_groups)
    values = np.tile(1.0 + order.astype(np.float64), (len(RANKS), 1))
    return values, [f"g{g}" for g in order]


@pytest.mark.parametrize("n", [26, 78])
@pytest.mark.parametrize("worse", ["higher", "lower"])
def test_many_groups_name_the_worst_and_count_the_others(n, worse):
    values, names = ranked_values(n)
    figures = [
        charts._group_curves_figure(RANKS, {"PCA": values, "mm": values}, names, ylabel="y", title="t", worse=worse),
        charts._group_panels_figure(RANKS, {"pca": values, "mm": values}, names, ylabel="y", worse=worse),
    ]
    worst = range(n - 1, n - 1 - charts.NAMED_GROUPS, -1) if worse == "higher" else range(charts.NAMED_GROUPS)
    for figure in figures:
        labels = legend_labels(figure)
        assert [label for label in labels if label.startswith("g")] == [f"g{g}" for g in worst]
        extreme = "highest" if worse == "higher" else "lowest"
        assert f"the {charts.NAMED_GROUPS} {extreme} of {n} groups:" in labels
        assert f"other {n - charts.NAMED_GROUPS} groups (median, min–max)" in labels
        named = [handle.get_color() for handle in figure.legends[0].legend_handles[-charts.NAMED_GROUPS - 1 : -1]]
        assert len(set(map(str, named))) == charts.NAMED_GROUPS


def test_the_worst_groups_are_worst_over_the_arms_on_average_over_r():
    """Group 0 is worst for PCA only, group 1 for the method only, at a single r each; group 2
    is second everywhere: on average over r, 2 is the worst."""
    values = np.ones((len(RANKS), 12))
    values[:, 2] = 3.0
    pca, method = values.copy(), values.copy()
    pca[0, 0] = method[-1, 1] = 5.0
    method[:, 3] = np.nan  # a group without values for one arm still ranks by the other
    pca[:, 3] = 2.5
    labels = legend_labels(
        charts._group_curves_figure(
            RANKS, {"PCA": pca, "mm": method}, [f"g{g}" for g in range(12)], ylabel="y", title="t"
        )
    )
    assert [label for label in labels if label.startswith("g")][:4] == ["g2", "g3", "g0", "g1"]


def test_a_far_apart_point_is_drawn_at_the_edge_with_its_value():
    figure, _ = drawn_quietly(build_outlier_pareto)
    (axes,) = figure.axes
    low, high = axes.get_ylim()
    bulk = [y for method, points in OUTLIER_SWEEPS.items() for _, y in points if method != "kleindessner-cov"]
    assert 0.07 < low < min(bulk) and high > max(bulk)
    assert (high - low) < 2 * (max(bulk) - min(bulk))  # zoomed on the bulk
    assert [text.get_text() for text in axes.texts] == ["kleindessner-cov: y = 0.07"]
    assert "beyond the axes: at the edge, with its value" in legend_labels(figure)
    low_x, high_x = axes.get_xlim()
    assert low_x < 2.05 and high_x > 4.5  # not far apart along x: drawn in place


def test_a_far_apart_point_on_the_front_is_drawn_in_place():
    figure, _ = drawn_quietly(lambda: build_outlier_pareto(on_front=True))
    (axes,) = figure.axes
    low, high = axes.get_ylim()
    assert low < 0.07 and high > 0.91 and axes.get_xlim()[0] < 0.01
    assert len(axes.texts) == 0 and "beyond the axes: at the edge, with its value" not in legend_labels(figure)


def test_the_zoom_spans_the_front_and_still_pushes_an_off_front_outlier():
    sweeps = {**FRONT_OUTLIER_SWEEPS, "mmd": [(2.9, 0.87), (30.0, 0.86)]}  # far right, off the front
    figure, _ = drawn_quietly(lambda: charts._pareto_figure(sweeps, FRONT_OUTLIER_FRONT, xlabel="x", title="t"))
    (axes,) = figure.axes
    low_x, high_x = axes.get_xlim()
    assert low_x < 0.01 and 3.2 < high_x < 30.0
    assert [text.get_text() for text in axes.texts] == ["mmd: x = 30"]


def test_flagged_points_have_their_own_marker_and_legend_entry():
    sweeps = {"pca": [(0.04, 0.9)], "mm-sparse": [(0.05, 0.85), (0.06, 0.84)], "mm": []}
    flagged = {"mm-sparse": [(0.0, 0.6)], "mm": [(0.0, 0.8)]}
    figure, texts = drawn_quietly(
        lambda: charts._pareto_figure(sweeps, [(0.04, 0.9)], xlabel="DP difference", title="t", flagged=flagged)
    )
    (axes,) = figure.axes
    crosses = [line for line in axes.lines if line.get_marker() == "x"]
    assert sorted(tuple(xy) for line in crosses for xy in line.get_xydata()) == [(0.0, 0.6), (0.0, 0.8)]
    joined = [line for line in axes.lines if line.get_linestyle() == "-"]
    assert [list(line.get_xdata()) for line in joined] == [[0.05, 0.06]]  # the flagged point is not joined
    labels = legend_labels(figure)
    assert charts.FLAGGED_LABEL == "degenerate classifier (left off the front)" and charts.FLAGGED_LABEL in labels
    assert labels[:3] == ["pca", "mm-sparse", "mm"]  # a method with only flagged points keeps its entry
    assert texts_outside(figure, texts) == []


def test_fourteen_methods_have_fourteen_colours():
    figure = build_pareto(14)
    (axes,) = figure.axes
    colours = {line.get_color() for line in axes.lines if line.get_linestyle() != "--"}
    assert len(colours) == 14


def test_a_two_dimensional_grid_is_joined_in_the_order_of_the_criterion():
    grid = [(2.4, 0.88), (2.0, 0.83), (2.6, 0.9), (2.2, 0.86), (2.1, 0.84), (2.5, 0.89)]  # dro's α × λ order
    figure = charts._pareto_figure({"pca": [(3.0, 0.92)], "dro": grid}, [], xlabel="x", title="t")
    (axes,) = figure.axes
    (line,) = [line for line in axes.lines if line.get_linestyle() == "-"]
    assert list(line.get_xdata()) == sorted(x for x, _ in grid)


def test_an_evenly_spread_sweep_is_drawn_in_full():
    sweeps = {
        "pca": [(3.0, 0.95)],
        "dro": [(2.0 - 0.1 * k, 0.9 - 0.15 * k) for k in range(6)],
        "mm": [(2.1, 0.9)],
        "mmd": [(2.2, 0.91)],
        "jevd": [(2.3, 0.92)],
    }
    figure, _ = drawn_quietly(lambda: charts._pareto_figure(sweeps, [], xlabel="x", title="t"))
    (axes,) = figure.axes
    assert axes.get_ylim()[0] < 0.15 and len(axes.texts) == 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.07, 0.8, 0.85, 0.9, 0.95], (0.8, 0.95)),
        ([0.8, 0.85, 0.9, 0.95, 12.0], (0.8, 0.95)),
        ([0.05, 0.07, 0.8, 0.82, 0.85, 0.9, 0.95, 0.9], (0.8, 0.95)),  # two apart: cut together
        ([0.07, 0.85, 0.9], (0.85, 0.9)),
        ([0.6, 0.62, 0.65, 0.7, 0.95], None),  # PCA far above a few fair methods: kept
        ([0.1, 0.3, 0.5, 0.7, 0.9], None),
        ([0.9, 0.9, 0.9, 0.5], None),  # the rest has no range to zoom on
        ([0.07, 0.9], None),
    ],
)
def test_bulk(values, expected):
    assert charts._bulk(np.array(values + [np.nan])) == expected


@pytest.mark.parametrize("draw", ["curves", "panels", "pareto"])
def test_same_numbers_give_the_same_bytes(draw, tmp_path):
    values = curves(26)
    calls = {
        "curves": lambda path: charts.group_curves(
            path, RANKS, {"PCA": values, "mm": values * 1.1}, group_names(26), ylabel="y", title="t"
        ),
        "panels": lambda path: charts.group_panels(
            path, RANKS, {"pca": values, "mm": values * 1.1}, group_names(26), ylabel="y"
        ),
        "pareto": lambda path: charts.pareto(path, OUTLIER_SWEEPS, OUTLIER_FRONT, xlabel="x", title="t"),
    }
    for name in ("a.png", "b.png"):
        calls[draw](locate(tmp_path / name))
    first, second = (tmp_path / "a.png").read_bytes(), (tmp_path / "b.png").read_bytes()
    assert first[:8] == b"\x89PNG\r\n\x1a\n" and first == second
    assert b"Software" not in first
