"""MMD² between projected groups and its gradient in V: the arithmetic of the ``mmd`` method.

Lee, Kim, Olfat, Hasegawa-Johnson & Yoo, "Fast and Efficient MMD-based Fair PCA via
Optimization over Stiefel Manifold" (AAAI 2022; spec seed-004.md §1.3, §2.4, §3). For two
groups a, b of rows z (in the solver's units) projected by V (p × r),

    h(V) = (1/m²) Σ_{i,j∈a} k(Vᵀz_i, Vᵀz_j) + (1/n²) Σ_{i,j∈b} k(·,·) − (2/(mn)) Σ_{i∈a,j∈b} k(·,·),

the biased V-statistic (diagonal included, as the paper's Lemma 1 and the authors' code). With
w_i = 1/m on a, −1/n on b (0 elsewhere), U = ZV and K the kernel matrix of U, h = wᵀKw.

* RBF kernel k(u, v) = exp(−‖u − v‖² / (2σ²)) (§1.2): no finite statistic exists, the kernel
  depends on V. With W = (wwᵀ) ∘ K and S = diag(W1)U − WU (N × r),

      h = 1ᵀW1,    ∇h(V) = −(2/σ²) Zᵀ S            (spec §2.4, checked by finite differences)

  :func:`rbf_blocks` accumulates h and S over pairs of row blocks I ≤ J (memory O(b²), never
  N²); Zᵀ S is then one additive pass over the rows (:func:`backprojection`).
* Random Fourier features (spec §3.4.2, Rahimi & Recht): φ(u) = √(2/D) cos(Ωᵀu + β) with
  Ω ~ N(0, σ⁻²), β ~ U[0, 2π], fixed for a run. h_RFF = ‖mean_a φ − mean_b φ‖² and its gradient
  are built from per-group sums c_g = Σ cos(ΩᵀVᵀz + β), A_g = Σ z sin(ΩᵀVᵀz + β)ᵀ, which are
  additive over rows: one pass per evaluation (:func:`rff_sums`, :func:`rff_mmd2`).
* Linear and quadratic kernels need only group moments (spec §3.4.4, exact for the V-statistic):
  k = uᵀv gives h = ‖Vᵀ(μ_a − μ_b)‖²; k = (uᵀv + c)² gives
  h = ‖Vᵀ(S_a − S_b)V‖_F² + 2c‖Vᵀ(μ_a − μ_b)‖² with S_g the uncentred second moments
  (:func:`moment_mmd2`). They match only the first two moments (they cannot tell the paper's
  Synthetic #1 groups apart), so they are a cheap baseline, not a substitute for RBF.

Everything is float64; h is a difference of O(1) terms compared with τ down to 1e-6, so it is
accumulated in float64 block by block. No dask here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.spatial.distance
from numba import njit

from fairpca_dist.exceptions import InputError

__all__ = [
    "pair_weights",
    "rbf_blocks",
    "pairwise_rbf",
    "backprojection",
    "median_bandwidth",
    "median_squared_distance",
    "PRECISIONS",
    "RandomFeatures",
    "FeatureBuffers",
    "RFFSums",
    "rff_block_rows",
    "rff_sums",
    "rff_mmd2",
    "pairwise_rff",
    "moment_mmd2",
    "null_bias",
    "unbiased_from_biased",
]

DEFAULT_BLOCK_ROWS = 256  # a 256 × 256 float64 kernel block (512 KiB) stays in cache: ~3x faster than 2048
RFF_BLOCK_VALUES = (
    32768  # values per (rows × D) random-feature buffer: the block's buffers stay in L2 (~1.5x faster than 4x more)
)


def pair_weights(
    codes: np.ndarray,
    pair: tuple[int, int],
    sizes: np.ndarray,
    row_weights: np.ndarray | None = None,
) -> np.ndarray:
    """w_i = s_i/size_a for rows of group ``pair[0]``, −s_i/size_b for ``pair[1]``, 0 otherwise,
    with s_i the rows' sample weights (1 without) and ``sizes`` per group code their totals."""
    a, b = pair
    s = np.ones(codes.shape[0]) if row_weights is None else np.asarray(row_weights, dtype=np.float64)
    w = np.zeros(codes.shape[0])
    w[codes == a] = s[codes == a] / sizes[a]
    w[codes == b] = -s[codes == b] / sizes[b]
    return w


def _squared_distances(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """‖u_i − v_j‖², clamped at 0 (the expansion ‖u‖² + ‖v‖² − 2uᵀv can round below zero)."""
    d = np.einsum("ij,ij->i", u, u)[:, None] + np.einsum("ij,ij->i", v, v)[None, :] - 2.0 * (u @ v.T)
    return np.maximum(d, 0.0)


def rbf_blocks(
    projected: np.ndarray,
    weights: np.ndarray,
    sigma: float,
    *,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    gradient: bool = True,
) -> tuple[float, np.ndarray | None]:
    """h = wᵀKw and S = diag(W1)U − WU of the RBF kernel on ``projected`` rows U (N × r).

    Pairs of row blocks I ≤ J (spec §3.2): W_IJ = (w_I w_Jᵀ) ∘ K_IJ; h += c·1ᵀW_IJ1 with c = 2
    off the diagonal; S_I += diag(W_IJ1)U_I − W_IJU_J and, for I ≠ J, S_J += diag(W_IJᵀ1)U_J −
    W_IJᵀU_I. Rows with w = 0 are skipped. Memory O(block_rows²); the result does not depend on
    the blocking beyond rounding. ∇h(V) = −(2/σ²) Zᵀ S. With ``gradient=False`` only h is
    formed and S is None (a metric, not a solver step).
    """
    if block_rows < 1:
        raise InputError(f"block_rows must be a positive integer, got {block_rows!r}")
    active = np.flatnonzero(weights)
    u, w = np.asarray(projected, dtype=np.float64)[active], weights[active]
    scale = -0.5 / sigma**2
    starts = range(0, u.shape[0], block_rows)
    s_active = np.zeros_like(u)
    h = 0.0
    for i in starts:
        ui, wi = u[i : i + block_rows], w[i : i + block_rows]
        for j in starts:
            if j < i:
                continue
            uj, wj = u[j : j + block_rows], w[j : j + block_rows]
            block = np.exp(scale * _squared_distances(ui, uj))
            block *= wi[:, None]
            block *= wj[None, :]
            rows = block.sum(axis=1)
            h += float(rows.sum()) if j == i else 2.0 * float(rows.sum())
            if not gradient:
                continue
            s_active[i : i + block_rows] += rows[:, None] * ui - block @ uj
            if j != i:
                s_active[j : j + block_rows] += block.sum(axis=0)[:, None] * uj - block.T @ ui
    if not gradient:
        return h, None
    s = np.zeros((weights.shape[0], u.shape[1]))
    s[active] = s_active
    return h, s


def pairwise_rbf(
    projected: np.ndarray,
    codes: np.ndarray,
    row_weights: np.ndarray | None,
    pairs: Sequence[tuple[int, int]],
    sigma: float,
    *,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    gradient: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """h_ab for every pair (a, b) of group codes from the projected rows (:func:`rbf_blocks`
    with :func:`pair_weights`), and their S side by side (N × (n_pairs·r)) for one Zᵀ S pass,
    or None with ``gradient=False``."""
    sizes = np.bincount(codes, weights=row_weights, minlength=1 + max(max(pair) for pair in pairs))
    parts = [
        rbf_blocks(
            projected, pair_weights(codes, pair, sizes, row_weights), sigma, block_rows=block_rows, gradient=gradient
        )
        for pair in pairs
    ]
    values = np.array([value for value, _ in parts])
    return values, (np.hstack([s for _, s in parts if s is not None]) if gradient else None)


def backprojection(rows: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Zᵀ S (p × r) of a block of rows and their S rows: additive over blocks."""
    return rows.T @ s


def median_bandwidth(projected: np.ndarray, *, mode: str = "code") -> float:
    """The median heuristic on projected rows (spec §1.2, E3): ``"code"`` (the authors' code):
    σ = √(median_{i<j} ‖u_i − u_j‖² / 2); ``"paper"`` (its text): σ = median distance. The
    caller passes a subsample for large tables (the median over N² pairs is not additive);
    the median is exact, in memory O(n) whatever the n(n−1)/2 pairs
    (:func:`median_squared_distance`)."""
    u = np.asarray(projected, dtype=np.float64)
    if u.shape[0] < 2:
        raise InputError("the median heuristic needs at least 2 rows")
    median = median_squared_distance(u)
    if not median > 0:
        raise InputError("the projected rows all coincide: the median heuristic gives bandwidth 0; pass sigma")
    return float(np.sqrt(median / 2.0)) if mode == "code" else float(np.sqrt(median))


def median_squared_distance(
    u: np.ndarray, *, block_rows: int = 1024, direct_pairs: int = 2**22, seed: int = 0
) -> float:
    """median_{i<j} ‖u_i − u_j‖², exactly ``np.median(pdist(u, "sqeuclidean"))``, without
    holding the n(n−1)/2 distances (8 · 2000² · k²/2 bytes for the heuristic's k groups of 2000
    rows: 0.5 GB at k = 4, 3 GB at k = 10, twice that while np.median copies them).

    Up to ``direct_pairs`` pairs it is that expression. Above, the quantiles 0.5 ± 5/√s of s
    random pairs bracket the median [lo, hi] (failing with probability < 1e-6); one blocked
    pass over the pairs counts those below lo and keeps those in [lo, hi] (about 1 % of them);
    the median's rank(s) among the kept ones give it exactly. A bracket that misses widens to
    the side it missed, and the pass is repeated."""
    n = u.shape[0]
    total = n * (n - 1) // 2
    if total <= direct_pairs:
        return float(np.median(scipy.spatial.distance.pdist(u, "sqeuclidean")))
    ranks = ((total - 1) // 2, total // 2)  # the middle one or two (averaged), as np.median
    rng = np.random.default_rng(seed)
    s = 200_000
    i, j = rng.integers(0, n, size=(2, s))
    sample = np.sum((u[i[i != j]] - u[j[i != j]]) ** 2, axis=1)
    delta = 5.0 / np.sqrt(sample.size)
    lo, hi = np.quantile(sample, [max(0.5 - delta, 0.0), min(0.5 + delta, 1.0)])
    not_after = np.tril(np.ones((block_rows, block_rows), dtype=bool))  # in a block's own square: j <= i
    while True:
        below, kept = 0, []
        for start in range(0, n, block_rows):
            block = u[start : start + block_rows]
            b = block.shape[0]
            d = scipy.spatial.distance.cdist(block, u[start:], "sqeuclidean")
            # pairs i < j only: NaN, neither below lo nor in [lo, hi], on and below the block's diagonal
            d[:, :b][not_after[:b, :b]] = np.nan
            below += int(np.count_nonzero(d < lo))
            inside = d >= lo
            inside &= d <= hi
            kept.append(d[inside])
        middle = np.concatenate(kept)
        if below > ranks[0]:
            lo = -np.inf
        elif below + middle.size <= ranks[1]:
            hi = np.inf
        else:
            middle.partition([ranks[0] - below, ranks[1] - below])
            return float((middle[ranks[0] - below] + middle[ranks[1] - below]) / 2.0)


PRECISIONS = ("double", "single")


@dataclass(frozen=True)
class RandomFeatures:
    """Fixed random Fourier features of the RBF kernel with bandwidth σ in r dimensions:
    ``frequencies`` Ω (r × D) with N(0, σ⁻²) entries, ``phases`` β (D,) uniform on [0, 2π).

    ``precision="single"`` evaluates cos and sin in float32 (after reducing the angle to
    [−π, π] in float64; the sums stay float64): several times faster on CPUs whose float64
    trigonometry is scalar, which is the cost of an evaluation pass. Each feature value is then
    off by up to ~3e-7, which averages out over the rows (h and its gradient move by ~1e-10
    relative on 2·10⁵ rows, against the estimator's own O(1/√D) error), but makes h a step
    function of V at that scale: line searches near a tight gradient tolerance may stop early.
    """

    frequencies: np.ndarray
    phases: np.ndarray
    precision: str = "double"

    @classmethod
    def draw(
        cls, n_components: int, n_features: int, sigma: float, rng: np.random.Generator, *, precision: str = "double"
    ) -> RandomFeatures:
        if n_features < 1:
            raise InputError(f"n_features of the random features must be a positive integer, got {n_features!r}")
        if precision not in PRECISIONS:
            raise InputError(f"precision of the random features must be one of {list(PRECISIONS)}, got {precision!r}")
        return cls(
            rng.normal(scale=1.0 / sigma, size=(n_components, n_features)),
            rng.uniform(0.0, 2.0 * np.pi, size=n_features),
            precision,
        )

    def cos_sin(
        self, projected: np.ndarray, out: FeatureBuffers | None = None, *, sine: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """cos and sin of the angles Ωᵀu + β of projected rows u (n × r), each (n × D), written
        into ``out`` (views of its first n rows; fresh buffers without it); without ``sine``,
        cos only (sin None). The angle is one
        product [u, 1] [Ω; β]; in single precision it is taken in turns ([Ω; β] / 2π), whose
        rounding remainder times 2π, in float64, is the angle reduced to [−π, π], then rounded
        to float32 (an unbiased error of at most 2⁻²⁴π; :func:`_reduce_turns`)."""
        n = projected.shape[0]
        buffers = out if out is not None else FeatureBuffers(n, self)
        lifted, angle = buffers.lifted[:n], buffers.angle[:n]
        lifted[:, :-1] = projected
        np.matmul(lifted, buffers.angle_map, out=angle)
        source: np.ndarray = angle
        if self.precision == "single":
            source = _single(buffers.reduced)[:n]
            _reduce_turns(angle, source)
        cos, sin = buffers.cos[:n], buffers.sin[:n] if sine else None
        np.cos(source, out=cos)
        if sine:
            np.sin(source, out=sin)
        return cos, sin

    @property
    def n_features(self) -> int:
        return self.phases.shape[0]


class FeatureBuffers:
    """The arrays a random-feature pass reuses block after block (at most ``rows`` rows each, of
    ``n_columns`` features), so that a pass allocates them once per task. Allocating them per
    block costs ~2.7× on dask workers: the nanny sets ``MALLOC_TRIM_THRESHOLD_``, which turns off
    glibc's adaptive mmap threshold, so every temporary above 128 KiB is mapped, and
    page-faulted in, afresh. ``angle_map`` is [Ω; β] ((r + 1) × D), in turns when single."""

    def __init__(self, rows: int, features: RandomFeatures, n_columns: int = 0) -> None:
        size = (rows, features.n_features)
        single = features.precision == "single"
        self.angle_map = np.vstack([features.frequencies, features.phases])
        if single:
            self.angle_map /= 2.0 * np.pi
        self.lifted = np.ones((rows, features.frequencies.shape[0] + 1))  # [u, 1]
        self.angle = np.empty(size)
        self.reduced = np.empty(size, dtype=np.float32) if single else None
        self.cos = np.empty(size, dtype=np.float32 if single else np.float64)
        self.sin = np.empty_like(self.cos)
        self.wide_cos = np.empty(size) if single else None  # float64 copies for the sums
        self.wide_sin = np.empty(size) if single else None
        self.rows = np.empty((rows, n_columns))  # one group's rows of a block, weighted
        self.weights = np.ones(rows)

    def widened(self, n: int, *, sine: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """float64 copies of the first n rows of the float32 cos (and sin) just computed."""
        cos = _single(self.wide_cos)[:n]
        np.copyto(cos, self.cos[:n])
        if not sine:
            return cos, None
        sin = _single(self.wide_sin)[:n]
        np.copyto(sin, self.sin[:n])
        return cos, sin


_EXACT_ROUNDING = 2.0**51
"""Below this magnitude, (t + 1.5·2⁵²) − 1.5·2⁵² is t rounded to the nearest integer, half to
even: np.rint's result, in two additions (float64 has no fraction bits left at 2⁵²)."""


@njit(nogil=True, cache=True)
def _reduce_turns(turns: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = float32(2π (t − rint(t)))`` for the angles t of ``turns`` (n × D, in turns): the
    angle reduced to [−π, π] in float64 (a float32 2π would scale every angle by the same 3e-8),
    then rounded to float32. One compiled loop over the block, where numpy's rint, subtract,
    multiply and cast made four passes over it: :meth:`RandomFeatures.cos_sin` takes 1.7 ns a
    value (32-128 rows × 1,000 features, float32 cos included) instead of 3.1-4.3 ns, and the
    report's random-feature sums of a 100k-row partition 17-32% less CPU. The result is
    numpy's, bit for bit: rint by :data:`_EXACT_ROUNDING`'s two additions, with the sign of t
    (NaN, infinities and the largest values take np.rint, as they did)."""
    magic = 1.5 * 2.0**52
    two_pi = 2.0 * np.pi
    for i in range(turns.shape[0]):
        for j in range(turns.shape[1]):
            t = turns[i, j]
            # the sign of t on the result, as np.rint's (−0.25 -> −0.0): t − nearest is then +0.0 at t = −0.0 too
            nearest = np.copysign((t + magic) - magic, t) if abs(t) < _EXACT_ROUNDING else np.rint(t)
            out[i, j] = np.float32((t - nearest) * two_pi)


def _single(buffer: np.ndarray | None) -> np.ndarray:
    """A buffer :class:`FeatureBuffers` has for single-precision features only."""
    if buffer is None:
        raise ValueError("these FeatureBuffers were made for double-precision random features")
    return buffer


@dataclass(frozen=True)
class RFFSums:
    """Per-group additive sums at one V (k groups, p features, D random features):
    ``cosines`` c_g (k, D) = Σ cos(ΩᵀVᵀz + β), ``sines`` A_g (k, p, D) = Σ z sin(ΩᵀVᵀz + β)ᵀ
    (None when only h was asked for: it needs the cosines alone), ``weight`` (k,) the rows'
    total weight. Partial sums merge with ``+``."""

    cosines: np.ndarray
    sines: np.ndarray | None
    weight: np.ndarray

    def __add__(self, other: RFFSums) -> RFFSums:
        sines = None if self.sines is None or other.sines is None else self.sines + other.sines
        return RFFSums(self.cosines + other.cosines, sines, self.weight + other.weight)


def rff_block_rows(n_features: int) -> int:
    """Rows per random-feature block at D = ``n_features``: about :data:`RFF_BLOCK_VALUES` / D."""
    return max(32, RFF_BLOCK_VALUES // n_features)


def rff_sums(
    rows: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    components: np.ndarray,
    features: RandomFeatures,
    weights: np.ndarray | None = None,
    *,
    gradient: bool = True,
) -> RFFSums:
    """:class:`RFFSums` of a block of rows (solver units) whose group codes are ``codes``;
    without ``gradient``, the cosines only (no sin, no product: h alone, about a third of the
    work).

    Group by group, in blocks of :func:`rff_block_rows` of that group's rows (memory
    O(:data:`RFF_BLOCK_VALUES`) whatever the rows): a block's sums are c_g += wᵀcos and
    A_g += (w ∘ Z)ᵀ sin, one (p × D) product per block rather than a (k·p × D) one over
    zero-padded rows of every group."""
    # np.take(..., out=) copies the whole of a non-contiguous input at every call: make it contiguous once
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    weights = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    n, p = rows.shape
    d = features.n_features
    cosines, sines, weight = (
        np.zeros((n_groups, d)),
        np.zeros((n_groups, p, d)) if gradient else None,
        np.zeros(n_groups),
    )
    block_rows = rff_block_rows(d)
    buffers = FeatureBuffers(min(n, block_rows), features, p)
    for g in range(n_groups):
        members = np.flatnonzero(codes == g)
        for start in range(0, members.size, block_rows):
            take = members[start : start + block_rows]
            m = take.size
            z, w = buffers.rows[:m], buffers.weights[:m]
            np.take(rows, take, axis=0, out=z)
            if weights is not None:
                np.take(weights, take, out=w)
            cos, sin = features.cos_sin(z @ components, buffers, sine=gradient)
            if features.precision == "single":  # the sums stay float64
                cos, sin = buffers.widened(m, sine=gradient)
            cosines[g] += w @ cos
            weight[g] += w.sum()
            if sines is not None and sin is not None:  # with gradient
                if weights is not None:
                    z *= w[:, None]
                sines[g] += z.T @ sin
    return RFFSums(cosines, sines, weight)


def rff_mmd2(sums: RFFSums, pair: tuple[int, int], features: RandomFeatures) -> tuple[float, np.ndarray | None]:
    """h_RFF(V) = ‖mean_a φ − mean_b φ‖² and its gradient (p × r) (spec §3.4.2):
    Δ = √(2/D)(c_a/m − c_b/n), ∇h = −2√(2/D) (A_a/m − A_b/n) diag(Δ) Ωᵀ; the gradient is
    None for sums without sines."""
    a, b = pair
    root = np.sqrt(2.0 / features.n_features)
    delta = root * (sums.cosines[a] / sums.weight[a] - sums.cosines[b] / sums.weight[b])
    if sums.sines is None:
        return float(delta @ delta), None
    mixed = sums.sines[a] / sums.weight[a] - sums.sines[b] / sums.weight[b]
    gradient = -2.0 * root * (mixed * delta) @ features.frequencies.T
    return float(delta @ delta), gradient


def pairwise_rff(
    sums: RFFSums, pairs: Sequence[tuple[int, int]], features: RandomFeatures
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`rff_mmd2` for every pair: values (n_pairs,) and gradients (n_pairs, p, r), or
    None for sums without sines."""
    parts = [rff_mmd2(sums, pair, features) for pair in pairs]
    values = np.array([value for value, _ in parts])
    return values, None if sums.sines is None else np.stack([g for _, g in parts if g is not None])


def moment_mmd2(
    means: np.ndarray,
    second: np.ndarray,
    components: np.ndarray,
    pair: tuple[int, int],
    *,
    kernel: str,
    offset: float = 1.0,
) -> tuple[float, np.ndarray]:
    """Exact V-statistic MMD² and gradient for the linear or quadratic kernel from group means
    (k, p) and uncentred second moments (k, p, p) (spec §3.4.4):

        linear:    h = ‖Vᵀδ‖²,                                   ∇h = 2δδᵀV
        quadratic: h = ‖VᵀΔV‖_F² + 2c‖Vᵀδ‖²,  k = (uᵀv + c)²,     ∇h = 4ΔVVᵀΔV + 4c δδᵀV

    with δ = μ_a − μ_b and Δ = S_a − S_b (symmetric).
    """
    a, b = pair
    delta = means[a] - means[b]
    projected = components.T @ delta
    linear = float(projected @ projected)
    linear_gradient = 2.0 * np.outer(delta, projected)
    if kernel == "linear":
        return linear, linear_gradient
    gap = second[a] - second[b]
    gap_v = gap @ components
    inner = components.T @ gap_v
    value = float(np.sum(inner * inner)) + 2.0 * offset * linear
    return value, 4.0 * gap_v @ inner + 2.0 * offset * linear_gradient


def null_bias(sizes: tuple[float, float], offdiagonal_means: tuple[float, float]) -> float:
    """(1/m)(1 − ū_a) + (1/n)(1 − ū_b) for a kernel with k(x, x) = 1 (spec §1.3): what the
    diagonal terms add to the biased estimator, ū_g the mean of group g's off-diagonal kernel
    values. Under equal distributions E h_b = (1/m + 1/n)(1 − κ): the floor below which τ cannot
    be met by matching distributions (spec E2)."""
    (m, n), (ua, ub) = sizes, offdiagonal_means
    return (1.0 - ua) / m + (1.0 - ub) / n


def unbiased_from_biased(biased: float, sizes: tuple[float, float], offdiagonal_means: tuple[float, float]) -> float:
    """h_u = h_b − :func:`null_bias` (an exact identity; h_u can be negative)."""
    return biased - null_bias(sizes, offdiagonal_means)
