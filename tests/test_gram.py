"""engine/gram.py: the compiled row loops of the moments kernel (dsyrk and narrow) against numpy,
on every way their rows come (in place, gathered, shifted, weighted), and the counting sort of
the group codes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fairpca_dist import InputError
from fairpca_dist.engine.blas import symmetrized
from fairpca_dist.engine.gram import (
    NARROW_FEATURES,
    accumulate_groups,
    accumulate_rows,
    group_order,
    group_runs,
    scatter_from_lower,
)


def reference(x, rows, start, stop, shift, weights):  # noqa: PLR0913
    index = np.arange(start, stop) if rows is None else rows[start:stop]
    w = np.ones(index.size) if weights is None else weights[index]
    centred = x[index] - (0.0 if shift is None else shift)
    return w.sum(), (w[:, None] * centred).sum(axis=0), centred.T @ (w[:, None] * centred)


@pytest.mark.parametrize("p", [1, 6, 7, NARROW_FEATURES, NARROW_FEATURES + 1, 33])  # both loops, odd and even p
@pytest.mark.parametrize("gathered", [False, True], ids=["in place", "gathered"])
@pytest.mark.parametrize("shifted", [False, True], ids=["no shift", "shifted"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("step", [1, 7, 1024])
def test_accumulate_rows_adds_the_sums_and_the_lower_triangle_of_the_gram(p, gathered, shifted, weighted, step):
    rng = np.random.default_rng([p, step])
    x = rng.normal(size=(301, p)) + 5.0
    rows = rng.permutation(301).astype(np.intp) if gathered else None
    shift = rng.normal(size=p) + 5.0 if shifted else None
    weights = rng.exponential(size=301) if weighted else None
    start, stop = 13, 290  # a range that starts and ends inside sub-blocks
    gram = np.tril(rng.normal(size=(p, p)))
    marker = np.triu(np.full((p, p), 7.0), 1)
    before = gram.copy()
    gram += marker  # the strict upper triangle must stay as it is
    total = rng.normal(size=p)
    total_before = total.copy()
    buffer = np.full((min(step, stop - start), p), np.nan)
    weight_sum = accumulate_rows(x, rows, start, stop, shift, weights, step, buffer, gram, total)
    want_w, want_s, want_g = reference(x, rows, start, stop, shift, weights)
    assert weight_sum == pytest.approx(want_w, rel=1e-13)
    np.testing.assert_allclose(total, total_before + want_s, rtol=1e-12, atol=1e-12 * np.abs(want_s).max())
    np.testing.assert_allclose(np.tril(gram), np.tril(before + want_g), rtol=1e-12, atol=1e-12 * np.abs(want_g).max())
    np.testing.assert_array_equal(np.triu(gram, 1), marker)
    np.testing.assert_allclose(symmetrized(gram), symmetrized(before) + want_g, rtol=1e-12, atol=1e-11)


def test_accumulate_rows_of_no_rows_or_no_features_changes_nothing():
    gram, total = np.eye(3), np.ones(3)
    assert accumulate_rows(np.zeros((4, 3)), None, 2, 2, None, None, 8, np.empty((0, 3)), gram, total) == 0.0
    np.testing.assert_array_equal(gram, np.eye(3))
    np.testing.assert_array_equal(total, np.ones(3))
    empty = np.zeros((0, 0))
    assert accumulate_rows(np.zeros((4, 0)), None, 0, 4, None, None, 8, np.empty((4, 0)), empty, np.zeros(0)) == 4.0


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"x": np.asfortranarray(np.ones((10, 3)))}, id="column-major rows"),
        pytest.param({"x": np.ones((10, 3), dtype=np.float32)}, id="float32 rows"),
        pytest.param({"gram": np.zeros((2, 2))}, id="accumulator of another size"),
        pytest.param({"gram": np.asfortranarray(np.arange(9.0).reshape(3, 3))}, id="column-major accumulator"),
        pytest.param({"total": np.zeros(4)}, id="sums of another size"),
        pytest.param({"weights": np.ones(9)}, id="weights of another length"),
        pytest.param({"rows": np.arange(10, dtype=np.int32)}, id="int32 rows"),
        pytest.param({"stop": 11}, id="rows past the end"),
        pytest.param({"buffer": np.empty((2, 3))}, id="buffer smaller than a sub-block"),
        pytest.param({"step": 0}, id="no rows per sub-block"),
    ],
)
def test_accumulate_rows_refuses_arrays_blas_would_misread(change):
    arguments = {
        "x": np.ones((10, 3)),
        "rows": None,
        "start": 0,
        "stop": 10,
        "shift": None,
        "weights": None,
        "step": 4,
        "buffer": np.empty((4, 3)),
        "gram": np.zeros((3, 3)),
        "total": np.zeros(3),
    } | change
    with pytest.raises(InputError, match="accumulate_rows"):
        accumulate_rows(**arguments)


@pytest.mark.parametrize("k", [1, 2, 5, 300])
def test_group_order_is_a_stable_sort_of_the_codes(k):
    codes = np.random.default_rng(k).integers(0, k, size=1001).astype(np.intp)
    order = group_order(codes, np.bincount(codes, minlength=k + 2))  # groups without rows too
    np.testing.assert_array_equal(order, np.argsort(codes, kind="stable"))


@pytest.mark.parametrize("p", [1, 6, 7, NARROW_FEATURES, NARROW_FEATURES + 1, 33])  # both loops
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("step", [1, 7, 64])
def test_accumulate_groups_sums_each_group_about_the_centre_of_its_first_block(p, weighted, step):
    rng = np.random.default_rng([p, step, weighted])
    k, n = 4, 503
    codes = rng.integers(0, k - 1, size=n).astype(np.intp)  # group 3 has no rows
    means = np.array([0.0, 1e3, -2e5])[:, None] + rng.normal(size=(3, p))
    x = means[codes] + rng.normal(size=(n, p))
    x[codes == 0, 0] += 20.0  # group 0: one column far from 0 (mean² > 49 var): shifted too
    weights = rng.exponential(size=n) if weighted else None
    sums = group_accumulators(k, p)
    accumulate_groups(x, codes, weights, step, 50.0, sums)
    grams, totals, weight_sums, shifts, decided = sums
    np.testing.assert_array_equal(decided, [True, True, True, False])
    for g in range(k):
        members = np.flatnonzero(codes == g)
        first = x[members[:step]]
        want_shift = first.mean(axis=0) if members.size else np.zeros(p)
        np.testing.assert_allclose(shifts[g], want_shift, rtol=1e-13, atol=1e-13)
        want_w, want_s, want_g = reference(x, members, 0, members.size, shifts[g], weights)
        assert weight_sums[g] == pytest.approx(want_w, rel=1e-13, abs=0)
        np.testing.assert_allclose(totals[g], want_s, rtol=1e-11, atol=1e-9 * max(1.0, np.abs(want_s).max()))
        np.testing.assert_allclose(
            np.tril(grams[g]), np.tril(want_g), rtol=1e-11, atol=1e-11 * max(1.0, np.abs(want_g).max())
        )
        assert not np.triu(grams[g], 1).any()


def group_accumulators(k, p):
    """Zero sums of k groups, as accumulate_groups takes them: grams, totals, weight sums, shifts, decided."""
    return np.zeros((k, p, p)), np.zeros((k, p)), np.zeros(k), np.zeros((k, p)), np.zeros(k, dtype=bool)


def test_accumulate_groups_leaves_roughly_centred_groups_unshifted():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1000, 3)) + 2.0  # mean² = 4 < 49 · variance
    codes = rng.integers(0, 2, size=1000).astype(np.intp)
    sums = group_accumulators(2, 3)
    accumulate_groups(x, codes, None, 100, 50.0, sums)
    _, totals, _, shifts, _ = sums
    np.testing.assert_array_equal(shifts, 0.0)
    np.testing.assert_allclose(totals[1], x[codes == 1].sum(axis=0), rtol=1e-13)


@pytest.mark.parametrize("p", [3, NARROW_FEATURES + 1])  # both loops
def test_accumulate_groups_keeps_the_centres_of_an_earlier_call(p):
    # A chunk's slabs add to the same sums: a group decided in the first slab keeps its centre
    # (its later rows are shifted by it as they are copied), one first seen in the second slab
    # is decided there; the sums equal those of one call over all the rows.
    rng = np.random.default_rng(4)
    x = rng.normal(size=(900, p)) + np.where(np.arange(900) % 3 == 0, 1e4, 0.0)[:, None]
    codes = (np.arange(900) % 3).astype(np.intp)
    codes[:300][codes[:300] == 2] = 1  # group 2's first rows are in the second slab
    whole, slabs = group_accumulators(3, p), group_accumulators(3, p)
    accumulate_groups(x, codes, None, 64, 50.0, whole)
    accumulate_groups(x[:300], codes[:300], None, 64, 50.0, slabs)
    assert slabs[4].tolist() == [True, True, False]
    first_shifts = slabs[3].copy()
    accumulate_groups(x[300:], codes[300:], None, 64, 50.0, slabs)
    np.testing.assert_array_equal(slabs[3][:2], first_shifts[:2])
    np.testing.assert_array_equal(slabs[3], whole[3])
    for got, want in zip(slabs, whole, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"x": np.asfortranarray(np.ones((10, 3)))}, id="column-major rows"),
        pytest.param({"codes": np.zeros(10, dtype=np.int32)}, id="int32 codes"),
        pytest.param({"codes": np.zeros(9, dtype=np.intp)}, id="codes of another length"),
        pytest.param({"grams": np.zeros((2, 2, 2))}, id="accumulators of another size"),
        pytest.param({"totals": np.zeros((3, 3))}, id="sums for another number of groups"),
        pytest.param({"shifts": np.zeros((2, 3), dtype=np.float32)}, id="single-precision centres"),
        pytest.param({"decided": np.zeros(2)}, id="decisions as floats"),
        pytest.param({"weights": np.ones(9)}, id="weights of another length"),
        pytest.param({"step": 0}, id="no rows per block"),
    ],
)
def test_accumulate_groups_refuses_arrays_blas_would_misread(change):
    arguments = {
        "x": np.ones((10, 3)),
        "codes": np.zeros(10, dtype=np.intp),
        "weights": None,
        "step": 4,
        "shift_at": 50.0,
        "grams": np.zeros((2, 3, 3)),
        "totals": np.zeros((2, 3)),
        "weight_sums": np.zeros(2),
        "shifts": np.zeros((2, 3)),
        "decided": np.zeros(2, dtype=bool),
    } | change
    names = ("grams", "totals", "weight_sums", "shifts", "decided")
    arguments["sums"] = tuple(arguments.pop(name) for name in names)
    with pytest.raises(InputError, match="accumulate_groups"):
        accumulate_groups(**arguments)


@pytest.mark.parametrize(
    "codes",
    [
        pytest.param([2, 2, 0, 0, 0, 3], id="one run per group"),
        pytest.param([1], id="one row"),
        pytest.param([0, 1, 0], id="a group in two runs"),
        pytest.param([3, 3, 1, 1, 3], id="the last group again"),
        pytest.param(np.random.default_rng(0).integers(0, 4, size=500), id="shuffled"),
    ],
)
def test_group_runs_counts_the_rows_and_finds_the_runs_of_grouped_rows(codes):
    codes = np.asarray(codes, dtype=np.intp)
    counts, starts = group_runs(codes, 5)
    np.testing.assert_array_equal(counts, np.bincount(codes, minlength=5))
    changes = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    if changes.size == np.count_nonzero(counts) - 1:
        np.testing.assert_array_equal(starts, [0, *changes, codes.size])
    else:
        assert starts is None


@pytest.mark.parametrize("bad", [-1, 5], ids=["negative", "past the groups"])
def test_group_runs_refuses_codes_outside_the_groups(bad):
    with pytest.raises(InputError, match="group codes must lie in 0 … 4, got " + str(bad)):
        group_runs(np.array([0, 1, bad, 2], dtype=np.intp), 5)


_COMPILE_CHECK = """
import numpy as np
from numba.core.registry import CPUDispatcher
from fairpca_dist.engine import gram, kernels
from fairpca_dist.engine.moments import GroupMoments

def signatures():
    return {
        f"{module.__name__}.{name}": len(f.signatures)
        for module in (gram, kernels)
        for name, f in vars(module).items()
        if isinstance(f, CPUDispatcher)
    }

gram.compile_kernels()
compiled = signatures()
rng = np.random.default_rng(5)
for p in (2, gram.NARROW_FEATURES, gram.NARROW_FEATURES + 1, 40):
    rows = rng.normal(size=(300, p)) + 10.0
    frozen = rows.copy()
    frozen.flags.writeable = False  # as a zero-copy Arrow read gives them
    for x in (rows, frozen):
        shuffled, grouped, many = rng.integers(0, 3, 300), np.sort(rng.integers(0, 3, 300)), np.arange(300) % 250
        for codes, k in ((shuffled, 3), (grouped, 3), (many, 250)):  # sweep, in place, gathered
            for weights in (None, rng.exponential(size=300)):
                GroupMoments.from_codes(x, codes, tuple(range(k)), weights=weights)
features = kernels.RandomFeatures.draw(3, 500, 1.0, rng, precision="single")  # as the report's and mmd's passes
z = rng.normal(size=(700, 5))
kernels.rff_sums(z, rng.integers(0, 2, 700), 2, np.linalg.qr(rng.normal(size=(5, 3)))[0], features)
assert compiled["fairpca_dist.engine.kernels._reduce_turns"] == 1, compiled
assert signatures() == compiled, (compiled, signatures())
"""


def test_compile_kernels_compiles_every_loop_a_pass_runs():
    # in a new process: this one's earlier tests have compiled loops of their own
    result = subprocess.run([sys.executable, "-c", _COMPILE_CHECK], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("p", [1, 2, 63, 64, 65, 130])
def test_scatter_from_lower_gives_the_numpy_formula_bit_for_bit(p):
    """S = G − s cᵀ in place, G read from its lower triangle (the upper one holds garbage), is
    ``symmetrized(G) − np.outer(s, c)`` element by element: the same product and difference, so
    the same bits, on both sides of the diagonal and across the tiles' edges."""
    rng = np.random.default_rng(p)
    lower = rng.standard_normal((p, p)) * 1e3
    gram = lower.copy()
    gram[np.triu_indices(p, 1)] = np.nan  # never read
    total, correction = rng.standard_normal(p) * 1e2, rng.standard_normal(p)
    want = symmetrized(lower) - np.outer(total, correction)
    got = scatter_from_lower(gram, total, correction)
    assert got is gram
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


def test_scatter_from_lower_refuses_arrays_it_would_misread():
    with pytest.raises(InputError, match="C-ordered float64 square"):
        scatter_from_lower(np.zeros((3, 3), order="F")[:, :2], np.zeros(3), np.zeros(3))
    with pytest.raises(InputError, match="vectors of 3"):
        scatter_from_lower(np.zeros((3, 3)), np.zeros(2), np.zeros(3))
