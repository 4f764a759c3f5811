"""The downstream check: does a classifier trained on a projection predict as well, and as
evenly across groups, as one trained on the raw features?

:func:`downstream_parity` trains ``StandardScaler`` + ``LogisticRegression`` on each projection of
a row sample and scores it on a held-out part: accuracy, per-group selection rate and
fairlearn's demographic-parity difference and ratio. :func:`downstream_blocks` renders that
for a report. The report (:mod:`fairpca_dist.report`) and the comparison
(:mod:`fairpca_dist.comparison`) both call it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from fairlearn.metrics import MetricFrame, demographic_parity_difference, demographic_parity_ratio, selection_rate
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from fairpca_dist.exceptions import InputError, SchemaError
from fairpca_dist.jsonable import jsonable
from fairpca_dist.moments import sorted_labels
from fairpca_dist.rendering import Block, Paragraph, Table, number
from fairpca_dist.solvers.result import FairProjection

__all__ = ["check_binary_target", "downstream_blocks", "downstream_parity"]

_CLASSIFIER_MAX_ITER = 1000
_CLASSIFIER = f"StandardScaler + LogisticRegression(lbfgs, C=1, max_iter={_CLASSIFIER_MAX_ITER})"


def downstream_parity(
    sample: pd.DataFrame,
    *,
    features: Sequence[str],
    sensitive: Sequence[str] | str,
    target: str,
    models: Mapping[str, FairProjection],
    random_state: int = 0,
    test_size: float = 0.3,
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
        Group column(s). Several columns define intersectional groups labelled
        ``"a & b"``, as :class:`GroupMoments` names tuple labels in the report.
    target : str
        Binary target column; the larger of its two (sorted) values is the positive class.
    models : mapping of str to FairProjection
        Name -> fitted projection.
    random_state : int
        Seed of the train/test split.
    test_size : float
        Share of rows held out for evaluation.

    Returns
    -------
    dict
        ``target``, ``positive_class``, ``sensitive``, ``n_train``, ``n_test``, ``test_size``,
        ``random_state``, ``classifier``, ``reference`` (the raw features) and ``models``
        (name -> scores). Scores are ``n_inputs``, ``accuracy``,
        ``demographic_parity_difference``, ``demographic_parity_ratio`` and ``selection_rate``
        (group -> rate); the ratio is None when no group gets a positive prediction.

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
    groups = sample[sensitive].astype(str).agg(" & ".join, axis=1).to_numpy()
    x = sample[features].to_numpy(dtype=np.float64)
    train, test = train_test_split(
        np.arange(len(sample)), test_size=test_size, random_state=random_state, stratify=y
    )

    def scores(inputs: np.ndarray) -> dict[str, Any]:
        classifier = _classifier().fit(inputs[train], y[train])
        return _parity_scores(y[test], classifier.predict(inputs[test]), groups[test], inputs.shape[1])

    return jsonable({
        "target": target,
        "positive_class": positive,
        "sensitive": sensitive,
        "n_train": len(train),
        "n_test": len(test),
        "test_size": test_size,
        "random_state": random_state,
        "classifier": _CLASSIFIER,
        "reference": scores(x),
        "models": {name: scores(model.transform(x)) for name, model in models.items()},
    })


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
        raise SchemaError(f"the sample lacks column(s) {missing}; it has {list(sample.columns)}")
    not_numeric = [column for column in features if not pd.api.types.is_numeric_dtype(sample[column])]
    if not_numeric:
        raise SchemaError(f"feature column(s) {not_numeric} are not numeric")
    incomplete = [column for column in needed if sample[column].isna().any()]
    if incomplete:
        raise InputError(f"column(s) {incomplete} of the sample contain missing values; drop or fill those rows")
    for name, model in models.items():
        if list(model.feature_names) != features:
            raise SchemaError(
                f"model {name!r} was fitted on features {list(model.feature_names)}, not {features}"
            )


def check_binary_target(counts: pd.Series, name: str) -> list[Hashable]:
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
            f"target {name!r}: class {counts.idxmin()!r} has {counts.min()} row(s); "
            "a stratified train/test split needs at least 2 per class"
        )
    return classes


def _binary_target(column: pd.Series, name: str) -> tuple[np.ndarray, Hashable]:
    """The target as 0/1 with the larger class as 1 (see :func:`check_binary_target`)."""
    positive = check_binary_target(column.value_counts(), name)[1]
    return (column == positive).to_numpy(dtype=np.int64), positive


def _classifier() -> Pipeline:
    """Standardise, then logistic regression (lbfgs is deterministic: no seed needed)."""
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=_CLASSIFIER_MAX_ITER))


def _parity_scores(y_true: np.ndarray, y_pred: np.ndarray, groups: np.ndarray, n_inputs: int) -> dict[str, Any]:
    rates = MetricFrame(metrics=selection_rate, y_true=y_true, y_pred=y_pred, sensitive_features=groups).by_group
    return {
        "n_inputs": n_inputs,
        "accuracy": accuracy_score(y_true, y_pred),
        "demographic_parity_difference": demographic_parity_difference(y_true, y_pred, sensitive_features=groups),
        "demographic_parity_ratio": demographic_parity_ratio(y_true, y_pred, sensitive_features=groups),
        "selection_rate": {str(group): rate for group, rate in rates.items()},
    }


def downstream_blocks(downstream: dict, labels: dict[str, str]) -> list[Block]:
    """The downstream section of a report: what was trained and how it was scored, a table of
    accuracy and parity per input, and the selection rate per group (``labels``: display names
    of the models)."""
    if "skipped" in downstream:
        return [Paragraph(f"Skipped: {downstream['skipped']}.")]
    entries = {"raw features": downstream["reference"]} | {
        labels.get(name, name): scores for name, scores in downstream["models"].items()
    }
    groups = sorted({group for scores in entries.values() for group in scores["selection_rate"]})
    return [
        Paragraph(
            f"{downstream['classifier']} predicting {downstream['target']!r} = {downstream['positive_class']!r}, "
            f"trained on {downstream['n_train']} rows and evaluated on {downstream['n_test']} held-out rows "
            f"(split stratified by the target, random_state {downstream['random_state']}); groups from "
            f"{', '.join(downstream['sensitive'])}. DP difference: largest minus smallest selection rate "
            "P(prediction = positive | group); DP ratio: smallest over largest."
        ),
        Table(
            ["inputs", "columns", "accuracy", "DP difference", "DP ratio"],
            [[name, *(number(scores[key]) for key in ("n_inputs", "accuracy", "demographic_parity_difference",
                                                      "demographic_parity_ratio"))]
             for name, scores in entries.items()],
        ),
        Table(
            ["group", *(f"selection rate ({name})" for name in entries)],
            [[group, *(number(scores["selection_rate"].get(group)) for scores in entries.values())]
             for group in groups],
        ),
    ]
