"""TablePasses restricted to cells, its pass count, and many random-feature sums in one pass:
checked against ArrayPasses built on exactly the kept rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import GroupMoments, InputError
from fairpca_dist.engine.cells import HashCells
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.engine.kernels import RandomFeatures
from fairpca_dist.engine.passes import table_passes

FEATURES = ["f0", "f1", "f2", "f3"]
N_ROWS = 900


def frame(weighted: bool) -> pd.DataFrame:
    """Grouped rows with a text key ``id``, a text cells column ``cell`` and optional weights."""
    x, labels = grouped_data(n_rows=N_ROWS, n_features=len(FEATURES), seed=3, offset=40.0)
    rng = np.random.default_rng(8)
    table = pd.DataFrame(x, columns=FEATURES).assign(group=labels)
    table["id"] = [f"key-{i:05d}" for i in rng.permutation(N_ROWS)]
    table["cell"] = rng.choice(["a", "b", "c", "d", "e"], size=N_ROWS)
    if weighted:
        table["w"] = rng.uniform(0.3, 2.5, size=N_ROWS)
    return table


def moments_of(table: pd.DataFrame) -> GroupMoments:
    return GroupMoments.from_arrays(table[FEATURES].to_numpy(), table["group"], feature_names=FEATURES)


def cells_of(table: pd.DataFrame, spec: HashCells | str) -> np.ndarray:
    """Each row's cell label, computed here independently of the passes."""
    return spec.assign(table[list(spec.key_columns)]) if isinstance(spec, HashCells) else table[spec].to_numpy()


def open_passes(table: pd.DataFrame, spec: HashCells | str, source: str, n_partitions: int, tmp_path):
    """TablePasses over ``table`` opened with cells ``spec``: a pandas DataFrame read in
    ``n_partitions`` chunks, or a folder of ``n_partitions`` Parquet files."""
    roles = {"sensitive_feature": "group", "sample_weight": "w" if "w" in table else None, "cells": spec}
    if source == "pandas":
        return table_passes(table, moments_of(table), chunk_rows=-(-N_ROWS // n_partitions), **roles)
    folder = tmp_path / "table"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(N_ROWS), n_partitions)):
        table.iloc[part].to_parquet(folder / f"part-{i:03d}.parquet")
    return table_passes(str(folder), moments_of(table), **roles)


def array_passes(table: pd.DataFrame, mask: np.ndarray, groups) -> ArrayPasses:
    kept = table[mask]
    return ArrayPasses(
        kept[FEATURES].to_numpy(),
        kept["group"].to_numpy(),
        groups,
        weights=kept["w"].to_numpy() if "w" in kept else None,
    )


SPECS = {"hash": (HashCells(("id",), n_cells=6, seed=2), [0, 2, 3]), "column": ("cell", ["a", "c", "e"])}


@pytest.mark.parametrize("n_partitions", [1, 4])
@pytest.mark.parametrize(
    ("source", "spec_name", "weighted"),
    [
        ("pandas", "hash", False),
        ("pandas", "column", True),
        ("parquet", "hash", True),
        ("parquet", "column", False),
    ],
)
def test_restricted_passes_equal_array_passes_on_the_kept_rows(tmp_path, source, spec_name, weighted, n_partitions):
    spec, train = SPECS[spec_name]
    table = frame(weighted)
    mask = np.isin(cells_of(table, spec), train)
    assert 0 < mask.sum() < N_ROWS
    passes = open_passes(table, spec, source, n_partitions, tmp_path)
    view, reference = passes.restricted(train), array_passes(table, mask, passes.groups)
    moments = moments_of(table)
    rng = np.random.default_rng(0)
    v = np.linalg.qr(rng.normal(size=(len(FEATURES), 2)))[0]
    origin = moments.global_mean

    got, want = view.l1_sums(v, moments.centers("group")), reference.l1_sums(v, moments.centers("group"))
    np.testing.assert_allclose(got.b, want.b, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.h, want.h, rtol=1e-9)

    for got_part, want_part in zip(view.projected(v, origin), reference.projected(v, origin), strict=True):
        if want_part is None:
            assert got_part is None
        else:
            np.testing.assert_allclose(got_part, want_part, rtol=1e-12, atol=1e-9)
    s = rng.normal(size=(int(mask.sum()), 3))
    np.testing.assert_allclose(view.backprojected(s, origin), reference.backprojected(s, origin), rtol=1e-9, atol=1e-9)
    with pytest.raises(InputError, match="rows of S"):
        view.backprojected(rng.normal(size=(N_ROWS, 3)), origin)  # all rows: not the restricted count

    features = RandomFeatures.draw(2, 40, 1.5, np.random.default_rng(1))
    got_rff, want_rff = view.rff_sums(v, origin, features), reference.rff_sums(v, origin, features)
    for name in ("cosines", "sines", "weight"):
        np.testing.assert_allclose(getattr(got_rff, name), getattr(want_rff, name), rtol=1e-9, atol=1e-9)

    kept_groups = pd.Series(table["group"][mask]).value_counts()
    small = view.sample(25, seed=4)
    assert np.bincount(small.codes, minlength=3).tolist() == [min(25, kept_groups.get(g, 0)) for g in passes.groups]
    whole = view.sample(N_ROWS, seed=4)  # every kept row, in table order
    np.testing.assert_array_equal(whole.x, table[FEATURES].to_numpy()[mask])
    np.testing.assert_array_equal(np.array(passes.groups)[whole.codes], table["group"].to_numpy()[mask])


def test_restriction_intersects_ignores_unknown_labels_and_shares_the_count():
    spec, _ = SPECS["hash"]
    table = frame(weighted=False)
    cells = cells_of(table, spec)
    passes = table_passes(table, moments_of(table), sensitive_feature="group", cells=spec, chunk_rows=200)
    v, centers = np.eye(len(FEATURES))[:, :2], moments_of(table).centers("group")

    twice = passes.restricted([0, 1, 2, 3]).rescaled(np.full(4, 2.0)).restricted([2, 3, 4, 99])
    assert twice.cells == frozenset({2, 3})
    want = array_passes(table, np.isin(cells, [2, 3]), passes.groups).rescaled(np.full(4, 2.0))
    np.testing.assert_allclose(twice.l1_sums(v, centers).b, want.l1_sums(v, centers).b, rtol=1e-9, atol=1e-9)
    unknown = passes.restricted([5, "nope"])
    want = array_passes(table, cells == 5, passes.groups)
    np.testing.assert_allclose(unknown.l1_sums(v, centers).h, want.l1_sums(v, centers).h, rtol=1e-9)
    assert passes.n_passes == twice.n_passes == unknown.n_passes == 2


def test_backprojected_of_a_restricted_view_counts_its_own_rows():
    """Offsets learnt by the parent's projection are not the view's: a fresh view counts rows."""
    spec, train = SPECS["column"]
    table = frame(weighted=False)
    mask = np.isin(cells_of(table, spec), train)
    passes = table_passes(table, moments_of(table), sensitive_feature="group", cells=spec, chunk_rows=250)
    origin = np.zeros(len(FEATURES))
    passes.projected(np.eye(len(FEATURES))[:, :1], origin)
    view = passes.restricted(train)
    s = np.random.default_rng(2).normal(size=(int(mask.sum()), 2))
    before = passes.n_passes
    got = view.backprojected(s, origin)
    assert passes.n_passes == before + 2  # row counts, then the gradient
    np.testing.assert_allclose(got, table[FEATURES].to_numpy()[mask].T @ s, rtol=1e-9, atol=1e-9)


def test_restricted_needs_cells_and_labels():
    table = frame(weighted=False)
    plain = table_passes(table, moments_of(table), sensitive_feature="group")
    with pytest.raises(InputError, match="opened with cells"):
        plain.restricted([0])
    with_cells = table_passes(table, moments_of(table), sensitive_feature="group", cells="cell")
    with pytest.raises(InputError, match="at least one"):
        with_cells.restricted([])
    with pytest.raises(InputError, match="string"):
        with_cells.restricted("abc")
    assert with_cells.n_passes == 0


def test_every_request_is_one_pass_shared_by_views():
    table = frame(weighted=True)
    moments = moments_of(table)
    passes = table_passes(table, moments, sensitive_feature="group", sample_weight="w", cells="cell", chunk_rows=300)
    rescaled, restricted = passes.rescaled(np.full(4, 3.0)), passes.restricted(["a", "b"])
    arrays = ArrayPasses(table[FEATURES].to_numpy(), table["group"], moments.groups)
    arrays_view = arrays.rescaled(np.full(4, 3.0))
    v, origin = np.eye(4)[:, :2], moments.global_mean
    features = RandomFeatures.draw(2, 8, 1.0, np.random.default_rng(0))
    requests = [
        lambda p: p.l1_sums(v, moments.centers("group")),
        lambda p: p.projected(v, origin),
        lambda p: p.rff_sums(v, origin, features),
        lambda p: p.rff_sums_many(
            [(v, features), (v[:, :1], RandomFeatures.draw(1, 8, 1.0, np.random.default_rng(0)))], origin
        ),
    ]
    expected = 0
    for request in requests:
        for view in (passes, rescaled, restricted):
            request(view)
            expected += 1
            assert passes.n_passes == rescaled.n_passes == restricted.n_passes == expected
        for view in (arrays, arrays_view):
            before = arrays.n_passes
            request(view)
            assert arrays.n_passes == arrays_view.n_passes == before + 1
    rescaled.backprojected(np.ones((N_ROWS, 1)), origin)  # offsets learnt by rescaled's projection: one pass
    assert passes.n_passes == expected + 1
    restricted.sample(10, seed=0)  # group counts, then the gather
    assert passes.n_passes == expected + 3
    sampled = arrays.sample(10, seed=0)
    assert sampled.n_passes == 0 and arrays.n_passes == len(requests) * 2 + 1


@pytest.mark.parametrize("n_partitions", [1, 3])
def test_rff_sums_many_equals_separate_calls_in_one_pass(n_partitions):
    table = frame(weighted=True)
    moments = moments_of(table)
    passes = table_passes(
        table, moments, sensitive_feature="group", sample_weight="w", chunk_rows=-(-N_ROWS // n_partitions)
    )
    arrays = ArrayPasses(table[FEATURES].to_numpy(), table["group"], moments.groups, weights=table["w"].to_numpy())
    rng = np.random.default_rng(5)
    shared = RandomFeatures.draw(2, 30, 2.0, rng)
    requests = [
        (np.linalg.qr(rng.normal(size=(4, 2)))[0], shared),
        (np.eye(4)[:, :2], shared),
        (np.eye(4)[:, 1:4], RandomFeatures.draw(3, 17, 0.7, rng, precision="single")),
    ]
    origin = moments.global_mean
    for rows in (passes, arrays):
        before = rows.n_passes
        many = rows.rff_sums_many(requests, origin)
        assert rows.n_passes == before + 1 and len(many) == 3
        for got, (v, features) in zip(many, requests, strict=True):
            alone = rows.rff_sums(v, origin, features)
            # literal sums of the weighted cos features per group, independent of the kernels module
            z = table[FEATURES].to_numpy() - origin
            angle = z @ v @ features.frequencies + features.phases
            for g, label in enumerate(moments.groups):
                member = (table["group"] == label).to_numpy()
                w = table["w"].to_numpy()[member]
                np.testing.assert_allclose(got.cosines[g], w @ np.cos(angle[member]), rtol=1e-5, atol=1e-5)
                assert got.weight[g] == pytest.approx(w.sum())
            for name in ("cosines", "sines", "weight"):
                np.testing.assert_array_equal(getattr(got, name), getattr(alone, name))
        for got, value_only in zip(many, rows.rff_sums_many(requests, origin, gradient=False), strict=True):
            assert value_only.sines is None
            np.testing.assert_array_equal(value_only.cosines, got.cosines)


def test_rff_sums_many_bad_input_fails_before_any_pass():
    table = frame(weighted=False)
    moments = moments_of(table)
    passes = table_passes(table, moments, sensitive_feature="group")
    arrays = ArrayPasses(table[FEATURES].to_numpy(), table["group"], moments.groups)
    features = RandomFeatures.draw(2, 5, 1.0, np.random.default_rng(0))
    origin = moments.global_mean
    for rows in (passes, arrays):
        with pytest.raises(InputError, match="non-empty"):
            rows.rff_sums_many([], origin)
        with pytest.raises(InputError, match="n_features=4"):
            rows.rff_sums_many([(np.eye(4)[:, :2], features), (np.eye(3)[:, :2], features)], origin)
        with pytest.raises(InputError, match="3 components"):
            rows.rff_sums_many([(np.eye(4)[:, :3], features)], origin)
        with pytest.raises(InputError, match="pair"):
            rows.rff_sums_many([np.eye(4)[:, :2]], origin)
        assert rows.n_passes == 0
