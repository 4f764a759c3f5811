"""Save and load fitted projections as ``model.npz`` + ``model.json`` (never pickle).

``model.json`` is the human-readable record: method, options, feature names, group labels and
sizes, the sensitive column(s) the labels are values of (``group_columns``: empty when the fit
did not know them; absent from older files, which read as empty), centring and scale,
diagnostics (status, certificate, the solver's details), library version and the data
fingerprint.
``model.npz`` holds the arrays. Both are written to temporary names and renamed into place
(on an object store: into a new version of the folder, committed when both are written), so a
crash never leaves a half-written model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, TypedDict, TypeVar, cast, get_args

import numpy as np

from fairpca_dist.engine.moments import Center, label_from_json, label_to_json
from fairpca_dist.exceptions import InputError, reading
from fairpca_dist.io.atomic import atomic_directory, atomic_file, output_lock
from fairpca_dist.io.storage import Location, StorageOptions, as_given, is_url, locate
from fairpca_dist.io.versions import committed
from fairpca_dist.solvers import SOLVERS
from fairpca_dist.solvers.result import FairProjection

__all__ = [
    "save_model",
    "load_model",
    "read_model_file",
    "write_model_files",
    "model_folder",
    "read_fingerprint",
    "MODEL_FILE",
    "ARRAYS_FILE",
    "MODEL_FORMAT_VERSION",
]

MODEL_FORMAT_VERSION = 1
MODEL_FILE = "model.json"  # the record, written last: a folder holding it holds a whole model
ARRAYS_FILE = "model.npz"
_ARRAYS = ("components", "mean", "scale", "group_count", "group_loss", "group_error", "objective_history")
_MODEL_FILES = (
    " (a model folder holds model.json and model.npz, written together by save_model; fit_table, on "
    "the command line `fairpca fit`, writes both)"
)
T = TypeVar("T")


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
    model: FairProjection,
    directory: str | os.PathLike[str],
    *,
    fingerprint: str | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
    storage_options: StorageOptions | None = None,
) -> Path | str:
    """Write ``model`` to ``directory/model.npz`` and ``directory/model.json`` (no pickle).

    Each file is written whole (a temporary name renamed into place; on an object store, a new
    version of the folder committed when both are written), so a crash never leaves a
    half-written model. The fields are listed on the site's "file formats" page.

    Parameters
    ----------
    model : FairProjection
        What :func:`~fairpca_dist.fit_projection` returned.
    directory : str or path-like
        The model folder: new, empty or holding a model already; or a URL (``s3://…``).
    fingerprint : str, optional
        The fitted data's fingerprint (:meth:`GroupMoments.fingerprint`), recorded as
        ``data_fingerprint``.
    inputs : iterable of paths, default ()
        Inputs (e.g. the table the model was fitted on) that ``directory`` must not overlap
        (:func:`~fairpca_dist.io.atomic.check_output`).
    storage_options : dict, optional
        Options of the filesystem of a URL.

    Returns
    -------
    Path or str
        The folder, as given.

    Raises
    ------
    OutputPathError
        ``directory`` overlaps an input, or is a folder of other files: nothing is written.
    OutputBusyError
        Another writer holds ``directory``.
    WriteError
        The files cannot be written.

    Examples
    --------
    >>> import numpy as np
    >>> from fairpca_dist import GroupMoments, fit_projection, load_model, save_model
    >>> x = np.random.default_rng(0).normal(size=(100, 3))
    >>> moments = GroupMoments.from_arrays(x, ["a", "b"] * 50)
    >>> model = fit_projection(moments, 2, method="pca")
    >>> import tempfile
    >>> folder = save_model(model, f"{tempfile.mkdtemp()}/model", fingerprint=moments.fingerprint())
    >>> np.array_equal(load_model(folder).components, model.components)
    True
    """
    if is_url(directory):  # no rename there: both files go into a new version of the folder
        with atomic_directory(directory, inputs=inputs, marker=MODEL_FILE, storage_options=storage_options) as folder:
            write_model_files(model, folder, fingerprint=fingerprint)
        return as_given(directory)
    # model.npz and model.json of one model; the folder is checked against the inputs, its files need not be
    with output_lock(directory, inputs=inputs, marker=MODEL_FILE) as folder:
        write_model_files(model, folder, fingerprint=fingerprint)
    return as_given(directory)


def write_model_files(model: FairProjection, folder: Location, *, fingerprint: str | None = None) -> None:
    """``model.npz``, then ``model.json`` (the record, last) into ``folder``, each written whole
    (:func:`~fairpca_dist.io.atomic.atomic_file`): what :func:`save_model` writes, for a writer
    that holds the folder already (:func:`fairpca_dist.fit_table`'s staging folder)."""
    from fairpca_dist import __version__

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
            {"label": label_to_json(g), "count": int(n), "loss": float(loss), "error": float(e)}
            for g, n, loss, e in zip(
                model.group_labels, model.group_count, model.group_loss, model.group_error, strict=True
            )
        ],
        "group_columns": list(model.group_columns),
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
    with atomic_file(folder / ARRAYS_FILE, inputs=()) as staging, staging.open("wb") as f:
        np.savez(f, **{name: getattr(model, name) for name in _ARRAYS})
    with atomic_file(folder / MODEL_FILE, inputs=()) as staging:
        staging.write_text(json.dumps(record, indent=2) + "\n")


def load_model(directory: str | os.PathLike[str], storage_options: StorageOptions | None = None) -> FairProjection:
    """Read a model written by :func:`save_model`.

    The format version (not the library version) decides whether a model can be read. A
    folder without the model's files, a file that is truncated, or one edited into something
    inconsistent (a field missing, null or of the wrong type; arrays whose shapes do not match
    the feature names and groups, complex or non-finite values) raises :class:`InputError`
    naming the file and the field or array. ``directory`` may be a URL (``s3://…``), opened
    with ``storage_options``; on an object store its committed version is read.

    Parameters
    ----------
    directory : str or path-like
        The model folder (or its URL).
    storage_options : dict, optional
        Options of the filesystem of a URL.

    Returns
    -------
    FairProjection
        The model, with the options, certificate and details it was saved with.

    Raises
    ------
    InputError
        No model there, an unsupported ``format_version``, or a truncated or inconsistent file.
    AccessError
        The folder cannot be opened.
    """
    folder = model_folder(directory, storage_options)
    json_path = folder / MODEL_FILE
    record = _read_record(folder)
    field = partial(_field, json_path=json_path)
    version = field(record, "format_version", f"the model format, {MODEL_FORMAT_VERSION}", lambda value: True)
    if version != MODEL_FORMAT_VERSION:
        raise InputError(
            f"{json_path}: unsupported model format {version!r} (written by fairpca_dist "
            f"{record.get('library_version')!r}; this version reads format {MODEL_FORMAT_VERSION})"
        )
    arrays = read_model_file(folder, ARRAYS_FILE, _read_arrays)
    method = field(record, "method", "the method's name, as text", _is_text)
    diagnostics = field(record, "diagnostics", "an object", _is_object)
    groups = field(record, "groups", "a list of objects, one per group", _is_list)
    names = field(record, "feature_names", "a list of column names", _is_list)
    model = FairProjection(
        method=method,
        center=field(record, "center", f"one of {list(get_args(Center))}", lambda value: value in get_args(Center)),
        n_components=field(record, "n_components", "a whole number", _is_int),
        feature_names=tuple(
            field(names, i, "a column name, as text", _is_text, within="feature_names") for i in range(len(names))
        ),
        group_labels=tuple(
            label_from_json(
                field(
                    field(groups, i, "an object", _is_object, within="groups"),
                    "label",
                    "a group label: text, a number or {'tuple': [labels]}",
                    _is_label,
                    within=f"groups[{i}]",
                )
            )
            for i in range(len(groups))
        ),
        n_iter=field(diagnostics, "n_iter", "a whole number", _is_int, within="diagnostics"),
        converged=field(diagnostics, "converged", "true or false", _is_bool, within="diagnostics"),
        status=field(diagnostics, "status", "text", _is_text, within="diagnostics"),
        message=field(diagnostics, "message", "text", _is_text, within="diagnostics"),
        certificate=dict(field(diagnostics, "certificate", "an object", _is_object, within="diagnostics")),
        **_options_and_details(
            method,
            dict(field(record, "options", "an object", _is_object)),
            dict(field(diagnostics, "details", "an object", _is_object, within="diagnostics", default={})),
        ),
        group_columns=tuple(
            field(
                record,
                "group_columns",
                "a list of column names, as text",
                lambda value: _is_list(value) and all(map(_is_text, value)),
                default=[],
            )
        ),
        **arrays,
    )
    _check_consistent(model, json_path, folder / ARRAYS_FILE)
    return model


def model_folder(
    directory: str | os.PathLike[str] | Location, storage_options: StorageOptions | None = None
) -> Location:
    """Where the files of the model folder ``directory`` are: the folder, or on an object
    store its committed version (:func:`fairpca_dist.io.versions.committed`)."""
    return committed(locate(directory, storage_options))


def read_model_file(
    directory: str | os.PathLike[str] | Location,
    name: str,
    read: Callable[[Location], T],
    *,
    missing: str = "",
    storage_options: StorageOptions | None = None,
) -> T:
    """``read(path)`` of the file ``name`` of the model folder ``directory``, or one
    :class:`InputError` naming the file: the folder does not exist or is a file, the file is
    missing (``missing`` is appended: what writes it), or ``read`` fails on it (a truncated
    or foreign file). An :class:`InputError` raised by ``read`` passes as it is; a file that
    is there but cannot be opened (permission denied) raises :class:`AccessError` naming it.
    """
    folder = model_folder(directory, storage_options)
    path = folder / name
    with reading(folder):
        if not folder.isdir():
            state = "is a file, not a model folder" if folder.exists() else "does not exist"
            raise InputError(
                f"model folder {folder} {state} (fit_table, on the command line `fairpca fit`, writes one)"
            )
        if not path.isfile():
            raise InputError(f"{path} is missing{missing or _MODEL_FILES}")
    with reading(path), path.open("rb"):  # a file there that cannot be opened: AccessError (permission denied)
        pass
    try:
        return read(path)
    except InputError:
        raise
    except Exception as error:  # BadZipFile, EOFError, ValueError, KeyError: truncated or not written by us
        raise InputError(
            f"{path} cannot be read (truncated, or not written by fairpca_dist?): {type(error).__name__}: {error}"
        ) from error


def _read_record(folder: Location) -> dict[str, Any]:
    """model.json of a model folder, as an object (any content)."""
    record = read_model_file(folder, MODEL_FILE, _read_json)
    if not isinstance(record, dict):
        raise InputError(f"{folder / MODEL_FILE} does not hold a model record (a JSON object)")
    return record


def _read_json(path: Location) -> Any:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path} is not valid JSON (truncated or edited?): {error}") from error


class _Arrays(TypedDict):
    """The arrays of model.npz (:data:`_ARRAYS`)."""

    components: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    group_count: np.ndarray
    group_loss: np.ndarray
    group_error: np.ndarray
    objective_history: np.ndarray


class _OptionsAndDetails(TypedDict):
    options: dict[str, Any]
    details: dict[str, Any]


def _read_arrays(path: Location) -> _Arrays:
    with path.open("rb") as file, np.load(file, allow_pickle=False) as data:
        missing = [name for name in _ARRAYS if name not in data.files]
        if missing:
            raise InputError(f"{path} lacks the array(s) {missing}")
        return cast(_Arrays, {name: data[name] for name in _ARRAYS})


_REQUIRED = object()


def _field(
    record: Any,
    key: str | int,
    expected: str,
    accepts: Callable[[Any], bool],
    *,
    json_path: Location,
    within: str = "",
    default: Any = _REQUIRED,
) -> Any:
    """``record[key]`` if ``accepts`` it, else :class:`InputError` naming the file, the field
    (``within`` its parent, e.g. ``diagnostics.n_iter``, ``groups[1]``) and what it should be;
    a missing field is an error unless it has a ``default``."""
    name = f"{within}[{key}]" if isinstance(key, int) else f"{within}.{key}" if within else key
    if isinstance(record, dict) and key not in record:
        if default is not _REQUIRED:
            return default
        raise InputError(f"{json_path} lacks the field {name!r} ({expected})")
    value = record[key]
    if not accepts(value):
        shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:57]}..."
        raise InputError(f"{json_path}: field {name!r} is {'null' if value is None else shown}, expected {expected}")
    return value


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _is_label(value: Any) -> bool:
    """A group label as :func:`~fairpca_dist.engine.moments.label_to_json` writes it (never null: a
    row without a label belongs to no group)."""
    if isinstance(value, dict):
        parts = value.get("tuple")
        return set(value) == {"tuple"} and isinstance(parts, list) and len(parts) > 0 and all(map(_is_label, parts))
    return isinstance(value, (str, int, float))


def _options_and_details(method: str, options: dict[str, Any], details: dict[str, Any]) -> _OptionsAndDetails:
    """Options and details as the model holds them. Models written before ``details`` existed
    (same format) kept some of the solver's records among the options (jevd's selected columns,
    dro's radii, mmd's log); for a registered method, entries it does not accept move to the
    details, so that the options refit the same problem."""
    if method in SOLVERS:
        accepted = SOLVERS[method].options
        details = {**{name: value for name, value in options.items() if name not in accepted}, **details}
        options = {name: value for name, value in options.items() if name in accepted}
    return {"options": options, "details": details}


def _check_consistent(model: FairProjection, json_path: Location, npz_path: Location) -> None:
    """Shapes and values of the arrays against the record: an edited file fails here, not later."""
    p, k = len(model.feature_names), len(model.group_labels)
    width = model.components.shape[1] if model.components.ndim == 2 else -1
    expected = {
        "components": (p, width),
        "mean": (p,),
        "scale": (p,),
        "group_count": (k,),
        "group_loss": (k,),
        "group_error": (k,),
    }
    for name, shape in expected.items():
        array = getattr(model, name)
        if array.shape != shape or width < 1:
            raise InputError(
                f"{npz_path}: {name} has shape {array.shape}, but {json_path.name} lists {p} feature(s) "
                f"{list(model.feature_names)} and {k} group(s): expected {shape if width >= 1 else (p, 'r')}"
            )
        _check_real(array, name, npz_path)
        if not np.all(np.isfinite(array)):
            raise InputError(f"{npz_path}: {name} has values that are not finite numbers")
    _check_real(model.objective_history, "objective_history", npz_path)
    if model.objective_history.ndim != 1:
        raise InputError(f"{npz_path}: objective_history has shape {model.objective_history.shape}, expected (n_iter,)")
    if not np.all(model.scale > 0):
        raise InputError(f"{npz_path}: scale has values that are not positive")
    if not 1 <= model.n_components <= p:
        raise InputError(f"{json_path}: n_components={model.n_components} is not between 1 and {p}")
    parts = {len(label) if isinstance(label, tuple) else 1 for label in model.group_labels}
    if model.group_columns and parts != {len(model.group_columns)}:
        raise InputError(
            f"{json_path}: group_columns {list(model.group_columns)} do not match the group labels "
            f"(of {' or '.join(map(str, sorted(parts)))} part(s) each)"
        )


def _check_real(array: np.ndarray, name: str, npz_path: Location) -> None:
    """Model arrays hold real numbers (complex components load, then fail inside Arrow)."""
    if array.dtype.kind not in "fiu":
        kind = "complex numbers" if array.dtype.kind == "c" else "values that are not numbers"
        raise InputError(f"{npz_path}: {name} holds {kind} (dtype {array.dtype}); a model's arrays hold real numbers")


def read_fingerprint(directory: str | os.PathLike[str], storage_options: StorageOptions | None = None) -> str | None:
    """The data fingerprint recorded with a saved model."""
    folder = model_folder(directory, storage_options)
    return _field(
        _read_record(folder),
        "data_fingerprint",
        "text or null",
        lambda v: v is None or _is_text(v),
        json_path=folder / MODEL_FILE,
        default=None,
    )
