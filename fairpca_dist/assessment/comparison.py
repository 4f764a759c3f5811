"""Every fair PCA method on one table, side by side, by every criterion (``fairpca compare``).

Each paper defines fairness its own way. :func:`compare_methods` fits every registered method —
each hyper-parameterised one over the grid of :data:`COMPARE_GRIDS` — at one or several ranks
r, and scores every fit by every criterion (:data:`CRITERIA`):

* **in sample**: fitted on all rows and scored on them (:func:`fairpca_dist.assessment.scoring.score_projection`):
  explained-variance ratio, the largest Samadi loss, the smallest group variance (Babu et al.),
  ABDiff and ARE (Vu et al.), the largest linear-kernel MMD² ‖Vᵀ(μ_a − μ_b)‖² over pairs;
* **out of sample**: the same fit on the training cells of one train/test split of the per-cell
  moments (:class:`~fairpca_dist.engine.cells.CellMoments`), scored on the test cells — no further
  pass over the rows for the moment-based methods;
* the largest **RBF-kernel MMD²** over pairs of each in-sample fit on every row, estimated by
  random Fourier features, one pass for all the fits of an r
  (:func:`fairpca_dist.assessment.metrics.mmd2_rbf_many`, cos/sin in float32: about twice as fast, off by
  ~1e-7 relative against the estimate's own ~1/√D; a fixed draw of features is not rotation
  invariant, so fits spanning the same subspace in other bases differ by that noise too); σ is
  the median heuristic at that r's PCA
  projection (two passes for its row sample), and ``mmd`` fits are given the same σ, so their
  constraint and this column measure the same thing;
* **downstream** accuracy and demographic-parity difference of a classifier trained on each
  in-sample fit's projection of a row sample (:func:`fairpca_dist.assessment.downstream.downstream_parity`);
  a degenerate classifier (constant predictions, or accuracy within noise of the base rate)
  is marked, and left out of the best (★) and of the fronts of those two columns: its DP
  difference of 0 is no fairness;
* fit time, status, and the passes over the rows each fit made.

:meth:`Comparison.summary` says the whole comparison's facts once, in words (the downstream base
rate and what makes a classifier degenerate, small groups, why fits failed, each reason once);
:meth:`Comparison.reading` says each r's: the fairest fit of each fairness criterion and its
cost in explained variance, the fits that worsen a criterion next to PCA (grouped by what they
worsen, "(its own criterion)" whenever that criterion is the method's own, better or worse),
the degenerate classifiers by kind, the fits that did not converge. A method's grid points are
named together ("dro (4 of 6 grid points)"); the Markdown's tables hold every fit's numbers.

Every method but ``mm-robust`` and ``mmd`` with the RBF kernel fits from the moments, so those
cost nothing beyond the one pass of the cell moments. The row-reading methods run through their
passes (restricted to the training cells for the out-of-sample fit,
:meth:`fairpca_dist.engine.passes.TablePasses.restricted`), and the comparison counts them. A fit that
fails or does not converge stays in the comparison with its status; the comparison completes.
Solvers, σ and the random features are seeded by ``random_state``: a comparison is reproducible.

No dask here: the rows come in through ``passes``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairpca_dist.assessment import metrics
from fairpca_dist.assessment.downstream import (
    base_rate_sentence,
    degenerate_mark,
    downstream_parity,
    small_groups_sentence,
)
from fairpca_dist.assessment.evaluation import MethodPlan, Methods, Split, fit_plan, method_plans, plan_splits
from fairpca_dist.assessment.scoring import CRITERIA, Criterion, ProjectionScores, criterion_named, score_projection
from fairpca_dist.engine.cells import CellMoments
from fairpca_dist.engine.moments import Center, GroupMoments, label_to_json
from fairpca_dist.engine.progress import progress_bar
from fairpca_dist.exceptions import FairPCAError, GroupError, InputError
from fairpca_dist.io.jsonable import jsonable
from fairpca_dist.solvers import CENTERS, SOLVERS, FairProjection, fit_projection
from fairpca_dist.solvers.checks import integer
from fairpca_dist.wording import group_display_names

if TYPE_CHECKING:
    from fairpca_dist.engine.passes import TablePasses

__all__ = [
    "COMPARE_GRIDS",
    "CRITERIA",
    "Criterion",
    "Candidate",
    "Comparison",
    "check_comparison",
    "compare_methods",
    "one_line",
    "pareto_front",
]

#: The grids swept by default: the trade-off parameter of every method that has one, at points
#: that span its range (Vu et al.'s α and λ corners; mm-sparse's ℓ1 penalty over three decades
#: below 1, where it zeroes every component on standardised data;
#: mmd's τ at the two looser of Lee et al.'s levels, fitted on a 2,000-row-per-group sample so a
#: comparison of a large table stays affordable — the RBF MMD² column shows how it holds on all
#: rows; Olfat & Aswani's mean-gap bound δ and covariance-gap weight μ). Options given to
#: :func:`compare_methods` replace these.
COMPARE_GRIDS: dict[str, dict[str, Any]] = {
    "dro": {"alpha": (0.05, 0.15), "lam": (0.0, 1.0, 2.5)},
    "mm-sparse": {"penalty": (0.001, 0.01, 0.1)},
    "mmd": {"tau": (1e-2, 1e-3), "estimator": "sample"},
    "olfat-sdp": {"delta": (0.0, 0.1), "mu": (0.1, 1.0)},
}

DOWNSTREAM_KEYS = ("accuracy", "dp_difference")
"""The criteria of the downstream classifier: a degenerate one is never the best at them."""

MESSAGE_LENGTH = 160
"""Characters of a failure message shown in a table or a sentence (:func:`one_line`)."""


@dataclass(frozen=True)
class Candidate:
    """One method at one grid point and rank r: status, cost and every criterion."""

    method: str
    params: dict[str, Any]
    n_components: int
    status: str
    message: str
    converged: bool
    seconds: float
    passes: int
    reads_rows: bool
    in_sample: ProjectionScores | None
    out_of_sample: ProjectionScores | None
    out_of_sample_status: str
    rbf_mmd2: float | None = None
    downstream: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    model: FairProjection | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        """The method and its grid point, e.g. ``dro (alpha=0.05, lam=1)``."""
        if not self.params:
            return self.method
        params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())
        return f"{self.method} ({params})"

    @property
    def ok(self) -> bool:
        return self.in_sample is not None

    @property
    def degenerate(self) -> str | None:
        """Why this fit's downstream classifier learned nothing usable, or None
        (:func:`fairpca_dist.assessment.downstream.downstream_parity`)."""
        return None if self.downstream is None else self.downstream["degenerate"]

    def competes(self, key: str, where: str = "in") -> bool:
        """Whether this fit's value of criterion ``key`` may be the best or on a front: it
        converged, the value is finite, and for a downstream criterion its classifier is not
        degenerate."""
        value = self.value(key, where)
        return (
            self.converged
            and value is not None
            and bool(np.isfinite(value))
            and not (key in DOWNSTREAM_KEYS and self.degenerate)
        )

    def measured(self, key: str, where: str = "in") -> float:
        """:meth:`value` where the caller knows it was measured (e.g. after :meth:`competes`).

        Raises
        ------
        ValueError
            When it was not measured (a bug in the caller).
        """
        value = self.value(key, where)
        if value is None:
            raise ValueError(f"{self.label}: criterion {key!r} ({where}) was not measured")
        return value

    def value(self, key: str, where: str = "in") -> float | None:
        """Criterion ``key`` in sample (``where="in"``) or on the test cells (``"test"``);
        None when it was not measured."""
        if key == "rbf_mmd2":
            return self.rbf_mmd2 if where == "in" else None
        if key in ("accuracy", "dp_difference"):
            if where != "in" or self.downstream is None:
                return None
            return self.downstream["accuracy" if key == "accuracy" else "demographic_parity_difference"]
        scores = self.in_sample if where == "in" else self.out_of_sample
        return None if scores is None else scores.value(key)


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare_methods`: settings, the split, every candidate, and the
    passes over the rows by purpose."""

    settings: dict[str, Any]
    groups: tuple[Hashable, ...]
    split: Split
    candidates: tuple[Candidate, ...]
    passes: dict[str, int]
    seconds: float
    downstream: dict[str, Any] | None = None
    """What :func:`~fairpca_dist.assessment.downstream.downstream_parity` found beyond each fit's scores:
    target, base rate, test rows per group, small groups, the raw features' classifier."""

    @property
    def group_names(self) -> list[str]:
        """The groups as a person reads them: ``sex=1`` when the sensitive columns are known
        (:func:`~fairpca_dist.wording.group_display_names`)."""
        return group_display_names(self.groups, self.settings.get("group_columns", ()))

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(c.n_components for c in self.candidates))

    def at(self, n_components: int) -> tuple[Candidate, ...]:
        return tuple(c for c in self.candidates if c.n_components == n_components)

    def criteria(self) -> tuple[Criterion, ...]:
        """The criteria measured for at least one candidate."""
        return tuple(c for c in CRITERIA if any(k.value(c.key) is not None for k in self.candidates))

    def table(self) -> pd.DataFrame:
        """One row per candidate: method, grid point, r, status, cost, and every criterion in
        sample (``in_<key>``) and out of sample (``test_<key>``)."""
        rows = []
        for c in self.candidates:
            row: dict[str, Any] = {
                "method": c.method,
                "params": json.dumps(jsonable(c.params)),
                "label": c.label,
                "n_components": c.n_components,
                "status": c.status,
                "converged": c.converged,
                "seconds": c.seconds,
                "passes": c.passes,
                "reads_rows": c.reads_rows,
                "test_status": c.out_of_sample_status,
                "downstream_degenerate": c.degenerate,
            }
            for criterion in CRITERIA:
                row[f"in_{criterion.key}"] = c.value(criterion.key, "in")
                if criterion.out_of_sample:
                    row[f"test_{criterion.key}"] = c.value(criterion.key, "test")
            rows.append(row)
        return pd.DataFrame(rows)

    def best(self, n_components: int, key: str, where: str = "in") -> tuple[Candidate, ...]:
        """The candidates at r with the best value of criterion ``key`` (ties all), among those
        that compete for it (:meth:`Candidate.competes`: converged, and no degenerate classifier
        for a downstream criterion)."""
        scored = [(c, c.measured(key, where)) for c in self.at(n_components) if c.competes(key, where)]
        if not scored:
            return ()
        sign = 1.0 if criterion_named(key).better == "lower" else -1.0
        top = min(sign * v for _, v in scored)
        return tuple(c for c, v in scored if np.isclose(sign * v, top, rtol=1e-9, atol=1e-15))

    def front(self, n_components: int, key: str) -> tuple[Candidate, ...]:
        """The candidates at r on the Pareto front of explained variance (higher) against
        fairness criterion ``key``, in sample (:func:`pareto_front`), among those that
        compete for it (:meth:`Candidate.competes`). Fits that did not converge are left out: their last
        iterate (e.g. mm-sparse's all-zero map past its tight range) would otherwise claim the
        front with numbers no solution has; so are degenerate classifiers from the downstream
        fronts: a DP difference of 0 from predicting one class is no fairness."""
        scored = [
            c for c in self.at(n_components) if c.competes(key) and c.value("explained_variance_ratio") is not None
        ]
        points = [(c.measured(key), c.measured("explained_variance_ratio")) for c in scored]
        return tuple(scored[i] for i in pareto_front(points, criterion_named(key).better))

    def summary(self) -> list[str]:
        """Plain-language sentences on the whole comparison, said once whatever the number of
        ranks: the downstream base rate and the rule that makes a classifier degenerate
        (:func:`~fairpca_dist.assessment.downstream.base_rate_sentence`), a raw-features classifier that is
        itself degenerate, the groups with few test rows, and the fits that failed or were
        skipped, grouped by reason (each reason once, then the fits and ranks it hit)."""
        lines = []
        if self.downstream is not None:
            downstream = self.downstream
            reference = downstream["reference"]["degenerate"]
            if reference:
                lines.append(
                    f"Even the classifier on the raw features is degenerate ({reference}): "
                    f"{downstream['target']!r} cannot be predicted from these features, so the downstream "
                    "columns say nothing about the projections."
                )
            lines.append(base_rate_sentence(downstream))
            small = small_groups_sentence(downstream)
            if small:
                lines.append(small)
        lines += self._by_reason("failed", "Failed")
        lines += self._by_reason("skipped", "Skipped")
        return lines

    def reading(self, n_components: int) -> list[str]:
        """Plain-language sentences on the trade-offs at r (the whole comparison's facts are
        :meth:`summary`'s): for each fairness criterion, the fits on the front and what the
        fairest one costs in explained variance next to PCA; the fits that worsen a criterion
        next to PCA (:meth:`~fairpca_dist.assessment.scoring.Criterion.worse`), grouped by what they
        worsen, with the range of their values; the degenerate downstream classifiers, grouped
        by kind; the fits that did not converge. A method's grid points are named together
        (:meth:`_named`)."""
        candidates = self.at(n_components)
        pca = next((c for c in candidates if c.method == "pca" and c.ok), None)
        lines = [*self._fronts_reading(n_components, pca)]
        if pca is not None:
            lines += self._worse_reading(n_components, [c for c in candidates if c is not pca], pca)
        lines += self._degenerate_reading(n_components)
        unconverged = [c for c in candidates if c.ok and not c.converged]
        if unconverged:
            lines.append(
                f"Did not converge (their numbers are of the last iterate; left out of the fronts): "
                f"{self._named(unconverged)}."
            )
        return lines

    def _named(self, candidates: Sequence[Candidate]) -> str:
        """The fits named compactly, method by method in order of first appearance: the method
        alone when it has one grid point at that r, ``dro (all 6 grid points)``, the one grid
        point's label, or ``dro (4 of 6 grid points)``."""
        parts = []
        for method in dict.fromkeys(c.method for c in candidates):
            points = [c for c in candidates if c.method == method]
            r = points[0].n_components
            total = sum(1 for c in self.at(r) if c.method == method)
            if len(points) == 1:
                parts.append(points[0].label)
            elif len(points) == total:
                parts.append(f"{method} (all {total} grid points)")
            else:
                parts.append(f"{method} ({len(points)} of {total} grid points)")
        return _and(parts)

    def _fronts_reading(self, n_components: int, pca: Candidate | None) -> list[str]:
        """For each fairness criterion: its front, the fairest fit on it and that fit's cost in
        explained variance next to PCA."""
        lines = []
        for criterion in self.criteria():
            if not criterion.fairness:
                continue
            front = self.front(n_components, criterion.key)
            if not front:
                continue
            fairest = front[0]  # the front is sorted from the fairest
            sentence = (
                f"For {criterion.title} ({criterion.better} is fairer), the front is {self._named(front)}; "
                f"the fairest is {fairest.label}, {_g(fairest.value(criterion.key))}"
            )
            if pca is not None and fairest is not pca:
                cost = 1.0 - fairest.measured("explained_variance_ratio") / pca.measured("explained_variance_ratio")
                sentence += (
                    f" against PCA's {_g(pca.value(criterion.key))}, costing {100 * cost:.1f} % of PCA's "
                    "explained variance."
                )
            else:
                sentence += "."
            lines.append(sentence)
        return lines

    def _worse_reading(self, n_components: int, candidates: Sequence[Candidate], pca: Candidate) -> list[str]:
        """One sentence per kind of trade-off: the converged fits that worsen the same criteria
        next to PCA (and improve, or worsen, their own), e.g. ``"mm and mm-sparse (all 3 grid
        points) raise the min group variance (their own criterion) from 1.9 to 2.87–2.96 but
        raise the max group loss from 1.06 to 1.43–1.8 next to PCA."`` A criterion is marked
        "own" whenever it is the method's own (``SOLVERS[m].criterion_of``), better or worse.
        A degenerate classifier's downstream numbers (or PCA's) are not compared."""
        kinds: dict[tuple[str | None, bool, tuple[str, ...]], list[Candidate]] = {}
        for candidate in candidates:
            if not candidate.converged:
                continue
            keys = [c.key for c in self.criteria() if c.fairness or c.key == "accuracy"]
            keys = [key for key in keys if candidate.competes(key) and pca.competes(key)]
            worse = tuple(key for key in keys if criterion_named(key).worse(candidate.measured(key), pca.measured(key)))
            if not worse:
                continue
            own = self._own_criterion(candidate)
            improved = (
                own in keys
                and own not in worse
                and criterion_named(own).worse(pca.measured(own), candidate.measured(own), rtol=1e-9, atol=0.0)
            )
            kinds.setdefault((own, improved, worse), []).append(candidate)
        lines = []
        for (own, improved, worse), fits in kinds.items():
            several = len(fits) > 1
            changes = _and(
                _without_repeated_verbs(
                    [
                        _change(key, pca.measured(key), [c.measured(key) for c in fits], key == own, several)
                        for key in worse
                    ]
                )
            )
            subject = self._named(fits)
            if improved and own is not None:  # improved: own is one of the criteria compared
                lines.append(
                    f"{subject} {_change(own, pca.measured(own), [c.measured(own) for c in fits], True, several)} "
                    f"but {changes} next to PCA."
                )
            else:
                lines.append(f"{subject} {changes} next to PCA.")
        return lines

    def _own_criterion(self, candidate: Candidate) -> str | None:
        """The key of the criterion the candidate's method makes fair, None for a user callable."""
        spec = SOLVERS.get(candidate.method)
        if spec is None:
            return None
        fixed = self.settings.get("methods", {}).get(candidate.method, {}).get("fixed", {})
        return spec.criterion_of({**fixed, **candidate.params})

    def _degenerate_reading(self, n_components: int) -> list[str]:
        """The degenerate downstream classifiers at r, grouped by kind (constant, nearly
        constant, ≈ base rate); the rule is :meth:`summary`'s."""
        degenerate = [c for c in self.at(n_components) if c.degenerate]
        if not degenerate:
            return []
        kinds: dict[str, list[Candidate]] = {}
        for candidate in degenerate:
            kinds.setdefault(degenerate_mark(candidate.degenerate), []).append(candidate)
        groups = "; ".join(f"{kind}: {self._named(fits)}" for kind, fits in kinds.items())
        return [f"Degenerate downstream classifiers (marked, never ★, left out of the fronts) — {groups}."]

    def _by_reason(self, status: str, heading: str) -> list[str]:
        """``"Failed: olfat-sdp (all 4 grid points) (REASON)."``: one sentence per distinct
        reason of the fits with this status, naming the fits it hit (and the ranks, when the
        comparison has several)."""
        reasons: dict[str, dict[int, list[Candidate]]] = {}
        for candidate in self.candidates:
            if candidate.status == status:
                reasons.setdefault(one_line(candidate.message), {}).setdefault(candidate.n_components, []).append(
                    candidate
                )
        lines = []
        for reason, by_rank in reasons.items():
            named = {r: self._named(fits) for r, fits in by_rank.items()}
            if len(self.ranks) == 1:
                fits = next(iter(named.values()))
            elif len(set(named.values())) == 1:
                ranks = "every r" if len(by_rank) == len(self.ranks) else f"r = {', '.join(map(str, by_rank))}"
                fits = f"{next(iter(named.values()))} at {ranks}"
            else:
                fits = "; ".join(f"{names} at r = {r}" for r, names in named.items())
            lines.append(f"{heading}: {fits} ({reason}).")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Everything but the fitted models, as JSON-ready values."""

        def scores(s: ProjectionScores | None) -> dict[str, Any] | None:
            return None if s is None else s.as_dict()

        return jsonable(
            {
                "settings": self.settings,
                "downstream": self.downstream,
                "groups": [label_to_json(g) for g in self.groups],
                "split": {
                    "train": [label_to_json(c) for c in self.split.train],
                    "test": [label_to_json(c) for c in self.split.test],
                },
                "passes": self.passes,
                "seconds": self.seconds,
                "candidates": [
                    {
                        "method": c.method,
                        "label": c.label,
                        "params": c.params,
                        "n_components": c.n_components,
                        "status": c.status,
                        "message": c.message,
                        "converged": c.converged,
                        "seconds": c.seconds,
                        "passes": c.passes,
                        "reads_rows": c.reads_rows,
                        "in_sample": scores(c.in_sample),
                        "out_of_sample": scores(c.out_of_sample),
                        "out_of_sample_status": c.out_of_sample_status,
                        "rbf_mmd2": c.rbf_mmd2,
                        "downstream": c.downstream,
                        "warnings": list(c.warnings),
                    }
                    for c in self.candidates
                ],
            }
        )


def pareto_front(points: Sequence[tuple[float, float]], better: str) -> list[int]:
    """Indices of the points (criterion value, explained variance) that no other point beats:
    j dominates i when its explained variance is at least i's and its criterion at least as good
    (``better`` is "lower" or "higher"), one of them strictly. Sorted by criterion value."""
    sign = 1.0 if better == "lower" else -1.0
    front = []
    for i, (value, variance) in enumerate(points):
        dominated = any(
            sign * other <= sign * value
            and other_variance >= variance
            and (sign * other < sign * value or other_variance > variance)
            for j, (other, other_variance) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: sign * points[i][0])


def check_comparison(
    methods: Methods | None,
    n_components: int | Sequence[int],
    n_features: int,
    *,
    groups: Sequence[Hashable] | None = None,
    center: Center = "group",
    target: str | None = None,
) -> tuple[tuple[MethodPlan, ...], tuple[int, ...]]:
    """The checks that need no rows, so they fail before any pass: methods, options and grids
    (:func:`~fairpca_dist.assessment.evaluation.method_plans` over :data:`COMPARE_GRIDS`), the ranks, the
    centring, and at least two ``groups`` when they are known. Returns the plans and the ranks."""
    if groups is not None and len(groups) < 2:
        raise GroupError(f"the table has {len(groups)} group(s) {list(groups)}: a fairness comparison needs at least 2")
    if center not in CENTERS:
        raise InputError(f"center={center!r} is not one of {CENTERS}")
    ranks = (n_components,) if isinstance(n_components, (int, np.integer)) else tuple(n_components)
    if not ranks:
        raise InputError("n_components gives no rank to compare at")
    ranks = tuple(integer("n_components", r) for r in ranks)
    too_large = [r for r in ranks if not 1 <= r <= n_features]
    if too_large:
        raise InputError(f"n_components {too_large} must be between 1 and n_features={n_features}")
    if target is not None and not isinstance(target, str):
        raise InputError(f"target must be a column name, got {target!r}")
    plans = method_plans(tuple(SOLVERS) if methods is None else methods, COMPARE_GRIDS, rows_allowed=True)
    return plans, tuple(dict.fromkeys(ranks))


def compare_methods(
    cells: CellMoments,
    n_components: int | Sequence[int],
    methods: Methods | None = None,
    *,
    passes: TablePasses | None = None,
    sample: pd.DataFrame | None = None,
    target: str | None = None,
    sensitive: Sequence[str] | str | None = None,
    train_fraction: float = 0.7,
    center: Center = "group",
    standardize: bool = True,
    ddof: int = 0,
    rbf_mmd: bool = True,
    n_random_features: int = 1000,
    random_state: int = 0,
    progress: bool = False,
) -> Comparison:
    """Fit every method of ``methods`` over its grid at every r and score each fit by every
    criterion (module docstring).

    Parameters
    ----------
    cells : CellMoments
        Per-cell moments of the table (``compute_moments(..., cells=HashCells(...))``): one pass.
    n_components : int or sequence of int
        The rank(s) r to compare at.
    methods : str, callable, list of them, mapping method → options, or None
        As in :func:`fairpca_dist.assessment.evaluation.evaluate`: in a mapping a list or tuple of values
        is swept and anything else fixed; options not given keep :data:`COMPARE_GRIDS`.
        None: every registered method.
    passes : TablePasses, optional
        The rows, opened with the same cells (``table_passes(..., cells=...)``), for the
        row-reading methods and the RBF MMD². Without them, row-reading methods are skipped
        (status ``"skipped"``) and the RBF column is not measured.
    sample, target, sensitive
        A row sample with a binary ``target`` column for the downstream classifier
        (:func:`fairpca_dist.assessment.downstream.downstream_parity`); skipped when either is None.
    train_fraction : float
        Share of the cells in the training part of the out-of-sample split (whole cells).
    center, standardize, ddof
        As in :func:`~fairpca_dist.fit_projection`, for every fit; with ``standardize`` each fit
        scales by the standard deviations of its own fitting rows.
    rbf_mmd : bool
        Measure the RBF MMD² (needs ``passes``: 3 passes per r).
    n_random_features : int
        Random Fourier features of the RBF MMD² estimate (its error shrinks as 1/√D).
    random_state : int
        Seeds the split, every solver, σ's sample and the random features.
    progress : bool
        A progress bar, one tick per fit.

    Raises
    ------
    InputError, GroupError
        Bad settings (:func:`check_comparison`), a split that leaves a group without rows.
    """
    started = time.perf_counter()
    if not isinstance(cells, CellMoments):
        raise InputError(f"compare_methods needs per-cell moments (CellMoments), got {type(cells).__name__}")
    plans, ranks = check_comparison(
        methods, n_components, cells.n_features, groups=cells.groups, center=center, target=target
    )
    split = plan_splits(cells.cells, n_splits=1, train_fraction=train_fraction, n_folds=2, random_state=random_state)[0]
    total = cells.total()
    train = cells.union(split.train)
    test = cells.union(split.test, min_group_size=1)
    if standardize:
        total.feature_scale(ddof)  # a column constant on the whole table is refused here
    fit_options: dict[str, Any] = {"center": center, "standardize": standardize, "ddof": ddof}
    used = {"rbf bandwidth samples": 0, "random-feature sums": 0}
    sigmas: dict[int, float] = {}
    candidates: list[Candidate] = []
    downstream: dict[str, Any] | None = None
    n_fits = 2 * len(ranks) * sum(len(plan.grid) for plan in plans)
    with progress_bar("compare", disable=None if progress else True) as bar:
        bar.unit, bar.total = "fit", n_fits
        for r in ranks:
            sigma = None
            if passes is not None and rbf_mmd:
                pca = fit_projection(total, r, method="pca", **fit_options)
                before = passes.n_passes
                sigma = metrics.rbf_bandwidth(
                    total.rescaled(pca.scale), passes.rescaled(pca.scale), pca.components, seed=random_state
                )
                used["rbf bandwidth samples"] += passes.n_passes - before
                sigmas[r] = sigma
            at_rank = [
                _candidate(plan, params, r, total, train, test, split, passes, fit_options, sigma, random_state, bar)
                for plan in plans
                for params in plan.grid
            ]
            at_rank = _with_rbf_mmd(at_rank, total, passes, sigma, n_random_features, random_state, used)
            at_rank, downstream = _with_downstream(at_rank, sample, target, sensitive, random_state, downstream)
            candidates += at_rank
    settings = {
        "n_components": list(ranks),
        "train_fraction": train_fraction,
        "center": center,
        "standardize": standardize,
        "ddof": ddof,
        "random_state": random_state,
        "n_cells": cells.n_cells,
        "n_samples": cells.n_samples,
        "n_features": cells.n_features,
        "feature_names": list(cells.feature_names),
        "group_columns": _group_columns(sensitive, cells.groups),
        "group_counts": [int(n) for n in total.count],
        "rbf_mmd": bool(rbf_mmd and passes is not None),
        "sigma": {str(r): value for r, value in sigmas.items()},
        "n_random_features": n_random_features,
        "target": target,
        "methods": {plan.name: {"fixed": jsonable(plan.fixed), "grid": jsonable(list(plan.grid))} for plan in plans},
    }
    return Comparison(
        settings=settings,
        groups=cells.groups,
        split=split,
        candidates=tuple(candidates),
        passes={**used, "fits": sum(c.passes for c in candidates)},
        seconds=time.perf_counter() - started,
        downstream=downstream,
    )


def _candidate(
    plan: MethodPlan,
    params: dict[str, Any],
    r: int,
    total: GroupMoments,
    train: GroupMoments,
    test: GroupMoments,
    split: Split,
    passes: TablePasses | None,
    fit_options: dict[str, Any],
    sigma: float | None,
    seed: int,
    bar: Any,
) -> Candidate:
    """Fit one grid point on all rows and on the training cells; score both."""
    options = {**plan.fixed, **params}
    reads = isinstance(plan.method, str) and SOLVERS[plan.method].reads_rows(options)
    if reads and plan.method == "mmd" and sigma is not None and "sigma" not in options:
        fit_options = {**fit_options, "sigma": sigma}  # the σ of the RBF MMD² column (module docstring)
    common: dict[str, Any] = {"method": plan.name, "params": params, "n_components": r, "reads_rows": reads}
    if reads and passes is None:
        bar.update(2)
        return Candidate(
            **common,
            status="skipped",
            message="reads the rows, which were not given",
            converged=False,
            seconds=0.0,
            passes=0,
            in_sample=None,
            out_of_sample=None,
            out_of_sample_status="skipped",
        )
    before = passes.n_passes if passes is not None else 0
    caught: list[str] = []
    started = time.perf_counter()
    try:
        model = fit_plan(total, r, plan, params, seed, {**fit_options, "passes": passes if reads else None}, caught)
        in_sample = score_projection(model, total)
    except Exception as error:  # noqa: BLE001 - a failing method is a result of the comparison
        bar.update(2)
        return Candidate(
            **common,
            status="failed",
            message=_failure(error),
            converged=False,
            seconds=time.perf_counter() - started,
            passes=_passes_since(passes, before),
            in_sample=None,
            out_of_sample=None,
            out_of_sample_status="not run",
            warnings=tuple(dict.fromkeys(caught)),
        )
    seconds = time.perf_counter() - started
    bar.update(1)
    try:
        held_out = fit_plan(
            train,
            r,
            plan,
            params,
            seed,
            {**fit_options, "passes": passes.restricted(split.train) if reads and passes is not None else None},
            caught,
        )
        out_of_sample, out_status = score_projection(held_out, train, test), held_out.status
    except Exception as error:  # noqa: BLE001
        out_of_sample, out_status = None, f"failed: {_failure(error)}"
    bar.update(1)
    return Candidate(
        **common,
        status=model.status,
        message=model.message,
        converged=model.converged,
        seconds=seconds,
        passes=_passes_since(passes, before),
        in_sample=in_sample,
        out_of_sample=out_of_sample,
        out_of_sample_status=out_status,
        warnings=tuple(dict.fromkeys(caught)),
        model=model,
    )


def _group_columns(sensitive: Sequence[str] | str | None, groups: Sequence[Hashable]) -> list[str]:
    """The sensitive column(s) the group labels are values of, when they are known and match
    the labels (one value per column); else none, and groups are named by their values."""
    columns = [sensitive] if isinstance(sensitive, str) else list(sensitive or ())
    width = {len(label) if isinstance(label, tuple) else 1 for label in groups}
    return columns if width == {len(columns)} else []


def _failure(error: Exception) -> str:
    kind = "" if isinstance(error, FairPCAError) else f"{type(error).__name__}: "
    return f"{kind}{error}"


def _passes_since(passes: TablePasses | None, before: int) -> int:
    return 0 if passes is None else passes.n_passes - before


def _with_rbf_mmd(
    candidates: list[Candidate],
    total: GroupMoments,
    passes: TablePasses | None,
    sigma: float | None,
    n_random_features: int,
    seed: int,
    used: dict[str, int],
) -> list[Candidate]:
    """The largest RBF MMD² over pairs of every successful in-sample fit, one pass for all."""
    fitted = [(c, c.model) for c in candidates if c.model is not None]
    if sigma is None or passes is None or not fitted:  # sigma is only set with the rows
        return candidates
    scale = fitted[0][1].scale  # every in-sample fit scales by the whole table's deviations
    before = passes.n_passes
    matrices = metrics.mmd2_rbf_many(
        total.rescaled(scale),
        passes.rescaled(scale),
        [model.components for _, model in fitted],
        sigma,
        n_random_features=n_random_features,
        random_state=seed,
    )
    used["random-feature sums"] += passes.n_passes - before
    values = {id(c): float(np.max(m)) for (c, _), m in zip(fitted, matrices, strict=True)}
    return [replace(c, rbf_mmd2=values.get(id(c))) for c in candidates]


def _with_downstream(
    candidates: list[Candidate],
    sample: pd.DataFrame | None,
    target: str | None,
    sensitive: Sequence[str] | str | None,
    seed: int,
    found: dict[str, Any] | None,
) -> tuple[list[Candidate], dict[str, Any] | None]:
    """Accuracy and DP difference of the downstream classifier on every successful fit, and
    what the check found beyond them (the same split at every r: base rate, groups; else
    ``found``, that of an earlier r)."""
    fitted = {c.label: c.model for c in candidates if c.model is not None}
    if sample is None or target is None or not fitted:
        return candidates, found
    features = list(next(iter(fitted.values())).feature_names)
    if sensitive is None:
        sensitive = [column for column in sample.columns if column not in features and column != target]
    scores = downstream_parity(
        sample, features=features, sensitive=sensitive, target=target, models=fitted, random_state=seed
    )
    shared = {key: value for key, value in scores.items() if key != "models"}
    return [
        replace(c, downstream=scores["models"].get(c.label) if c.model is not None else None) for c in candidates
    ], shared


def one_line(message: str, limit: int = MESSAGE_LENGTH) -> str:
    """``message`` on one line (runs of white space become one space), cut at the last word
    boundary within ``limit`` characters, with "…", when longer (mid-word only when one word
    fills more than half the limit)."""
    text = " ".join(message.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    boundary = cut.rfind(" ")
    if boundary > limit // 2:
        cut = cut[:boundary]
    return cut.rstrip(" ,;:") + "…"


def _and(items: Sequence[str]) -> str:
    """``"a, b and c"``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _change(key: str, before: float, after: Sequence[float], own: bool, several: bool) -> str:
    """``"raises the DP difference from 0.04 to 0.09"``, ``"raise the ABDiff (their own
    criterion) from 0.99 to 0.78–0.80"``: PCA's value ``before``, the range of the fits'
    values ``after``; the verb plural when ``several`` fits are the subject."""
    low, high = min(after), max(after)
    verb = ("raise" if high > before else "lower") + ("" if several else "s")
    mark = f" ({'their' if several else 'its'} own criterion)" if own else ""
    values = _g(low) if _g(low) == _g(high) else f"{_g(low)}–{_g(high)}"
    return f"{verb} the {criterion_named(key).title}{mark} from {_g(before)} to {values}"


def _without_repeated_verbs(changes: Sequence[str]) -> list[str]:
    """``["raise the a …", "raise the b …"]`` → ``["raise the a …", "the b …"]``: a verb said
    once for a run of changes in the same direction."""
    kept, previous = [], None
    for change in changes:
        verb, rest = change.split(" ", 1)
        kept.append(rest if verb == previous else change)
        previous = verb
    return kept


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
