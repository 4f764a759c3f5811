"""Fairness report of a fitted projection: ``report.json`` + ``report.md`` + ``report.html`` + PNGs.

The report compares two *arms*, always under the same keys: ``"pca"``, plain PCA refitted at the
model's n_components with the model's centring and scale (the baseline of Samadi et al.'s
figures), and ``"fair"``, the fitted model itself (its method is in ``report["model"]``).

**Each method is judged by its own criterion first.** Every registered method makes fair by its
paper's definition (:meth:`fairpca_dist.solvers.SolverSpec.criterion_of`: samadi, fair-eig and
jevd the largest group loss, the mm family the smallest group variance, dro ABDiff, olfat and
kleindessner the linear MMD², mmd the MMD² of its kernel, pca explained variance). The report's
headline (``report["criterion"]``) names that criterion in words with its direction (lower or
higher is fairer) and gives it for both arms; ``report["comparison"]`` gives every other
criterion of :data:`fairpca_dist.assessment.scoring.CRITERIA` that was measured, side by side; a short
reading says what improved, what it cost in explained variance, and which other fairness
criterion got worse than PCA's. The values are read as the comparison of methods reads them:
the moment-based ones through :meth:`fairpca_dist.assessment.scoring.ProjectionScores.value`, the RBF MMD²
as the largest entry of its matrix, the downstream ones from the classifier's scores.

For both arms it records, from the group moments (:func:`fairpca_dist.assessment.scoring.score_projection`, in sample):

* at the fitted n_components: per-group error err_g, loss loss_g, kept variance and
  explained-variance ratio EVR_g, the largest loss, the smallest group variance, ARE and ABDiff,
  the total explained-variance ratio and the linear-kernel MMD² matrix ‖Vᵀ(μ_a − μ_b)‖² between
  the projected groups;
* the same against r = 1..R, refitting both methods at every r but the model's own, where the
  model itself is scored (the curves behind the figures);
  R is min(n_features, max(10, r)) by default, only the model's r for a method slow to refit
  (:data:`SLOW_TO_REFIT`, or one that reads the rows); the curves end early, said so in words,
  where the method cannot be fitted at a larger r than the model's (kleindessner with many
  groups and few features);
* given the rows (a :class:`~fairpca_dist.engine.datapasses.DataPasses`), the RBF-kernel MMD² matrix of
  both arms at the fitted n_components over every row (:func:`fairpca_dist.assessment.metrics.mmd2_rbf`:
  all pairs in kernel blocks up to :data:`~fairpca_dist.params.RBF_EXACT_MAX_ROWS` rows, random Fourier features
  above), one σ for both arms (the model's own for an ``mmd`` fit, else the median heuristic at
  the PCA projection of at most 2000 rows per group: ``bandwidth_rows``, e.g. the sample ingest
  drew, else a sample of the rows), so the two are comparable; the random-feature sums may come
  from a pass that read the rows for another reason (the write-back: :func:`rbf_plan`); without
  the rows, ``mmd`` with the RBF kernel has its criterion "not measured", said so in words;
* optionally, a downstream check (:func:`~fairpca_dist.assessment.downstream.downstream_parity`): accuracy and
  demographic parity of a logistic regression trained on each arm's projection of a row sample.

Groups are named by their column (``sex=1``; intersectional ``sex=1 & race=2``) when the model
recorded its sensitive column(s) (:attr:`~fairpca_dist.solvers.result.FairProjection.group_columns`),
else by their bare labels; ``group_names`` maps values to names (``sex=female``).

Every metric uses the working moments ``moments.rescaled(model.scale)``: the components act
on standardised rows when the model standardises. :func:`build_report` returns plain JSON
values; :func:`write_report` renders them without computing anything new, so the Markdown, the
HTML and the figures always show the numbers in ``report.json``. The steps that take time draw
a progress bar on a terminal (:func:`fairpca_dist.engine.progress.progress_bar`): the refits of the
curves, one tick per r, and the RBF-kernel MMD², one tick per arm (the passes over the rows draw
their own when the :class:`~fairpca_dist.engine.passes.TablePasses` were opened with ``progress``). No
Prefect here: the flow publishes :func:`report_markdown_summary` and :func:`report_table` as
artifacts.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairpca_dist.assessment import charts, metrics
from fairpca_dist.assessment.downstream import degenerate_mark, downstream_blocks, downstream_parity
from fairpca_dist.assessment.rendering import Block, Heading, Image, Paragraph, Table, html_page, markdown, number
from fairpca_dist.assessment.scoring import (
    CRITERIA,
    WORSE_RTOL,
    Criterion,
    ProjectionScores,
    criterion_named,
    score_projection,
)
from fairpca_dist.engine.datapasses import DataPasses, RFFRequest
from fairpca_dist.engine.kernels import RFFSums
from fairpca_dist.engine.moments import GroupMoments, label_to_json
from fairpca_dist.engine.passes import RFFWork
from fairpca_dist.engine.progress import progress_bar
from fairpca_dist.exceptions import GroupError, InputError, SchemaError, SolverError
from fairpca_dist.io.atomic import atomic_directory, output_lock, staging_folder, write_errors_named
from fairpca_dist.io.jsonable import jsonable
from fairpca_dist.io.storage import Location, StorageOptions, is_url, locate
from fairpca_dist.params import RBF_EXACT_MAX_ROWS, RBF_MMD_CHOICES, RBF_RFF_GROUP_ROWS, RBF_RFF_MAX_ROWS
from fairpca_dist.projection import projected_columns
from fairpca_dist.solvers import SOLVERS, fit_projection
from fairpca_dist.solvers.result import FairProjection
from fairpca_dist.wording import differences, group_display_names

__all__ = [
    "ReportFiles",
    "RBFPlan",
    "RBFSums",
    "build_report",
    "rbf_plan",
    "curve_length",
    "refitted_methods",
    "write_report",
    "report_markdown_summary",
    "report_table",
    "ARMS",
    "FIGURES",
    "REPORT_FILE",
    "SLOW_TO_REFIT",
    "UNCHANGED_RTOL",
]

REPORT_FILE = "report.json"
"""Every number of a report, written last: the mark of a report folder."""

ARMS = ("pca", "fair")
"""The two arms of every comparison: the PCA baseline and the fitted model."""

FIGURES: dict[str, tuple[str, str]] = {
    "error_vs_components": ("group_error", "average reconstruction error"),
    "loss_vs_components": ("group_loss", "loss (error minus the group's best rank-r error)"),
    "explained_variance": ("group_explained_variance_ratio", "explained-variance ratio"),
}
"""Figure file stem -> (per-group quantity in the curves, axis label)."""

UNCHANGED_RTOL = 1e-6
"""A criterion whose values for PCA and the model differ by less than this share (or by less
than 1e-12) reads "unchanged" rather than better or worse."""

SLOW_TO_REFIT = frozenset({"mmd"})
"""Methods whose refits take minutes on a few thousand rows (mmd's optimiser, whatever its
kernel): by default their curves stop at the model's own r (:func:`curve_length`)."""

SHOWN_PAIRS = 10
"""The MMD² sections of the document list every pair of groups up to this many pairs (5 groups),
else this many pairs with the largest values; report.json keeps every pair."""

SHOWN_GROUPS = (30, 15)
"""The document's per-group table lists every group up to the first number, else the second
number of groups with the largest loss under the fitted model; report.json keeps every group."""

_RBF_FEATURES = 1000
_REFIT_SEED = 0
_ROUND_OFF = 1e-12
_COLUMN_TITLES = {"error": "error", "loss": "loss", "explained_variance_ratio": "EVR"}
_DOWNSTREAM_KEYS = {"accuracy": "accuracy", "dp_difference": "demographic_parity_difference"}
"""Criterion key -> its name in the downstream scores of each arm."""
_ROW_KEYS = {"rbf_mmd2", *_DOWNSTREAM_KEYS}
"""The criteria measured on the rows, not from the moments (nor at every r of the curves)."""


@dataclass(frozen=True)
class ReportFiles:
    """Paths of everything :func:`write_report` wrote.

    Attributes
    ----------
    json, markdown, html : Path or str
        ``report.json``, ``report.md`` and ``report.html`` (on an object store: the URLs of
        the committed version's files).
    figures : dict of str to Path or str
        One PNG per key of :data:`FIGURES`.
    """

    json: Path
    markdown: Path
    html: Path
    figures: dict[str, Path]


# ---------------------------------------------------------------------- the report's numbers
def build_report(
    moments: GroupMoments,
    model: FairProjection,
    *,
    max_components: int | None = None,
    sample: pd.DataFrame | None = None,
    target: str | None = None,
    sensitive: Sequence[str] | str | None = None,
    title: str = "Fair PCA report",
    passes: DataPasses | None = None,
    rbf_mmd: str = "auto",
    group_names: Mapping[Any, str] | None = None,
    bandwidth_rows: DataPasses | None = None,
    rbf_sums: RBFSums | None = None,
) -> dict:
    """Every number of the fairness report of ``model``, as plain JSON values.

    Parameters
    ----------
    moments : GroupMoments
        The statistics the model was fitted on (same features and groups).
    model : FairProjection
        The fitted projection (any registered method).
    max_components : int, optional
        R, the largest r of the curves; default min(n_features, max(10, model.n_components)),
        or the model's own r for a method slow to refit (:func:`curve_length`). The curves end
        before R where the method cannot be fitted at some r beyond the model's own (``stopped``).
    sample : DataFrame, optional
        Rows for the downstream check (features, sensitive column(s), target).
    target : str, optional
        Binary target column of ``sample``.
    sensitive : str or sequence of str, optional
        Group column(s) of ``sample``; default: the model's ``group_columns`` when it recorded
        them, else every column that is neither a feature nor the target.
    title : str
        Heading of the rendered report.
    passes : DataPasses, optional
        The rows (in the units of ``moments``), for the RBF-kernel MMD² and for a method that
        reads them at every iteration (``mm-robust``, ``mmd`` with the RBF kernel): its curve
        refits it at every r.
    rbf_mmd : {"auto", "exact", "rff", "none"}
        The RBF-kernel MMD² at the model's n_components (module docstring): ``"auto"`` is
        ``"exact"`` up to :data:`~fairpca_dist.params.RBF_EXACT_MAX_ROWS` rows and ``"rff"`` above, and skipped when
        ``passes`` is None; ``"none"`` skips it.
    group_names : mapping, optional
        Display names of values of the sensitive column(s) (:func:`~fairpca_dist.wording.group_display_names`):
        ``{1: "female"}``, or ``{"sex=1": "female"}`` for one column's value; a group then
        reads ``sex=female``.
    bandwidth_rows : DataPasses, optional
        Rows of ``moments`` (e.g. a sample, :class:`~fairpca_dist.engine.datapasses.ArrayPasses`)
        for the RBF kernel's bandwidth by the median heuristic; default ``passes``.
    rbf_sums : RBFSums, optional
        The random-feature sums of the arms over the rows, computed by a pass that read the
        rows for another reason, with their plan (:func:`rbf_plan` of this model and moments,
        :meth:`RBFPlan.rff_work`): the RBF-kernel MMD² then reads no rows and measures no
        bandwidth (no ``passes`` or ``bandwidth_rows`` are needed for it).

    Returns
    -------
    dict
        ``title``, ``library_version``;
        ``data``: ``n_samples``, ``n_features``, ``feature_names``, ``fingerprint``,
        ``group_columns`` (the model's; empty when unknown), ``group_names`` (as given, keys as
        text), ``groups`` (``label`` as in model.json, display ``name``, ``count``);
        ``model``: ``method``, ``n_components``, ``output_columns``, ``center``, ``options``,
        ``converged``, ``status``, ``message``, ``n_iter``, ``certificate``;
        ``criterion``: the method's own criterion, the report's headline: ``key``, ``title``,
        ``better`` ("lower" or "higher"), ``fairness``, ``meaning``, ``pca`` and ``fair`` (its
        values, None when not measured), ``verdict`` ("better", "worse", "unchanged", or None
        when not measured; :data:`UNCHANGED_RTOL`), ``change`` (the model's gain over PCA as a
        share of PCA's value, positive when better; None when PCA's is 0 or not measured) and,
        when not measured, ``not_measured`` (why);
        ``comparison``: every other criterion of :data:`~fairpca_dist.assessment.scoring.CRITERIA` measured
        for both arms, in that order, as the same fields (downstream rows also ``degenerate``:
        arm -> why its classifier learned nothing, for the arms where it did not);
        ``at_model``: arm -> evaluation at the model's n_components;
        ``curves``: ``n_components`` (1..R, or fewer when stopped), ``stopped`` (None, or
        ``{"at": r, "reason": message}``: the first r beyond the model's own where the method
        refused or failed, so the curves end at r − 1), arm -> one evaluation per r, and
        ``criterion``: ``key`` (the method's own criterion when the moments give it, else the
        largest group loss), ``pca`` and ``fair`` (its value per r);
        ``rbf_mmd``: ``estimator``, ``sigma``, ``sigma_source``, ``n_random_features`` (rff) and
        arm -> k × k matrix, or ``{"skipped": reason}``;
        ``downstream``: :func:`~fairpca_dist.assessment.downstream.downstream_parity` of both arms, or
        ``{"skipped": reason}``.
        An evaluation is :meth:`fairpca_dist.assessment.scoring.ProjectionScores.as_dict`: ``n_components``,
        ``group_error`` (and ``_within``), ``group_variance``, ``group_loss``, ``max_loss``,
        ``min_group_variance``, ``group_explained_variance_ratio``, ``explained_variance_ratio``
        (total), ``are``, ``abdiff`` (and ``_within``), ``mmd2_linear`` (k × k) and ``converged``;
        per-group lists follow ``data.groups``.
        Non-finite numbers are None.

    Raises
    ------
    SchemaError, GroupError
        The model was fitted on other features or groups than ``moments``, or its
        ``group_columns`` do not match its labels (:func:`~fairpca_dist.wording.group_display_names`).
    InputError
        Bad ``max_components``, ``rbf_mmd`` or ``group_names``; a method that is not in
        :data:`~fairpca_dist.solvers.SOLVERS` (the curves refit it), or that reads rows while
        ``passes`` is missing; ``rbf_mmd="exact"`` or ``"rff"`` without ``passes``; bad sample (see
        :func:`~fairpca_dist.assessment.downstream.downstream_parity`).
    """
    from fairpca_dist import __version__

    _check_model_matches(moments, model)
    if rbf_mmd not in RBF_MMD_CHOICES:
        raise InputError(f"rbf_mmd must be one of {list(RBF_MMD_CHOICES)}, got {rbf_mmd!r}")
    if passes is None and rbf_mmd in ("exact", "rff") and rbf_sums is None:
        raise InputError(f"rbf_mmd={rbf_mmd!r} reads the rows: pass passes= (or rbf_mmd='none')")
    names = group_display_names(moments.groups, model.group_columns, group_names)
    _check_refittable(model)
    # a wide table's curves start at the model's r: each r below costs two fits by passes over the rows
    first = model.n_components if moments.is_diagonal else 1
    asked = range(first, curve_length(max_components, moments.n_features, model) + 1)
    own = SOLVERS[model.method].criterion_of(model.options)
    working = moments.rescaled(model.scale)
    arms = {"pca": _pca(moments, model, model.n_components, passes), "fair": model}
    scores = {arm: score_projection(projection, moments) for arm, projection in arms.items()}
    curves, stopped = _curves(moments, model, asked, passes, arms["pca"])
    ranks = asked[: len(curves["fair"])]
    if moments.is_diagonal:
        rbf, downstream = {"skipped": WIDE_SKIPPED}, {"skipped": WIDE_SKIPPED}
    else:
        rbf = _rbf_mmd(working, arms, passes, rbf_mmd, bandwidth_rows, rbf_sums)
        downstream = _downstream(sample, target, sensitive, arms, group_names)
    criterion, comparison = _criteria(own, scores, rbf, downstream)
    curve_key = own if own not in _ROW_KEYS and own != "explained_variance_ratio" else "max_loss"
    report = {
        "title": title,
        "library_version": __version__,
        "data": {
            "n_samples": moments.n_samples,
            "n_features": moments.n_features,
            "feature_names": moments.feature_names,
            "fingerprint": moments.fingerprint(),
            "group_columns": list(model.group_columns),
            "group_names": {str(key): name for key, name in (group_names or {}).items()},
            "groups": [
                {"label": label_to_json(group), "name": name, "count": count}
                for group, name, count in zip(moments.groups, names, moments.count, strict=True)
            ],
        },
        "model": {
            "method": model.method,
            "n_components": model.n_components,
            "output_columns": projected_columns(model),
            "center": model.center,
            "options": model.options,
            "converged": model.converged,
            "status": model.status,
            "message": model.message,
            "n_iter": model.n_iter,
            "certificate": model.certificate,
            "details": model.details,
        },
        "criterion": criterion,
        "comparison": comparison,
        "at_model": {arm: scores[arm].as_dict() for arm in ARMS},
        "curves": {
            "n_components": list(ranks),
            "stopped": stopped,
            **{arm: [point.as_dict() for point in curves[arm]] for arm in ARMS},
            "criterion": {"key": curve_key, **{arm: [point.value(curve_key) for point in curves[arm]] for arm in ARMS}},
        },
        "rbf_mmd": rbf,
        "downstream": downstream,
    }
    return jsonable(report)


def _check_model_matches(moments: GroupMoments, model: FairProjection) -> None:
    if tuple(model.feature_names) != moments.feature_names:
        raise SchemaError(
            "the model was fitted on other features than the moments have: "
            + differences("the model", model.feature_names, "the moments", moments.feature_names)
        )
    if tuple(model.group_labels) != moments.groups:
        raise GroupError(
            "the model was fitted on other groups than the moments have: "
            + differences("the model", model.group_labels, "the moments", moments.groups)
        )


def _curves(
    moments: GroupMoments, model: FairProjection, ranks: range, passes: DataPasses | None, pca: FairProjection
) -> tuple[dict[str, list[ProjectionScores]], dict[str, Any] | None]:
    """PCA and the model's method refitted and scored at every r of ``ranks`` (a bar on a
    terminal: on wide tables, and for a method that reads the rows, these refits are most of
    the report's time), and where they stopped. At the model's own r the model itself is
    scored, not refitted, beside ``pca`` (PCA at that r, fitted once for the report): the
    curve shows the model the report is about, and a method that reads the rows at every
    iteration (whose curves stop there by default) reads none here.

    A refit beyond the model's own r that the method refuses or cannot solve at that r
    (:class:`~fairpca_dist.exceptions.InputError` or :class:`~fairpca_dist.exceptions.SolverError`,
    e.g. kleindessner's rank is at most n_features minus the rank of the group-mean differences)
    ends the curves there: ``stopped`` is ``{"at": r, "reason": message}``, else None. The same
    failure at r up to the model's own is raised: the model was fitted there."""
    curves: dict[str, list[ProjectionScores]] = {"pca": [], "fair": []}
    with progress_bar(f"report: {refitted_methods(model.method)} at r = 1..{len(ranks)}") as bar:
        bar.total, bar.unit = len(ranks), "r"
        for r in ranks:
            try:
                fair = (
                    model if r == model.n_components else _refit(moments, model, r, model.method, model.options, passes)
                )
            except (InputError, SolverError) as error:
                if r <= model.n_components:
                    raise
                return curves, {"at": r, "reason": str(error)}
            at_r = pca if r == model.n_components else _pca(moments, model, r, passes)
            curves["pca"].append(score_projection(at_r, moments))
            curves["fair"].append(score_projection(fair, moments))
            bar.update()
    return curves, None


def refitted_methods(method: str) -> str:
    """What the curves refit, for a progress line: ``"pca and mm"``, or ``"pca"`` once for a pca model."""
    return "pca" if method == "pca" else f"pca and {method}"


def curve_length(max_components: int | None, n_features: int, model: FairProjection) -> int:
    """R, the largest r of the report's curves: ``max_components``, at least the model's own r,
    which the curves must include. By default min(n_features, max(10, r)), and just the model's
    r for a method slow to refit (:data:`SLOW_TO_REFIT`, or one that reads the rows at every
    iteration): its curves would take most of the report's time (minutes on a few thousand rows)."""
    n_components = model.n_components
    if max_components is None:
        return n_components if _slow_to_refit(model.method, model.options) else min(n_features, max(10, n_components))
    if (
        isinstance(max_components, bool)
        or not isinstance(max_components, (int, np.integer))
        or not (n_components <= max_components <= n_features)
    ):
        raise InputError(
            f"max_components={max_components!r} must be an integer between the model's "
            f"n_components={n_components} and n_features={n_features}"
        )
    return int(max_components)


def _slow_to_refit(method: str, options: dict[str, Any]) -> bool:
    """Whether the curves stop at the model's own r by default (:func:`curve_length`)."""
    return method in SLOW_TO_REFIT or (method in SOLVERS and SOLVERS[method].reads_rows(options))


def _check_refittable(model: FairProjection) -> None:
    """The report refits the model's method with its options at every r."""
    if model.method not in SOLVERS:
        raise InputError(
            f"cannot draw the curves of method {model.method!r}: the report refits it at every r, "
            f"which needs a registered method ({sorted(SOLVERS)})"
        )


def _refit(
    moments: GroupMoments,
    model: FairProjection,
    n_components: int,
    method: str,
    options: dict[str, Any],
    passes: DataPasses | None = None,
) -> FairProjection:
    """``method`` at ``n_components`` with the model's centring and scale (and the rows, for a
    method that reads them), seeded: a method with random starts gives the same curves on
    every run of the report."""
    return fit_projection(
        moments,
        n_components,
        method=method,
        center=model.center,
        standardize=model.scale,
        random_state=_REFIT_SEED,
        passes=passes if SOLVERS[method].reads_rows(options) else None,
        **options,
    )


WIDE_SKIPPED = (
    "not measured on a wide table: its moments keep only their diagonal, and a sample of its rows would not fit "
    "in memory"
)
"""Why a wide table's report has no RBF-kernel MMD² and no downstream check."""

WIDE_PCA_OPTIONS = {"constraint": "mean", "tradeoff": 0.0}
"""``fnpm-streaming`` with these options is PCA (Π = I): the wide table's PCA arm."""


def _pca(moments: GroupMoments, model: FairProjection, n_components: int, passes: DataPasses | None) -> FairProjection:
    """PCA at ``n_components`` with the model's centring and scale: from the moments, or, for
    moments that keep only their diagonal (a wide table), by block power iterations over the
    rows (``fnpm-streaming`` with Π = I, :data:`WIDE_PCA_OPTIONS`: one pass per iteration)."""
    if not moments.is_diagonal:
        return _refit(moments, model, n_components, "pca", {})
    if passes is None:
        raise InputError("the report of a wide table reads the rows for its PCA arm: pass passes=")
    streamed = _refit(moments, model, n_components, "fnpm-streaming", WIDE_PCA_OPTIONS, passes)
    return replace(streamed, method="pca", options={}, details={"computed_by": "fnpm-streaming", **WIDE_PCA_OPTIONS})


@dataclass(frozen=True)
class RBFPlan:
    """How a report measures the RBF-kernel MMD² of its arms, decided before any pass over the
    rows (module docstring): the ``estimator`` ("exact" or "rff"), one bandwidth ``sigma`` for
    both arms and where it came from, and for "rff" the (V, random features) request of each
    arm (in :data:`ARMS` order) and the rows' keep ``rates`` per group (None: every row), whose
    sums any pass over the rows may compute (:meth:`rff_work`)."""

    estimator: str
    sigma: float
    sigma_source: str
    requests: list[RFFRequest] | None
    rates: np.ndarray | None = None

    def rff_work(
        self, moments: GroupMoments, model: FairProjection, sensitive: Sequence[str], sample_weight: str | None = None
    ) -> RFFWork:
        """The sums of :attr:`requests` as a pass over the rows computes them
        (:class:`~fairpca_dist.engine.passes.RFFWork`: the projection's write-back, or
        :func:`~fairpca_dist.engine.passes.rff_pass`)."""
        if self.requests is None:
            raise InputError(
                f"the {self.estimator} RBF-kernel MMD² reads every pair of rows: no sums to ride on a pass"
            )
        origin = moments.rescaled(model.scale).global_mean  # the rows in the model's units, about their mean
        return RFFWork(
            tuple(moments.feature_names),
            tuple(self.requests),
            origin,
            model.scale,
            moments.groups,
            tuple(sensitive),
            sample_weight,
            self.rates,
        )


@dataclass(frozen=True)
class RBFSums:
    """Random-feature sums of a report's arms over the rows (:meth:`RBFPlan.rff_work`, computed
    by a pass that read the rows for another reason) and the ``plan`` they follow: given to
    :func:`build_report`, the report uses that plan's bandwidth and features rather than
    measuring them again, so its numbers are those of the sums."""

    plan: RBFPlan
    sums: list[RFFSums]


def rbf_plan(
    moments: GroupMoments,
    model: FairProjection,
    *,
    rbf_mmd: str = "auto",
    bandwidth_rows: DataPasses,
) -> RBFPlan | None:
    """The :class:`RBFPlan` of a report of ``model`` on a table (None for ``rbf_mmd="none"``):
    the PCA arm refitted from ``moments`` at the model's r, σ by the median heuristic at the PCA
    projection of ``bandwidth_rows`` (rows of ``moments``: at most 2000 per group are used)
    unless the model carries its own, the random features drawn, and above
    :data:`~fairpca_dist.params.RBF_RFF_MAX_ROWS` rows the keep rate of each group (that many
    rows in all, at least :data:`~fairpca_dist.params.RBF_RFF_GROUP_ROWS` per group)."""
    if rbf_mmd not in RBF_MMD_CHOICES:
        raise InputError(f"rbf_mmd must be one of {list(RBF_MMD_CHOICES)}, got {rbf_mmd!r}")
    arms = {"pca": _refit(moments, model, model.n_components, "pca", {}), "fair": model}
    plan = _rbf_plan(moments.rescaled(model.scale), arms, rbf_mmd, bandwidth_rows.rescaled(model.scale))
    if plan is None or plan.requests is None or moments.n_samples <= RBF_RFF_MAX_ROWS:
        return plan
    rates = np.minimum(1.0, np.maximum(RBF_RFF_MAX_ROWS / moments.n_samples, RBF_RFF_GROUP_ROWS / moments.count))
    return replace(plan, rates=rates)


def _rbf_plan(
    working: GroupMoments, models: dict[str, FairProjection], choice: str, rows: DataPasses
) -> RBFPlan | None:
    if choice == "none":
        return None
    model = models["fair"]
    estimator = choice if choice != "auto" else "exact" if working.n_samples <= RBF_EXACT_MAX_ROWS else "rff"
    if "sigma" in model.certificate:
        sigma, source = float(model.certificate["sigma"]), f"the {model.method} model's"
    else:
        sigma = metrics.rbf_bandwidth(working, rows, models["pca"].components)
        source = "median heuristic at the PCA projection (at most 2000 rows per group)"
    requests = None
    if estimator == "rff":
        components = [projection.components for projection in models.values()]
        requests = metrics.rff_requests(working, components, sigma, n_random_features=_RBF_FEATURES)
    return RBFPlan(estimator, sigma, source, requests)


def _rbf_mmd(
    working: GroupMoments,
    models: dict[str, FairProjection],
    passes: DataPasses | None,
    choice: str,
    bandwidth_rows: DataPasses | None,
    rbf_sums: RBFSums | None,
) -> dict:
    """The RBF-kernel MMD² of both arms over every row, with one σ (module docstring); a bar on
    a terminal, one tick per arm (both at once for random features): over every pair of rows
    this is the report's longest step on a long table. Random-feature sums computed by another
    pass, with their plan (``rbf_sums``), replace the plan and the pass of their own."""
    if choice == "none":
        return {"skipped": "not asked for (rbf_mmd='none')"}
    if passes is None and rbf_sums is None:
        return {"skipped": "the rows were not given"}
    model = models["fair"]
    rows = None if passes is None else passes.rescaled(model.scale)
    rff_sums: list[RFFSums] | None = None
    if rbf_sums is not None:
        plan: RBFPlan | None = rbf_sums.plan
        rff_sums = rbf_sums.sums
        _check_planned_for(rbf_sums.plan, models)
    else:
        sampled = bandwidth_rows.rescaled(model.scale) if bandwidth_rows is not None else rows
        assert sampled is not None  # passes was given
        plan = _rbf_plan(working, models, choice, sampled)
    assert plan is not None  # choice is not "none"
    how = "every pair of rows" if plan.estimator == "exact" else "random Fourier features"
    with progress_bar(
        f"report: RBF-kernel MMD² of pca and {model.method} over {working.n_samples:,} rows ({how})"
    ) as bar:
        bar.total, bar.unit = (len(models) if plan.estimator == "exact" else 1), "projection"
        result: dict[str, Any] = {"estimator": plan.estimator, "sigma": plan.sigma, "sigma_source": plan.sigma_source}
        if plan.requests is not None:  # both arms from one pass over the rows, or from sums given
            result["n_random_features"] = _RBF_FEATURES
            if rff_sums is None:
                assert rows is not None  # checked above
                rff_sums = rows.rff_sums_many(plan.requests, working.global_mean, gradient=False)
            result["rows_summed"] = [float(w) for w in rff_sums[0].weight]  # fewer than the groups' on a subsample
            matrices = metrics.mmd2_from_rff_sums(working, rff_sums, plan.requests)
            bar.update()
        else:
            if rows is None:
                raise InputError("the exact RBF-kernel MMD² reads every pair of rows: pass passes=")
            matrices = []
            for projection in models.values():
                matrices.append(metrics.mmd2_rbf(working, rows, projection.components, plan.sigma, estimator="exact"))
                bar.update()
    result.update(zip(models, matrices, strict=True))
    return result


def _check_planned_for(plan: RBFPlan, models: dict[str, FairProjection]) -> None:
    """Raise unless ``plan``'s random features were drawn for these arms' components (sums of
    another model's projections would give another model's MMD²)."""
    requests = plan.requests or []
    planned = [components for components, _ in requests]
    if len(planned) != len(models) or not all(
        np.array_equal(v, arm.components) for v, arm in zip(planned, models.values(), strict=False)
    ):
        raise InputError(
            "the random-feature sums given to the report were computed for other projections than "
            "this model's and its PCA arm (rbf_plan of this model and moments)"
        )


def _downstream(
    sample: pd.DataFrame | None,
    target: str | None,
    sensitive: Sequence[str] | str | None,
    models: dict[str, FairProjection],
    group_names: Mapping[Any, str] | None,
) -> dict:
    if sample is None or target is None:
        missing = " and no ".join(name for name, value in (("sample", sample), ("target", target)) if value is None)
        return {"skipped": f"no {missing} given"}
    fair = models["fair"]
    features = list(fair.feature_names)
    if sensitive is None:
        sensitive = list(fair.group_columns) or [
            column for column in sample.columns if column not in features and column != target
        ]
    return downstream_parity(
        sample, features=features, sensitive=sensitive, target=target, models=models, group_names=group_names
    )


# ---------------------------------------------------------------------- criteria, side by side
def _criteria(
    own: str, scores: dict[str, ProjectionScores], rbf: dict, downstream: dict
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The method's own criterion (the headline) and every other criterion measured for both
    arms, in the order of :data:`~fairpca_dist.assessment.scoring.CRITERIA` (``build_report``'s Returns)."""
    rows = {criterion.key: _criterion_row(criterion, scores, rbf, downstream) for criterion in CRITERIA}
    headline = rows.pop(own)
    if headline["verdict"] is None:
        headline["not_measured"] = _not_measured(own, rbf)
    return headline, [row for row in rows.values() if row["verdict"] is not None]


def _criterion_row(
    criterion: Criterion, scores: dict[str, ProjectionScores], rbf: dict, downstream: dict
) -> dict[str, Any]:
    values = {arm: _criterion_value(criterion.key, arm, scores, rbf, downstream) for arm in ARMS}
    row = {
        "key": criterion.key,
        "title": criterion.title,
        "better": criterion.better,
        "fairness": criterion.fairness,
        "meaning": criterion.meaning,
        **values,
        **_verdict(criterion.better, values["pca"], values["fair"]),
    }
    if criterion.key in _DOWNSTREAM_KEYS and "skipped" not in downstream:
        row["degenerate"] = {arm: reason for arm in ARMS if (reason := downstream["models"][arm].get("degenerate"))}
    return row


def _criterion_value(
    key: str, arm: str, scores: dict[str, ProjectionScores], rbf: dict, downstream: dict
) -> float | None:
    """Criterion ``key`` of one arm, read as the comparison of methods reads it
    (:meth:`fairpca_dist.assessment.comparison.Candidate.value`): the moment-based ones from scoring, the
    RBF MMD² as the largest entry of the arm's matrix (the worst pair of groups), the
    downstream ones from the arm's classifier; None when not measured or not finite."""
    if key == "rbf_mmd2":
        value = None if "skipped" in rbf else float(np.max(rbf[arm]))
    elif key in _DOWNSTREAM_KEYS:
        value = None if "skipped" in downstream else downstream["models"][arm][_DOWNSTREAM_KEYS[key]]
    else:
        value = scores[arm].value(key)
    return float(value) if value is not None and np.isfinite(value) else None


def _verdict(better: str, pca: float | None, fair: float | None) -> dict[str, Any]:
    """``verdict`` and ``change`` of the model against PCA (``build_report``'s Returns)."""
    if pca is None or fair is None:
        return {"verdict": None, "change": None}
    if np.isclose(fair, pca, rtol=UNCHANGED_RTOL, atol=1e-12):
        return {"verdict": "unchanged", "change": 0.0}
    gain = pca - fair if better == "lower" else fair - pca
    return {"verdict": "better" if gain > 0 else "worse", "change": gain / abs(pca) if pca != 0 else None}


def _not_measured(key: str, rbf: dict) -> str:
    """Why the method's own criterion ``key`` has no value (the RBF MMD² of an ``mmd`` fit
    with the RBF kernel, skipped; or a value that is not finite)."""
    if key == "rbf_mmd2" and "skipped" in rbf:
        return (
            f"{rbf['skipped']}; it is measured over every row (build_report: passes= and rbf_mmd other than "
            "'none'; `fairpca report`: unless --rbf-mmd none)"
        )
    return "its value is not a finite number"


# ---------------------------------------------------------------------- group names
# ---------------------------------------------------------------------- tables for artifacts
def report_table(report: dict) -> list[dict]:
    """One row per group: name, rows, and error, loss and EVR of PCA and of the fitted model.

    Keys: ``group``, ``n``, then ``<quantity>_<arm>`` for quantity in error, loss,
    explained_variance_ratio and arm in :data:`ARMS` (e.g. ``loss_fair``).
    """
    at_model = report["at_model"]
    return [
        {
            "group": group["name"],
            "n": group["count"],
            **{
                f"{quantity}_{arm}": at_model[arm][f"group_{quantity}"][g]
                for quantity in _COLUMN_TITLES
                for arm in ARMS
            },
        }
        for g, group in enumerate(report["data"]["groups"])
    ]


def report_markdown_summary(report: dict) -> str:
    """The headline of the report as Markdown: model line, the method's own criterion for PCA
    and the method, every criterion side by side, the reading in words (what improved, what it
    cost, what got worse), the per-group table and what its columns mean."""
    return markdown(_summary_blocks(report))


def _arm_labels(report: dict) -> dict[str, str]:
    return {"pca": "PCA", "fair": report["model"]["method"]}


def _summary_blocks(report: dict) -> list[Block]:
    data, model = report["data"], report["model"]
    by = f" by {', '.join(data['group_columns'])}" if data["group_columns"] else ""
    return [
        Heading(1, report["title"]),
        Paragraph(
            f"Method {model['method']} at n_components = {model['n_components']} "
            f"({len(model['output_columns'])} output columns), centre '{model['center']}'; "
            f"{data['n_samples']} rows, {data['n_features']} features, {len(data['groups'])} groups{by}. "
            f"Solver: {model['message']}."
        ),
        Paragraph(_headline(report)),
        Paragraph(
            f"Every criterion at r = {model['n_components']}, in sample (on the rows the model was fitted on), for "
            f"PCA refitted with the model's centring and scale and for {model['method']}; the first is "
            f"{model['method']}'s own:"
        ),
        _criteria_table(report),
        *(Paragraph(sentence) for sentence in _reading(report)),
        *_group_blocks(report),
        Paragraph(
            f"Per group, in the model's units (centre '{model['center']}'): error is the group's average squared "
            "reconstruction error, the mean of ‖x − x̂‖² over its rows, x̂ the row's projection mapped back; loss is "
            "that error minus the smallest error any projection to the same number of dimensions could give the "
            "group (Samadi et al.'s loss: 0 means the projection serves the group as well as the group's own best "
            "projection would); EVR is the share of the group's variance the projection keeps."
        ),
    ]


def _group_blocks(report: dict) -> list[Block]:
    """The per-group table: every group up to ``SHOWN_GROUPS[0]``, else the ``SHOWN_GROUPS[1]``
    groups with the largest loss under the fitted model, largest first, and how many more."""
    labels, rows = _arm_labels(report), report_table(report)
    everyone, limit = SHOWN_GROUPS
    shown, more = _worst(rows, lambda row: _sortable(row["loss_fair"]), limit if len(rows) > everyone else len(rows))
    header = ["group", "n", *(f"{title} ({labels[arm]})" for title in _COLUMN_TITLES.values() for arm in ARMS)]
    return [
        *(
            [Paragraph(f"The {len(shown)} groups with the largest loss under {labels['fair']}, largest first:")]
            if more
            else []
        ),
        Table(header, [[number(value) for value in row.values()] for row in shown]),
        *([Paragraph(f"… and {more} more groups (every group is in report.json).")] if more else []),
    ]


def _direction(better: str, fairness: bool) -> str:
    """``"lower is fairer"``, ``"higher is better"``, … of a criterion row of ``report.json``
    (:attr:`~fairpca_dist.assessment.scoring.Criterion.direction`)."""
    return Criterion("", "", better, fairness).direction


def _change(row: dict) -> str:
    """The model against PCA in words: ``"12 % better"``, ``"worse"`` (PCA's value 0),
    ``"unchanged"``; ``"≈ 100 % better"`` when the model's value is round-off of 0 (``_values``)."""
    if row["verdict"] in (None, "unchanged"):
        return row["verdict"] or "not measured"
    if row["change"] is None:
        return row["verdict"]
    percent = "≈ 100" if _values(row)["fair"] == "≈ 0" else _percent(abs(row["change"]))
    return f"{percent} % {row['verdict']}"


def _percent(share: float) -> str:
    """A share in percent, 3 significant digits (never an exponent): 232, 99.8, 6.7, 0.13; as
    many more as it takes not to read 100 when it is not exactly 100 (99.98, 100.4)."""
    value = 100 * share
    text, digits = (f"{value:.0f}" if value >= 100 else f"{value:.3g}"), 3
    while text == "100" and value != 100:
        digits += 1
        text = f"{value:.{digits}g}"
    return text


def _values(row: dict) -> dict[str, str]:
    """Both arms' values of a criterion as text; a value below 1e-12 of the larger one (round-off
    of an exact 0, e.g. a linear MMD² the method sets to 0) reads "≈ 0"."""
    scale = max((abs(row[arm]) for arm in ARMS if row[arm] is not None), default=0.0)
    return {
        arm: "≈ 0"
        if row[arm] is not None and row[arm] != 0 and abs(row[arm]) <= _ROUND_OFF * scale
        else number(row[arm])
        for arm in ARMS
    }


def _headline(report: dict) -> str:
    """The method's own criterion, in words with its direction, for PCA and the method."""
    own, method = report["criterion"], report["model"]["method"]
    sentence = (
        f"{method} is judged by its own criterion: {own['title']}, {own['meaning']}; "
        f"{_direction(own['better'], own['fairness'])}. "
    )
    if own["verdict"] is None:
        return sentence + f"Not measured: {own['not_measured']}."
    shown = _values(own)
    return sentence + f"PCA {shown['pca']}, {method} {shown['fair']} ({_change(own)})."


def _criteria_table(report: dict) -> Table:
    """The own criterion, then every other one measured: direction, both values, the change."""
    method, own = report["model"]["method"], report["criterion"]
    rows = [[f"{own['title']} ({method}'s own)", *_criterion_cells(own, report)]]
    rows += [[row["title"], *_criterion_cells(row, report)] for row in report["comparison"]]
    return Table(["criterion", "better", "PCA", method, f"{method} against PCA"], rows)


def _criterion_cells(row: dict, report: dict) -> list[str]:
    labels = _arm_labels(report)
    flagged = [
        f"{labels[arm]}'s classifier {degenerate_mark(reason)}" for arm, reason in row.get("degenerate", {}).items()
    ]
    note = f"not comparable: {', '.join(flagged)}" if flagged else _change(row)
    shown = _values(row)
    return [f"{criterion_named(row['key']).arrow} {row['better']}", shown["pca"], shown["fair"], note]


def _reading(report: dict) -> list[str]:
    """What improved (the own criterion), what it cost (explained variance), and which other
    fairness criterion got worse than PCA's by more than compare's tolerance
    (:meth:`~fairpca_dist.assessment.scoring.Criterion.worse`), in plain words (as compare's reading)."""
    own, method = report["criterion"], report["model"]["method"]
    rows = {row["key"]: row for row in report["comparison"]}
    shown = _values(own)
    if own["verdict"] is None:
        lines = [
            f"Its own criterion, {own['title']}, was not measured, so this report cannot say whether {method} "
            "made the groups fairer by it."
        ]
    elif own["verdict"] == "unchanged":
        lines = [
            f"Its own criterion did not change: {own['title']} is {shown['pca']} for PCA and "
            f"{shown['fair']} for {method}."
        ]
    else:
        what = "What improved" if own["verdict"] == "better" else "It did not improve its own criterion"
        lines = [f"{what}: {own['title']} from {shown['pca']} (PCA) to {shown['fair']} ({method}), {_change(own)}."]
    if own["key"] != "explained_variance_ratio":
        lines.append(_cost(rows["explained_variance_ratio"], report))
    worse = [
        row
        for row in report["comparison"]
        if row["fairness"]
        and row["verdict"] == "worse"
        and not row.get("degenerate")
        and criterion_named(row["key"]).worse(row["fair"], row["pca"])
    ]
    if worse:
        lines.append("What got worse: " + "; ".join(_worse(row, report) for row in worse) + ".")
    else:
        lines.append(f"No other fairness criterion got worse than PCA's by more than {WORSE_RTOL:.0%}.")
    return lines


def _worse(row: dict, report: dict) -> str:
    """One criterion that got worse, in words; a DP difference built from groups with few test
    rows says how few."""
    shown, method = _values(row), report["model"]["method"]
    small = report["downstream"]["groups_too_small"] if row["key"] == "dp_difference" else None
    caveat = f" (from groups with as few as {min(small.values())} test rows)" if small else ""
    return (
        f"{row['title']} ({_direction(row['better'], row['fairness'])}) from {shown['pca']} (PCA) to "
        f"{shown['fair']} ({method}), {_change(row)}{caveat}"
    )


def _cost(variance: dict, report: dict) -> str:
    """What the model cost in explained variance next to PCA, in words."""
    method, model = report["model"]["method"], report["model"]
    before, after = number(variance["pca"]), number(variance["fair"])
    if variance["verdict"] == "unchanged":
        return f"It cost no explained variance ({before} for both)."
    if variance["verdict"] == "worse":
        less = "" if variance["change"] is None else f", {_percent(-variance['change'])} % less"
        return f"What it cost: explained variance from {before} (PCA) to {after} ({method}){less}."
    wider = len(model["output_columns"]) > model["n_components"]
    return f"Explained variance rose from {before} (PCA) to {after} ({method})" + (
        f": {method} returns {len(model['output_columns'])} columns, PCA {model['n_components']}." if wider else "."
    )


def _document_blocks(report: dict) -> list[Block]:
    model, curves = report["model"], report["curves"]
    labels = _arm_labels(report)
    criterion = criterion_named(curves["criterion"]["key"])
    certificate = ", ".join(f"{name} {number(value)}" for name, value in sorted(model["certificate"].items()))
    return [
        *_summary_blocks(report),
        Heading(2, "Model"),
        Paragraph(
            f"Options {json.dumps(model['options'], sort_keys=True)}; {model['n_iter']} iteration(s); "
            f"status {model['status']}; certificate: {certificate or 'none'}. "
            f"Output columns: {', '.join(model['output_columns'])}."
        ),
        Heading(2, "Data"),
        Paragraph(
            f"Features: {', '.join(report['data']['feature_names'])}. "
            f"Statistics fingerprint {report['data']['fingerprint']}; library version {report['library_version']}."
        ),
        Heading(2, "Linear-kernel MMD² between the projected groups"),
        Paragraph(
            "MMD²(a, b) = ‖Vᵀ(μ_a − μ_b)‖², in the model's (scaled) units: 0 means both groups "
            "project to the same mean."
        ),
        *_mmd_blocks(report, labels, lambda arm: report["at_model"][arm]["mmd2_linear"]),
        Heading(2, "RBF-kernel MMD² between the projected groups"),
        *_rbf_mmd_blocks(report, labels),
        Heading(2, "Against the number of components"),
        Paragraph(
            f"Both methods refitted at {_ranks_text(curves['n_components'])}: {criterion.title} "
            f"({_direction(criterion.better, criterion.fairness)}) and the explained-variance ratio (EVR) of "
            f"all rows.{_curves_end(report)}"
        ),
        Table(
            [
                "r",
                *(f"{criterion.title} ({labels[arm]})" for arm in ARMS),
                *(f"EVR ({labels[arm]})" for arm in ARMS),
                f"{labels['fair']} converged",
            ],
            [
                [
                    str(r),
                    *(number(curves["criterion"][arm][i]) for arm in ARMS),
                    *(number(curves[arm][i]["explained_variance_ratio"]) for arm in ARMS),
                    str(curves["fair"][i]["converged"]),
                ]
                for i, r in enumerate(curves["n_components"])
            ],
        ),
        *(
            Image(name, f"{label} per group against r: PCA and {labels['fair']}")
            for name, (_, label) in FIGURES.items()
        ),
        Heading(2, "Downstream classifier"),
        *downstream_blocks(report["downstream"], labels),
    ]


def _ranks_text(ranks: list[int]) -> str:
    """``"every r = 1..10"``, or ``"r = 3"`` for one."""
    return f"r = {ranks[0]}" if len(ranks) == 1 else f"every r = {ranks[0]}..{ranks[-1]}"


def _curves_end(report: dict) -> str:
    """Why the curves end where they do, when that is not the r asked for: the method failed at
    the next r, or it is slow to refit and stopped at the model's r by default."""
    curves, method = report["curves"], report["model"]["method"]
    stopped, last = curves["stopped"], curves["n_components"][-1]
    if curves["n_components"][0] > 1:
        return (
            f" They start at the model's r = {curves['n_components'][0]}: on a wide table every r costs two fits "
            "by passes over the rows; ask for more with max_components (`fairpca report --max-components`)."
        )
    if stopped:
        return (
            f" The curves end at r = {last}: {method} could not be fitted at r = {stopped['at']}: {stopped['reason']}."
        )
    if _slow_to_refit(method, report["model"]["options"]) and last == report["model"]["n_components"]:
        return (
            f" They stop at the model's r = {last}: {method} is slow to refit (it can take minutes per r on a "
            "few thousand rows), so by default the report does not refit it beyond its own r; ask for more with "
            "max_components (`fairpca report --max-components`)."
        )
    return ""


def _mmd_blocks(report: dict, labels: dict[str, str], matrix: Callable[[str], list[list[float]]]) -> list[Block]:
    """The MMD² of every pair of groups for both arms; beyond :data:`SHOWN_PAIRS` pairs, only
    the pairs with the largest value in either arm, largest first, and how many more there are."""
    names = [group["name"] for group in report["data"]["groups"]]
    pairs = [(a, b) for a in range(len(names)) for b in range(a + 1, len(names))]
    shown, more = _worst(pairs, lambda pair: max(_sortable(matrix(arm)[pair[0]][pair[1]]) for arm in ARMS), SHOWN_PAIRS)
    return [
        *(
            [Paragraph(f"The {len(shown)} pairs of groups with the largest MMD² under either arm, largest first:")]
            if more
            else []
        ),
        Table(
            ["group a", "group b", *(f"MMD² ({labels[arm]})" for arm in ARMS)],
            [[names[a], names[b], *(number(matrix(arm)[a][b]) for arm in ARMS)] for a, b in shown],
        ),
        *([Paragraph(f"… and {more} more pairs (every pair is in report.json).")] if more else []),
    ]


def _worst(items: list, key: Callable[[Any], float], limit: int) -> tuple[list, int]:
    """All ``items`` in their order when there are at most ``limit``, else the ``limit`` with
    the largest ``key``, largest first; and how many were left out."""
    if len(items) <= limit:
        return items, 0
    return sorted(items, key=key, reverse=True)[:limit], len(items) - limit


def _sortable(value: float | None) -> float:
    """A value to sort by, None (not finite) last."""
    return -np.inf if value is None else value


def _rbf_mmd_blocks(report: dict, labels: dict[str, str]) -> list[Block]:
    rbf = report["rbf_mmd"]
    if "skipped" in rbf:
        return [Paragraph(f"Skipped: {rbf['skipped']}.")]
    how = (
        "every pair of rows, in kernel blocks"
        if rbf["estimator"] == "exact"
        else f"{rbf['n_random_features']} random Fourier features (an estimate; its error shrinks as 1/√D)"
    )
    return [
        Paragraph(
            f"Biased MMD² of the projected groups under k(u, v) = exp(−‖u − v‖² / (2σ²)), over every "
            f"row: {how}; σ = {number(rbf['sigma'])} ({rbf['sigma_source']}), the same for both arms. "
            "0 means the projected groups have the same distribution."
        ),
        *_mmd_blocks(report, labels, lambda arm: rbf[arm]),
    ]


def _plot(report: dict, quantity: str, ylabel: str, path: Location) -> None:
    """Per-group ``quantity`` against r for both arms (:func:`fairpca_dist.assessment.charts.group_curves`)."""
    curves, labels = report["curves"], _arm_labels(report)
    arms = {
        labels[arm]: np.array([point[quantity] for point in curves[arm]], dtype=np.float64)  # None -> NaN
        for arm in ARMS
    }
    charts.group_curves(
        path,
        curves["n_components"],
        arms,
        [group["name"] for group in report["data"]["groups"]],
        ylabel=ylabel,
        title=report["title"],
        worse="lower" if quantity == "group_explained_variance_ratio" else "higher",
    )


# ---------------------------------------------------------------------- writing
def write_report(
    report: dict,
    out_dir: str | os.PathLike[str],
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
    storage_options: StorageOptions | None = None,
) -> ReportFiles:
    """Write ``report.json``, ``report.md``, ``report.html`` and the PNGs of :data:`FIGURES`.

    ``report.json`` has sorted keys, indent 2, and null for non-finite numbers. ``report.md``
    and the self-contained ``report.html`` show the same content (the HTML with the figures
    inlined). Everything is first written to a hidden staging folder next to ``out_dir`` and
    then moved into ``out_dir`` file by file (``report.json`` last), so an error leaves the
    previous report, if any, untouched; other files in ``out_dir`` are kept. The same report
    gives byte-identical JSON and Markdown. ``out_dir`` is locked while it is written
    (:func:`~fairpca_dist.io.atomic.output_lock`); a full or read-only disk raises
    :class:`~fairpca_dist.exceptions.WriteError` naming it. On an object store (a URL, opened
    with ``storage_options``) the report is a new version of ``out_dir``, committed whole
    (:func:`~fairpca_dist.io.atomic.atomic_directory`).

    Parameters
    ----------
    report : dict
        From :func:`build_report`.
    out_dir : str or os.PathLike
        Folder of the report; created if needed. An existing file there, or a folder with
        other files but no ``report.json`` (not a report folder), is refused.
    inputs : iterable of paths
        What the report was built from (the model's folder, the table): ``out_dir`` must not
        overlap any of them (:class:`~fairpca_dist.exceptions.OutputPathError`, nothing written).

    Returns
    -------
    ReportFiles
    """
    if is_url(out_dir):
        with atomic_directory(out_dir, inputs=inputs, marker=REPORT_FILE, storage_options=storage_options) as folder:
            _render(jsonable(report), folder)
        return _report_files(folder.url, str)
    # locked: two reports into one folder would mix their files; a folder without a report is not ours
    with output_lock(out_dir, inputs=inputs, marker=REPORT_FILE) as folder, write_errors_named(out_dir):
        staging = staging_folder(Path(folder.path))
        try:
            names = _render(jsonable(report), locate(staging))
            Path(folder.path).mkdir(exist_ok=True)
            for name in names:
                os.replace(staging / name, Path(folder.path) / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return _report_files(out_dir, Path)


def _report_files(folder: str | os.PathLike[str], kind: Callable[[str], Any]) -> ReportFiles:
    base = os.fspath(folder).rstrip("/")
    return ReportFiles(
        json=kind(f"{base}/{REPORT_FILE}"),
        markdown=kind(f"{base}/report.md"),
        html=kind(f"{base}/report.html"),
        figures={name: kind(f"{base}/{name}.png") for name in FIGURES},
    )


def _render(report: dict, folder: Location) -> list[str]:
    """Write every file of the report into ``folder``; returns their names, report.json last."""
    images = {}
    for name, (quantity, ylabel) in FIGURES.items():
        _plot(report, quantity, ylabel, folder / f"{name}.png")
        images[name] = (folder / f"{name}.png").read_bytes()
    blocks = _document_blocks(report)
    (folder / "report.md").write_text(markdown(blocks), encoding="utf-8")
    (folder / "report.html").write_text(html_page(blocks, images, report["title"]), encoding="utf-8")
    (folder / REPORT_FILE).write_text(
        json.dumps(report, sort_keys=True, indent=2, allow_nan=False, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return [*(f"{name}.png" for name in FIGURES), "report.md", "report.html", REPORT_FILE]
