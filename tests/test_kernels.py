"""MMD² arithmetic of the ``mmd`` method (spec seed-004.md §1.3, §2.4, §3, §5.2 tests 1–10).

References are written here from the paper's formulas, not from the library: Lemma 1's three
double sums for h, the paper's SP G gradient (with its typos corrected, spec E8), central finite
differences, and the closed forms of the linear and quadratic kernels computed from the rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance

from fairpca_dist import InputError
from fairpca_dist.engine.kernels import (
    RandomFeatures,
    _reduce_turns,
    backprojection,
    median_bandwidth,
    median_squared_distance,
    moment_mmd2,
    pair_weights,
    pairwise_rff,
    rbf_blocks,
    rff_block_rows,
    rff_mmd2,
    rff_sums,
    unbiased_from_biased,
)
from fairpca_dist.solvers.stiefel import random_orthonormal


def two_groups(m: int = 40, n: int = 30, p: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, p)) @ rng.normal(size=(p, p))
    y = rng.normal(size=(n, p)) @ rng.normal(size=(p, p)) + rng.normal(size=p)
    return x, y


def rbf(a: np.ndarray, b: np.ndarray, sigma: float) -> np.ndarray:
    return np.exp(-((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / (2 * sigma**2))


def lemma1(x: np.ndarray, y: np.ndarray, v: np.ndarray, sigma: float) -> float:
    """Paper eq. (5) squared: the three double sums, diagonal included."""
    px, py = x @ v, y @ v
    m, n = len(x), len(y)
    return rbf(px, px, sigma).sum() / m**2 + rbf(py, py, sigma).sum() / n**2 - 2 * rbf(px, py, sigma).sum() / (m * n)


def sp_g_gradient(x: np.ndarray, y: np.ndarray, v: np.ndarray, sigma: float) -> np.ndarray:
    """Paper SP G: ∇h = ∇h1 + ∇h2 − 2∇h3 with the 1/(mnσ²) typo fixed."""
    m, n = len(x), len(y)
    kx, ky, kxy = rbf(x @ v, x @ v, sigma), rbf(y @ v, y @ v, sigma), rbf(x @ v, y @ v, sigma)
    g1 = -2 / (m**2 * sigma**2) * x.T @ (np.diag(kx.sum(1)) - kx) @ x @ v
    g2 = -2 / (n**2 * sigma**2) * y.T @ (np.diag(ky.sum(1)) - ky) @ y @ v
    g3 = (
        -1
        / (m * n * sigma**2)
        * (x.T @ np.diag(kxy.sum(1)) @ x + y.T @ np.diag(kxy.sum(0)) @ y - x.T @ kxy @ y - y.T @ kxy.T @ x)
        @ v
    )
    return g1 + g2 - 2 * g3


def blocked(x: np.ndarray, y: np.ndarray, v: np.ndarray, sigma: float, block_rows: int, order=None):
    z = np.vstack([x, y])
    codes = np.r_[np.zeros(len(x), int), np.ones(len(y), int)]
    if order is not None:
        z, codes = z[order], codes[order]
    w = pair_weights(codes, (0, 1), np.bincount(codes).astype(float))
    h, s = rbf_blocks(z @ v, w, sigma, block_rows=block_rows)
    gradient = sum(backprojection(z[i : i + 7], s[i : i + 7]) for i in range(0, len(z), 7))  # any row blocks
    return h, -2 / sigma**2 * gradient


@pytest.mark.parametrize("block_rows", [1, 3, 16, 70, 4096])
def test_blocked_value_and_gradient_equal_the_paper_formulas(block_rows):
    x, y = two_groups()
    v = random_orthonormal(np.random.default_rng(1), 5, 2)
    sigma = 1.7
    rng = np.random.default_rng(2)
    h, g = blocked(x, y, v, sigma, block_rows, order=rng.permutation(70))  # groups interleaved
    assert h == pytest.approx(lemma1(x, y, v, sigma), rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(g, sp_g_gradient(x, y, v, sigma), rtol=1e-10, atol=1e-13)


def test_gradient_matches_central_finite_differences():
    x, y = two_groups(seed=3)
    v = random_orthonormal(np.random.default_rng(4), 5, 3)
    sigma = 2.0
    _, g = blocked(x, y, v, sigma, 16)
    rng = np.random.default_rng(5)
    for _ in range(3):
        e = rng.normal(size=v.shape)
        t = 1e-5
        fd = (lemma1(x, y, v + t * e, sigma) - lemma1(x, y, v - t * e, sigma)) / (2 * t)
        assert np.sum(g * e) == pytest.approx(fd, rel=1e-6)


def test_bounds_invariances_and_identical_groups():
    x, y = two_groups(seed=6)
    rng = np.random.default_rng(7)
    v = random_orthonormal(rng, 5, 2)
    sigma = 1.3
    h, g = blocked(x, y, v, sigma, 8)
    assert 0 <= h <= 2
    r = np.linalg.qr(rng.normal(size=(2, 2)))[0]
    h_rot, g_rot = blocked(x, y, v @ r, sigma, 8)
    assert h_rot == pytest.approx(h, rel=1e-12)
    np.testing.assert_allclose(g_rot, g @ r, atol=1e-12)  # ∇h(VR) = ∇h(V)R
    shift = rng.normal(size=5) * 100
    assert blocked(x + shift, y + shift, v, sigma, 8)[0] == pytest.approx(h, rel=1e-9)
    assert blocked(y, x, v, sigma, 8)[0] == pytest.approx(h, rel=1e-12)  # group swap
    assert blocked(3 * x, 3 * y, v, 3 * sigma, 8)[0] == pytest.approx(h, rel=1e-12)  # joint rescaling
    h0, g0 = blocked(x, x, v, sigma, 8)
    assert abs(h0) <= 1e-15 and np.abs(g0).max() <= 1e-13


def test_rows_of_other_groups_are_ignored():
    x, y = two_groups(seed=8)
    other = np.random.default_rng(9).normal(size=(25, 5))
    v = random_orthonormal(np.random.default_rng(10), 5, 2)
    z = np.vstack([x, other, y])
    codes = np.r_[np.zeros(len(x), int), np.full(25, 2), np.ones(len(y), int)]
    w = pair_weights(codes, (0, 1), np.bincount(codes).astype(float))
    h, s = rbf_blocks(z @ v, w, 1.5, block_rows=9)
    assert h == pytest.approx(lemma1(x, y, v, 1.5), rel=1e-12)
    assert np.all(s[codes == 2] == 0)


def test_biased_unbiased_identity():
    x, y = two_groups(m=20, n=15, seed=11)
    v = random_orthonormal(np.random.default_rng(12), 5, 2)
    sigma = 1.1
    px, py = x @ v, y @ v
    kx, ky, kxy = rbf(px, px, sigma), rbf(py, py, sigma), rbf(px, py, sigma)
    ux = (kx.sum() - 20) / (20 * 19)
    uy = (ky.sum() - 15) / (15 * 14)
    unbiased = ux + uy - 2 * kxy.mean()
    biased = lemma1(x, y, v, sigma)
    assert unbiased_from_biased(biased, (20, 15), (ux, uy)) == pytest.approx(unbiased, rel=1e-12, abs=1e-15)


def test_median_bandwidth_modes():
    u = np.array([[0.0], [1.0], [3.0]])  # squared distances 1, 9, 4: median 4
    assert median_bandwidth(u, mode="code") == pytest.approx(np.sqrt(2.0))
    assert median_bandwidth(u, mode="paper") == pytest.approx(2.0)
    with pytest.raises(InputError, match="coincide"):
        median_bandwidth(np.zeros((4, 2)))


@pytest.mark.parametrize(("n", "r", "block_rows"), [(300, 2, 64), (301, 3, 1000), (40, 1, 7)])
def test_median_of_pairwise_distances_in_blocks_is_numpys_exactly(n, r, block_rows):
    """The blocked path (bracket from sampled pairs, one counting pass) gives np.median over
    every pair i < j bit for bit: odd and even pair counts, and ties (integer coordinates)."""
    rng = np.random.default_rng(n)
    for u in (rng.normal(size=(n, r)), rng.integers(0, 3, size=(n, r)).astype(float)):
        want = float(np.median(scipy.spatial.distance.pdist(u, "sqeuclidean")))
        assert median_squared_distance(u, block_rows=block_rows, direct_pairs=0) == want
        assert median_squared_distance(u) == want  # the direct path


def test_rff_converges_to_exact_and_its_gradient_is_right():
    x, y = two_groups(m=60, n=50, seed=13)
    v = random_orthonormal(np.random.default_rng(14), 5, 2)
    sigma = 2.5
    exact = lemma1(x, y, v, sigma)
    z = np.vstack([x, y])
    codes = np.r_[np.zeros(60, int), np.ones(50, int)]
    errors = []
    for n_features in (100, 10_000):
        features = RandomFeatures.draw(2, n_features, sigma, np.random.default_rng(15))
        sums = rff_sums(z[:40], codes[:40], 2, v, features) + rff_sums(z[40:], codes[40:], 2, v, features)
        errors.append(abs(rff_mmd2(sums, (0, 1), features)[0] - exact))
    assert errors[1] < 0.1 * exact and errors[1] < errors[0]  # O(1/√D) on the embeddings
    features = RandomFeatures.draw(2, 300, sigma, np.random.default_rng(16))

    def value(w):
        return rff_mmd2(rff_sums(z, codes, 2, w, features), (0, 1), features)[0]

    gradient = rff_mmd2(rff_sums(z, codes, 2, v, features), (0, 1), features)[1]
    e = np.random.default_rng(17).normal(size=v.shape)
    fd = (value(v + 1e-6 * e) - value(v - 1e-6 * e)) / 2e-6
    assert np.sum(gradient * e) == pytest.approx(fd, rel=1e-6)
    with pytest.raises(InputError, match="n_features"):
        RandomFeatures.draw(2, 0, sigma, np.random.default_rng(0))


def test_rff_sums_are_the_literal_sums_across_row_blocks():
    """c_g = Σ_{i∈g} s_i cos(Ωᵀ Vᵀ z_i + β), A_g = Σ_{i∈g} s_i z_i sin(…)ᵀ, over more rows than
    one random-feature block (so several blocks and a partial last one are summed)."""
    rng = np.random.default_rng(21)
    n = 2 * rff_block_rows(7) + 37
    z, codes, s = rng.normal(size=(n, 4)), rng.integers(0, 3, size=n), rng.random(n)
    v = random_orthonormal(rng, 4, 2)
    features = RandomFeatures.draw(2, 7, 1.3, np.random.default_rng(22))
    sums = rff_sums(z, codes, 3, v, features, s)
    angle = z @ v @ features.frequencies + features.phases
    for g in range(3):
        rows = codes == g
        np.testing.assert_allclose(sums.cosines[g], s[rows] @ np.cos(angle[rows]), rtol=1e-12)
        np.testing.assert_allclose(sums.sines[g], (s[rows, None] * z[rows]).T @ np.sin(angle[rows]), rtol=1e-12)
        assert sums.weight[g] == pytest.approx(s[rows].sum(), rel=1e-14)


@pytest.mark.parametrize("precision", ["double", "single"])
def test_rff_sums_without_gradient_are_the_cosines_alone(precision):
    """gradient=False skips sin and the (p × D) products: the same cosines and weights, bit
    for bit, no sines, and h without a gradient."""
    rng = np.random.default_rng(23)
    z, codes, s = rng.normal(size=(900, 5)), rng.integers(0, 2, size=900), rng.random(900)
    v = random_orthonormal(rng, 5, 2)
    features = RandomFeatures.draw(2, 40, 1.1, np.random.default_rng(24), precision=precision)
    full, value_only = (rff_sums(z, codes, 2, v, features, s, gradient=g) for g in (True, False))
    np.testing.assert_array_equal(value_only.cosines, full.cosines)
    np.testing.assert_array_equal(value_only.weight, full.weight)
    assert value_only.sines is None and (value_only + value_only).sines is None
    values, gradients = pairwise_rff(value_only, [(0, 1)], features)
    assert gradients is None and values[0] == pairwise_rff(full, [(0, 1)], features)[0][0]


def test_single_precision_features_agree_with_double():
    """float32 cos/sin after range reduction: per value ~1e-7, summed over rows far less."""
    rng = np.random.default_rng(18)
    z = rng.normal(size=(20_000, 6)) * 5.0  # angles of tens of radians
    codes = (rng.random(20_000) < 0.4).astype(int)
    v = random_orthonormal(rng, 6, 2)
    double = RandomFeatures.draw(2, 200, 0.7, np.random.default_rng(19))
    single = RandomFeatures(double.frequencies, double.phases, "single")
    (h_double, g_double), (h_single, g_single) = (
        rff_mmd2(rff_sums(z, codes, 2, v, f), (0, 1), f) for f in (double, single)
    )
    assert h_single == pytest.approx(h_double, rel=1e-6)
    np.testing.assert_allclose(g_single, g_double, rtol=1e-5, atol=1e-7 * np.abs(g_double).max())
    cos, sin = single.cos_sin(z @ v)
    assert cos.dtype == np.float32 and np.abs(cos - np.cos(z @ v @ double.frequencies + double.phases)).max() < 1e-6
    with pytest.raises(InputError, match="precision"):
        RandomFeatures.draw(2, 10, 1.0, rng, precision="half")


def test_single_precision_angle_reduction_is_numpys_bit_for_bit():
    """The compiled reduction of angles in turns gives what numpy's rint, subtract, multiply by
    2π and cast to float32 give, on every kind of value: halves (rounded to even), values near
    the exact-rounding bound and beyond it, huge, tiny, signed zeros, infinities and NaN."""
    rng = np.random.default_rng(20)
    bound = 2.0**51
    special = [0.5, 1.5, 2.5, -0.5, -1.5, 0.0, -0.0, 1e-300, -1e-300, bound, -bound, np.nextafter(bound, 0.0)]
    special += [np.nextafter(bound, np.inf), 2.0**52 + 1.0, 2.0**53, 1e300, -1e300, np.inf, -np.inf, np.nan]
    values = np.concatenate(
        [
            rng.normal(scale=10.0, size=4000),
            rng.normal(scale=1e6, size=2000),
            rng.integers(-1000, 1000, 1000) + 0.5,
            rng.uniform(-bound, bound, 1000),
            special,
        ]
    )
    turns = np.resize(values, (len(values) // 8 + 1, 8))  # a block of rows × features, as cos_sin's
    expected = np.empty(turns.shape, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        np.copyto(expected, (turns - np.rint(turns)) * (2.0 * np.pi), casting="same_kind")
    reduced = np.empty(turns.shape, dtype=np.float32)
    _reduce_turns(turns, reduced)
    np.testing.assert_array_equal(reduced.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("kernel", ["linear", "quadratic"])
def test_moment_kernels_equal_the_v_statistic_on_rows(kernel):
    x, y = two_groups(m=25, n=20, seed=18)
    v = random_orthonormal(np.random.default_rng(19), 5, 2)
    offset = 0.7

    def k(a, b):
        gram = a @ b.T
        return gram if kernel == "linear" else (gram + offset) ** 2

    def h_rows(w):
        px, py = x @ w, y @ w
        return k(px, px).mean() + k(py, py).mean() - 2 * k(px, py).mean()

    means = np.stack([x.mean(0), y.mean(0)])
    second = np.stack([x.T @ x / 25, y.T @ y / 20])
    value, gradient = moment_mmd2(means, second, v, (0, 1), kernel=kernel, offset=offset)
    assert value == pytest.approx(h_rows(v), rel=1e-12)
    e = np.random.default_rng(20).normal(size=v.shape)
    fd = (h_rows(v + 1e-6 * e) - h_rows(v - 1e-6 * e)) / 2e-6
    assert np.sum(gradient * e) == pytest.approx(fd, rel=1e-6)


def test_bad_block_size():
    with pytest.raises(InputError, match="block_rows"):
        rbf_blocks(np.zeros((3, 1)), np.ones(3), 1.0, block_rows=0)


# ================================================================== the in-memory row passes of mmd
def test_array_passes_project_backproject_and_sum_random_features_in_row_order():
    from fairpca_dist.engine.datapasses import ArrayPasses

    rng = np.random.default_rng(21)
    x = rng.normal(size=(150_000, 4)) + 1e6  # several internal blocks; a large common offset
    labels = np.where(rng.random(150_000) < 0.3, "a", "b")
    scale = np.array([1.0, 2.0, 0.5, 4.0])
    origin = x.mean(axis=0) / scale
    passes = ArrayPasses(x, labels, ("a", "b")).rescaled(scale)
    v = random_orthonormal(rng, 4, 2)
    z = x / scale - origin
    u, codes, weights = passes.projected(v, origin)
    np.testing.assert_allclose(u, z @ v, atol=1e-9)
    assert weights is None and np.array_equal(codes, (labels == "b").astype(int))
    s = rng.normal(size=(150_000, 3))
    np.testing.assert_allclose(passes.backprojected(s, origin), z.T @ s, rtol=1e-9)
    features = RandomFeatures.draw(2, 20, 1.0, rng)
    total = passes.rff_sums(v, origin, features)
    whole = rff_sums(z, codes, 2, v, features)
    np.testing.assert_allclose(total.cosines, whole.cosines, rtol=1e-9)
    np.testing.assert_allclose(total.sines, whole.sines, rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(total.weight, np.bincount(codes))


def test_array_passes_sample_is_per_group_and_deterministic():
    from fairpca_dist.engine.datapasses import ArrayPasses

    rng = np.random.default_rng(22)
    labels = np.r_[np.full(500, "a"), np.full(30, "b")]
    passes = ArrayPasses(rng.normal(size=(530, 3)), labels, ("a", "b"), weights=rng.random(530))
    sample = passes.sample(100, seed=3)
    assert np.bincount(sample.codes).tolist() == [100, 30]
    np.testing.assert_array_equal(sample.x, passes.sample(100, seed=3).x)
    assert not np.array_equal(sample.x, passes.sample(100, seed=4).x)
    row = np.flatnonzero((passes.x == sample.x[0]).all(axis=1))[0]
    assert sample.weights[0] == passes.weights[row]
    with pytest.raises(InputError, match="max_rows_per_group"):
        passes.sample(1, seed=0)


def test_null_bias_of_the_biased_estimator():
    """Two samples of one distribution: E h_b = (1/m + 1/n)(1 − κ), κ = E k(x, x′) (spec §1.3, test 7)."""
    rng = np.random.default_rng(23)
    sigma, m, n = 1.0, 30, 20
    big = rng.normal(size=(3000, 2))
    kappa = (rbf(big, big, sigma).sum() - 3000) / (3000 * 2999)
    draws = []
    for _ in range(400):
        x, y = rng.normal(size=(m, 2)), rng.normal(size=(n, 2))
        draws.append(lemma1(x, y, np.eye(2), sigma))
    expected = (1 / m + 1 / n) * (1 - kappa)
    assert np.mean(draws) == pytest.approx(expected, rel=0.08)  # 400 draws: standard error ~3 %
