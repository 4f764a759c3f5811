"""Write-back: complete output or none, identical bytes on rerun."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import FairPCA, InputError, projection
from fairpca_dist.projection import SUCCESS_MARKER, project_table


@pytest.fixture()
def table(tmp_path):
    x, labels = grouped_data(n_rows=2000, n_features=4, n_groups=2)
    frame = pd.DataFrame(x, columns=list("abcd")).assign(id=np.arange(2000), g=labels)
    folder = tmp_path / "table"
    folder.mkdir()
    for i in range(0, 2000, 400):
        frame.iloc[i : i + 400].to_parquet(folder / f"part-{i // 400:05d}.parquet", index=False)
    model = FairPCA(n_components=2, method="fair-eig", standardize=True).fit(
        frame[list("abcd")], sensitive_features=labels
    )
    return folder, frame, model


def test_output_matches_the_estimator(table, tmp_path):
    folder, frame, model = table
    result = project_table(model.projection_, str(folder), tmp_path / "out", pass_through=["id"])
    assert result.rows == 2000 and result.partitions == 5 and result.columns == ("id", "fairpca0", "fairpca1")
    out = pd.read_parquet(tmp_path / "out")
    np.testing.assert_allclose(
        out[["fairpca0", "fairpca1"]].to_numpy(), model.transform(frame[list("abcd")]), atol=1e-10
    )
    assert json.loads((tmp_path / "out" / SUCCESS_MARKER).read_text())["rows"] == 2000


def test_failure_half_way_leaves_previous_output_and_rerun_is_identical(table, tmp_path, monkeypatch):
    folder, _, model = table
    project_table(model.projection_, str(folder), tmp_path / "out", pass_through=["id"])
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    real = projection._project_partition

    def fail_on_third(part, partition, *args):
        if partition.index == 2:
            raise OSError("disk went away")
        return real(part, partition, *args)

    monkeypatch.setattr(projection, "_project_partition", fail_on_third)
    with pytest.raises(OSError, match="disk went away"):
        project_table(model.projection_, str(folder), tmp_path / "out", pass_through=["id"])
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with pytest.raises(OSError):
        project_table(model.projection_, str(folder), tmp_path / "fresh", pass_through=["id"])
    assert not (tmp_path / "fresh").exists()
    monkeypatch.setattr(projection, "_project_partition", real)
    project_table(model.projection_, str(folder), tmp_path / "out", pass_through=["id"])
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


def test_bad_values_and_missing_features(table, tmp_path):
    folder, frame, model = table
    broken = frame.copy()
    broken.loc[5, "c"] = np.nan
    with pytest.raises(InputError, match="'c': 1 \\(NaN\\)"):
        project_table(model.projection_, broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="feature column 'd' not found"):
        project_table(model.projection_, frame.drop(columns="d"), tmp_path / "out")


def test_finite_values_whose_sum_overflows_are_projected_and_opposite_infinities_refused(table, tmp_path):
    """The check reads the partition's sum first: finite values whose sum overflows float64 are
    still projected (the exact check finds nothing), and +inf and -inf, whose sum is NaN, are named."""
    folder, frame, model = table
    huge = frame.copy()
    huge.loc[:3, "a"] = np.finfo(np.float64).max  # the sum is inf; every value is finite
    project_table(model.projection_, huge, tmp_path / "huge")
    written = pd.read_parquet(tmp_path / "huge")
    assert len(written) == len(frame) and np.isfinite(written.iloc[4:].to_numpy(dtype=float)).all()
    both = frame.copy()
    both.loc[1, "b"], both.loc[2, "d"] = np.inf, -np.inf
    with pytest.raises(InputError, match="'b': 1 \\(inf\\), 'd': 1 \\(inf\\)"):
        project_table(model.projection_, both, tmp_path / "both")
    assert not (tmp_path / "both").exists()


def test_transform_in_blocks_equals_the_whole_array_expression(monkeypatch):
    """Rows far from the origin (offset 1e8) across several blocks, in C and Fortran order: the
    blocked transform computes ((x − mean) / scale) @ components row by row as written."""
    from fairpca_dist.solvers import result

    monkeypatch.setattr(result, "TRANSFORM_BLOCK_ROWS", 1000)
    x, labels = grouped_data(n_rows=4500, n_features=6, n_groups=2, offset=1e8)
    model = FairPCA(n_components=3, method="fair-eig", standardize=True).fit(x, sensitive_features=labels).projection_
    expected = ((x - model.mean) / model.scale) @ model.components
    for rows, want in ((x, expected), (np.asfortranarray(x), expected), (x[::-1], expected[::-1])):
        np.testing.assert_allclose(model.transform(rows), want, rtol=1e-13, atol=1e-13 * np.abs(expected).max())
    assert model.transform(x[:0]).shape == (0, 3)
