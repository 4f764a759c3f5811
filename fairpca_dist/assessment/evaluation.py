"""Cross-validated evaluation of fair PCA methods from per-cell moments, with no further pass.

The protocol of Vu et al. (ICLR 2022, §5, Tables 1 and 3; spec/seeds-002-003.md §B.8,
protocol 3), for any registered method and its hyper-parameter grid:

1. ``n_splits`` random train/test splits (paper: 10, with 30 % of the rows for training);
2. on each training part, ``n_folds``-fold cross-validation (paper: 3) picks the grid point
   with the smallest mean ABDiff + ARE on the held-out folds;
3. the method is refitted on the whole training part with that point and scored on the test
   part (out of sample, Table 1) and on the training part (in sample, Table 3).

Metrics of a projection V (orthonormal p × r; rank-relaxed maps use ⟨·, 2P − P²⟩ as in
:mod:`fairpca_dist.assessment.metrics`) on a set of rows, in the fitted model's units (its ``scale``),
by :func:`fairpca_dist.assessment.scoring.score_projection` (which also scores every other criterion):

    L_g   = E_g ‖(I − VVᵀ)(x − c_g)‖²       mean reconstruction error of group g
    ARE   = Σ_g p̂_g L_g                     p̂_g the group's share of the set's rows (weights)
    ABDiff = max_g L_g − min_g L_g          = |L_0 − L_1| for two groups

c_g is the centre the method was fitted about, taken from the **fitting** rows (their mean for
``center="global"``, the paper's setting; each group's mean for ``"group"``; 0 for
``"origin"``): a model is scored as it would be used, without peeking at the scored rows. Each
score also keeps the errors about the scored rows' own group means (``group_error_within``):
the authors' code computes its ABDiff that way (benchmarks/baselines/dro_authors.py).

Every set here is a union of cells (:class:`~fairpca_dist.engine.cells.CellMoments`), so the whole
protocol — every split, fold and grid point — runs on the driver from the statistics of one
pass over the rows. Splits are drawn at the granularity of cells: with hash cells a random
choice of cells is a random subset of the rows (each row in a cell independently), and
``train_fraction`` must be a whole number of cells (0.3 with 10, 20 or 30 cells).
"""

from __future__ import annotations

import itertools
import json
import math
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fairpca_dist.assessment.scoring import ProjectionScores, score_projection
from fairpca_dist.engine.cells import CellMoments
from fairpca_dist.engine.moments import Center, GroupMoments, label_to_json
from fairpca_dist.engine.progress import progress_bar
from fairpca_dist.exceptions import GroupError, InputError
from fairpca_dist.io.jsonable import jsonable
from fairpca_dist.solvers import CENTERS, SOLVERS, FairProjection, fit_projection, solver_options
from fairpca_dist.solvers.checks import integer, number

__all__ = [
    "PAPER_GRIDS",
    "Split",
    "GridScore",
    "SplitResult",
    "Evaluation",
    "Methods",
    "check_methods",
    "MethodPlan",
    "method_plans",
    "fit_plan",
    "plan_splits",
    "evaluate",
]

#: The hyper-parameter grids of Vu et al. §5 for the methods this library has. ``samadi-mw``'s
#: η is the step size of a solver that runs to a certified optimum here, not a trade-off, so
#: it has no grid (the paper's FairPCA stops after a fixed number of uncertified steps).
PAPER_GRIDS: dict[str, dict[str, tuple[Any, ...]]] = {
    "dro": {"alpha": (0.05, 0.1, 0.15), "lam": (0.0, 0.5, 1.0, 1.5, 2.0, 2.5)},
}

Method = str | Callable[..., FairProjection]
# Mapping is invariant in its keys: a dict of names alone is not a Mapping[Method, ...]
Methods = (
    Method
    | Sequence[Method]
    | Mapping[str, Mapping[str, Any] | None]
    | Mapping[Callable[..., FairProjection], Mapping[str, Any] | None]
    | Mapping[Method, Mapping[str, Any] | None]
)


# ----------------------------------------------------------------------------- splits
@dataclass(frozen=True)
class Split:
    """One train/test split of the cells and the folds of its training part."""

    index: int
    train: tuple[Hashable, ...]
    test: tuple[Hashable, ...]
    folds: tuple[tuple[Hashable, ...], ...]


def plan_splits(
    cells: Sequence[Hashable],
    *,
    n_splits: int = 10,
    train_fraction: float = 0.3,
    n_folds: int = 3,
    random_state: int | np.random.Generator | None = None,
) -> tuple[Split, ...]:
    """``n_splits`` distinct random train/test splits of ``cells`` and the ``n_folds`` folds of
    each training part (cells shuffled and dealt into folds whose sizes differ by at most one).

    Raises :class:`InputError` when ``train_fraction`` is not a whole number of cells, when a
    training part has fewer cells than folds, or when there are fewer distinct splits than
    ``n_splits``.
    """
    n_splits = integer("n_splits", n_splits)
    n_folds = integer("n_folds", n_folds, minimum=2)
    fraction = number("train_fraction", train_fraction, strict=True)
    cells = tuple(cells)
    n_cells = len(cells)
    n_train = round(fraction * n_cells)
    if fraction >= 1 or not math.isclose(n_train, fraction * n_cells, abs_tol=1e-9) or not 0 < n_train < n_cells:
        raise InputError(
            f"train_fraction={train_fraction!r} is not a whole number of the {n_cells} cells "
            f"(splits are unions of cells): use a multiple of 1/{n_cells}, or a number of cells that "
            f"{train_fraction!r} × n_cells makes whole (e.g. 10 or 20 cells for 0.3)"
        )
    if n_train < n_folds:
        raise InputError(
            f"the training part has {n_train} cell(s), fewer than n_folds={n_folds}: use more cells or fewer folds"
        )
    possible = math.comb(n_cells, n_train)
    if possible < n_splits:
        raise InputError(
            f"n_splits={n_splits} distinct splits of {n_cells} cells into {n_train} training cells "
            f"do not exist (only {possible}): use more cells or fewer splits"
        )
    rng = np.random.default_rng(random_state)
    chosen: list[tuple[int, ...]] = []
    while len(chosen) < n_splits:
        train = tuple(sorted(rng.permutation(n_cells)[:n_train].tolist()))
        if train not in chosen:
            chosen.append(train)
    splits = []
    for index, train in enumerate(chosen):
        dealt = np.array_split(rng.permutation(np.array(train)), n_folds)
        splits.append(
            Split(
                index=index,
                train=tuple(cells[i] for i in train),
                test=tuple(cells[i] for i in range(n_cells) if i not in train),
                folds=tuple(tuple(cells[i] for i in sorted(fold.tolist())) for fold in dealt),
            )
        )
    return tuple(splits)


def _fold_sets(split: Split) -> Iterator[tuple[str, tuple[Hashable, ...], tuple[Hashable, ...]]]:
    """(name, fitting cells, held-out cells) of each fold of ``split``."""
    for j, fold in enumerate(split.folds):
        yield f"fold {j}", tuple(c for c in split.train if c not in fold), fold


def _check_cover(cells: CellMoments, splits: Sequence[Split], min_group_size: int, cross_validate: bool) -> None:
    """Every set the protocol fits on holds ≥ ``min_group_size`` rows of every group, and every
    set it scores holds at least one: checked on the cell counts before any fit, naming the
    split, the cells and the groups at fault."""
    position = {cell: i for i, cell in enumerate(cells.cells)}
    count = cells.count
    problems = []
    for split in splits:
        sets = [("training", split.train, min_group_size), ("test", split.test, 1)]
        if cross_validate:
            for name, fit_on, held in _fold_sets(split):
                sets += [(f"{name} training", fit_on, min_group_size), (f"{name} validation", held, 1)]
        for role, members, needed in sets:
            found = count[[position[c] for c in members]].sum(axis=0)
            short = [f"{g!r} ({int(n)} row(s))" for g, n in zip(cells.groups, found, strict=True) if n < needed]
            if short:
                problems.append(
                    f"split {split.index}: the {role} cells {list(members)} hold too few rows of "
                    f"group(s) {', '.join(short)}; at least {needed} needed"
                )
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise GroupError(
            "; ".join(problems[:3]) + more + ". Use fewer, larger cells, a larger train_fraction or fewer folds."
        )


# ----------------------------------------------------------------------------- methods and grids
@dataclass(frozen=True)
class MethodPlan:
    """A method to fit, its fixed options and the points of its grid (one empty dict when
    nothing is swept)."""

    name: str
    method: Method
    fixed: dict[str, Any]
    grid: tuple[dict[str, Any], ...]


def _swept(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray, range))


def method_plans(
    methods: Methods, grids: Mapping[str, Mapping[str, Any]] = PAPER_GRIDS, *, rows_allowed: bool = False
) -> tuple[MethodPlan, ...]:
    """Methods with their fixed options and grid: a list or tuple of values is swept, any other
    value is fixed; options not given keep their ``grids`` entry (:data:`PAPER_GRIDS` here).
    Without ``rows_allowed``, methods that read the rows are refused."""
    if isinstance(methods, str) or callable(methods):
        methods = [methods]
    if not isinstance(methods, Mapping):
        methods = {method: None for method in methods}
    if not methods:
        raise InputError("no methods to evaluate")
    plans = []
    allowed: frozenset[str] | None
    for method, spec in methods.items():
        if isinstance(method, str):
            if method not in SOLVERS:
                raise InputError(f"unknown method {method!r}; available: {sorted(SOLVERS)}")
            if not rows_allowed and SOLVERS[method].reads_rows({**grids.get(method, {}), **(spec or {})}):
                raise InputError(
                    f"method {method!r} reads the rows at every iteration; the evaluation works from "
                    "per-cell moments only"
                )
            name, spec, allowed = method, {**grids.get(method, {}), **(spec or {})}, SOLVERS[method].options
        elif callable(method):
            name, spec, allowed = getattr(method, "__name__", "custom"), spec or {}, solver_options(method)
        else:
            raise InputError(f"a method must be a name in {sorted(SOLVERS)} or a solver function, got {method!r}")
        unknown = sorted(set(spec) - allowed) if allowed is not None else []
        if unknown and allowed is not None:
            raise InputError(
                f"unknown option(s) {unknown} for method {name!r}; valid options: {sorted(allowed) or 'none'}"
            )
        swept = {key: tuple(values) for key, values in spec.items() if _swept(values)}
        empty = [key for key, values in swept.items() if not values]
        if empty:
            raise InputError(f"the grid of {name!r} gives no value for {empty}")
        fixed = {key: value for key, value in spec.items() if key not in swept}
        grid = tuple(dict(zip(swept, values, strict=True)) for values in itertools.product(*swept.values()))
        plans.append(MethodPlan(name, method, fixed, grid))
    return tuple(plans)


def check_methods(methods: Methods) -> None:
    """Raise :class:`InputError` for unknown methods or options and for methods that need the
    rows: :func:`evaluate`'s checks, for callers that want them before a pass over the rows."""
    method_plans(methods)


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class GridScore:
    """A grid point's cross-validation result: ABDiff, ARE and their sum averaged over folds."""

    params: dict[str, Any]
    abdiff: float
    are: float

    @property
    def criterion(self) -> float:
        return self.abdiff + self.are


@dataclass(frozen=True)
class SplitResult:
    """One method on one split: the grid point chosen by CV, then scores of the refit."""

    method: str
    split: int
    params: dict[str, Any]
    cross_validation: tuple[GridScore, ...]
    test: ProjectionScores
    train: ProjectionScores
    fits: int
    seconds: float
    converged: bool
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evaluation:
    """The outcome of :func:`evaluate`: settings, the splits, and one :class:`SplitResult` per
    method and split."""

    settings: dict[str, Any]
    groups: tuple[Hashable, ...]
    splits: tuple[Split, ...]
    results: tuple[SplitResult, ...]
    seconds: float = 0.0

    @property
    def methods(self) -> tuple[str, ...]:
        """The evaluated methods, in the order they were given."""
        return tuple(dict.fromkeys(result.method for result in self.results))

    def table(self) -> pd.DataFrame:
        """One row per method and split: chosen parameters and the four scores.

        Returns
        -------
        pandas.DataFrame
            Columns ``method``, ``split``, ``params`` (chosen), ``test_abdiff``, ``test_are``,
            ``train_abdiff``, ``train_are`` (and ``*_abdiff_within``), ``fits``, ``seconds``, ``converged``.
        """
        rows = []
        for result in self.results:
            rows.append(
                {
                    "method": result.method,
                    "split": result.split,
                    "params": json.dumps(result.params),
                    "test_abdiff": result.test.abdiff,
                    "test_are": result.test.are,
                    "train_abdiff": result.train.abdiff,
                    "train_are": result.train.are,
                    "test_abdiff_within": result.test.abdiff_within,
                    "train_abdiff_within": result.train.abdiff_within,
                    "fits": result.fits,
                    "seconds": result.seconds,
                    "converged": result.converged,
                }
            )
        return pd.DataFrame(rows)

    def summary(self) -> pd.DataFrame:
        """Per method: mean and standard deviation over splits of the test (out-of-sample) and
        train (in-sample) ABDiff and ARE, and the most chosen parameters.

        Returns
        -------
        pandas.DataFrame
            Indexed by method: the mean and ``_std`` of ``test_abdiff``, ``test_are``, ``train_abdiff``,
            ``train_are``; ``params`` (the most chosen), ``fits``, ``seconds``.
        """
        table = self.table()
        rows = []
        for method in self.methods:
            part = table[table["method"] == method]
            row: dict[str, Any] = {"method": method}
            for column in ("test_abdiff", "test_are", "train_abdiff", "train_are"):
                row[column] = float(part[column].mean())
                row[f"{column}_std"] = float(part[column].std(ddof=1)) if len(part) > 1 else 0.0
            row["params"] = part["params"].mode().iloc[0]
            row["fits"] = int(part["fits"].sum())
            row["seconds"] = float(part["seconds"].sum())
            rows.append(row)
        return pd.DataFrame(rows).set_index("method")

    def tradeoff(self) -> pd.DataFrame:
        """Per method and grid point: the cross-validated ABDiff and ARE averaged over splits
        (the paper's Pareto view of the grid).

        Returns
        -------
        pandas.DataFrame
            One row per method and grid point: ``method``, ``params``, ``abdiff``, ``are``.
        """
        rows = [
            {"method": result.method, "params": json.dumps(point.params), "abdiff": point.abdiff, "are": point.are}
            for result in self.results
            for point in result.cross_validation
        ]
        if not rows:
            return pd.DataFrame(columns=["method", "params", "abdiff", "are"])
        return pd.DataFrame(rows).groupby(["method", "params"], sort=False, as_index=False).mean()

    def to_dict(self) -> dict[str, Any]:
        """Everything, as JSON-ready values.

        Returns
        -------
        dict
            ``settings``, ``groups``, ``seconds``, ``splits`` and ``results`` (what ``evaluation.json`` holds).
        """

        def scores(s: ProjectionScores) -> dict[str, Any]:
            return {
                "are": s.are,
                "abdiff": s.abdiff,
                "abdiff_within": s.abdiff_within,
                "group_errors": s.group_error.tolist(),
                "group_errors_within": s.group_error_within.tolist(),
            }

        return {
            "settings": self.settings,
            "groups": [label_to_json(g) for g in self.groups],
            "seconds": self.seconds,
            "splits": [
                {
                    "index": s.index,
                    "train": [label_to_json(c) for c in s.train],
                    "test": [label_to_json(c) for c in s.test],
                    "folds": [[label_to_json(c) for c in fold] for fold in s.folds],
                }
                for s in self.splits
            ],
            "results": [
                {
                    "method": r.method,
                    "split": r.split,
                    "params": jsonable(r.params),
                    "fits": r.fits,
                    "seconds": r.seconds,
                    "converged": r.converged,
                    "warnings": list(r.warnings),
                    "test": scores(r.test),
                    "train": scores(r.train),
                    "cross_validation": [
                        {"params": jsonable(g.params), "abdiff": g.abdiff, "are": g.are} for g in r.cross_validation
                    ],
                }
                for r in self.results
            ],
        }

    def markdown(self) -> str:
        """The summary as a Markdown table (mean ± s.d. over splits)."""
        summary = self.summary()
        lines = [
            "| method | test ABDiff | test ARE | train ABDiff | train ARE | chosen | fits | s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for method, row in summary.iterrows():
            cells = [
                f"{row[c]:.4f} ± {row[c + '_std']:.4f}"
                for c in ("test_abdiff", "test_are", "train_abdiff", "train_are")
            ]
            lines.append(
                f"| {method} | " + " | ".join(cells) + f" | {row['params']} | {row['fits']} | {row['seconds']:.1f} |"
            )
        return "\n".join(lines)


# ----------------------------------------------------------------------------- the protocol
def fit_plan(
    moments: GroupMoments,
    n_components: int,
    plan: MethodPlan,
    params: dict[str, Any],
    seed: int,
    fit_options: dict[str, Any],
    caught: list[str],
) -> FairProjection:
    """Fit ``plan``'s method with ``params`` and ``fit_options`` (those of
    :func:`~fairpca_dist.fit_projection`, ``standardize`` a bool); warnings are collected in
    ``caught``, not shown. With standardisation, a column constant on these fitting rows keeps
    scale 1."""
    options = dict(fit_options)
    if options["standardize"]:
        options["standardize"] = moments.feature_scale(options["ddof"], constant="keep")
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        model = fit_projection(
            moments, n_components, method=plan.method, random_state=seed, **options, **plan.fixed, **params
        )
    caught.extend(f"{r.category.__name__}: {r.message}" for r in records)
    return model


def evaluate(
    cells: CellMoments,
    n_components: int,
    methods: Methods = "pca",
    *,
    n_splits: int = 10,
    train_fraction: float = 0.3,
    n_folds: int = 3,
    center: Center = "group",
    standardize: bool = False,
    ddof: int = 0,
    min_group_size: int = 2,
    random_state: int | None = None,
    progress: bool = False,
) -> Evaluation:
    """Repeated train/test splits with cross-validated hyper-parameters, from per-cell moments.

    Parameters
    ----------
    cells : CellMoments
        From ``compute_moments(..., cells=HashCells(...))`` (or a cells column): one pass.
    n_components : int
        Target dimension r (paper: 3).
    methods : str, callable, list of them, or mapping method → options
        Registered method names (or solver functions). In a mapping, an option whose value is a
        list or tuple is swept (the grid is the product of the swept options); any other value is
        fixed. Options not given keep the grid of :data:`PAPER_GRIDS` (``dro``: α × λ of the
        paper); fix them (``{"dro": {"alpha": 0.15, "lam": 0.5}}``) to skip cross-validation.
    n_splits, train_fraction, n_folds : int, float, int
        The protocol (paper: 10 splits, 30 % train, 3 folds); see :func:`plan_splits`.
        Cross-validation runs only for a method whose grid has several points.
    center, standardize, ddof, min_group_size
        As in :func:`~fairpca_dist.fit_projection`, for every fit. ``standardize=True`` scales
        each fit by its own fitting rows' standard deviations (the authors' pipeline z-scores
        with the training statistics); scores are in the units of the fit. A column constant on
        the whole table raises :class:`~fairpca_dist.exceptions.SchemaError`; one that is
        constant only on some fitting part keeps scale 1 there (as in the authors' code).
    random_state : int or None
        Seeds the splits and every solver (the same seed for every grid point of a fold, so
        grid points are compared on equal terms).
    progress : bool
        Show a progress bar (one tick per fit) on a terminal.

    Returns
    -------
    Evaluation
        ``summary()`` for the paper's tables (test = out of sample, train = in sample).

    Raises
    ------
    InputError
        Bad settings, unknown methods or options, methods that need the rows; a
        :class:`GroupError` when some split or fold leaves a group without rows (naming the
        split, the cells and the group) — all before any fit.
    """
    started = time.perf_counter()
    if not isinstance(cells, CellMoments):
        raise InputError(
            f"evaluate needs per-cell moments (CellMoments), got {type(cells).__name__}; "
            "compute them with compute_moments(..., cells=HashCells(...))"
        )
    if center not in CENTERS:
        raise InputError(f"center={center!r} is not one of {CENTERS}")
    n_components = integer("n_components", n_components)
    if n_components > cells.n_features:
        raise InputError(f"n_components={n_components} must be between 1 and n_features={cells.n_features}")
    min_group_size = integer("min_group_size", min_group_size)
    plans = method_plans(methods)
    rng = np.random.default_rng(random_state)
    splits = plan_splits(
        cells.cells, n_splits=n_splits, train_fraction=train_fraction, n_folds=n_folds, random_state=rng
    )
    cross_validate = any(len(plan.grid) > 1 for plan in plans)
    _check_cover(cells, splits, min_group_size, cross_validate)
    if standardize:
        cells.total().feature_scale(ddof)  # a column constant on the whole table is refused here
    seeds = rng.integers(2**32, size=(len(splits), n_folds + 1))
    fit_options = {"center": center, "standardize": standardize, "ddof": ddof, "min_group_size": min_group_size}
    total = sum(len(splits) * (1 + (len(plan.grid) * n_folds if len(plan.grid) > 1 else 0)) for plan in plans)
    results = []
    with progress_bar("evaluate", disable=None if progress else True) as bar:
        bar.unit, bar.total = "fit", total
        for split in splits:
            train = cells.union(split.train, min_group_size=min_group_size)
            test = cells.union(split.test, min_group_size=1)
            folds = (
                [
                    (cells.union(fit_on, min_group_size=min_group_size), cells.union(held, min_group_size=1))
                    for _, fit_on, held in _fold_sets(split)
                ]
                if cross_validate
                else []
            )
            for plan in plans:
                results.append(
                    _evaluate_split(plan, split, train, test, folds, seeds[split.index], n_components, fit_options, bar)
                )
    caught = [(r.method, w) for r in results for w in r.warnings]
    for method in dict.fromkeys(m for m, _ in caught):
        messages = sorted({w for m, w in caught if m == method})
        warnings.warn(
            f"evaluate: {sum(m == method for m, _ in caught)} warning(s) from {method!r} fits, e.g. "
            f"{messages[0]} (all in Evaluation.results[i].warnings)",
            UserWarning,
            stacklevel=2,
        )
    settings = {
        "n_components": n_components,
        "n_splits": len(splits),
        "train_fraction": train_fraction,
        "n_folds": n_folds,
        "center": center,
        "standardize": standardize,
        "ddof": ddof,
        "min_group_size": min_group_size,
        "random_state": random_state,
        "n_cells": cells.n_cells,
        "cells": jsonable(getattr(cells.assignment, "to_json", lambda: cells.assignment)()),
        "methods": {plan.name: {"fixed": jsonable(plan.fixed), "grid": jsonable(list(plan.grid))} for plan in plans},
    }
    return Evaluation(
        settings=settings,
        groups=cells.groups,
        splits=splits,
        results=tuple(results),
        seconds=time.perf_counter() - started,
    )


def _evaluate_split(
    plan: MethodPlan,
    split: Split,
    train: GroupMoments,
    test: GroupMoments,
    folds: Sequence[tuple[GroupMoments, GroupMoments]],
    seeds: np.ndarray,
    n_components: int,
    fit_options: dict[str, Any],
    bar: Any,
) -> SplitResult:
    """Cross-validate ``plan``'s grid on the folds (when it has several points), refit the best
    point on the whole training part, score it on test and train."""
    started = time.perf_counter()
    caught: list[str] = []
    grid_scores = []
    if len(plan.grid) > 1:
        for params in plan.grid:
            fold_scores = []
            for j, (fit_on, held) in enumerate(folds):
                model = fit_plan(fit_on, n_components, plan, params, int(seeds[j]), fit_options, caught)
                fold_scores.append(score_projection(model, fit_on, held))
                bar.update(1)
            grid_scores.append(
                GridScore(
                    params=params,
                    abdiff=float(np.mean([s.abdiff for s in fold_scores])),
                    are=float(np.mean([s.are for s in fold_scores])),
                )
            )
        best = min(grid_scores, key=lambda g: g.criterion).params  # ties: the first grid point
    else:
        best = plan.grid[0]
    model = fit_plan(train, n_components, plan, best, int(seeds[-1]), fit_options, caught)
    bar.update(1)
    return SplitResult(
        method=plan.name,
        split=split.index,
        params=best,
        cross_validation=tuple(grid_scores),
        test=score_projection(model, train, test),
        train=score_projection(model, train, train),
        fits=len(plan.grid) * len(folds) * (len(plan.grid) > 1) + 1,
        seconds=time.perf_counter() - started,
        converged=model.converged,
        warnings=tuple(dict.fromkeys(caught)),
    )
