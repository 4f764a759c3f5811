"""One projection scored by every moment-based criterion of the papers, on one set of rows.

The one home of scoring: the report (in sample), the evaluation protocol (each fold, split and
grid point, out of sample) and the comparison of methods all call :func:`score_projection`.
For a model with components V fitted on the rows of ``fitted_on`` and scored on the rows of
``rows`` (both :class:`~fairpca_dist.engine.moments.GroupMoments`, in the model's units ``scale``):

* ``group_error`` L_g = E_g ‖(I − P)(x − c_g)‖² about the centres c_g of ``model.center``
  taken from the **fitting** rows (a model is scored as it would be used; Vu et al. §5), and
  ``group_error_within`` about the scored rows' own group means;
* ``are`` = Σ_g p̂_g L_g (p̂_g the group's share of the scored weight) and ``abdiff`` =
  max_g L_g − min_g L_g (Vu et al.'s ARE and ABDiff);
* ``group_variance`` = E_g ‖P(x − c_g)‖², the variance kept per group, whose minimum is Babu
  et al.'s max-min criterion;
* ``group_loss`` = err_g − err_g*(r) (Samadi et al.'s loss, about the scored rows' centres) and
  ``group_explained_variance_ratio``;
* ``explained_variance_ratio``: the share of the variance of all scored rows kept;
* ``mmd2_linear``: ‖Vᵀ(μ_a − μ_b)‖² between the projected groups (k × k).

:data:`CRITERIA` names every criterion a person reads in a report or a comparison, with its
direction; each registered method's own criterion is one of them
(:attr:`fairpca_dist.solvers.SolverSpec.criterion`).

Rank-relaxed maps (Samadi et al.'s r + k − 1 columns) use ⟨·, 2P − P²⟩ throughout, as
:mod:`fairpca_dist.assessment.metrics` does. The RBF-kernel MMD² needs the rows:
:func:`fairpca_dist.assessment.metrics.mmd2_rbf`. No dask here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fairpca_dist.assessment import metrics
from fairpca_dist.engine.moments import GroupMoments
from fairpca_dist.exceptions import InputError
from fairpca_dist.solvers.result import FairProjection
from fairpca_dist.wording import differences

__all__ = [
    "CRITERIA",
    "WORSE_ATOL",
    "WORSE_RTOL",
    "Criterion",
    "ProjectionScores",
    "criterion_named",
    "own_criterion",
    "score_projection",
]


WORSE_RTOL, WORSE_ATOL = 0.01, 1e-6
"""A projection worsens a criterion next to another (PCA) when it is worse by more than
WORSE_RTOL of the larger of the two values plus WORSE_ATOL (:meth:`Criterion.worse`): what the
report's and the comparison's plain words call "worse"."""


@dataclass(frozen=True)
class Criterion:
    """A criterion a person compares projections by.

    Attributes
    ----------
    key : str
        Its name in scores, tables and JSON (``max_loss``, ``rbf_mmd2``, …).
    title : str
        Its short title in tables.
    better : {"lower", "higher"}
        Which way is better (fairer, for a fairness criterion).
    fairness : bool
        Whether it measures fairness (the Pareto plots put each against explained variance).
    out_of_sample : bool
        Whether a held-out value exists (the row-based criteria are measured in sample only).
    meaning : str
        What it measures, in plain words.
    """

    key: str
    title: str
    better: str
    fairness: bool
    out_of_sample: bool = True
    meaning: str = ""

    @property
    def arrow(self) -> str:
        """↓ or ↑: the direction of better values."""
        return "↓" if self.better == "lower" else "↑"

    @property
    def direction(self) -> str:
        """``"lower is fairer"`` for a fairness criterion, ``"higher is better"`` for another."""
        return f"{self.better} is {'fairer' if self.fairness else 'better'}"

    def worse(self, value: float, reference: float, *, rtol: float | None = None, atol: float | None = None) -> bool:
        """Whether ``value`` is worse than ``reference`` by more than ``rtol`` (default
        :data:`WORSE_RTOL`) of the larger of the two in magnitude plus ``atol`` (default
        :data:`WORSE_ATOL`): smaller differences are solver tolerance or sampling noise, not a
        trade-off a person should be told about."""
        rtol = WORSE_RTOL if rtol is None else rtol
        atol = WORSE_ATOL if atol is None else atol
        sign = 1.0 if self.better == "lower" else -1.0
        return sign * (value - reference) > rtol * max(abs(value), abs(reference)) + atol


CRITERIA: tuple[Criterion, ...] = (
    Criterion(
        "explained_variance_ratio",
        "explained variance",
        "higher",
        False,
        meaning="the share of the variance of all rows the projection keeps",
    ),
    Criterion(
        "max_loss",
        "max group loss",
        "lower",
        True,
        meaning="the largest over the groups of a group's reconstruction error minus the smallest error "
        "any r-dimensional projection gives that group (Samadi et al.'s loss)",
    ),
    Criterion(
        "min_group_variance",
        "min group variance",
        "higher",
        True,
        meaning="the smallest variance the projection keeps of any group (Babu et al.'s max-min criterion)",
    ),
    Criterion(
        "abdiff",
        "ABDiff",
        "lower",
        True,
        meaning="the largest minus the smallest group reconstruction error (Vu et al.)",
    ),
    Criterion("are", "ARE", "lower", False, meaning="the average reconstruction error over all rows (Vu et al.)"),
    Criterion(
        "mmd2_linear",
        "linear MMD²",
        "lower",
        True,
        meaning="the largest squared distance between the projected group means, ‖Vᵀ(μ_a − μ_b)‖²",
    ),
    Criterion(
        "rbf_mmd2",
        "RBF MMD²",
        "lower",
        True,
        out_of_sample=False,
        meaning="the largest RBF-kernel MMD² between the projected groups' distributions",
    ),
    Criterion(
        "accuracy",
        "downstream accuracy",
        "higher",
        False,
        out_of_sample=False,
        meaning="the accuracy of a classifier trained on the projection",
    ),
    Criterion(
        "dp_difference",
        "DP difference",
        "lower",
        True,
        out_of_sample=False,
        meaning="the largest minus the smallest per-group positive rate of that classifier",
    ),
)
_CRITERIA_BY_KEY = {criterion.key: criterion for criterion in CRITERIA}


def criterion_named(key: str) -> Criterion:
    """The criterion of :data:`CRITERIA` with this key."""
    try:
        return _CRITERIA_BY_KEY[key]
    except KeyError:
        raise InputError(f"unknown criterion {key!r}; known: {sorted(_CRITERIA_BY_KEY)}") from None


@dataclass(frozen=True)
class ProjectionScores:
    """Every moment-based criterion of one projection on one set of rows (module docstring).
    Per-group arrays follow the groups of the moments."""

    n_components: int
    group_error: np.ndarray
    group_error_within: np.ndarray
    group_variance: np.ndarray
    group_loss: np.ndarray
    group_explained_variance_ratio: np.ndarray
    explained_variance_ratio: float
    are: float
    mmd2_linear: np.ndarray
    converged: bool

    @property
    def abdiff(self) -> float:
        """max_g L_g − min_g L_g."""
        return float(self.group_error.max() - self.group_error.min())

    @property
    def abdiff_within(self) -> float:
        """ABDiff of the errors about each group's own mean (the DRO authors' code's ABDiff)."""
        return float(self.group_error_within.max() - self.group_error_within.min())

    @property
    def criterion(self) -> float:
        """ABDiff + ARE, what the evaluation protocol's cross-validation minimises."""
        return self.abdiff + self.are

    @property
    def max_loss(self) -> float:
        return float(self.group_loss.max())

    @property
    def min_group_variance(self) -> float:
        return float(self.group_variance.min())

    def value(self, key: str) -> float:
        """The moment-based criterion ``key`` of :data:`CRITERIA` as one number (``mmd2_linear``:
        its largest entry, the worst pair of groups)."""
        if key == "mmd2_linear":
            return float(np.max(self.mmd2_linear))
        return float(getattr(self, key))

    def as_dict(self) -> dict[str, Any]:
        """Every field and derived criterion, as plain values (arrays become lists)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        derived = {name: getattr(self, name) for name in ("abdiff", "abdiff_within", "max_loss", "min_group_variance")}
        return {
            name: value.tolist() if isinstance(value, np.ndarray) else value
            for name, value in {**fields, **derived}.items()
        }


def score_projection(
    model: FairProjection, fitted_on: GroupMoments, rows: GroupMoments | None = None
) -> ProjectionScores:
    """Scores of ``model`` (fitted on the rows of ``fitted_on``) on the rows of ``rows``
    (default: the fitting rows, in sample), in the model's units, about the centres of
    ``model.center`` computed on ``fitted_on`` (module docstring)."""
    rows = fitted_on if rows is None else rows
    if rows.feature_names != fitted_on.feature_names:
        raise InputError(
            "the scored rows have other features than the fit: "
            + differences("the fit", fitted_on.feature_names, "the scored rows", rows.feature_names)
        )
    if rows.groups != fitted_on.groups:
        raise InputError(
            "the scored rows have other groups than the fit: "
            + differences("the fit", fitted_on.groups, "the scored rows", rows.groups)
        )
    scored = rows.rescaled(model.scale)
    if scored.is_diagonal:
        return _wide_scores(model, scored, rows is fitted_on)
    centres = fitted_on.rescaled(model.scale).centers(model.center)
    components, center = model.components, model.center
    errors = metrics.group_errors_about(scored, components, centres)
    share = scored.weight / scored.weight.sum()
    return ProjectionScores(
        n_components=model.n_components,
        group_error=errors,
        group_error_within=metrics.group_errors(scored, components, center="group"),
        group_variance=metrics.group_variance_about(scored, components, centres),
        group_loss=metrics.group_losses(scored, components, n_components=model.n_components, center=center),
        group_explained_variance_ratio=metrics.group_explained_variance_ratio(scored, components, center=center),
        explained_variance_ratio=float(metrics.explained_variance_ratio(scored, components).sum()),
        are=float(share @ errors),
        mmd2_linear=metrics.mmd2_linear(scored, components),
        converged=model.converged,
    )


def _wide_scores(model: FairProjection, scored: GroupMoments, in_sample: bool) -> ProjectionScores:
    """In-sample scores of a model fitted on moments that keep only their diagonal (a wide
    table): the errors and losses the fit computed from the rows give the variance kept about
    the model's centres, a_g = tr Σ_g − err_g; about the group's own mean it is
    a_g − ‖Vᵀd_g‖² (d_g = μ_g − c_g), and over all rows Σ_g p̂_g (a_g − ‖Vᵀd_g‖² + ‖Vᵀ(μ_g − μ)‖²);
    the traces come from the diagonals, the mean terms from the means (k × p numbers)."""
    if not in_sample:
        raise InputError(
            "a wide table's moments keep only their diagonal: a model is scored on the rows it was fitted on only"
        )
    components = model.components
    share = scored.weight / scored.weight.sum()
    traces = metrics.group_traces(scored, center=model.center)
    kept = traces - model.group_error
    kept_within = kept - ((metrics.center_offsets(scored, model.center) @ components) ** 2).sum(axis=1)
    traces_within = metrics.group_traces(scored, center="group")
    gaps = scored.mean_gaps()
    total_kept = share @ (kept_within + ((gaps @ components) ** 2).sum(axis=1))
    total = share @ (traces_within + (gaps**2).sum(axis=1))
    return ProjectionScores(
        n_components=model.n_components,
        group_error=model.group_error,
        group_error_within=traces_within - kept_within,
        group_variance=kept,
        group_loss=model.group_loss,
        group_explained_variance_ratio=kept / traces,
        explained_variance_ratio=float(total_kept / total),
        are=float(share @ model.group_error),
        mmd2_linear=metrics.mmd2_linear(scored, components),
        converged=model.converged,
    )


def own_criterion(model: FairProjection, scores: ProjectionScores) -> tuple[Criterion, float | None]:
    """The criterion ``model``'s method makes fair (its paper's definition,
    :meth:`fairpca_dist.solvers.SolverSpec.criterion_of`) and its value in ``scores`` (the
    model's :func:`score_projection`); None for one that is measured on the rows (the RBF MMD²:
    :func:`fairpca_dist.assessment.report.build_report` measures it over every row)."""
    from fairpca_dist.solvers import SOLVERS  # the registry imports the solvers; scoring needs only their names

    criterion = criterion_named(SOLVERS[model.method].criterion_of(model.options))
    if criterion.key in ("rbf_mmd2", "accuracy", "dp_difference"):
        return criterion, None
    return criterion, scores.value(criterion.key)
