"""Model artifacts: model.npz + model.json, no pickle, exact round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import grouped_data

from fairpca_dist import FairPCA, InputError, load_model, save_model
from fairpca_dist.io.model_io import read_fingerprint


def test_roundtrip(tmp_path):
    x, labels = grouped_data(n_rows=300, n_features=4)
    fpca = FairPCA(n_components=2, standardize=True).fit(x, sensitive_features=labels)
    folder = save_model(fpca.projection_, tmp_path / "model", fingerprint=fpca.moments_.fingerprint())
    assert sorted(p.name for p in folder.iterdir()) == ["model.json", "model.npz"]
    loaded = load_model(folder)
    for name in ("components", "mean", "scale", "group_loss", "group_error", "group_count", "objective_history"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(fpca.projection_, name))
    assert loaded.group_labels == ("g0", "g1", "g2")
    assert loaded.feature_names == ("x0", "x1", "x2", "x3")
    np.testing.assert_array_equal(loaded.transform(x), fpca.transform(x))
    record = json.loads((folder / "model.json").read_text())
    assert record["method"] == "pca" and record["library_version"]
    assert record["groups"][0]["count"] == int(fpca.group_counts_[0])
    assert read_fingerprint(folder) == fpca.moments_.fingerprint()
    with np.load(folder / "model.npz", allow_pickle=False) as data:
        assert all(data[name].dtype != object for name in data.files)


def test_missing_model_is_named(tmp_path):
    with pytest.raises(InputError, match="model.json is missing"):
        load_model(tmp_path)


@pytest.fixture()
def saved(tmp_path):
    x, labels = grouped_data(n_rows=300, n_features=3)
    return save_model(FairPCA(n_components=2).fit(x, sensitive_features=labels).projection_, tmp_path / "model")


def _edit_json(folder, path, value):
    record = json.loads((folder / "model.json").read_text())
    parent = record
    for key in path[:-1]:
        parent = parent[key]
    if value is KeyError:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    (folder / "model.json").write_text(json.dumps(record))


@pytest.mark.parametrize(
    "path, value, message",
    [
        (["method"], None, r"field 'method' is null, expected the method's name, as text"),
        (["center"], "middle", r"field 'center' is 'middle', expected one of \['group', 'global', 'origin'\]"),
        (["n_components"], "2", r"field 'n_components' is '2', expected a whole number"),
        (["n_components"], True, r"field 'n_components' is True, expected a whole number"),
        (["feature_names"], None, r"field 'feature_names' is null, expected a list of column names"),
        (["feature_names", 1], 7, r"field 'feature_names\[1\]' is 7, expected a column name, as text"),
        (["groups", 1], "g1", r"field 'groups\[1\]' is 'g1', expected an object"),
        (["groups", 0, "label"], None, r"field 'groups\[0\]\.label' is null, expected a group label"),
        (["options"], [], r"field 'options' is \[\], expected an object"),
        (["diagnostics"], None, r"field 'diagnostics' is null, expected an object"),
        (["diagnostics", "n_iter"], KeyError, r"lacks the field 'diagnostics\.n_iter' \(a whole number\)"),
        (["diagnostics", "converged"], "yes", r"field 'diagnostics\.converged' is 'yes', expected true or false"),
        (["diagnostics", "status"], 3, r"field 'diagnostics\.status' is 3, expected text"),
        (["diagnostics", "certificate"], None, r"field 'diagnostics\.certificate' is null, expected an object"),
        (["format_version"], KeyError, r"lacks the field 'format_version'"),
    ],
)
def test_a_malformed_field_of_model_json_is_named(saved, path, value, message):
    _edit_json(saved, path, value)
    with pytest.raises(InputError, match=rf"\S+model\.json:? .*{message}"):
        load_model(saved)


def test_a_malformed_fingerprint_is_named(saved):
    _edit_json(saved, ["data_fingerprint"], 5)
    with pytest.raises(InputError, match=r"model\.json: field 'data_fingerprint' is 5, expected text or null"):
        read_fingerprint(saved)


@pytest.mark.parametrize(
    "name, dtype, message",
    [
        ("components", complex, r"components holds complex numbers \(dtype complex128\)"),
        ("objective_history", complex, r"objective_history holds complex numbers \(dtype complex128\)"),
        ("mean", str, r"mean holds values that are not numbers \(dtype <U\d+\)"),
    ],
)
def test_model_arrays_that_are_not_real_numbers_are_refused_at_load(saved, name, dtype, message):
    # complex components loaded, then failed inside Arrow when a table was projected
    with np.load(saved / "model.npz") as data:
        arrays = dict(data)
    arrays[name] = arrays[name].astype(dtype)
    np.savez(saved / "model.npz", **arrays)
    with pytest.raises(InputError, match=rf"\S+model\.npz: {message}; a model's arrays hold real numbers"):
        load_model(saved)


def test_a_model_folder_without_its_files_is_named(saved, tmp_path):
    with pytest.raises(InputError, match=r"model folder \S+nowhere does not exist \(fit_table"):
        load_model(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=r"model folder \S+file is a file, not a model folder"):
        load_model(tmp_path / "file")
    (saved / "model.npz").write_bytes(b"")
    with pytest.raises(
        InputError, match=r"\S+model\.npz cannot be read \(truncated, or not written by fairpca_dist\?\)"
    ):
        load_model(saved)
    (saved / "model.npz").unlink()
    with pytest.raises(InputError, match=r"\S+model\.npz is missing \(a model folder holds model\.json and model\.npz"):
        load_model(saved)
