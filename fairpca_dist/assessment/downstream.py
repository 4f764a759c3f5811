"""The downstream check: does a classifier trained on a projection predict as well, and as
evenly across groups, as one trained on the raw features?

:func:`downstream_parity` trains ``StandardScaler`` + ``LogisticRegression`` on each projection of
a row sample and scores it on a held-out part: accuracy, per-group selection rate and
fairlearn's demographic-parity difference and ratio. :func:`downstream_blocks` renders that
for a report. The report (:mod:`fairpca_dist.assessment.report`) and the comparison
(:mod:`fairpca_dist.assessment.comparison`) both call it.

A classifier that learned nothing has perfect parity: predicting one class for every row gives
every group the same selection rate, a DP difference of 0 and the accuracy of the majority
class. So each input is checked for being **degenerate** — its predictions are (nearly)
constant (:data:`CONSTANT_SHARE`), or its accuracy is within noise of the majority-class
accuracy (:data:`NOISE_STANDARD_ERRORS`) — and groups with too few test rows for a selection
rate to mean much (:data:`MIN_GROUP_TEST_ROWS`) are named with their counts. Reports mark
degenerate classifiers and the comparison never calls one the best or the fairest.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairpca_dist.assessment.rendering import Block, Paragraph, Table, number
from fairpca_dist.engine.moments import sorted_labels
from fairpca_dist.exceptions import InputError, SchemaError
from fairpca_dist.extras import check_installed
from fairpca_dist.io.jsonable import jsonable
from fairpca_dist.solvers.result import FairProjection
from fairpca_dist.wording import differences, group_display_names, listed, listed_counts

# the [report] extra, checked here and imported where used, as is scikit-learn: with them, this
# module costs 0.8-1.3 s of imports to a command that only checks a target column (check_binary_target)
check_installed("fairlearn", extra="report", feature="the downstream classifier check (fairlearn)")

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

__all__ = [
    "CONSTANT_SHARE",
    "MIN_GROUP_TEST_ROWS",
    "NOISE_STANDARD_ERRORS",
    "base_rate_sentence",
    "check_binary_target",
    "degenerate_mark",
    "downstream_blocks",
    "downstream_parity",
    "import_classifier_libraries",
    "small_groups_sentence",
]

_CLASSIFIER_MAX_ITER = 1000
_CLASSIFIER = f"StandardScaler + LogisticRegression(lbfgs, C=1, max_iter={_CLASSIFIER_MAX_ITER})"

CONSTANT_SHARE = 0.99
"""Predictions are (nearly) constant when at least this share of the test rows get one class."""

NOISE_STANDARD_ERRORS = 2.0
"""Accuracy is "≈ base rate" when it exceeds the majority-class accuracy m by at most this many
standard errors √(m(1 − m)/n_test) of an accuracy measured on n_test rows (or falls below m)."""

MIN_GROUP_TEST_ROWS = 30
"""Groups with fewer test rows than this give selection rates too rough to compare: the parity
figures built from them carry a warning with the counts."""


def downstream_parity(
    sample: pd.DataFrame,
    *,
    features: Sequence[str],
    sensitive: Sequence[str] | str,
    target: str,
    models: Mapping[str, FairProjection],
    random_state: int = 0,
    test_size: float = 0.3,
    group_names: Mapping[Any, str] | None = None,
) -> dict:
    """Accuracy and demographic parity of a classifier trained on each model's projection.

    The rows are split once into train and test parts, stratified by the target. For each
    model, ``model.transform`` of the features feeds ``StandardScaler`` + scikit-learn's
    ``LogisticRegression`` (lbfgs, C = 1, deterministic); on the test part the report gives the
    accuracy, the per-group selection rate P(ŷ = 1 | group), and fairlearn's
    ``demographic_parity_difference`` (largest minus smallest selection rate) and
    ``demographic_parity_ratio`` (smallest over largest). The same classifier on the
    standardised raw features is the reference.

    Parameters
    ----------
    sample : DataFrame
        Rows with the feature, sensitive and target columns.
    features : sequence of str
        Feature columns, in the order every model was fitted on.
    sensitive : str or sequence of str
        Group column(s). Groups are named ``column=value``, intersectional ones
        ``sex=1 & race=2`` (:func:`~fairpca_dist.wording.group_display_names`).
    target : str
        Binary target column; the larger of its two (sorted) values is the positive class.
    models : mapping of str to FairProjection
        Name -> fitted projection.
    random_state : int
        Seed of the train/test split.
    test_size : float
        Share of rows held out for evaluation.
    group_names : mapping, optional
        Display names of values of the sensitive column(s), as in
        :func:`~fairpca_dist.wording.group_display_names` (keys naming no group of the sample are
        ignored).

    Returns
    -------
    dict
        ``target``, ``positive_class``, ``sensitive``, ``n_train``, ``n_test``, ``test_size``,
        ``random_state``, ``classifier``; ``base_rate`` (the positive class's share of the test
        rows) and ``majority_accuracy`` = max(base rate, 1 − base rate), the accuracy of
        predicting the majority class for every row; ``group_test_counts`` (group -> test
        rows) and ``groups_too_small`` (the groups with fewer than
        :data:`MIN_GROUP_TEST_ROWS` test rows -> their counts; empty when none);
        ``thresholds`` (the three constants of the degeneracy checks); ``reference`` (the raw
        features) and ``models`` (name -> scores). Scores are ``n_inputs``, ``accuracy``,
        ``demographic_parity_difference``, ``demographic_parity_ratio``, ``selection_rate``
        (group -> rate), ``predicted_positive_share`` and ``degenerate``: None, or why the
        classifier learned nothing usable (a reason starting with ``"constant"``,
        ``"nearly constant"`` or ``"≈ base rate"`` before a colon; :func:`degenerate_mark`).
        The ratio is None when no group gets a positive prediction.

    Raises
    ------
    SchemaError
        A column is missing, a feature is not numeric, or a model was fitted on other features.
    InputError
        Missing values, no sensitive column, or a target that is not binary with at least two
        rows per class.
    """
    features = list(features)
    sensitive = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    _check_sample(sample, features, sensitive, target, models)
    y, positive = _binary_target(sample[target], target)
    labels, values = pd.factorize(
        pd.MultiIndex.from_frame(sample[sensitive]) if len(sensitive) > 1 else sample[sensitive[0]]
    )
    groups = np.asarray(group_display_names(list(values), sensitive, group_names, strict=False))[labels]
    x = sample[features].to_numpy(dtype=np.float64)
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(np.arange(len(sample)), test_size=test_size, random_state=random_state, stratify=y)

    base_rate = float(y[test].mean())
    majority = max(base_rate, 1.0 - base_rate)

    def scores(inputs: np.ndarray) -> dict[str, Any]:
        classifier = _classifier().fit(inputs[train], y[train])
        predicted = classifier.predict(inputs[test])
        return {
            **_parity_scores(y[test], predicted, groups[test], inputs.shape[1]),
            "predicted_positive_share": float(predicted.mean()),
            "degenerate": _degenerate(y[test], predicted, majority),
        }

    counts = pd.Series(groups[test]).value_counts().sort_index()
    return jsonable(
        {
            "target": target,
            "positive_class": positive,
            "sensitive": sensitive,
            "n_train": len(train),
            "n_test": len(test),
            "test_size": test_size,
            "random_state": random_state,
            "classifier": _CLASSIFIER,
            "base_rate": base_rate,
            "majority_accuracy": majority,
            "group_test_counts": {str(group): int(n) for group, n in counts.items()},
            "groups_too_small": {str(group): int(n) for group, n in counts.items() if n < MIN_GROUP_TEST_ROWS},
            "thresholds": {
                "constant_share": CONSTANT_SHARE,
                "noise_standard_errors": NOISE_STANDARD_ERRORS,
                "min_group_test_rows": MIN_GROUP_TEST_ROWS,
            },
            "reference": scores(x),
            "models": {name: scores(model.transform(x)) for name, model in models.items()},
        }
    )


def _check_sample(
    sample: pd.DataFrame,
    features: list[str],
    sensitive: list[str],
    target: str,
    models: Mapping[str, FairProjection],
) -> None:
    if not sensitive:
        raise InputError("no sensitive column given: name the group column(s) of the sample")
    if target in features or target in sensitive:
        raise SchemaError(f"target {target!r} is also a feature or sensitive column; name a separate label column")
    needed = list(dict.fromkeys([*features, *sensitive, target]))
    missing = [column for column in needed if column not in sample.columns]
    if missing:
        raise SchemaError(f"the sample lacks column(s) {missing}; it has {listed(sample.columns)}")
    not_numeric = [column for column in features if not pd.api.types.is_numeric_dtype(sample[column])]
    if not_numeric:
        raise SchemaError(f"feature column(s) {not_numeric} are not numeric")
    incomplete = [column for column in needed if sample[column].isna().any()]
    if incomplete:
        raise InputError(f"column(s) {incomplete} of the sample contain missing values; drop or fill those rows")
    for name, model in models.items():
        if list(model.feature_names) != features:
            raise SchemaError(
                f"model {name!r} was fitted on other features than the sample's: "
                + differences("the model", model.feature_names, "the sample", features)
            )


def check_binary_target(counts: pd.Series, name: str) -> tuple[Hashable, ...]:
    """The two classes of target ``name``, sorted, from its value ``counts``; raises unless there
    are exactly 2, of >= 2 rows each (the downstream check's stratified split)."""
    classes = sorted_labels(counts.index.tolist())
    if len(classes) != 2:
        raise InputError(
            f"target {name!r} has {len(classes)} class(es) {list(classes)[:10]}; "
            "demographic parity needs a binary target"
        )
    if counts.min() < 2:
        raise InputError(
            f"target {name!r}: class {sorted_labels([counts.idxmin()])[0]!r} has {counts.min()} row(s); "
            "a stratified train/test split needs at least 2 per class"
        )
    return classes


def _binary_target(column: pd.Series, name: str) -> tuple[np.ndarray, Hashable]:
    """The target as 0/1 with the larger class as 1 (see :func:`check_binary_target`)."""
    positive = check_binary_target(column.value_counts(), name)[1]
    return (column == positive).to_numpy(dtype=np.int64), positive


def import_classifier_libraries() -> None:
    """Import what :func:`downstream_parity` uses of scikit-learn and fairlearn (0.8-1.3 s of a
    core, at its first call otherwise): for a command that has time to spare before its report
    runs (``fairpca demo`` while its Prefect server starts)."""
    import fairlearn.metrics  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.metrics  # noqa: F401
    import sklearn.model_selection  # noqa: F401
    import sklearn.pipeline  # noqa: F401
    import sklearn.preprocessing  # noqa: F401


def _classifier() -> Pipeline:
    """Standardise, then logistic regression (lbfgs is deterministic: no seed needed)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=_CLASSIFIER_MAX_ITER))


def _parity_scores(y_true: np.ndarray, y_pred: np.ndarray, groups: np.ndarray, n_inputs: int) -> dict[str, Any]:
    # fairlearn's demographic_parity_difference and _ratio are these of one such frame each: one
    # frame for the three (a MetricFrame costs ~0.2 s of pandas grouping on 10,000 rows)
    from fairlearn.metrics import MetricFrame, selection_rate
    from sklearn.metrics import accuracy_score

    frame = MetricFrame(metrics=selection_rate, y_true=y_true, y_pred=y_pred, sensitive_features=groups)
    return {
        "n_inputs": n_inputs,
        "accuracy": accuracy_score(y_true, y_pred),
        "demographic_parity_difference": frame.difference(method="between_groups"),
        "demographic_parity_ratio": frame.ratio(method="between_groups"),
        "selection_rate": {str(group): rate for group, rate in frame.by_group.items()},
    }


def _degenerate(y_true: np.ndarray, y_pred: np.ndarray, majority: float) -> str | None:
    """Why a classifier's predictions say nothing about its inputs, or None (module docstring).

    Constant: one class for every test row. Nearly constant: one class for at least
    :data:`CONSTANT_SHARE` of them. ≈ base rate: accuracy a ≤ m + k·√(m(1 − m)/n), m the
    majority-class accuracy, k = :data:`NOISE_STANDARD_ERRORS`, n the test rows.
    """
    positive_share = float(y_pred.mean())
    top = max(positive_share, 1.0 - positive_share)
    if top == 1.0:
        return "constant: predicts one class for every row"
    if top >= CONSTANT_SHARE:
        predicted = "positive" if positive_share > 0.5 else "negative"
        return f"nearly constant: predicts {predicted} for {100 * top:.1f} % of the test rows"
    from sklearn.metrics import accuracy_score

    accuracy = accuracy_score(y_true, y_pred)
    noise = _noise(majority, len(y_true))
    if accuracy <= majority + noise:
        return (
            f"≈ base rate: accuracy {accuracy:.4g}, not above the majority class's {majority:.4g} by more "
            f"than {NOISE_STANDARD_ERRORS:g} standard errors ({noise:.2g})"
        )
    return None


def degenerate_mark(reason: str | None) -> str:
    """The short mark of a degeneracy ``reason`` for a table cell: ``"constant"``,
    ``"nearly constant"``, ``"≈ base rate"``, or ``""`` for None."""
    return "" if reason is None else reason.split(":", 1)[0]


def downstream_blocks(downstream: dict, labels: dict[str, str]) -> list[Block]:
    """The downstream section of a report: what was trained and how it was scored, the base
    rate, a table of accuracy and parity per input with degenerate classifiers marked, in words
    how each model's classifier compares with PCA's (the model named ``"pca"``), a warning when
    groups have few test rows, and the selection rate per group with its test rows
    (``labels``: display names of the models)."""
    if "skipped" in downstream:
        return [Paragraph(f"Skipped: {downstream['skipped']}.")]
    entries = {"raw features": downstream["reference"]} | {
        labels.get(name, name): scores for name, scores in downstream["models"].items()
    }
    counts = downstream["group_test_counts"]
    small = small_groups_sentence(downstream)
    return [
        Paragraph(
            f"{downstream['classifier']} predicting {downstream['target']!r} = {downstream['positive_class']!r}, "
            f"trained on {downstream['n_train']} rows and evaluated on {downstream['n_test']} held-out rows "
            f"(split stratified by the target, random_state {downstream['random_state']}); groups from "
            f"{', '.join(downstream['sensitive'])}. DP difference: largest minus smallest selection rate "
            "P(prediction = positive | group); DP ratio: smallest over largest."
        ),
        Paragraph(base_rate_sentence(downstream)),
        Table(
            ["inputs", "columns", "accuracy", "DP difference", "DP ratio", "note"],
            [
                [
                    name,
                    *(
                        number(scores[key])
                        for key in ("n_inputs", "accuracy", "demographic_parity_difference", "demographic_parity_ratio")
                    ),
                    scores["degenerate"] or "",
                ]
                for name, scores in entries.items()
            ],
        ),
        *(Paragraph(sentence) for sentence in _against_pca(downstream, labels)),
        *([Paragraph(small)] if small else []),
        Table(
            ["group", "test rows", *(f"selection rate ({name})" for name in entries)],
            [
                [group, str(n), *(number(scores["selection_rate"].get(group)) for scores in entries.values())]
                for group, n in counts.items()
            ],
        ),
    ]


def base_rate_sentence(downstream: dict) -> str:
    """The base rate of a :func:`downstream_parity` result in words, and what makes a
    classifier degenerate."""
    thresholds, majority = downstream["thresholds"], downstream["majority_accuracy"]
    noise = _noise(majority, downstream["n_test"], thresholds["noise_standard_errors"])
    return (
        f"Base rate: {downstream['positive_class']!r} is {100 * downstream['base_rate']:.1f} % of the "
        f"{downstream['n_test']} test rows, so predicting the majority class for every row scores accuracy "
        f"{majority:.4g}. A classifier that predicts one class for at least "
        f"{100 * thresholds['constant_share']:g} % of the test rows (constant) or whose accuracy is at most "
        f"{thresholds['noise_standard_errors']:g} standard errors (±{noise:.2g}) above {majority:.4g} (≈ base rate) "
        "learned nothing usable from its inputs: it is marked, and its parity figures (a DP difference of 0 "
        "for a constant one) say nothing about fairness."
    )


def small_groups_sentence(downstream: dict) -> str | None:
    """A warning naming the groups with fewer test rows than :data:`MIN_GROUP_TEST_ROWS`, with
    their counts; None when there are none."""
    small = downstream["groups_too_small"]
    if not small:
        return None
    return (
        f"Warning: {len(small)} group(s) have fewer than {downstream['thresholds']['min_group_test_rows']} test "
        f"rows ({listed_counts(small)}): their selection rates, and the DP difference and ratio built from "
        "them, rest on a handful of predictions and may move a lot with another split."
    )


def _against_pca(downstream: dict, labels: dict[str, str]) -> list[str]:
    """Each model's classifier next to PCA's, in words: DP difference and accuracy, or why one
    of them says nothing (degenerate)."""
    pca = downstream["models"].get("pca")
    if pca is None:
        return []
    pca_label = labels.get("pca", "pca")
    sentences = []
    for name, scores in downstream["models"].items():
        if name == "pca":
            continue
        label = labels.get(name, name)
        flagged = [(who, s["degenerate"]) for who, s in ((label, scores), (pca_label, pca)) if s["degenerate"]]
        if flagged:
            sentences.append(
                "; ".join(f"{who}'s classifier is degenerate ({reason})" for who, reason in flagged)
                + f": its DP difference and accuracy are no measure of the projection's fairness, so {label} and "
                f"{pca_label} cannot be compared downstream."
            )
            continue
        ours, theirs = scores["demographic_parity_difference"], pca["demographic_parity_difference"]
        evenness = (
            "less evenly across groups than"
            if ours > theirs
            else "more evenly across groups than"
            if ours < theirs
            else "as evenly across groups as"
        )
        sentences.append(
            f"{label}'s classifier selects {evenness} {pca_label}'s: DP difference {ours:.4g} against "
            f"{theirs:.4g}, accuracy {scores['accuracy']:.4g} against {pca['accuracy']:.4g}."
        )
    return sentences


def _noise(majority: float, n_test: int, standard_errors: float = NOISE_STANDARD_ERRORS) -> float:
    """``standard_errors`` standard errors of an accuracy near ``majority`` on ``n_test`` rows."""
    return standard_errors * float(np.sqrt(majority * (1.0 - majority) / n_test))
