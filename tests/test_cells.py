"""Cells: one pass keeps moments per cell; any union of cells equals a direct pass over its rows."""

from __future__ import annotations

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data
from test_moments import assert_matches_reference

from fairpca_dist import (
    CellMoments,
    GroupError,
    GroupMoments,
    HashCells,
    InputError,
    SchemaError,
    compute_moments,
)

FEATURES = ["f0", "f1", "f2", "f3", "f4"]


def table(n_rows: int = 3000, *, offset: float = 0.0, n_cells: int = 10, seed: int = 0) -> pd.DataFrame:
    """Grouped rows with a key column ``id`` (text), a cells column ``cell`` and features f0…f4."""
    x, labels = grouped_data(n_rows=n_rows, n_features=5, seed=seed, offset=offset)
    rng = np.random.default_rng(seed + 1)
    frame = pd.DataFrame(x, columns=FEATURES).assign(group=labels)
    frame["id"] = [f"row-{i:06d}" for i in rng.permutation(n_rows)]
    frame["cell"] = rng.integers(0, n_cells, size=n_rows)
    return frame


def direct(frame: pd.DataFrame) -> GroupMoments:
    """A separate pass over exactly these rows."""
    return compute_moments(frame, sensitive_feature="group", features=FEATURES, chunk_rows=700)


def assert_same_moments(a: GroupMoments, b: GroupMoments, rtol: float = 1e-10) -> None:
    assert a.groups == b.groups and a.feature_names == b.feature_names
    np.testing.assert_array_equal(a.count, b.count)
    np.testing.assert_allclose(a.weight, b.weight, rtol=1e-12)
    scale = np.abs(b.scatter).max()
    np.testing.assert_allclose(a.scatter, b.scatter, rtol=0, atol=rtol * scale)
    std = np.sqrt(np.abs(np.diagonal(b.scatter, axis1=1, axis2=2)) / b.weight[:, None]).max()
    np.testing.assert_allclose(a.means_about(b.origin[0]), b.means_about(b.origin[0]), rtol=0, atol=rtol * std)


def assert_same_cells(a: CellMoments, b: CellMoments, rtol: float = 1e-10) -> None:
    assert a.cells == b.cells and a.groups == b.groups
    np.testing.assert_array_equal(a.count, b.count)
    for cell in a.cells:
        present = a[cell].count > 0
        np.testing.assert_allclose(a[cell].scatter, b[cell].scatter, rtol=0, atol=rtol * np.abs(b[cell].scatter).max())
        np.testing.assert_allclose(a[cell].mean[present], b[cell].mean[present], rtol=1e-14, atol=rtol)


# ----------------------------------------------------------------------------- unions are exact
@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_unions_of_column_cells_equal_a_direct_pass(offset):
    frame = table(offset=offset)
    by_cell = compute_moments(frame, sensitive_feature="group", features=FEATURES, cells="cell", chunk_rows=256)
    assert by_cell.cells == tuple(range(10)) and by_cell.groups == ("g0", "g1", "g2")
    assert by_cell.assignment == "cell"
    np.testing.assert_array_equal(by_cell.count, pd.crosstab(frame["cell"], frame["group"]).to_numpy())
    rng = np.random.default_rng(5)
    for _ in range(4):  # random train/test splits of 3 test cells
        test_cells = rng.choice(10, size=3, replace=False).tolist()
        in_test = frame["cell"].isin(test_cells)
        assert_same_moments(by_cell.union(test_cells), direct(frame[in_test]))
        assert_same_moments(by_cell.complement(test_cells), direct(frame[~in_test]))
        x = frame.loc[~in_test, FEATURES].to_numpy()
        assert_matches_reference(by_cell.complement(test_cells), x, frame.loc[~in_test, "group"].to_numpy())
    for fold in np.array_split(rng.permutation(10), 5):  # 5-fold CV, 2 cells per fold
        held_out = frame["cell"].isin(fold)
        assert_same_moments(by_cell.complement(fold), direct(frame[~held_out]))
        assert_same_moments(by_cell.union(fold), direct(frame[held_out]))
    assert_same_moments(by_cell.total(), direct(frame))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unions_of_hash_cells_equal_a_direct_pass(seed):
    frame = table(offset=1e8)
    spec = HashCells(("id",), n_cells=10, seed=seed)
    by_cell = compute_moments(frame, sensitive_feature="group", features=FEATURES, cells=spec, chunk_rows=333)
    assert by_cell.assignment == spec and by_cell.cells == tuple(range(10))
    cell = spec.assign(frame[["id"]])
    rng = np.random.default_rng(seed)
    for _ in range(3):  # repeated random 30/70 splits
        test_cells = rng.choice(10, size=3, replace=False)
        in_test = np.isin(cell, test_cells)
        assert_same_moments(by_cell.union(test_cells), direct(frame[in_test]))
        assert_same_moments(by_cell.complement(test_cells), direct(frame[~in_test]))


def test_union_is_exact_when_cells_lack_groups_far_from_the_origin():
    # Rows sorted by group, cells by position: cell 0 holds only g0, cell 9 only g2. A group a
    # cell lacks is stored with count 0 and a zero origin; a merge that used that origin as the
    # reference of the mean would lose eight digits of the mean at 1e8.
    rng = np.random.default_rng(2)
    x = rng.integers(-1000, 1000, size=(4000, 3)).astype(float)
    labels = np.repeat(["a", "b", "c"], [1500, 1000, 1500])
    cells = np.arange(4000) * 8 // 4000
    near = CellMoments.from_arrays(x, cells, labels)
    far = compute_moments(x + 1e8, sensitive_feature=labels, cells=cells, chunk_rows=450)
    assert far.count[0].tolist() == [500, 0, 0] and far.count[7].tolist() == [0, 0, 500]
    for chosen in ([0, 3, 5], [2, 3, 4, 7], [1, 4, 6], list(range(8))):
        union, reference = far.union(chosen), near.union(chosen)
        np.testing.assert_allclose(union.scatter, reference.scatter, rtol=1e-12)
        np.testing.assert_allclose(union.means_about(np.full(3, 1e8)), reference.mean, rtol=0, atol=1e-9)
        mask = np.isin(cells, chosen)
        assert_matches_reference(union, x[mask] + 1e8, labels[mask])


def test_weighted_cells_equal_weighted_direct_pass():
    frame = table().assign(w=np.random.default_rng(4).uniform(0.1, 3.0, size=3000))
    roles = {"sensitive_feature": "group", "features": FEATURES, "sample_weight": "w", "chunk_rows": 400}
    by_cell = compute_moments(frame, cells="cell", **roles)
    chosen = frame["cell"].isin([1, 4, 8])
    assert_same_moments(by_cell.union([8, 4, 1]), compute_moments(frame[chosen], **roles))


def test_total_equals_the_pass_without_cells_and_reads_each_partition_once(monkeypatch):
    from fairpca_dist.engine import passes, sources

    frame = table(offset=1e8)
    monkeypatch.setattr(passes, "_active_client", lambda: None)  # this process's threads, even with a session client
    calls = []
    read_chunk = sources.read_chunk
    monkeypatch.setattr(sources, "read_chunk", lambda *a, **k: calls.append(1) or read_chunk(*a, **k))
    by_cell = compute_moments(
        frame, sensitive_feature="group", features=FEATURES, cells=HashCells(("id",), 6), chunk_rows=500
    )
    assert len(calls) == 6  # one task per partition: splits cost no extra pass
    assert_same_moments(by_cell.total(), direct(frame), rtol=1e-12)


# ----------------------------------------------------------------------------- every input and scheduler
def test_parquet_csv_and_distributed_equal_the_in_memory_path(tmp_path, dask_cluster):
    frame = table(n_rows=4000, offset=1e8)
    folder = tmp_path / "table"
    folder.mkdir()
    for i in range(0, 4000, 900):
        frame.iloc[i : i + 900].to_parquet(folder / f"part-{i:05d}.parquet")
    frame.to_csv(tmp_path / "table.csv", index=False)
    roles = {"sensitive_feature": "group", "features": FEATURES}
    for cells in ("cell", HashCells(("id",), n_cells=10, seed=7)):
        in_memory = compute_moments(frame, cells=cells, chunk_rows=4000, **roles)
        threaded = compute_moments(str(folder), cells=cells, **roles)
        distributed = compute_moments(str(folder), cells=cells, client=dask_cluster, **roles)
        from_csv = compute_moments(
            str(tmp_path / "table.csv"), cells=cells, read_options={"blocksize": 100_000}, **roles
        )
        for other in (threaded, distributed, from_csv):
            assert other.assignment == in_memory.assignment
            assert_same_cells(other, in_memory)


def test_arrays_and_dask_frames_equal_the_pandas_path():
    frame = table(offset=1e8)
    x, labels, cell = frame[FEATURES].to_numpy(), frame["group"].to_numpy(), frame["cell"].to_numpy()
    pandas_path = compute_moments(frame, sensitive_feature="group", features=FEATURES, cells="cell", chunk_rows=3000)
    from_numpy = compute_moments(x, sensitive_feature=labels, cells=cell, chunk_rows=512, feature_names=FEATURES)
    from_dask_array = compute_moments(
        da.from_array(x, chunks=(700, 5)),
        sensitive_feature=da.from_array(labels.astype(str), chunks=300),
        cells=da.from_array(cell, chunks=1000),
        feature_names=FEATURES,
    )
    from_dask_frame = compute_moments(
        dd.from_pandas(frame, npartitions=7), sensitive_feature="group", features=FEATURES, cells="cell"
    )
    reference = CellMoments.from_arrays(x, cell, labels, feature_names=FEATURES)
    for other in (from_numpy, from_dask_array, from_dask_frame, reference):
        assert_same_cells(other, pandas_path)
    assert from_numpy.assignment is None


def test_hash_cells_over_all_columns_need_no_key_and_agree_for_arrays_and_frames():
    frame = table()
    spec = HashCells((), n_cells=4, seed=3)
    from_frame = compute_moments(frame[[*FEATURES, "group"]], sensitive_feature="group", cells=spec, chunk_rows=250)
    x, labels = frame[FEATURES].to_numpy(), frame["group"].to_numpy()
    from_numpy = compute_moments(x, sensitive_feature=labels, cells=spec, feature_names=FEATURES, chunk_rows=1000)
    assert_same_cells(from_numpy, from_frame)
    reordered = compute_moments(frame, sensitive_feature="group", features=FEATURES[::-1], cells=spec)
    np.testing.assert_array_equal(reordered.count, from_frame.count)  # the order of features does not matter
    # Duplicated rows always share a cell.
    doubled = pd.concat([frame, frame.iloc[:500]], ignore_index=True)[[*FEATURES, "group"]]
    cell = spec.assign(doubled[sorted(FEATURES) + ["group"]])
    np.testing.assert_array_equal(cell[:500], cell[3000:])


# ----------------------------------------------------------------------------- hash cells are reproducible
def test_hash_cells_survive_repartitioning_shuffling_and_dtypes():
    frame = table().assign(number=np.arange(3000) * 7 - 5000)
    spec = HashCells(("id", "number"), n_cells=8, seed=11)
    shuffled = frame.sample(frac=1.0, random_state=3)
    cells = spec.assign(frame[["id", "number"]])
    np.testing.assert_array_equal(spec.assign(shuffled[["id", "number"]]), cells[shuffled.index.to_numpy()])
    variants = {
        "int32 / categorical": frame[["id", "number"]].astype({"number": np.int32, "id": "category"}),
        "float / object": frame[["id", "number"]].astype({"number": float, "id": object}),
        "nullable / arrow": frame[["id", "number"]].astype({"number": "Int64", "id": "string[pyarrow]"}),
    }
    for name, columns in variants.items():
        np.testing.assert_array_equal(spec.assign(columns), cells, err_msg=name)
    roles = {"sensitive_feature": "group", "features": FEATURES, "cells": spec}
    one = compute_moments(frame, chunk_rows=3000, **roles)
    many = compute_moments(shuffled, chunk_rows=97, **roles)
    assert_same_cells(many, one)
    np.testing.assert_array_equal(one.count.sum(axis=1), np.bincount(cells, minlength=8))
    assert not np.array_equal(HashCells(("id", "number"), 8, seed=12).assign(frame[["id", "number"]]), cells)


def test_hash_cells_are_pinned():
    # Saved cell moments stay valid only if the same rows keep getting the same cells: these
    # ids are part of the format (a change in the hash or in pandas' hashing shows here).
    ids = pd.DataFrame({"id": np.arange(12)})
    assert HashCells(("id",), 10).assign(ids).tolist() == [1, 6, 6, 2, 8, 4, 7, 9, 4, 3, 8, 8]
    assert HashCells(("id",), 10, seed=1).assign(ids).tolist() == [8, 3, 2, 4, 2, 9, 5, 3, 0, 9, 0, 6]
    text = pd.DataFrame({"id": [f"cust-{i}" for i in range(12)]})
    assert HashCells(("id",), 10).assign(text).tolist() == [8, 4, 6, 9, 2, 8, 7, 0, 3, 3, 1, 5]


def test_hash_cells_spread_rows_evenly_and_small_tables_keep_empty_cells():
    counts = np.bincount(HashCells(("id",), 10, seed=3).assign(pd.DataFrame({"id": np.arange(100_000)})))
    assert np.abs(counts - 10_000).max() < 5 * np.sqrt(10_000)
    frame = table(n_rows=40)
    by_cell = compute_moments(frame, sensitive_feature="group", features=FEATURES, cells=HashCells(("id",), 64))
    assert by_cell.cells == tuple(range(64)) and by_cell.n_samples == 40
    assert (by_cell.count.sum(axis=1) == 0).any()


# ----------------------------------------------------------------------------- merging and persistence
def test_chunks_merge_with_plus():
    frame = table(offset=1e8)
    roles = {"sensitive_feature": "group", "features": FEATURES, "cells": "cell"}
    whole = compute_moments(frame, **roles)
    first, second = compute_moments(frame.iloc[:1000], **roles), compute_moments(frame.iloc[1000:], **roles)
    assert_same_cells(first + second, whole)
    assert_same_cells(second + first, whole)
    assert_same_cells(CellMoments.empty(FEATURES, assignment="cell") + whole, whole, rtol=0)
    with pytest.raises(InputError, match="assigned by 'cell'"):
        whole + compute_moments(frame, sensitive_feature="group", features=FEATURES, cells=HashCells(("id",), 10))
    with pytest.raises(SchemaError, match="different features"):
        whole + compute_moments(frame, sensitive_feature="group", features=FEATURES[:3], cells="cell")


@pytest.mark.parametrize("cells", ["cell", HashCells(("id",), 5, seed=9), "labels per row"])
def test_save_load_roundtrip_without_pickle(tmp_path, cells):
    frame = table(n_rows=600, offset=1e8)
    cells = frame["cell"].to_numpy() if cells == "labels per row" else cells
    by_cell = compute_moments(frame, sensitive_feature="group", features=FEATURES, cells=cells)
    path = tmp_path / "cells.npz"
    by_cell.save(path)
    with np.load(path, allow_pickle=False) as data:
        assert data["scatter"].shape == (by_cell.n_cells, 3, 5, 5)
    loaded = CellMoments.load(path)
    assert loaded.assignment == by_cell.assignment
    assert loaded.fingerprint() == by_cell.fingerprint()
    assert_same_cells(loaded, by_cell, rtol=0)
    assert_same_moments(loaded.union(loaded.cells[:2]), by_cell.union(by_cell.cells[:2]), rtol=0)
    with pytest.raises(InputError, match="CellMoments.load"):
        GroupMoments.load(path)
    by_cell.total().save(tmp_path / "plain.npz")
    with pytest.raises(InputError, match="not per-cell moments"):
        CellMoments.load(tmp_path / "plain.npz")


def test_fingerprint_tells_cells_apart():
    frame = table(n_rows=600)
    roles = {"sensitive_feature": "group", "features": FEATURES, "chunk_rows": 150}
    a = compute_moments(frame, cells="cell", **roles)
    assert a.fingerprint() == compute_moments(frame, cells="cell", **roles).fingerprint()
    moved = frame.assign(cell=np.where(np.arange(600) == 0, (frame["cell"] + 1) % 10, frame["cell"]))
    assert a.fingerprint() != compute_moments(moved, cells="cell", **roles).fingerprint()
    assert a.fingerprint() != compute_moments(frame.assign(cell=frame["cell"] + 1), cells="cell", **roles).fingerprint()


# ----------------------------------------------------------------------------- errors
def test_union_errors_name_the_cells_and_the_group():
    x, labels = grouped_data(n_rows=300, n_groups=3)
    cells = np.where(labels == "g2", 0, 1 + np.arange(300) % 3)  # g2 only in cell 0
    cells[np.flatnonzero(labels == "g2")[0]] = 2  # ... and one row of it in cell 2
    by_cell = CellMoments.from_arrays(x, cells, labels)
    with pytest.raises(GroupError, match=r"cell\(s\) \[1, 3\] hold too few rows of group\(s\) 'g2': 0 row\(s\)"):
        by_cell.union([3, 1])
    with pytest.raises(GroupError, match=r"cell\(s\) \[2\] hold too few rows of group\(s\) 'g2': 1 row\(s\)"):
        by_cell.union(2)
    assert by_cell.union(2, min_group_size=1).count[2] == 1
    with pytest.raises(GroupError, match=r"\[1, 2, 3\] \(all but \[0\]\) hold too few rows of group\(s\) 'g2': 1 row"):
        by_cell.complement([0])
    with pytest.raises(InputError, match=r"unknown cell\(s\) \[7\]; the cells are \[0, 1, 2, 3\]"):
        by_cell.union([1, 7])
    with pytest.raises(InputError, match="listed more than once"):
        by_cell.union([0, 1, 1])
    with pytest.raises(InputError, match="complement of cell.* is empty"):
        by_cell.complement(by_cell.cells)
    with pytest.raises(InputError, match="no cells given"):
        by_cell.union([])
    with pytest.raises(KeyError, match="no cell 9"):
        by_cell[9]
    assert_same_moments(by_cell.union({0, 3}), by_cell.union(np.array([3, 0])), rtol=0)
    with pytest.raises(InputError, match=r"1 missing cell label\(s\)"):
        CellMoments.from_arrays(x[:3], [0, None, 1], labels[:3])
    assert by_cell[1].count[2] == 0 and set(by_cell) == {0, 1, 2, 3} and 9 not in by_cell


def poisoned(frame: pd.DataFrame) -> dd.DataFrame:
    """A dask DataFrame whose partitions fail if read: errors raised with it come before any pass."""

    def fail() -> pd.DataFrame:
        raise AssertionError("a partition was read")

    return dd.from_delayed([dask.delayed(fail)()], meta=frame.iloc[:0], verify_meta=False)


def test_bad_cell_specs_are_refused_before_any_pass():
    frame = table(n_rows=200)
    lazy = poisoned(frame)
    with pytest.raises(SchemaError, match="cells column 'cel' not found; did you mean 'cell'"):
        compute_moments(lazy, sensitive_feature="group", cells="cel")
    with pytest.raises(SchemaError, match="HashCells key column 'idd' not found; did you mean 'id'"):
        compute_moments(lazy, sensitive_feature="group", cells=HashCells(("id", "idd"), 4))
    with pytest.raises(SchemaError, match="'cell' is used both as a feature and as the cells column"):
        compute_moments(lazy, sensitive_feature="group", features=[*FEATURES, "cell"], cells="cell")
    with pytest.raises(SchemaError, match="cells column 'group' is also the sensitive"):
        compute_moments(lazy, sensitive_feature="group", cells="group")
    with pytest.raises(SchemaError, match="array input has no cells column 'cell'"):
        compute_moments(frame[FEATURES].to_numpy(), sensitive_feature=frame["group"].to_numpy(), cells="cell")
    with pytest.raises(SchemaError, match="HashCells key column 'id' is not a feature of the array"):
        compute_moments(
            frame[FEATURES].to_numpy(), sensitive_feature=frame["group"].to_numpy(), cells=HashCells(("id",), 3)
        )
    with pytest.raises(SchemaError, match="column names \\(cells too\\)"):
        compute_moments(dd.from_pandas(frame, npartitions=2), sensitive_feature="group", cells=np.zeros(200))
    with pytest.raises(SchemaError, match="cells has 199 values but the data has 200 rows"):
        compute_moments(frame, sensitive_feature="group", cells=np.zeros(199))
    with pytest.raises(InputError, match="n_cells=1 must be an integer >= 2"):
        HashCells(("id",), 1)
    with pytest.raises(InputError, match="key_columns must be column names"):
        HashCells((3,), 4)
    # The default features leave out the cells column and the hash keys.
    by_cell = compute_moments(frame.assign(key=np.arange(200)), sensitive_feature="group", cells=HashCells(("key",), 3))
    assert by_cell.feature_names == tuple(FEATURES) + ("cell",)
    assert compute_moments(frame, sensitive_feature="group", cells="cell").feature_names == tuple(FEATURES)
    listed = compute_moments(
        frame, sensitive_feature="group", features=FEATURES[:2], cells=HashCells(("f0", "group"), 3)
    )
    assert listed.feature_names == ("f0", "f1")  # a key column may be a listed feature, or the group column


def test_missing_cell_labels_and_keys_name_column_and_partition():
    frame = table(n_rows=600).assign(cell=lambda f: f["cell"].astype(float))
    frame.loc[450, "cell"] = np.nan
    with pytest.raises(InputError, match=r"cells column 'cell' has 1 missing label\(s\) in partition 2"):
        compute_moments(frame, sensitive_feature="group", features=FEATURES, cells="cell", chunk_rows=200)
    frame.loc[[10, 20], "id"] = None
    with pytest.raises(InputError, match=r"HashCells key column 'id' has 2 missing value\(s\) in partition 0"):
        compute_moments(
            frame, sensitive_feature="group", features=FEATURES, cells=HashCells(("id",), 4), chunk_rows=200
        )
    labels = np.array(["a", None, "b"] * 100, dtype=object)
    with pytest.raises(InputError, match=r"cells has 100 missing label\(s\) in partition 0"):
        compute_moments(
            frame[FEATURES].to_numpy()[:300], sensitive_feature=frame["group"].to_numpy()[:300], cells=labels
        )
