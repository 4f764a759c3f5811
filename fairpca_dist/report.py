"""Fairness report of a fitted projection: ``report.json`` + ``report.md`` + ``report.html`` + PNGs.

The report compares two *arms*, always under the same keys: ``"pca"``, plain PCA refitted at the
model's n_components with the model's centring and scale (the baseline of Samadi et al.'s
figures), and ``"fair"``, the fitted model itself (its method is in ``report["model"]``). For
both it records, from the group moments (:func:`fairpca_dist.scoring.score_projection`, in sample):

* at the fitted n_components: per-group error err_g, loss loss_g, kept variance and
  explained-variance ratio EVR_g, the largest loss, the smallest group variance, ARE and ABDiff,
  the total explained-variance ratio and the linear-kernel MMD² matrix ‖Vᵀ(μ_a − μ_b)‖² between
  the projected groups;
* the same against r = 1..R, refitting both methods at every r (the curves behind the figures);
* given the rows (a :class:`~fairpca_dist.datapasses.DataPasses`), the RBF-kernel MMD² matrix of
  both arms at the fitted n_components over every row (:func:`fairpca_dist.metrics.mmd2_rbf`:
  all pairs in kernel blocks up to :data:`~fairpca_dist.params.RBF_EXACT_MAX_ROWS` rows, random Fourier features
  above), one σ for both arms (the model's own for an ``mmd`` fit, else the median heuristic at
  the PCA projection), so the two are comparable;
* optionally, a downstream check (:func:`~fairpca_dist.downstream.downstream_parity`): accuracy and demographic parity
  of a logistic regression trained on each arm's projection of a row sample.

Every metric uses the working moments ``moments.rescaled(model.scale)``: the components act
on standardised rows when the model standardises. :func:`build_report` returns plain JSON
values; :func:`write_report` renders them without computing anything new, so the Markdown, the
HTML and the figures always show the numbers in ``report.json``. No Prefect here: the flow
publishes :func:`report_markdown_summary` and :func:`report_table` as artifacts.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairpca_dist import charts, metrics
from fairpca_dist.atomic import atomic_directory, output_lock, staging_folder, write_errors_named
from fairpca_dist.storage import Location, StorageOptions, is_url, locate
from fairpca_dist.exceptions import GroupError, InputError, SchemaError
from fairpca_dist.jsonable import jsonable
from fairpca_dist.moments import GroupMoments, label_to_json
from fairpca_dist.params import RBF_EXACT_MAX_ROWS, RBF_MMD_CHOICES
from fairpca_dist.progress import progress_bar
from fairpca_dist.rendering import Block, Heading, Image, Paragraph, Table, html_page, markdown, number
from fairpca_dist.scoring import score_projection
from fairpca_dist.projection import projected_columns
from fairpca_dist.datapasses import DataPasses
from fairpca_dist.downstream import downstream_blocks, downstream_parity
from fairpca_dist.solvers import SOLVERS, fit_projection
from fairpca_dist.solvers.result import FairProjection

__all__ = [
    "ReportFiles",
    "build_report",
    "curve_length",
    "write_report",
    "report_markdown_summary",
    "report_table",
    "ARMS",
    "FIGURES",
    "REPORT_FILE",
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

_RBF_FEATURES = 1000
_COLUMN_TITLES = {"error": "error", "loss": "loss", "explained_variance_ratio": "EVR"}


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
) -> dict:
    """Every number of the fairness report of ``model``, as plain JSON values.

    Parameters
    ----------
    moments : GroupMoments
        The statistics the model was fitted on (same features and groups).
    model : FairProjection
        The fitted projection (any registered method).
    max_components : int, optional
        R, the largest r of the curves; default min(n_features, max(10, model.n_components)).
    sample : DataFrame, optional
        Rows for the downstream check (features, sensitive column(s), target).
    target : str, optional
        Binary target column of ``sample``.
    sensitive : str or sequence of str, optional
        Group column(s) of ``sample``; default: every column that is neither a feature nor
        the target.
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

    Returns
    -------
    dict
        ``title``, ``library_version``;
        ``data``: ``n_samples``, ``n_features``, ``feature_names``, ``fingerprint``, ``groups``
        (``label`` as in model.json, display ``name``, ``count``);
        ``model``: ``method``, ``n_components``, ``output_columns``, ``center``, ``options``,
        ``converged``, ``status``, ``message``, ``n_iter``, ``certificate``;
        ``at_model``: arm -> evaluation at the model's n_components;
        ``curves``: ``n_components`` (1..R) and arm -> one evaluation per r;
        ``rbf_mmd``: ``estimator``, ``sigma``, ``sigma_source``, ``n_random_features`` (rff) and
        arm -> k × k matrix, or ``{"skipped": reason}``;
        ``downstream``: :func:`~fairpca_dist.downstream.downstream_parity` of both arms, or ``{"skipped": reason}``.
        An evaluation is :meth:`fairpca_dist.scoring.ProjectionScores.as_dict`: ``n_components``,
        ``group_error`` (and ``_within``), ``group_variance``, ``group_loss``, ``max_loss``,
        ``min_group_variance``, ``group_explained_variance_ratio``, ``explained_variance_ratio``
        (total), ``are``, ``abdiff`` (and ``_within``), ``mmd2_linear`` (k × k) and ``converged``;
        per-group lists follow ``data.groups``.
        Non-finite numbers are None.

    Raises
    ------
    SchemaError, GroupError
        The model was fitted on other features or groups than ``moments``.
    InputError
        Bad ``max_components`` or ``rbf_mmd``; a method that is not in
        :data:`~fairpca_dist.solvers.SOLVERS` (the curves refit it), or that reads rows while
        ``passes`` is missing; ``rbf_mmd="exact"`` or ``"rff"`` without ``passes``; bad sample (see
        :func:`~fairpca_dist.downstream.downstream_parity`).
    """
    from fairpca_dist import __version__

    _check_model_matches(moments, model)
    if rbf_mmd not in RBF_MMD_CHOICES:
        raise InputError(f"rbf_mmd must be one of {list(RBF_MMD_CHOICES)}, got {rbf_mmd!r}")
    if passes is None and rbf_mmd in ("exact", "rff"):
        raise InputError(f"rbf_mmd={rbf_mmd!r} reads the rows: pass passes= (or rbf_mmd='none')")
    ranks = range(1, curve_length(max_components, moments.n_features, model.n_components) + 1)
    _check_refittable(model)
    options = model.options
    working = moments.rescaled(model.scale)
    pca = _refit(moments, model, model.n_components, "pca", {})
    report = {
        "title": title,
        "library_version": __version__,
        "data": {
            "n_samples": moments.n_samples,
            "n_features": moments.n_features,
            "feature_names": moments.feature_names,
            "fingerprint": moments.fingerprint(),
            "groups": [
                {"label": label_to_json(group), "name": _group_name(group), "count": count}
                for group, count in zip(moments.groups, moments.count)
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
        "at_model": {"pca": _evaluate(moments, pca), "fair": _evaluate(moments, model)},
        "curves": {"n_components": list(ranks), **_curves(moments, model, ranks, options, passes)},
        "rbf_mmd": _rbf_mmd(working, {"pca": pca, "fair": model}, passes, rbf_mmd),
        "downstream": _downstream(sample, target, sensitive, {"pca": pca, "fair": model}),
    }
    return jsonable(report)


def _check_model_matches(moments: GroupMoments, model: FairProjection) -> None:
    if tuple(model.feature_names) != moments.feature_names:
        raise SchemaError(
            f"the model was fitted on features {list(model.feature_names)}, "
            f"the moments have {list(moments.feature_names)}"
        )
    if tuple(model.group_labels) != moments.groups:
        raise GroupError(
            f"the model was fitted on groups {list(model.group_labels)}, the moments have {list(moments.groups)}"
        )


def _curves(moments: GroupMoments, model: FairProjection, ranks: range, options: dict[str, Any],
            passes: DataPasses | None) -> dict[str, list[dict[str, Any]]]:
    """PCA and the model's method refitted and scored at every r of ``ranks`` (a bar on a
    terminal: on wide tables these refits are most of the report's time)."""
    curves: dict[str, list[dict[str, Any]]] = {"pca": [], "fair": []}
    with progress_bar(f"report: pca and {model.method} at r = 1..{len(ranks)}") as bar:
        bar.total, bar.unit = len(ranks), "r"
        for r in ranks:
            curves["pca"].append(_evaluate(moments, _refit(moments, model, r, "pca", {})))
            curves["fair"].append(_evaluate(moments, _refit(moments, model, r, model.method, options, passes)))
            bar.update()
    return curves


def curve_length(max_components: int | None, n_features: int, n_components: int) -> int:
    """R, the largest r of the report's curves: ``max_components``, by default
    min(n_features, max(10, r)); at least the model's own r, which the curves must include."""
    if max_components is None:
        return min(n_features, max(10, n_components))
    if isinstance(max_components, bool) or not isinstance(max_components, (int, np.integer)) or not (
        n_components <= max_components <= n_features
    ):
        raise InputError(f"max_components={max_components!r} must be an integer between the model's "
                         f"n_components={n_components} and n_features={n_features}")
    return int(max_components)


def _check_refittable(model: FairProjection) -> None:
    """The report refits the model's method with its options at every r."""
    if model.method not in SOLVERS:
        raise InputError(
            f"cannot draw the curves of method {model.method!r}: the report refits it at every r, "
            f"which needs a registered method ({sorted(SOLVERS)})"
        )


def _refit(moments: GroupMoments, model: FairProjection, n_components: int, method: str,
           options: dict[str, Any], passes: DataPasses | None = None) -> FairProjection:
    """``method`` at ``n_components`` with the model's centring and scale (and the rows, for a
    method that reads them)."""
    return fit_projection(moments, n_components, method=method, center=model.center, standardize=model.scale,
                          passes=passes if SOLVERS[method].reads_rows(options) else None, **options)


def _evaluate(moments: GroupMoments, projection: FairProjection) -> dict[str, Any]:
    """Every moment-based criterion of one projection, in sample (:mod:`fairpca_dist.scoring`)."""
    return score_projection(projection, moments).as_dict()


def _rbf_mmd(working: GroupMoments, models: dict[str, FairProjection], passes: DataPasses | None,
             choice: str) -> dict:
    """The RBF-kernel MMD² of both arms over every row, with one σ (module docstring)."""
    if choice == "none":
        return {"skipped": "not asked for (rbf_mmd='none')"}
    if passes is None:
        return {"skipped": "the rows were not given"}
    model = models["fair"]
    rows = passes.rescaled(model.scale)
    if "sigma" in model.certificate:
        sigma, source = float(model.certificate["sigma"]), f"the {model.method} model's"
    else:
        sigma = metrics.rbf_bandwidth(working, rows, models["pca"].components)
        source = "median heuristic at the PCA projection (at most 2000 rows per group)"
    estimator = choice if choice != "auto" else "exact" if working.n_samples <= RBF_EXACT_MAX_ROWS else "rff"
    result: dict[str, Any] = {"estimator": estimator, "sigma": sigma, "sigma_source": source}
    components = [projection.components for projection in models.values()]
    if estimator == "rff":  # both arms from one pass over the rows
        result["n_random_features"] = _RBF_FEATURES
        matrices = metrics.mmd2_rbf_many(working, rows, components, sigma, n_random_features=_RBF_FEATURES)
    else:
        matrices = [metrics.mmd2_rbf(working, rows, v, sigma, estimator="exact") for v in components]
    result.update(zip(models, matrices))
    return result


def _downstream(sample: pd.DataFrame | None, target: str | None, sensitive: Sequence[str] | str | None,
                models: dict[str, FairProjection]) -> dict:
    if sample is None or target is None:
        missing = " and no ".join(name for name, value in (("sample", sample), ("target", target)) if value is None)
        return {"skipped": f"no {missing} given"}
    features = list(models["fair"].feature_names)
    if sensitive is None:
        sensitive = [column for column in sample.columns if column not in features and column != target]
    return downstream_parity(sample, features=features, sensitive=sensitive, target=target, models=models)


def _group_name(label: Hashable) -> str:
    """Display name of a group label; intersectional (tuple) labels read ``"a & b"``."""
    return " & ".join(map(str, label)) if isinstance(label, tuple) else str(label)


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
    """The headline of the report as Markdown: model line, per-group table, largest losses."""
    return markdown(_summary_blocks(report))


def _arm_labels(report: dict) -> dict[str, str]:
    return {"pca": "PCA", "fair": report["model"]["method"]}


def _summary_blocks(report: dict) -> list[Block]:
    data, model, at_model = report["data"], report["model"], report["at_model"]
    labels = _arm_labels(report)
    rows = report_table(report)
    header = ["group", "n", *(f"{title} ({labels[arm]})" for title in _COLUMN_TITLES.values() for arm in ARMS)]
    return [
        Heading(1, report["title"]),
        Paragraph(
            f"Method {model['method']} at n_components = {model['n_components']} "
            f"({len(model['output_columns'])} output columns), centre '{model['center']}'; "
            f"{data['n_samples']} rows, {data['n_features']} features, {len(data['groups'])} groups. "
            f"Solver: {model['message']}."
        ),
        Table(header, [[number(value) for value in row.values()] for row in rows]),
        Paragraph(
            "Largest group loss: "
            + ", ".join(f"{labels[arm]} {number(at_model[arm]['max_loss'])}" for arm in ARMS)
            + ". Explained-variance ratio of all rows: "
            + ", ".join(f"{labels[arm]} {number(at_model[arm]['explained_variance_ratio'])}" for arm in ARMS)
            + "."
        ),
    ]


def _document_blocks(report: dict) -> list[Block]:
    model, curves = report["model"], report["curves"]
    labels = _arm_labels(report)
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
        Paragraph("MMD²(a, b) = ‖Vᵀ(μ_a − μ_b)‖², in the model's (scaled) units: 0 means both groups "
                   "project to the same mean."),
        _mmd_table(report, labels, lambda arm: report["at_model"][arm]["mmd2_linear"]),
        Heading(2, "RBF-kernel MMD² between the projected groups"),
        *_rbf_mmd_blocks(report, labels),
        Heading(2, "Against the number of components"),
        Paragraph(f"Both methods refitted at every r = 1..{curves['n_components'][-1]}."),
        Table(
            ["r", *(f"max loss ({labels[arm]})" for arm in ARMS), *(f"EVR ({labels[arm]})" for arm in ARMS),
             f"{labels['fair']} converged"],
            [
                [str(r), *(number(curves[arm][i][key]) for key in ("max_loss", "explained_variance_ratio")
                           for arm in ARMS), str(curves["fair"][i]["converged"])]
                for i, r in enumerate(curves["n_components"])
            ],
        ),
        *(Image(name, f"{label} per group against r: PCA and {labels['fair']}")
          for name, (_, label) in FIGURES.items()),
        Heading(2, "Downstream classifier"),
        *downstream_blocks(report["downstream"], labels),
    ]


def _mmd_table(report: dict, labels: dict[str, str], matrix: Callable[[str], list[list[float]]]) -> Table:
    names = [group["name"] for group in report["data"]["groups"]]
    pairs = [(a, b) for a in range(len(names)) for b in range(a + 1, len(names))]
    return Table(
        ["group a", "group b", *(f"MMD² ({labels[arm]})" for arm in ARMS)],
        [[names[a], names[b], *(number(matrix(arm)[a][b]) for arm in ARMS)] for a, b in pairs],
    )


def _rbf_mmd_blocks(report: dict, labels: dict[str, str]) -> list[Block]:
    rbf = report["rbf_mmd"]
    if "skipped" in rbf:
        return [Paragraph(f"Skipped: {rbf['skipped']}.")]
    how = ("every pair of rows, in kernel blocks" if rbf["estimator"] == "exact"
           else f"{rbf['n_random_features']} random Fourier features (an estimate; its error shrinks as 1/√D)")
    return [
        Paragraph(f"Biased MMD² of the projected groups under k(u, v) = exp(−‖u − v‖² / (2σ²)), over every "
                   f"row: {how}; σ = {number(rbf['sigma'])} ({rbf['sigma_source']}), the same for both arms. "
                   "0 means the projected groups have the same distribution."),
        _mmd_table(report, labels, lambda arm: rbf[arm]),
    ]


def _plot(report: dict, quantity: str, ylabel: str, path: Location) -> None:
    """Per-group ``quantity`` against r for both arms (:func:`fairpca_dist.charts.group_curves`)."""
    curves, labels = report["curves"], _arm_labels(report)
    arms = {labels[arm]: np.array([point[quantity] for point in curves[arm]], dtype=np.float64)  # None -> NaN
            for arm in ARMS}
    charts.group_curves(path, curves["n_components"], arms, [group["name"] for group in report["data"]["groups"]],
                        ylabel=ylabel, title=report["title"],
                        worse="lower" if quantity == "group_explained_variance_ratio" else "higher")


# ---------------------------------------------------------------------- writing
def write_report(report: dict, out_dir: str | Path, *, inputs: Iterable[str | os.PathLike[str]] = (),
                 storage_options: StorageOptions | None = None) -> ReportFiles:
    """Write ``report.json``, ``report.md``, ``report.html`` and the PNGs of :data:`FIGURES`.

    ``report.json`` has sorted keys, indent 2, and null for non-finite numbers. ``report.md``
    and the self-contained ``report.html`` show the same content (the HTML with the figures
    inlined). Everything is first written to a hidden staging folder next to ``out_dir`` and
    then moved into ``out_dir`` file by file (``report.json`` last), so an error leaves the
    previous report, if any, untouched; other files in ``out_dir`` are kept. The same report
    gives byte-identical JSON and Markdown. ``out_dir`` is locked while it is written
    (:func:`~fairpca_dist.atomic.output_lock`); a full or read-only disk raises
    :class:`~fairpca_dist.exceptions.WriteError` naming it. On an object store (a URL, opened
    with ``storage_options``) the report is a new version of ``out_dir``, committed whole
    (:func:`~fairpca_dist.atomic.atomic_directory`).

    Parameters
    ----------
    report : dict
        From :func:`build_report`.
    out_dir : str or Path
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
    return ReportFiles(json=kind(f"{base}/{REPORT_FILE}"), markdown=kind(f"{base}/report.md"),
                       html=kind(f"{base}/report.html"), figures={name: kind(f"{base}/{name}.png") for name in FIGURES})


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
