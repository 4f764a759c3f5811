"""Save and load fitted projections as ``model.npz`` + ``model.json`` (never pickle).

``model.json`` is the human-readable record: method, options, feature names, group labels and
sizes, centring and scale, diagnostics (status, certificate, the solver's details), library
version and the data fingerprint.
``model.npz`` holds the arrays. Both are written to temporary names and renamed into place,
so a crash never leaves a half-written model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from fairpca_dist.atomic import atomic_file, output_lock
from fairpca_dist.exceptions import InputError
from fairpca_dist.moments import label_from_json, label_to_json
from fairpca_dist.solvers import SOLVERS
from fairpca_dist.solvers.result import FairProjection

__all__ = ["save_model", "load_model", "read_fingerprint", "MODEL_FORMAT_VERSION"]

MODEL_FORMAT_VERSION = 1
_ARRAYS = ("components", "mean", "scale", "group_count", "group_loss", "group_error", "objective_history")


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def save_model(
    model: FairProjection, directory: str | os.PathLike[str], *, fingerprint: str | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``model`` to ``directory/model.npz`` and ``directory/model.json``; returns the folder.

    ``inputs`` (e.g. the table the model was fitted on) must not overlap ``directory``
    (:func:`~fairpca_dist.atomic.check_output`); nothing is written if one does.
    """
    from fairpca_dist import __version__

    folder = Path(directory)
    record = {
        "format_version": MODEL_FORMAT_VERSION,
        "library_version": __version__,
        "method": model.method,
        "options": _jsonable(model.options),
        "n_components": model.n_components,
        "n_output_columns": int(model.components.shape[1]),
        "center": model.center,
        "feature_names": list(model.feature_names),
        "groups": [
            {"label": label_to_json(g), "count": int(n), "loss": float(l), "error": float(e)}
            for g, n, l, e in zip(model.group_labels, model.group_count, model.group_loss, model.group_error)
        ],
        "mean": model.mean.tolist(),
        "scale": model.scale.tolist(),
        "diagnostics": {
            "n_iter": model.n_iter,
            "converged": model.converged,
            "status": model.status,
            "message": model.message,
            "certificate": _jsonable(model.certificate),
            "details": _jsonable(model.details),
            "final_objective": float(model.objective_history[-1]) if model.objective_history.size else None,
        },
        "data_fingerprint": fingerprint,
    }
    inputs = list(inputs)
    with output_lock(folder, inputs=inputs):  # model.npz and model.json of one model, never of two
        with atomic_file(folder / "model.npz", inputs=inputs) as staging, open(staging, "wb") as f:
            np.savez(f, **{name: getattr(model, name) for name in _ARRAYS})
        with atomic_file(folder / "model.json", inputs=inputs) as staging:
            staging.write_text(json.dumps(record, indent=2) + "\n")
    return folder


def load_model(directory: str | os.PathLike[str]) -> FairProjection:
    """Read a model written by :func:`save_model`.

    The format version (not the library version) decides whether a model can be read. A file
    that is truncated, edited into something inconsistent (arrays whose shapes do not match
    the feature names and groups, non-finite values, missing fields) raises
    :class:`InputError` naming the file and the field.
    """
    folder = Path(directory)
    json_path, npz_path = folder / "model.json", folder / "model.npz"
    for path in (json_path, npz_path):
        if not path.is_file():
            raise InputError(f"no model at {folder}: {path.name} is missing")
    try:
        record = json.loads(json_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{json_path} is not valid JSON (truncated or edited?): {error}") from error
    if not isinstance(record, dict):
        raise InputError(f"{json_path} does not hold a model record")
    if record.get("format_version") != MODEL_FORMAT_VERSION:
        raise InputError(
            f"{json_path}: unsupported model format {record.get('format_version')!r} (written by fairpca_dist "
            f"{record.get('library_version')!r}; this version reads format {MODEL_FORMAT_VERSION})"
        )
    try:
        with np.load(npz_path, allow_pickle=False) as data:
            missing = [name for name in _ARRAYS if name not in data.files]
            if missing:
                raise InputError(f"{npz_path} lacks the array(s) {missing}")
            arrays = {name: data[name] for name in _ARRAYS}
    except InputError:
        raise
    except Exception as error:  # BadZipFile, EOFError, ValueError: a truncated or foreign file
        raise InputError(f"{npz_path} cannot be read (truncated or not written by save_model?): "
                         f"{type(error).__name__}: {error}") from error
    try:
        diagnostics = record["diagnostics"]
        model = FairProjection(
            method=record["method"],
            center=record["center"],
            n_components=int(record["n_components"]),
            feature_names=tuple(record["feature_names"]),
            group_labels=tuple(label_from_json(g["label"]) for g in record["groups"]),
            n_iter=int(diagnostics["n_iter"]),
            converged=bool(diagnostics["converged"]),
            status=diagnostics["status"],
            message=diagnostics["message"],
            certificate=dict(diagnostics["certificate"]),
            **_options_and_details(record["method"], dict(record["options"]), dict(diagnostics.get("details", {}))),
            **arrays,
        )
    except KeyError as error:
        raise InputError(f"{json_path} lacks the field {error.args[0]!r}") from error
    except (TypeError, ValueError) as error:
        raise InputError(f"{json_path} has a field of the wrong type: {error}") from error
    _check_consistent(model, json_path, npz_path)
    return model


def _options_and_details(method: str, options: dict[str, Any], details: dict[str, Any]) -> dict[str, dict]:
    """Options and details as the model holds them. Models written before ``details`` existed
    (same format) kept some of the solver's records among the options (jevd's selected columns,
    dro's radii, mmd's log); for a registered method, entries it does not accept move to the
    details, so that the options refit the same problem."""
    if method in SOLVERS:
        accepted = SOLVERS[method].options
        details = {**{name: value for name, value in options.items() if name not in accepted}, **details}
        options = {name: value for name, value in options.items() if name in accepted}
    return {"options": options, "details": details}


def _check_consistent(model: FairProjection, json_path: Path, npz_path: Path) -> None:
    """Shapes and values of the arrays against the record: an edited file fails here, not later."""
    p, k = len(model.feature_names), len(model.group_labels)
    width = model.components.shape[1] if model.components.ndim == 2 else -1
    expected = {"components": (p, width), "mean": (p,), "scale": (p,), "group_count": (k,), "group_loss": (k,),
                "group_error": (k,)}
    for name, shape in expected.items():
        array = getattr(model, name)
        if array.shape != shape or width < 1:
            raise InputError(
                f"{npz_path}: {name} has shape {array.shape}, but {json_path.name} lists {p} feature(s) "
                f"{list(model.feature_names)} and {k} group(s): expected {shape if width >= 1 else (p, 'r')}"
            )
        if not np.issubdtype(array.dtype, np.number) or not np.all(np.isfinite(array)):
            raise InputError(f"{npz_path}: {name} has values that are not finite numbers")
    if not np.all(model.scale > 0):
        raise InputError(f"{npz_path}: scale has values that are not positive")
    if not 1 <= model.n_components <= p:
        raise InputError(f"{json_path}: n_components={model.n_components} is not between 1 and {p}")


def read_fingerprint(directory: str | os.PathLike[str]) -> str | None:
    """The data fingerprint recorded with a saved model."""
    return json.loads((Path(directory) / "model.json").read_text()).get("data_fingerprint")
