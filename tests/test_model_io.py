"""Model artifacts: model.npz + model.json, no pickle, exact round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import grouped_data
from fairpca_dist import FairPCA, InputError, load_model, save_model
from fairpca_dist.model_io import read_fingerprint


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
