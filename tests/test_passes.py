"""compute_moments: the one dask pass equals numpy for any partitioning and scheduler."""

from __future__ import annotations

import importlib

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data, reference_moments
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_moments import assert_matches_reference

from fairpca_dist import GroupMoments, InputError, compute_moments


def frame_with_partitions(frame: pd.DataFrame, sizes: list[int]) -> dd.DataFrame:
    """A dask DataFrame whose partitions have exactly ``sizes`` rows (zeros allowed)."""
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    parts = [dask.delayed(frame.iloc.__getitem__)(slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return dd.from_delayed(parts, meta=frame.iloc[:0], verify_meta=False)


@st.composite
def partitioned_tables(draw):
    n_groups = draw(st.integers(2, 4))
    sizes = draw(st.lists(st.integers(0, 30), min_size=1, max_size=8))
    total = sum(sizes)
    codes = draw(st.lists(st.integers(0, n_groups - 1), min_size=total, max_size=total))
    if draw(st.booleans()):  # sorted by group: most partitions miss most groups
        codes = sorted(codes)
    offset = draw(st.sampled_from([0.0, 1e8]))
    return sizes, np.array(codes, dtype=int), offset, draw(st.integers(0, 2**16))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(partitioned_tables(), st.sampled_from([2, 3, 8]))
def test_any_partitioning_equals_numpy(table, split_every):
    sizes, codes, offset, seed = table
    labels = np.array([f"g{c}" for c in codes], dtype=object)
    counts = pd.Series(labels).value_counts()
    if len(counts) < 2 or counts.min() < 2:
        return  # not a valid fair-PCA table; the error paths are tested separately
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(len(codes), 3)) * [1.0, 10.0, 0.1] + offset
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(group=labels)
    moments = compute_moments(frame_with_partitions(frame, sizes), sensitive_feature="group", split_every=split_every)
    assert_matches_reference(moments, x, labels)


def test_dask_array_with_empty_and_uneven_chunks():
    x, labels = grouped_data(n_rows=500, offset=1e8)
    chunks = ((0, 120, 7, 0, 300, 73), (5,))
    moments = compute_moments(da.from_array(x, chunks=chunks), sensitive_feature=labels)
    assert_matches_reference(moments, x, labels)
    lazy_labels = da.from_array(labels.astype(str), chunks=50)
    assert_matches_reference(
        compute_moments(da.from_array(x, chunks=(64, 2)), sensitive_feature=lazy_labels), x, labels
    )


def test_threaded_and_distributed_agree_from_parquet(tmp_path, dask_cluster):
    x, labels = grouped_data(n_rows=3000, n_features=6, offset=1e8)
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(6)]).assign(group=labels, row_id=np.arange(3000))
    folder = tmp_path / "table"
    folder.mkdir()
    for i in range(0, 3000, 700):
        frame.iloc[i : i + 700].to_parquet(folder / f"part-{i:05d}.parquet")
    threaded = compute_moments(str(folder), sensitive_feature="group", key_columns=["row_id"])
    distributed = compute_moments(str(folder), sensitive_feature="group", key_columns=["row_id"], client=dask_cluster)
    by_address = compute_moments(
        str(folder / "*.parquet"),
        sensitive_feature="group",
        key_columns=["row_id"],
        client=dask_cluster.scheduler.address,
    )
    for moments in (threaded, distributed, by_address):
        assert moments.feature_names == tuple(f"f{j}" for j in range(6))
        assert_matches_reference(moments, x, labels)


def test_parquet_row_groups_become_partitions(tmp_path, monkeypatch):
    # Large files are read as several partitions of packed row groups (bounded task memory);
    # the statistics do not depend on it, and a bad value is named with its partition.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairpca_dist.engine import sources

    x, labels = grouped_data(n_rows=4000, n_features=4, offset=1e8)
    frame = pd.DataFrame(x, columns=list("abcd")).assign(group=labels)
    path = tmp_path / "one.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    monkeypatch.setattr(sources, "PARQUET_PARTITION_BYTES", "40 kB")  # two row groups of ~20 kB
    assert sources.open_table(str(path), sensitive_feature="group").n_partitions == 4
    assert (
        sources.open_table(str(path), sensitive_feature="group", read_options={"split_row_groups": False}).n_partitions
        == 1
    )
    assert_matches_reference(compute_moments(str(path), sensitive_feature="group"), x, labels)
    # dask's pyarrow-filesystem reader plans its own partitions and refuses split_row_groups.
    arrow = compute_moments(str(path), sensitive_feature="group", read_options={"filesystem": "arrow"})
    assert_matches_reference(arrow, x, labels)
    frame.loc[3100, "c"] = np.nan
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    with pytest.raises(InputError, match=r"partition 3 \(file \S+one\.parquet\): 'c': 1 \(NaN\)"):
        compute_moments(str(path), sensitive_feature="group")


def test_csv_intersectional_groups_and_weight_column(tmp_path):
    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    frame["sex"] = rng.choice(["f", "m"], size=n)
    frame["band"] = rng.choice([1, 2], size=n)
    frame["w"] = rng.uniform(0.5, 2.0, size=n)
    frame["note"] = "text column, ignored by default"
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    moments = compute_moments(
        str(path), sensitive_feature=["sex", "band"], sample_weight="w", read_options={"blocksize": 4000}
    )
    assert moments.feature_names == ("a", "b", "c")
    labels = np.empty(n, dtype=object)
    labels[:] = list(zip(frame["sex"], frame["band"], strict=True))
    assert moments.groups == (("f", 1), ("f", 2), ("m", 1), ("m", 2))
    reference = GroupMoments.from_arrays(frame[["a", "b", "c"]].to_numpy(), labels, weights=frame["w"].to_numpy())
    np.testing.assert_allclose(moments.scatter, reference.scatter, rtol=1e-10)
    np.testing.assert_allclose(moments.weight, reference.weight, rtol=1e-12)


def test_in_memory_frame_and_numpy_agree():
    x, labels = grouped_data(n_rows=1000)
    frame = pd.DataFrame(x, columns=list("abcde")).assign(g=labels)
    from_frame = compute_moments(frame, sensitive_feature="g", chunk_rows=128)
    from_numpy = compute_moments(x, sensitive_feature=labels, chunk_rows=1000, feature_names=list("abcde"))
    np.testing.assert_allclose(from_frame.scatter, from_numpy.scatter, rtol=1e-12)
    assert from_frame.feature_names == from_numpy.feature_names == tuple("abcde")


@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_credit_moments_equal_numpy(credit_frame, offset):
    x = credit_frame.drop(columns="education").to_numpy() + offset
    labels = credit_frame["education"].to_numpy()
    frame = pd.DataFrame(x, columns=credit_frame.columns[:-1]).assign(education=labels)
    moments = compute_moments(frame, sensitive_feature="education", chunk_rows=4096)
    assert moments.groups == ("high", "low") and moments.count.tolist() == [24615, 5385]
    reference = reference_moments(x, labels)
    for i, (count, _, mean, scatter) in enumerate(reference.values()):
        np.testing.assert_allclose(moments.scatter[i], scatter, rtol=1e-10)
        std = np.sqrt(np.diag(scatter) / count)
        np.testing.assert_allclose(moments.mean[i], mean, rtol=0, atol=1e-10 * std.max())


def test_large_partitions_are_read_in_slabs(monkeypatch):
    from fairpca_dist.engine import passes

    monkeypatch.setattr(passes, "_SLAB_BYTES", 1000 * 4 * 8)  # five slabs of 1000 rows
    x, labels = grouped_data(n_rows=5000, n_features=4, offset=1e8)
    frame = pd.DataFrame(x, columns=list("abcd")).assign(g=labels)
    frame.loc[[321, 4321], "c"] = np.nan  # in two slabs: both counted
    frame.loc[2500, "a"] = np.inf
    with pytest.raises(InputError, match="'a': 1 \\(inf\\), 'c': 2 \\(NaN\\)"):
        compute_moments(frame, sensitive_feature="g", chunk_rows=5000)
    frame.loc[2500, "a"] = 1e200  # finite, but its square is not
    frame.loc[[321, 4321], "c"] = 0.0
    with pytest.raises(InputError, match="overflow float64 when squared \\(largest \\|value\\| 1e\\+200 in 'a'\\)"):
        compute_moments(frame, sensitive_feature="g", chunk_rows=5000)
    frame.loc[2500, "a"] = x[2500, 0]
    assert_matches_reference(
        compute_moments(frame, sensitive_feature="g", chunk_rows=5000), frame[list("abcd")].to_numpy(), labels
    )


@pytest.mark.parametrize(
    "labels",
    [
        np.array([-128, 127, 0], dtype=np.int8),
        np.array([0, 255], dtype=np.uint8),
        np.array([False, True]),
        np.array([2**63 + 1, 2**63 + 5], dtype=np.uint64),
        np.array([-(2**63), 2**63 - 1]),  # range too wide for direct coding: hashed
        np.array([3, 70_000, 9]),  # sparse integer labels
    ],
    ids=["int8 extremes", "uint8", "bool", "uint64 above 2**63", "int64 full range", "sparse int"],
)
def test_integer_labels_group_like_their_text(labels):
    # Integer labels take a direct-coding fast path; it must group exactly like the same labels
    # as strings, keep the label values and types, and work when partitions miss groups.
    rng = np.random.default_rng(5)
    pick = np.sort(rng.integers(0, len(labels), size=900))  # sorted: partitions miss groups
    x = rng.normal(size=(900, 3)) + 1e8
    by_value = compute_moments(x, sensitive_feature=labels[pick], chunk_rows=128)
    by_text = compute_moments(x, sensitive_feature=labels[pick].astype(str), chunk_rows=128)
    assert by_value.groups == tuple(sorted(labels.tolist()))
    assert all(type(group) is type(labels.tolist()[0]) for group in by_value.groups)
    order = np.argsort([str(group) for group in by_value.groups])
    expected = np.argsort(by_text.groups)
    np.testing.assert_array_equal(by_value.count[order], by_text.count[expected])
    np.testing.assert_allclose(by_value.scatter[order], by_text.scatter[expected], rtol=1e-13)
    assert_matches_reference(by_value, x, labels[pick])


def test_threaded_passes_run_blas_single_threaded():
    # Two dask threads each calling a 2-thread BLAS oversubscribe 2 cores; the threaded path
    # limits every loaded BLAS to one thread per task, and restores the caller's setting.
    from threadpoolctl import threadpool_info, threadpool_limits

    from fairpca_dist.engine.passes import run_graph

    def blas_threads() -> dict[str, int]:
        return {pool["filepath"]: pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    run_graph(dask.delayed(len)([]))
    importlib.import_module("scipy.linalg")  # may load a second BLAS after that pass cached the first

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        inside = run_graph(dask.delayed(blas_threads)())
        after = blas_threads()
    if max(before.values()) < 2:  # OpenBLAS cannot grow past OPENBLAS_NUM_THREADS set at load
        pytest.skip("no loaded BLAS accepts a second thread in this environment")
    # Compare the libraries a task thread reports (an old OpenBLAS bundled by SCS may not).
    assert any(before.get(path) == 2 for path in inside)
    assert set(inside.values()) == {1}
    assert after == before
