"""GroupMoments: chunk kernel, Chan merge, derived matrices, persistence, group checks."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import grouped_data, reference_moments

from fairpca_dist import GroupError, GroupMoments, InputError, SchemaError, fit_projection


def assert_matches_reference(moments: GroupMoments, x, labels, weights=None, rtol=1e-10):
    reference = reference_moments(x, labels, weights)
    assert moments.groups == tuple(reference)
    for i, (count, weight, mean, scatter) in enumerate(reference.values()):
        assert moments.count[i] == count
        np.testing.assert_allclose(moments.weight[i], weight, rtol=1e-12)
        np.testing.assert_allclose(moments.mean[i], mean, rtol=1e-14, atol=rtol * np.abs(scatter).max() ** 0.5)
        np.testing.assert_allclose(moments.scatter[i], scatter, rtol=0, atol=rtol * np.abs(scatter).max())


@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_from_arrays_matches_numpy(offset):
    x, labels = grouped_data(offset=offset)
    assert_matches_reference(GroupMoments.from_arrays(x, labels), x, labels)


def test_large_offset_gives_the_centred_answer():
    # Integers shifted by 1e8 are exact in float64, so the shifted data are the same data.
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, size=(5000, 4)).astype(float)
    labels = rng.integers(0, 2, size=5000)
    near = GroupMoments.from_arrays(x, labels)
    chunks = [GroupMoments.from_arrays(x[i : i + 333] + 1e8, labels[i : i + 333]) for i in range(0, 5000, 333)]
    far = sum(chunks[1:], chunks[0])
    np.testing.assert_allclose(far.scatter, near.scatter, rtol=1e-12)
    np.testing.assert_allclose(far.mean - 1e8, near.mean, atol=1e-9)


@pytest.mark.parametrize("case", ["means of 6 std", "column constant within a group", "offset 1e8"])
def test_kernel_shift_paths_are_exact(case):
    # The kernel shifts a group only when unshifted sums would cancel more than 2 digits;
    # every path must agree with the two-pass reference.
    rng = np.random.default_rng(7)
    n = 20_000
    labels = np.repeat([0, 1], n // 2)
    scale = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    x = rng.standard_normal((n, 5)) * scale
    if case == "means of 6 std":
        x += 6.0 * scale
    elif case == "offset 1e8":
        x += 1e8
    else:
        x[:, 2] = np.where(labels == 0, 3.0, x[:, 2])
    assert_matches_reference(GroupMoments.from_arrays(x, labels), x, labels, rtol=1e-12)


def test_kernel_recomputes_shifted_when_the_first_rows_mislead():
    # Rows ordered by a drifting column: the first sub-block is centred, the rest sits at 50
    # with a tiny spread, so only the check after the unshifted pass (G_jj > 100 S_jj) sees
    # the cancellation and recomputes with the group's own mean as the shift.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((200_000, 50)) * 0.01  # sub-blocks of 1024 rows at p = 50
    x[:, 0] += np.where(np.arange(200_000) < 1024, 100 * x[:, 0], 50.0)
    moments = GroupMoments.from_codes(x, np.zeros(200_000, dtype=np.intp), (0,))
    np.testing.assert_allclose(moments.origin[0, 0], x[:, 0].mean(), rtol=1e-9)
    centred = x - x.mean(axis=0)
    scatter = centred.T @ centred
    np.testing.assert_allclose(moments.scatter[0], scatter, rtol=0, atol=1e-12 * np.abs(scatter).max())
    assert moments.weight[0] == 200_000 and np.abs(moments.mean[0] - x.mean(axis=0)).max() < 1e-12


def in_slabs(x, codes, weights, size):
    """The rows as from_slabs takes them, ``size`` rows a slab."""
    return lambda: [
        (x[i : i + size], codes[i : i + size], None if weights is None else weights[i : i + size])
        for i in range(0, len(x), size)
    ]


@pytest.mark.parametrize("p", [3, 40])  # the narrow and the dsyrk loops
@pytest.mark.parametrize("rows", ["shuffled", "sorted", "many groups"])  # sweep, in place, gathered
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_slabs_add_to_the_same_sums(p, rows, weighted):
    # A partition converted slab by slab gives the statistics of the whole: every slab adds to
    # the same sums, the centre of a group is decided on its first rows in whichever slab.
    rng = np.random.default_rng([p, len(rows), weighted])
    n, k = 3000, 700 if rows == "many groups" else 4
    codes = rng.integers(0, k, size=n)
    if rows == "sorted":
        codes = np.sort(codes)
    x = rng.normal(size=(n, p)) + 1e8 * (codes % 2)[:, None]  # half the groups far from 0
    weights = rng.exponential(size=n) if weighted else None
    groups = tuple(range(k))
    whole = GroupMoments.from_codes(x, codes, groups, weights=weights)
    for size in (1, 999, 1500):
        sliced = GroupMoments.from_slabs(in_slabs(x, codes, weights, size), groups, feature_names=whole.feature_names)
        assert sliced.groups == whole.groups
        np.testing.assert_array_equal(sliced.count, whole.count)
        np.testing.assert_allclose(sliced.weight, whole.weight, rtol=1e-13)
        np.testing.assert_allclose(sliced.means_about(whole.origin[0]), whole.means_about(whole.origin[0]), atol=1e-9)
        scale = np.abs(whole.scatter).max(axis=(1, 2))[:, None, None]
        np.testing.assert_allclose(sliced.scatter, whole.scatter, rtol=0, atol=1e-12 * scale.max())


def test_slabs_recheck_a_misleading_shift_over_every_slab():
    # The drifting column of the test above, in three slabs: the recheck sums the group again
    # over all of them, not only the last.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((30_000, 50)) * 0.01
    x[:, 0] += np.where(np.arange(30_000) < 1024, 100 * x[:, 0], 50.0)
    codes = np.zeros(30_000, dtype=np.intp)
    moments = GroupMoments.from_slabs(
        in_slabs(x, codes, None, 10_000), (0,), feature_names=[f"x{j}" for j in range(50)]
    )
    centred = x - x.mean(axis=0)
    scatter = centred.T @ centred
    np.testing.assert_allclose(moments.scatter[0], scatter, rtol=0, atol=1e-12 * np.abs(scatter).max())
    np.testing.assert_allclose(moments.mean[0], x.mean(axis=0), rtol=0, atol=1e-12)
    assert moments.count[0] == 30_000


def test_slabs_without_rows_give_empty_moments():
    empty = GroupMoments.from_slabs(
        lambda: [(np.empty((0, 2)), np.empty(0, dtype=np.intp), None)], ("a",), feature_names=["u", "v"]
    )
    assert empty.groups == () and empty.feature_names == ("u", "v")


def test_kernel_rechecks_a_shift_taken_from_unweighted_rows():
    # The first sub-block (1024 rows at p = 50) sits at 1e8 with weight 0: its mean is a useless
    # shift for the weighted rows, so the check after the pass must recompute about their mean.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((20_000, 50))
    x[:1024] += 1e8
    weights = np.ones(20_000)
    weights[:1024] = 0.0
    moments = GroupMoments.from_arrays(x, np.zeros(20_000, dtype=int), weights=weights)
    kept = x[1024:]
    centred = kept - kept.mean(axis=0)
    np.testing.assert_allclose(moments.mean[0], kept.mean(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        moments.scatter[0], centred.T @ centred, rtol=0, atol=1e-12 * np.abs(centred.T @ centred).max()
    )


def test_naive_sum_of_squares_would_fail_the_offset_test():
    # The guard: the raw-moment formula loses the answer at offset 1e8, so the test above can fail.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5000, 3)) + 1e8
    raw = x.T @ x - len(x) * np.outer(x.mean(0), x.mean(0))
    centred = (x - x.mean(0)).T @ (x - x.mean(0))
    assert np.abs(raw - centred).max() / np.abs(centred).max() > 1e-3


def test_weights_equal_repeated_rows():
    x, labels = grouped_data(n_rows=200)
    repeats = np.random.default_rng(2).integers(1, 4, size=200)
    weighted = GroupMoments.from_arrays(x, labels, weights=repeats.astype(float))
    repeated = GroupMoments.from_arrays(np.repeat(x, repeats, axis=0), np.repeat(labels, repeats))
    np.testing.assert_allclose(weighted.weight, repeated.weight)
    np.testing.assert_allclose(weighted.mean, repeated.mean, rtol=1e-12)
    np.testing.assert_allclose(weighted.scatter, repeated.scatter, rtol=1e-11, atol=1e-9)
    assert_matches_reference(weighted, x, labels, repeats.astype(float))


def test_merge_is_exact_and_order_free():
    x, labels = grouped_data(n_rows=900, offset=1e6)
    whole = GroupMoments.from_arrays(x, labels)
    pieces = [GroupMoments.from_arrays(x[i : i + 100], labels[i : i + 100]) for i in range(0, 900, 100)]
    left = pieces[0]
    for piece in pieces[1:]:
        left = left + piece
    right = pieces[-1]
    for piece in reversed(pieces[:-1]):
        right = piece + right
    for merged in (left, right):
        assert merged.groups == whole.groups
        np.testing.assert_array_equal(merged.count, whole.count)
        np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-15)
        np.testing.assert_allclose(merged.scatter, whole.scatter, rtol=1e-10, atol=1e-8)


def test_merge_with_disjoint_groups_and_empty():
    x, labels = grouped_data(n_rows=300)
    a = GroupMoments.from_arrays(x[labels == "g0"], labels[labels == "g0"])
    b = GroupMoments.from_arrays(x[labels != "g0"], labels[labels != "g0"])
    empty = GroupMoments.empty(a.feature_names)
    merged = empty + b + empty + a
    assert merged.groups == ("g0", "g1", "g2")
    assert_matches_reference(merged, x, labels)


def test_merge_rejects_other_features():
    x, labels = grouped_data()
    a = GroupMoments.from_arrays(x, labels)
    b = GroupMoments.from_arrays(x, labels, feature_names=["a", "b", "c", "d", "e"])
    with pytest.raises(SchemaError, match="different features"):
        a + b


@pytest.mark.parametrize("center", ["group", "global", "origin"])
def test_derived_second_moments(center):
    x, labels = grouped_data(offset=5.0)
    moments = GroupMoments.from_arrays(x, labels)
    mu = x.mean(axis=0)
    for i, g in enumerate(moments.groups):
        xg = x[labels == g]
        c = {"group": xg.mean(axis=0), "global": mu, "origin": 0.0}[center]
        expected = (xg - c).T @ (xg - c) / len(xg)
        np.testing.assert_allclose(moments.covariance(center)[i], expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(moments.global_mean, mu, rtol=1e-13)
    np.testing.assert_allclose(moments.total_covariance(ddof=1), np.cov(x.T), rtol=1e-10)
    np.testing.assert_allclose(moments.feature_scale(ddof=1), x.std(axis=0, ddof=1), rtol=1e-12)


def test_rescaled_equals_moments_of_scaled_rows():
    x, labels = grouped_data(offset=3.0)
    scale = np.array([1.0, 2.0, 0.5, 10.0, 3.0])
    direct = GroupMoments.from_arrays(x / scale, labels)
    rescaled = GroupMoments.from_arrays(x, labels).rescaled(scale)
    np.testing.assert_allclose(rescaled.mean, direct.mean, rtol=1e-13)
    np.testing.assert_allclose(rescaled.scatter, direct.scatter, rtol=1e-10)


def test_constant_column_cannot_be_standardised():
    x, labels = grouped_data()
    x[:, 2] = 7.0
    with pytest.raises(SchemaError, match=r"\['x2'\].*zero variance"):
        GroupMoments.from_arrays(x, labels).feature_scale()
    kept = GroupMoments.from_arrays(x, labels).feature_scale(constant="keep")
    np.testing.assert_allclose(kept, np.where(np.arange(5) == 2, 1.0, x.std(axis=0)), rtol=1e-12)


@pytest.mark.parametrize("scale", [1e-20, 1e-100])
def test_a_column_of_tiny_scale_is_standardised(scale):
    # Its scale is far below eps, but its variance is a normal float64: not a constant column.
    x, labels = grouped_data()
    x[:, 2] *= scale
    np.testing.assert_allclose(GroupMoments.from_arrays(x, labels).feature_scale(), x.std(axis=0), rtol=1e-12)


@pytest.mark.parametrize("scale", [1e-160, 1e-300])
def test_a_varying_column_whose_variance_underflows_is_not_called_constant(scale):
    x, labels = grouped_data()
    x[:, 2] *= scale  # squares of 1e-300 are 0 in float64; of 1e-160, subnormal
    moments = GroupMoments.from_arrays(x, labels)
    with pytest.raises(
        SchemaError,
        match=r"feature\(s\) 'x2' \(values of order \d\.\de-\d+\) vary, but their variance "
        r"underflows float64 .*rescale them first \(multiply 'x2' by 1e\+(\d+)\)",
    ) as error:
        moments.feature_scale()
    factor = float("1e" + re.search(r"by 1e\+(\d+)", str(error.value)).group(1))
    assert 1e-3 < scale * factor < 1e3
    kept = moments.feature_scale(constant="keep")
    np.testing.assert_allclose(kept, np.where(np.arange(5) == 2, 1.0, x.std(axis=0)), rtol=1e-12)
    assert np.isfinite(fit_projection(moments, 2).components).all()  # unstandardised, it is harmless


def test_save_load_roundtrip_without_pickle(tmp_path):
    x, _ = grouped_data()
    labels = np.array([("a", 1) if v > 0 else ("b", 2) for v in x[:, 0]], dtype=object)
    moments = GroupMoments.from_arrays(x + 1e8, labels, feature_names=list("abcde"))
    moments.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as data:  # loads without pickle
        assert set(data.files) >= {"count", "scatter"}
    loaded = GroupMoments.load(tmp_path / "m.npz")
    assert loaded.groups == (("a", 1), ("b", 2))
    assert loaded.feature_names == moments.feature_names
    np.testing.assert_array_equal(loaded.scatter, moments.scatter)
    np.testing.assert_array_equal(loaded.mean, moments.mean)
    assert loaded.fingerprint() == moments.fingerprint()


def test_moments_saved_with_one_shared_origin_still_load(tmp_path):
    # Files written before origins became per group hold a (p,) origin shared by all groups.
    x, labels = grouped_data(n_rows=60, n_features=3)
    moments = GroupMoments.from_arrays(x, labels)
    shared = np.array([1.0, -2.0, 3.0])
    old = {
        "header": np.array(
            json.dumps(
                {"format_version": 1, "groups": list(moments.groups), "feature_names": list(moments.feature_names)}
            )
        ),
        "count": moments.count,
        "weight": moments.weight,
        "scatter": moments.scatter,
        "mean_offset": moments.mean - shared,
        "origin": shared,
    }
    np.savez(tmp_path / "old.npz", **old)
    loaded = GroupMoments.load(tmp_path / "old.npz")
    np.testing.assert_allclose(loaded.mean, moments.mean, rtol=1e-15)
    np.testing.assert_allclose(loaded.total_scatter(), moments.total_scatter(), rtol=1e-13)


def test_merge_is_exact_for_groups_far_apart():
    # One group near 0, one at 1e8 with unit spread: each group keeps its own reference point,
    # so merging 20 chunks loses nothing (a shared origin at 0 left 6e-11 in the far group).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200_000, 5))
    codes = rng.integers(0, 2, 200_000)
    x[codes == 1] += 1e8
    parts = [
        GroupMoments.from_codes(x[i : i + 10_000], codes[i : i + 10_000], (0, 1)) for i in range(0, 200_000, 10_000)
    ]
    merged = sum(parts[1:], parts[0])
    for g in (0, 1):
        rows = x[codes == g]
        centred = rows - rows[0]  # exact (Sterbenz), then centred in two passes
        centred -= centred.mean(axis=0)
        centred -= centred.mean(axis=0)
        reference = centred.T @ centred
        assert np.linalg.norm(merged.scatter[g] - reference) <= 1e-13 * np.linalg.norm(reference)


def test_group_checks_name_the_problem():
    x, _ = grouped_data(n_rows=10)
    with pytest.raises(GroupError, match="1 group.*'only'"):
        GroupMoments.from_arrays(x, ["only"] * 10).check_groups()
    labels = ["a"] * 9 + ["b"]
    with pytest.raises(GroupError, match="'b': 1 row"):
        GroupMoments.from_arrays(x, labels).check_groups()
    with pytest.raises(GroupError, match="zero total sample weight"):
        GroupMoments.from_arrays(x, ["a"] * 5 + ["b"] * 5, weights=np.r_[np.ones(5), np.zeros(5)]).check_groups()


def test_shape_mismatch_is_an_input_error():
    with pytest.raises(InputError, match="codes has shape"):
        GroupMoments.from_codes(np.zeros((3, 2)), np.zeros(2, dtype=int), ["a"])


# ---------------------------------------------------------------- the chunk kernel against masks + numpy
def _kernel_case(n_rows: int, p: int, n_groups: int, layout: str, *, offset: float = 0.0, seed: int = 0):
    """Rows of ``n_groups`` groups (own means and scales) in a ``layout``: "shuffled" (a gather
    per group), "sorted" by group, or "runs" (one contiguous run per group, not in label order)."""
    rng = np.random.default_rng([seed, n_rows, p, n_groups])
    codes = rng.integers(0, n_groups, size=n_rows)
    if layout == "sorted":
        codes = np.sort(codes)
    elif layout == "runs":
        codes = np.sort(codes)[::-1].copy()
    x = rng.normal(size=(n_rows, p)) * rng.uniform(0.5, 3.0, size=(n_groups, 1))[codes]
    x += rng.normal(scale=5.0, size=(n_groups, p))[codes] + offset
    return x, codes


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("layout", ["shuffled", "sorted", "runs"])
@pytest.mark.parametrize(
    ("n_rows", "p", "n_groups"),
    [
        (130_000, 1, 3),  # p = 1: many sub-blocks of 1024 rows
        (9_000, 7, 1),  # one group: a slice, whatever the layout
        (9_000, 7, 2),  # shuffled: the sweep, one block per group
        (6_000, 50, 6),
        (20_000, 12, 78),  # many groups
        (3_000, 50, 300),  # some groups of one row; the sweep's blocks of 69 rows
        (3_000, 200, 100),  # too many groups for the sweep's memory: gathered group after group
        (30_000, 12, 2_000),  # the same with narrow rows (the narrow loop, gathered)
    ],
)
def test_kernel_equals_per_group_masks_and_numpy(n_rows, p, n_groups, layout, weighted):
    x, codes = _kernel_case(n_rows, p, n_groups, layout)
    weights = np.random.default_rng(5).uniform(0.0, 3.0, size=n_rows) if weighted else None
    labels = np.array([f"g{c:03d}" for c in range(n_groups)])
    moments = GroupMoments.from_codes(x, codes, tuple(labels), weights=weights)
    assert_matches_reference(moments, x, labels[codes], weights, rtol=1e-12)


@pytest.mark.parametrize("layout", ["shuffled", "sorted", "runs"])
def test_kernel_keeps_the_digits_at_offset_1e8_in_every_layout(layout):
    # The shifted sub-blocks are written to the scratch buffer, never into the caller's rows.
    x, codes = _kernel_case(12_000, 9, 3, layout, offset=1e8)
    before = x.copy()
    labels = np.array(["a", "b", "c"])
    moments = GroupMoments.from_codes(x, codes, tuple(labels))
    assert_matches_reference(moments, x, labels[codes], rtol=1e-12)
    np.testing.assert_array_equal(x, before)


def test_kernel_leaves_out_groups_without_rows_in_the_chunk():
    x, codes = _kernel_case(5_000, 4, 3, "shuffled")
    groups = ("u", "v", "w", "x", "y")  # codes 0-2 used; "x" and "y" have no rows here
    moments = GroupMoments.from_codes(x, np.array([0, 2, 4])[codes], groups)
    assert moments.groups == ("u", "w", "y")
    assert_matches_reference(moments, x, np.array(["u", "w", "y"])[codes], rtol=1e-12)


def test_kernel_does_not_depend_on_the_order_of_the_rows():
    # Grouped rows take the slice path (no gather), shuffled rows the gather: same statistics.
    x, codes = _kernel_case(40_000, 20, 4, "sorted", offset=1e3)
    order = np.random.default_rng(9).permutation(len(codes))
    grouped = GroupMoments.from_codes(x, codes, (0, 1, 2, 3))
    shuffled = GroupMoments.from_codes(x[order], codes[order], (0, 1, 2, 3))
    np.testing.assert_array_equal(grouped.count, shuffled.count)
    np.testing.assert_allclose(grouped.mean, shuffled.mean, rtol=1e-14)
    np.testing.assert_allclose(grouped.scatter, shuffled.scatter, rtol=0, atol=1e-12 * np.abs(grouped.scatter).max())


@pytest.mark.parametrize(
    "convert",
    [
        pytest.param(lambda x: x.astype(np.float32), id="float32"),
        pytest.param(np.asfortranarray, id="column-major"),
        pytest.param(lambda x: np.repeat(x, 2, axis=1)[:, ::2], id="every other column"),
        pytest.param(lambda x: np.repeat(x, 3, axis=0)[::3], id="every third row"),
        pytest.param(lambda x: x.astype(np.int64), id="integers"),
    ],
)
def test_kernel_reads_any_numeric_array_layout(convert):
    x, codes = _kernel_case(7_000, 11, 3, "shuffled")
    x = np.round(x, 2)
    given = convert(x)
    labels = np.array(["a", "b", "c"])
    moments = GroupMoments.from_codes(given, codes, tuple(labels))
    assert_matches_reference(moments, np.asarray(given, dtype=np.float64), labels[codes], rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_moments_of_a_dataframe_equal_the_masks_and_numpy(dtype):
    # A pandas frame (converted slab by slab, in several partitions) against the reference.
    import pandas as pd

    from fairpca_dist import compute_moments

    x, codes = _kernel_case(30_000, 6, 78, "shuffled")
    x = x.astype(dtype)
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(6)]).assign(group=codes)
    weights = np.random.default_rng(4).uniform(0.5, 2.0, size=len(frame))
    moments = compute_moments(
        frame.assign(w=weights), sensitive_feature="group", sample_weight="w", chunk_rows=7_000, min_group_size=0
    )
    assert_matches_reference(moments, x.astype(np.float64), codes, weights, rtol=1e-12)


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_sums_lose_no_more_digits_over_many_rows(order, weighted):
    # Means of 6 standard deviations (below the shift rule's threshold: summed about 0), 300k
    # rows per group: S = G − s sᵀ / w keeps its digits only if the sums s and w round as a sum
    # of per-block sums does (one running sum over all rows loses ~10x more).
    rng = np.random.default_rng(5)
    n = 600_000
    labels = np.repeat([0, 1], n // 2)
    x = rng.standard_normal((n, 3)) + 6.0
    weights = rng.uniform(0.5, 1.5, size=n) if weighted else None
    if order == "shuffled":
        permutation = rng.permutation(n)
        x, labels = x[permutation], labels[permutation]
        weights = None if weights is None else weights[permutation]
    moments = GroupMoments.from_codes(x, labels, (0, 1), weights=weights)
    for g in (0, 1):  # the reference in extended precision (two-pass)
        w = np.ones(n // 2, dtype=np.longdouble) if weights is None else weights[labels == g].astype(np.longdouble)
        xg = x[labels == g].astype(np.longdouble)
        mean = w @ xg / w.sum()
        want = ((xg - mean).T @ ((xg - mean) * w[:, None])).astype(np.float64)
        assert abs(moments.weight[g] - w.sum()) <= 1e-15 * w.sum()
        assert np.abs(moments.mean[g] - mean).max() <= 5e-15 * 6.0  # one running sum: 5e-15 to 2e-14
        assert (
            np.abs(moments.scatter[g] - want).max() <= 2.5e-13 * np.abs(want).max()
        )  # one running sum: 4e-13 to 2e-12


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_kernel_rechecks_interleaved_groups_whose_first_rows_mislead(weighted):
    # Two interleaved groups (the sweep): each group's first 1024 rows are centred, the rest sit
    # at 50 with a tiny spread in column 0, so the check after the sweep must recompute both
    # about their own means (the rows then gathered group after group).
    rng = np.random.default_rng(13)
    n = 400_000  # 200k rows per group: G_00 ≈ 200 S_00 about 0
    codes = rng.integers(0, 2, size=n)
    x = rng.standard_normal((n, 6)) * 0.01
    rank = np.empty(n, dtype=int)
    for g in (0, 1):
        rank[codes == g] = np.arange(np.count_nonzero(codes == g))
    x[:, 0] += np.where(rank < 1024, 100 * x[:, 0], 50.0 + codes)
    weights = rng.uniform(0.5, 2.0, size=n) if weighted else None
    moments = GroupMoments.from_codes(x, codes, ("a", "b"), weights=weights)
    assert_matches_reference(moments, x, np.array(["a", "b"])[codes], weights, rtol=1e-12)
    for g in (0, 1):
        np.testing.assert_allclose(moments.origin[g, 0], moments.mean[g, 0], rtol=1e-6)  # recomputed about the mean
