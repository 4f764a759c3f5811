"""The row loop of the moments kernel, compiled: one call per group of a chunk, no GIL held.

For the rows of one group (a contiguous range of a C-ordered float64 array, or the rows an index
array lists), about a centre c and with optional sample weights w,

    W += Σ w,    s += Σ w (x − c),    G += Σ w (x − c)(x − c)ᵀ   (lower triangle only),

in sub-blocks of ``step`` rows: each sub-block is summed and, when it must be gathered, shifted
or weighted, copied into a scratch block in the same loop (one read of the rows), then added to
G by BLAS ``dsyrk`` (half the flops of a general product) while it is still in cache. Rows that
need none of the three go to ``dsyrk`` where they lie. Compiled by Numba (``nogil``, cached on
disk after the first call), so the dask threads of a pass run it in parallel, and a chunk costs
a handful of Python calls whatever its number of sub-blocks (measured against numpy's
``X.T @ X`` in ``benchmarks/profile_kernel.py``).

Narrow rows (p ≤ :data:`NARROW_FEATURES`) take another loop: dsyrk's kernels are tuned for wide
matrices, and at p = 10 its calls on 1024-row sub-blocks plus the sums took 1.6x numpy's one
call on the whole chunk, 2.4x with the sweep's copies. There each sub-block is copied transposed
(and shifted) into a scratch block of p + 1 rows that fits the L1 cache, whose last row is √w
(the values scaled by it), and the upper triangle of its augmented Gram matrix

    [ Σ w (x − c)(x − c)ᵀ   Σ w (x − c) ]
    [        ·                 Σ w      ]

is added up by dot products of its rows, four at a time (2 × 2 tiles: each pair of loaded
values feeds four sums; the compiler vectorizes each sum over the rows, with partial sums in
any order: ``fastmath`` reassociation only, so NaN and infinity still propagate). The sums and
the weight come out of the same loop; the sweep over interleaved groups copies each row into
its group's transposed block the same way. CPU time of one thread on 100k × 10 rows (best of
15, at load 3–5): in place 1.2 ms, swept 2.0 ms, against 2.2 and 3.3 ms for the dsyrk loop and
its sweep and 1.4 ms for numpy's ungrouped ``X.T @ X``; at p = 20, 3.6 / 4.2 ms against
4.4–4.6 ms for the dsyrk loop in place and 3.4 ms for ``X.T @ X``
(``benchmarks/profile_kernel.py`` measures the kernel against ``X.T @ X``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from fairpca_dist.engine.blas import fortran_dsyrk
from fairpca_dist.exceptions import InputError

__all__ = [
    "accumulate_rows",
    "scatter_from_lower",
    "accumulate_groups",
    "first_centre",
    "group_order",
    "group_runs",
    "compile_kernels",
    "NARROW_FEATURES",
]

NARROW_FEATURES = 24
"""Up to this many features the narrow loop runs instead of dsyrk (measured faster up to p = 24
in place, and gathered; slower from p = 32)."""
_NARROW_BLOCK_FLOATS = 4096  # the transposed scratch block: 32 KiB, within the 48 KiB L1 cache

_NO_ROWS = np.empty(0, dtype=np.intp)
_NOTHING = np.empty(0)


def _narrow_rows(p: int) -> int:
    """Rows per transposed block of the narrow loop: (p + 1) × rows floats fill 32 KiB."""
    return max(8, _NARROW_BLOCK_FLOATS // (p + 1) // 8 * 8)


def accumulate_rows(
    x: np.ndarray,
    rows: np.ndarray | None,
    start: int,
    stop: int,
    shift: np.ndarray | None,
    weights: np.ndarray | None,
    step: int,
    buffer: np.ndarray,
    gram: np.ndarray,
    total: np.ndarray,
) -> float:
    """Add the sums of one group's rows about ``shift`` to ``total`` and ``gram``; return Σ w.

    Parameters
    ----------
    x : ndarray of shape (n, p), float64, C-ordered
        The chunk's rows.
    rows : ndarray of intp or None
        ``None``: the group's rows are ``x[start:stop]``; else they are ``x[rows[start:stop]]``
        (valid row numbers: they are not checked).
    start, stop : int
        The range of rows (of ``x``, or of ``rows``).
    shift : ndarray of shape (p,), float64, or None
        The centre c (``None``: 0).
    weights : ndarray of shape (n,), float64, or None
        One non-negative weight per row of ``x`` (``None``: 1).
    step : int
        Rows per sub-block (≥ 1); at most the rows of ``buffer``. The narrow loop (p ≤
        :data:`NARROW_FEATURES`) takes sub-blocks of its own size.
    buffer : ndarray of shape (≥ min(step, stop − start), p), float64, C-ordered
        Scratch space for a gathered, shifted or weighted sub-block (of the dsyrk loop; the
        narrow loop has one of its own, the size of the L1 cache).
    gram : ndarray of shape (p, p), float64, C-ordered
        Accumulates Σ w (x − c)(x − c)ᵀ in its lower triangle (the upper one is left as it
        is: read it with :func:`~fairpca_dist.engine.blas.symmetrized`).
    total : ndarray of shape (p,), float64
        Accumulates Σ w (x − c).

    Returns
    -------
    float
        Σ w over the rows (their number when unweighted).

    Raises
    ------
    InputError
        An array of another dtype, layout or size than the above (BLAS and the compiled loop
        would read the wrong memory).
    """
    p = x.shape[1] if x.ndim == 2 else -1
    arrays = {"x": (x, None), "buffer": (buffer, None), "gram": (gram, (p, p)), "total": (total, (p,))}
    arrays |= {"shift": (shift, (p,))} if shift is not None else {}
    arrays |= {"weights": (weights, (x.shape[0],))} if weights is not None else {}
    for name, (array, shape) in arrays.items():
        if array.dtype != np.float64 or not array.flags.c_contiguous or (shape is not None and array.shape != shape):
            raise InputError(
                f"accumulate_rows needs {name} as C-ordered float64 {shape or ''}, got {array.dtype} {array.shape}"
            )
    if not 0 <= start <= stop or step < 1 or buffer.ndim != 2 or buffer.shape[1] != p:
        raise InputError(f"accumulate_rows: bad rows {start}:{stop}, step {step} or buffer {buffer.shape} for p = {p}")
    if rows is not None and (rows.dtype != np.intp or rows.ndim != 1 or not rows.flags.c_contiguous):
        raise InputError(f"accumulate_rows needs rows as a contiguous intp array, got {rows.dtype} {rows.shape}")
    length = x.shape[0] if rows is None else rows.shape[0]
    if stop > length or (stop > start and buffer.shape[0] < min(step, stop - start)):
        raise InputError(f"accumulate_rows: rows {start}:{stop} of {length}, or a buffer of {buffer.shape[0]} rows")
    rows, shift, weights = (
        _NO_ROWS if rows is None else rows,
        _NOTHING if shift is None else shift,
        _NOTHING if weights is None else weights,
    )
    if p <= NARROW_FEATURES:
        block = np.empty((p + 1, _narrow_rows(p)))
        return float(_accumulate_narrow(x, rows, start, stop, shift, weights, block, gram, total))
    return float(_accumulate(x, rows, start, stop, shift, weights, step, buffer, gram, total, fortran_dsyrk()))


@njit(nogil=True, cache=True)
def _accumulate(
    x: Any,
    rows: Any,
    start: int,
    stop: int,
    shift: Any,
    weights: Any,
    step: int,
    buffer: Any,
    gram: Any,
    total: Any,
    syrk: Any,
) -> float:  # pragma: no cover - compiled; covered through accumulate_rows
    p = x.shape[1]
    gathered, shifted, weighted = rows.size > 0, shift.size > 0, weights.size > 0
    sums = np.zeros(p)
    block_sums = np.empty(p)  # summed per sub-block, then added: rounding grows with the blocks, not the rows
    weight_sum = 0.0
    for begin in range(start, stop, step):
        m = min(step, stop - begin)
        block_sums[:] = 0.0
        block_weight = 0.0
        if not (gathered or shifted or weighted):
            block = x[begin : begin + m]
            for i in range(m):
                for j in range(p):
                    block_sums[j] += block[i, j]
        else:
            block = buffer[:m]
            # Scalar indexing throughout: a row view per row (x[row]) costs reference counting.
            for i in range(m):
                row = rows[begin + i] if gathered else begin + i
                if shifted:
                    for j in range(p):
                        block[i, j] = x[row, j] - shift[j]
                else:
                    for j in range(p):
                        block[i, j] = x[row, j]
                if weighted:
                    w = weights[row]
                    root = np.sqrt(w)
                    block_weight += w
                    for j in range(p):
                        block_sums[j] += w * block[i, j]
                        block[i, j] *= root
                else:
                    for j in range(p):
                        block_sums[j] += block[i, j]
        sums += block_sums
        weight_sum += block_weight if weighted else m
        _add_gram(syrk, block, gram)
    total += sums
    return weight_sum


@njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def _accumulate_narrow(
    x: Any, rows: Any, start: int, stop: int, shift: Any, weights: Any, block: Any, gram: Any, total: Any
) -> float:  # pragma: no cover - compiled; covered through accumulate_rows
    """The narrow loop (see the module's docstring): ``block`` is the (p + 1) × m scratch."""
    p = x.shape[1]
    q, m = block.shape
    gathered, shifted, weighted = rows.size > 0, shift.size > 0, weights.size > 0
    augmented = np.zeros((q, q))  # summed per sub-block, then added: rounding grows with the blocks
    for begin in range(start, stop, m):
        size = min(m, stop - begin)
        for i in range(size):
            row = rows[begin + i] if gathered else begin + i
            root = np.sqrt(weights[row]) if weighted else 1.0
            for j in range(p):
                value = x[row, j] - shift[j] if shifted else x[row, j]
                block[j, i] = root * value if weighted else value
            block[p, i] = root
        _add_tiles(block, size, augmented)
    _add_augmented(augmented, gram, total)
    return augmented[p, p]


@njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def _add_tiles(block: Any, size: int, augmented: Any) -> None:  # pragma: no cover - compiled
    """augmented += the upper triangle of B Bᵀ, B = the first ``size`` columns of ``block``
    (q × m), by 2 × 2 tiles (j, j1) × (r, r1) of dot products."""
    q = block.shape[0]
    for j in range(0, q, 2):
        j1 = min(j + 1, q - 1)
        for r in range(j, q, 2):
            r1 = min(r + 1, q - 1)
            a = b = c = d = 0.0
            for i in range(size):
                u, u1, v, v1 = block[j, i], block[j1, i], block[r, i], block[r1, i]
                a += u * v
                b += u * v1
                c += u1 * v
                d += u1 * v1
            augmented[j, r] += a
            if r1 > r:
                augmented[j, r1] += b
            if j1 > j and r >= j1:
                augmented[j1, r] += c
            if j1 > j and r1 > r:
                augmented[j1, r1] += d


@njit(nogil=True, cache=True)
def _add_augmented(augmented: Any, gram: Any, total: Any) -> None:  # pragma: no cover - compiled
    """Add the augmented Gram's upper triangle (q = p + 1) to ``gram``'s lower triangle and its
    last column to ``total``."""
    p = augmented.shape[0] - 1
    for j in range(p):
        total[j] += augmented[j, p]
        for r in range(j + 1):
            gram[j, r] += augmented[r, j]


def group_runs(codes: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows per group, and where each group's rows begin when every group's rows are contiguous
    (one pass over the codes; ``np.bincount`` and a comparison of neighbours take 3x as long).

    Parameters
    ----------
    codes : ndarray of shape (n,), intp
    n_groups : int
        Codes must lie in ``0 … n_groups − 1``.

    Returns
    -------
    counts : ndarray of shape (n_groups,), intp
    starts : ndarray of intp, or None
        The first row of each run of equal codes, then n, when there is one run per group
        present; ``None`` when some group's rows are interleaved with another's.

    Raises
    ------
    InputError
        Codes of another dtype or shape, or outside ``0 … n_groups − 1``.
    """
    if codes.dtype != np.intp or codes.ndim != 1:
        raise InputError(f"group_runs needs a 1-D intp array of codes, got {codes.dtype} {codes.shape}")
    counts = np.zeros(n_groups, dtype=np.intp)
    starts = np.empty(n_groups + 1, dtype=np.intp)
    runs = _group_runs(codes, counts, starts)
    if runs < 0:
        raise InputError(f"group codes must lie in 0 … {n_groups - 1}, got {int(codes[-1 - runs])}")
    if runs > np.count_nonzero(counts):
        return counts, None
    return counts, np.append(starts[:runs], codes.shape[0])


@njit(nogil=True, cache=True)
def _group_runs(codes: Any, counts: Any, starts: Any) -> int:  # pragma: no cover - compiled
    """Fill ``counts``; the starts of the first ``len(starts)`` runs; return the number of runs
    (−1 − i if code i is out of range)."""
    k = counts.size
    runs = 0
    for i in range(codes.size):
        c = codes[i]
        if c < 0 or c >= k:
            return -1 - i
        counts[c] += 1
        if i == 0 or c != codes[i - 1]:
            if runs < starts.size:
                starts[runs] = i
            runs += 1
    return runs


@njit(nogil=True, cache=True)
def group_order(codes: Any, counts: Any) -> Any:  # pragma: no cover - compiled
    """Row indices ordered by group code, each group's rows in their order (a counting sort:
    one pass over the codes, where a comparison sort of them takes ~10x as long).

    Parameters
    ----------
    codes : ndarray of shape (n,), intp
        Values in ``0 … len(counts) − 1``.
    counts : ndarray, int
        ``counts[g]`` = the number of rows of code g (``np.bincount(codes)``).

    Returns
    -------
    ndarray of shape (n,), intp
        Group 0's rows, then group 1's, …
    """
    position = np.empty(counts.size, dtype=np.intp)
    filled = 0
    for g in range(counts.size):
        position[g] = filled
        filled += counts[g]
    order = np.empty(codes.size, dtype=np.intp)
    for i in range(codes.size):
        g = codes[i]
        order[position[g]] = i
        position[g] += 1
    return order


def accumulate_groups(
    x: np.ndarray,
    codes: np.ndarray,
    weights: np.ndarray | None,
    step: int,
    shift_at: float,
    sums: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """Add the sums of every group of rows whose groups are interleaved, in one sweep.

    Each row is copied, in the order of the rows, into the scratch block of its group; a full
    block is summed and added to its group's Gram matrix by dsyrk (a sequential read of the
    rows, where gathering group after group reads each group's rows scattered over the chunk:
    ~4x slower per row from memory). A group's centre c_g is decided on its first block, as for
    one group: c_g = the block's mean if some column has mean² > (``shift_at`` − 1) · variance
    there, else 0; that block and every later row of the group are shifted by it. A group
    decided by an earlier call (an earlier slab of the same chunk) keeps its centre.

    Parameters
    ----------
    x : ndarray of shape (n, p), float64, C-ordered
    codes : ndarray of shape (n,), intp
        Group code of each row, in ``0 … k − 1``.
    weights : ndarray of shape (n,), float64, or None
    step : int
        Rows per scratch block (≥ 1); k · step · p floats of scratch memory.
    shift_at : float
        The shift rule's threshold.
    sums : tuple of ndarray
        The k groups' accumulators, C-ordered, added to in place:

        - ``grams`` (k, p, p) float64: Σ w (x − c_g)(x − c_g)ᵀ in the lower triangles;
        - ``totals`` (k, p) float64: Σ w (x − c_g);
        - ``weight_sums`` (k,) float64: Σ w;
        - ``shifts`` (k, p) float64: c_g, written when a group is decided (zeros: no shift);
        - ``decided`` (k,) bool: whether c_g is decided, set on a group's first block.

    Raises
    ------
    InputError
        Arrays of another dtype, layout or size.
    """
    grams, totals, weight_sums, shifts, decided = sums
    n, p = x.shape if x.ndim == 2 else (-1, -1)
    k = grams.shape[0]
    arrays = {
        "x": (x, (n, p), np.float64),
        "grams": (grams, (k, p, p), np.float64),
        "totals": (totals, (k, p), np.float64),
        "weight_sums": (weight_sums, (k,), np.float64),
        "shifts": (shifts, (k, p), np.float64),
        "decided": (decided, (k,), np.bool_),
    }
    arrays |= {"weights": (weights, (n,), np.float64)} if weights is not None else {}
    for name, (array, shape, dtype) in arrays.items():
        if array.dtype != dtype or not array.flags.c_contiguous or array.shape != shape:
            raise InputError(
                f"accumulate_groups needs {name} as C-ordered {np.dtype(dtype)} {shape}, "
                f"got {array.dtype} {array.shape}"
            )
    if codes.dtype != np.intp or codes.shape != (n,) or step < 1:
        raise InputError(
            f"accumulate_groups needs intp codes of shape ({n},) and step >= 1, got {codes.dtype} {codes.shape}, {step}"
        )
    weights = _NOTHING if weights is None else weights
    if p <= NARROW_FEATURES:
        blocks = np.empty((k, p + 1, min(step, _narrow_rows(p))))
        _accumulate_groups_narrow(x, codes, weights, blocks, shift_at, grams, totals, weight_sums, shifts, decided)
        return
    shifted = decided & shifts.any(axis=1)  # whose rows are copied minus their centre
    state = (np.empty((k, step, p)), np.empty((k, step)), decided, shifted, grams, totals, weight_sums, shifts)
    _accumulate_groups(x, codes, weights, state, shift_at, fortran_dsyrk())


@njit(nogil=True, cache=True)
def _accumulate_groups(
    x: Any, codes: Any, weights: Any, state: Any, shift_at: float, syrk: Any
) -> None:  # pragma: no cover - compiled; covered through accumulate_groups
    """The sweep of the dsyrk loop; ``state``: the scratch blocks (k × step × p) and their
    weights (k × step), ``decided``, which groups are shifted, then the accumulators of
    :func:`accumulate_groups`."""
    blocks, block_weights, _, shifted, _, _, _, shifts = state
    k, step, p = blocks.shape
    weighted = weights.size > 0
    fill = np.zeros(k, dtype=np.intp)
    for i in range(x.shape[0]):  # scalar indexing: a row view per row costs reference counting
        g = codes[i]
        f = fill[g]
        if shifted[g]:  # a plain copy otherwise: 10-25 % of the pass at p = 50
            for j in range(p):
                blocks[g, f, j] = x[i, j] - shifts[g, j]
        else:
            for j in range(p):
                blocks[g, f, j] = x[i, j]
        block_weights[g, f] = weights[i] if weighted else 1.0
        fill[g] = f + 1
        if f + 1 == step:
            _flush(g, step, state, weighted, shift_at, syrk)
            fill[g] = 0
    for g in range(k):
        if fill[g] > 0:
            _flush(g, fill[g], state, weighted, shift_at, syrk)


@njit(nogil=True, cache=True)
def _accumulate_groups_narrow(
    x: Any,
    codes: Any,
    weights: Any,
    blocks: Any,
    shift_at: float,
    grams: Any,
    totals: Any,
    weight_sums: Any,
    shifts: Any,
    decided: Any,
) -> None:  # pragma: no cover - compiled; covered through accumulate_groups
    """The sweep of the narrow loop: each row is copied, transposed, into its group's block
    (k × (p + 1) × m: the rows' values about the group's centre once decided, then the weight),
    and a full block is added to its group's augmented Gram matrix by :func:`_flush_narrow`."""
    k, q, m = blocks.shape
    p = q - 1
    weighted = weights.size > 0
    augmented = np.zeros((k, q, q))
    fill = np.zeros(k, dtype=np.intp)
    for i in range(x.shape[0]):  # scalar indexing: a row view per row costs reference counting
        g = codes[i]
        f = fill[g]
        if decided[g]:
            for j in range(p):
                blocks[g, j, f] = x[i, j] - shifts[g, j]
        else:
            for j in range(p):
                blocks[g, j, f] = x[i, j]
        blocks[g, p, f] = weights[i] if weighted else 1.0
        fill[g] = f + 1
        if f + 1 == m:
            _flush_narrow(blocks[g], m, augmented[g], decided, g, shifts[g], shift_at, weighted)
            fill[g] = 0
    for g in range(k):
        if fill[g] > 0:
            _flush_narrow(blocks[g], fill[g], augmented[g], decided, g, shifts[g], shift_at, weighted)
        _add_augmented(augmented[g], grams[g], totals[g])
        weight_sums[g] += augmented[g, p, p]


@njit(nogil=True, cache=True)
def _flush_narrow(
    block: Any, m: int, augmented: Any, decided: Any, g: int, shift: Any, shift_at: float, weighted: bool
) -> None:  # pragma: no cover - compiled
    """Add the first m columns of a group's transposed block (values, then weights) to its
    augmented Gram; on the group's first block, decide its centre first and shift the block."""
    p = block.shape[0] - 1
    if not decided[g]:
        decided[g] = True
        if _centre(block[:p, :m].T, _NO_ROWS, 0, m, shift_at, shift):
            for j in range(p):
                for i in range(m):
                    block[j, i] -= shift[j]
    if weighted:
        for i in range(m):
            root = np.sqrt(block[p, i])
            for j in range(p):
                block[j, i] *= root
            block[p, i] = root
    _add_tiles(block, m, augmented)


@njit(nogil=True, cache=True)
def _flush(g: int, m: int, state: Any, weighted: bool, shift_at: float, syrk: Any) -> None:  # pragma: no cover
    """Sum group g's block of m rows into its totals and Gram; on its first block, decide its
    centre first (and shift the block by it)."""
    blocks, block_weights, decided, shifted, grams, totals, weight_sums, shifts = state
    p = blocks.shape[2]
    block = blocks[g, :m]
    if not decided[g]:
        decided[g] = True
        shifted[g] = _centre(block, _NO_ROWS, 0, m, shift_at, shifts[g])
        if shifted[g]:
            mean = shifts[g]
            for i in range(m):
                for j in range(p):
                    block[i, j] -= mean[j]
    sums = np.zeros(p)
    if weighted:
        block_weight = 0.0
        for i in range(m):
            w = block_weights[g, i]
            root = np.sqrt(w)
            block_weight += w
            for j in range(p):
                sums[j] += w * block[i, j]
                block[i, j] *= root
        weight_sums[g] += block_weight
    else:
        for i in range(m):
            for j in range(p):
                sums[j] += block[i, j]
        weight_sums[g] += m
    totals[g] += sums
    _add_gram(syrk, block, grams[g])


def first_centre(
    x: np.ndarray, rows: np.ndarray | None, start: int, stop: int, step: int, shift_at: float
) -> np.ndarray | None:
    """The centre of a group's rows by the shift rule, decided on its first sub-block: the
    sub-block's mean if some column has mean² > (``shift_at`` − 1) · variance there, else
    ``None`` (no shift).

    Parameters
    ----------
    x : ndarray of shape (n, p), float64, C-ordered
    rows : ndarray of intp or None
        As in :func:`accumulate_rows`: the group is ``x[start:stop]`` or ``x[rows[start:stop]]``.
    start, stop : int
        The group's range (``start < stop``).
    step : int
        Rows of the first sub-block (≥ 1).
    shift_at : float
        The threshold.

    Returns
    -------
    ndarray of shape (p,) or None

    Raises
    ------
    InputError
        Arrays of another dtype or layout, an empty range.
    """
    if x.dtype != np.float64 or x.ndim != 2 or not x.flags.c_contiguous:
        raise InputError(f"first_centre needs x as C-ordered float64 rows, got {x.dtype} {x.shape}")
    if rows is not None and (rows.dtype != np.intp or rows.ndim != 1 or not rows.flags.c_contiguous):
        raise InputError(f"first_centre needs rows as a contiguous intp array, got {rows.dtype} {rows.shape}")
    if not 0 <= start < stop <= (x.shape[0] if rows is None else rows.shape[0]) or step < 1:
        raise InputError(f"first_centre: bad rows {start}:{stop} or step {step}")
    centre = np.zeros(x.shape[1])
    shifted = _centre(x, _NO_ROWS if rows is None else rows, start, min(step, stop - start), shift_at, centre)
    return centre if shifted else None


@njit(nogil=True, cache=True)
def _centre(x: Any, rows: Any, start: int, m: int, shift_at: float, centre: Any) -> bool:  # pragma: no cover
    """Whether the m rows from ``start`` (of ``x``, or listed by ``rows``) must be shifted by the
    shift rule; if so their mean is written to ``centre``."""
    p = x.shape[1]
    gathered = rows.size > 0
    mean = np.zeros(p)
    for i in range(m):
        row = rows[start + i] if gathered else start + i
        for j in range(p):
            mean[j] += x[row, j]
    mean /= m
    spread = np.zeros(p)
    for i in range(m):
        row = rows[start + i] if gathered else start + i
        for j in range(p):
            spread[j] += (x[row, j] - mean[j]) ** 2
    shifted = False
    for j in range(p):
        # constant nonzero column: 0 variance; NaN never compares true (the pass reports it)
        if mean[j] * mean[j] > (shift_at - 1.0) * (spread[j] / m):
            shifted = True
    if shifted:
        centre[:] = mean
    return shifted


def scatter_from_lower(gram: np.ndarray, total: np.ndarray, correction: np.ndarray) -> np.ndarray:
    """S = G − s cᵀ in place of ``gram`` (C-ordered float64 p × p, G in its lower triangle),
    with G's upper triangle filled from the lower one; returns ``gram``.

    Element by element what ``symmetrized(gram) - np.outer(total, correction)`` gives (one
    product and one difference each, so the same bits), without its five p × p temporaries: at
    p = 2,000 those cost 0.1–0.2 s per group of a chunk (32 MB each, mapped afresh), a fifth of
    the chunk's time at 100k rows.
    """
    p = gram.shape[0]
    if gram.dtype != np.float64 or not gram.flags.c_contiguous or gram.shape != (p, p):
        raise InputError(f"scatter_from_lower needs a C-ordered float64 square matrix, got {gram.dtype} {gram.shape}")
    if total.shape != (p,) or correction.shape != (p,):
        raise InputError(f"scatter_from_lower needs vectors of {p}, got {total.shape} and {correction.shape}")
    _scatter_from_lower(gram, np.ascontiguousarray(total, np.float64), np.ascontiguousarray(correction, np.float64))
    return gram


_TILE = 64  # the transposed writes go tile by tile: 2 × 32 KiB within the L1 and L2 caches


@njit(nogil=True, cache=True)
def _scatter_from_lower(gram: Any, total: Any, correction: Any) -> None:  # pragma: no cover - compiled
    p = gram.shape[0]
    for i0 in range(0, p, _TILE):
        for j0 in range(0, i0 + 1, _TILE):
            for i in range(i0, min(i0 + _TILE, p)):
                for j in range(j0, min(j0 + _TILE, i + 1)):
                    g = gram[i, j]
                    gram[i, j] = g - total[i] * correction[j]
                    if j != i:
                        gram[j, i] = g - total[j] * correction[i]


@njit(nogil=True, cache=True)
def _add_gram(syrk: Any, block: Any, gram: Any) -> None:  # pragma: no cover - compiled
    """gram += blockᵀ block on the row-major lower triangle of ``gram`` (C-ordered p × p), by
    dsyrk; ``block``: m rows of p contiguous floats, consecutive rows p floats apart."""
    m, p = block.shape
    if m == 0 or p == 0:  # nothing to add (and lda = 0 is an error for BLAS)
        return
    # dsyrk takes every argument by reference: uplo "U", trans "N", alpha = beta = 1 and
    # n = lda = ldc = p. The row-major (m, p) block is the column-major p × m matrix A (leading
    # dimension p), so dsyrk adds A Aᵀ = blockᵀ block to the column-major upper triangle of the
    # p × p accumulator, which is the row-major lower triangle of ``gram``.
    flags = np.array([ord("U"), ord("N")], dtype=np.uint8)
    one = np.ones(1)
    sizes = np.array([p, m], dtype=np.int32)
    syrk(
        flags[0:1].ctypes,
        flags[1:2].ctypes,
        sizes[0:1].ctypes,
        sizes[1:2].ctypes,
        one.ctypes,
        block.ctypes,
        sizes[0:1].ctypes,
        one.ctypes,
        gram.ctypes,
        sizes[0:1].ctypes,
    )


def compile_kernels() -> None:
    """Compile the kernel's loops for the array types a pass gives them (narrow and wide rows;
    writable and read-only, as numpy and a zero-copy Arrow read give them; groups contiguous,
    mixed, or too many for the sweep; with and without weights), or load them from Numba's disk
    cache. ``make env`` calls it once, so that a new machine's first pass does not spend ~5 s
    compiling (11 s at load 8). Also the one compiled loop of the random Fourier features
    (single precision's angle reduction, :class:`~fairpca_dist.engine.kernels.RandomFeatures`),
    which the ``mmd`` method's passes and the report's random-feature sums run."""
    from fairpca_dist.engine.kernels import RandomFeatures
    from fairpca_dist.engine.moments import GroupMoments

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 64)
    weights = rng.random(64)
    many = tuple(range(6000))  # k · p · 64 rows of float64 exceed the sweep's memory
    for p in (3, NARROW_FEATURES + 1):
        rows = rng.standard_normal((64, p))
        for x in (rows, rows.copy()):
            if x is not rows:
                x.flags.writeable = False
            for codes, groups in ((labels, (0, 1, 2)), (np.sort(labels), (0, 1, 2)), (labels, many)):
                for w in (None, weights):
                    GroupMoments.from_codes(x, codes, groups, weights=w)
    RandomFeatures.draw(2, 8, 1.0, rng, precision="single").cos_sin(rng.standard_normal((4, 2)))
