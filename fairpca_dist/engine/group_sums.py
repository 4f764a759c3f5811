"""One chunk's per-group sums, added slab by slab: the driver of the moments kernel.

For each group g of a chunk (a partition, or an array), about a centre c_g,

    W_g = Σ w,    s_g = Σ w (x − c_g),    G_g = Σ w (x − c_g)(x − c_g)ᵀ,

from which μ_g = c_g + s_g / W_g and S_g = G_g − s_g s_gᵀ / W_g (Welford's shifted sums: exact
when c_g is near μ_g). A chunk that must be converted to float64 first (a DataFrame, a column-
major or Arrow read) arrives in slabs of a bounded size, and every slab adds to the same sums:
the chunk's statistics are finished once, whatever its number of slabs. (Finishing each slab
and merging the results costs k·p² work per slab: at p = 2,000 a 32 MB slab holds 2,000 rows,
and its merge cost twice its Gram.)

The rows of a slab are read the fastest way they allow (:mod:`fairpca_dist.engine.gram`):

- every group's rows contiguous (a table sorted or partitioned by group): in place, group by
  group, by :func:`~fairpca_dist.engine.gram.accumulate_rows`;
- interleaved: one sweep copying each row into its group's scratch block
  (:func:`~fairpca_dist.engine.gram.accumulate_groups`);
- more groups than the sweep's scratch memory holds (many cells × groups at large p): gathered
  group after group by a counting sort of the codes.

The shift rule. Sums about a centre c lose about log10(G_jj / S_jj) digits in S = G − s sᵀ / W
(G_jj / S_jj = 1 + (mean − c)² / variance of column j), so a result is accepted only if every
G_jj ≤ :data:`CANCELLATION_LIMIT` · S_jj: at most 2 digits lost, a relative error below
~2e-13 in S. A group is shifted up front (c_g = the mean of its first sub-block) when that
sub-block predicts half that cancellation (some column with 1 + mean² / variance >
:data:`SHIFT_AT`, or constant and nonzero); c_g = 0 otherwise. When the check fails either way,
the group is summed again, over all the chunk's slabs, about its own weighted mean. Roughly
centred features thus skip the shift, and data with column means of 1e8 are as exact as
centred data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from fairpca_dist.engine.gram import (
    accumulate_groups,
    accumulate_rows,
    first_centre,
    group_order,
    group_runs,
    scatter_from_lower,
)
from fairpca_dist.exceptions import InputError

__all__ = ["GroupSums", "Slab", "CANCELLATION_LIMIT", "SHIFT_AT"]

Slab = tuple[np.ndarray, np.ndarray, np.ndarray | None]
"""Rows of a chunk: (x, codes, weights), x C-ordered float64 (n, p), codes (n,) group codes,
weights (n,) or None."""

CANCELLATION_LIMIT = 100.0
"""A group's sums are accepted when every G_jj ≤ this · S_jj (at most 2 digits lost)."""
SHIFT_AT = CANCELLATION_LIMIT / 2
"""A group is shifted up front when its first sub-block predicts G_jj / S_jj above this."""

# Scratch memory of the sweep over interleaved groups (one block of rows per group): up to this
# many bytes, with at least _MIN_SWEEP_ROWS rows per block; more groups than that (many cells ×
# groups at large p) are gathered group after group instead, through one block.
_SWEEP_BYTES = 8 * 2**20
_MIN_SWEEP_ROWS = 64


def _gram_rows(n_features: int) -> int:
    """Rows per sub-block of the moments kernel: up to 2 MiB (the core's L2 cache), at most
    1024 rows. dsyrk runs as fast on 1024 rows as on 100k (p = 10 … 200), and 256-row blocks
    cost 5 % more at p = 200; above 1024 rows the copies leave the cache (p = 50: 10 % more at
    4096, 16 % at 16384)."""
    return int(np.clip(2 * 2**20 // (8 * max(n_features, 1)), 256, 1024))


class GroupSums:
    """Σ w, Σ w (x − c_g) and Σ w (x − c_g)(x − c_g)ᵀ per group of one chunk, slab by slab.

    Parameters
    ----------
    n_groups : int
        Codes lie in ``0 … n_groups − 1``.
    n_features : int
        p, the columns of every slab.

    Notes
    -----
    The p × p accumulators of all ``n_groups`` groups are allocated up front as zeros; the
    pages of a group without rows are never touched, so they take no memory.
    """

    def __init__(self, n_groups: int, n_features: int) -> None:
        k, p = n_groups, n_features
        self.counts = np.zeros(k, dtype=np.int64)
        self.weight_sums = np.zeros(k)
        self.totals = np.zeros((k, p))
        self.grams = np.zeros((k, p, p))  # lower triangles
        self.shifts = np.zeros((k, p))  # c_g; zeros until decided, and for a group not shifted
        self.decided = np.zeros(k, dtype=bool)

    @property
    def _step(self) -> int:
        return _gram_rows(self.totals.shape[1])

    def add(self, x: np.ndarray, codes: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Add one slab's rows.

        Parameters
        ----------
        x : ndarray of shape (n, p), float64, C-ordered
        codes : ndarray of shape (n,), int
            Each row's group, in ``0 … n_groups − 1``.
        weights : ndarray of shape (n,), float64, or None
            Non-negative sample weights (``None``: 1).

        Raises
        ------
        InputError
            Codes of another length or outside the groups; arrays of another dtype or layout.
        """
        codes = np.asarray(codes, dtype=np.intp)
        if codes.shape != (x.shape[0],):
            raise InputError(f"codes has shape {codes.shape}, expected ({x.shape[0]},)")
        k, p = self.totals.shape
        counts, starts = group_runs(codes, k)
        self.counts += counts
        if starts is not None:  # one run per group
            for begin, stop in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
                self._add_rows(int(codes[begin]), x, None, begin, stop, weights)
            return
        sweep = min(self._step, _SWEEP_BYTES // (8 * k * max(p, 1)))
        if sweep >= _MIN_SWEEP_ROWS:
            sums = (self.grams, self.totals, self.weight_sums, self.shifts, self.decided)
            accumulate_groups(x, codes, weights, sweep, SHIFT_AT, sums)
            return
        order = group_order(codes, counts)
        stops = np.cumsum(counts).tolist()
        for g in np.flatnonzero(counts).tolist():
            self._add_rows(g, x, order, stops[g] - int(counts[g]), stops[g], weights)

    def _add_rows(
        self, g: int, x: np.ndarray, rows: np.ndarray | None, start: int, stop: int, weights: np.ndarray | None
    ) -> None:
        """Add group g's rows ``x[start:stop]`` (or ``x[rows[start:stop]]``), deciding its
        centre on them if no earlier rows did."""
        step = self._step
        if not self.decided[g]:
            centre = first_centre(x, rows, start, stop, step, SHIFT_AT)
            if centre is not None:
                self.shifts[g] = centre
            self.decided[g] = True
        shift = self.shifts[g] if self.shifts[g].any() else None  # no shift: dsyrk reads the rows in place
        buffer = np.empty((min(step, stop - start), x.shape[1]))
        gram, total = self.grams[g], self.totals[g]
        self.weight_sums[g] += accumulate_rows(x, rows, start, stop, shift, weights, step, buffer, gram, total)

    def finish(
        self, slabs: Callable[[], Iterable[Slab]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The statistics of the groups that have rows, in code order.

        Each group's sums pass the cancellation check or are summed again about the group's
        own weighted mean (the first rows misled the shift rule: rows sorted by a drifting
        column, or the first rows carry little weight; the sums give that mean to far better
        than its standard deviation). The accumulators become the scatter matrices in place:
        call once.

        Parameters
        ----------
        slabs : callable
            Returns the slabs that were added, again (read only for a group that failed the
            check).

        Returns
        -------
        present : ndarray of intp
            The codes of the groups with rows.
        count : ndarray of int64
        weight : ndarray
            W_g.
        origin : ndarray of shape (len(present), p)
            c_g.
        mean_offset : ndarray of shape (len(present), p)
            μ_g − c_g.
        scatter : ndarray of shape (len(present), p, p)
            S_g (the accumulators themselves when every group has rows: no copy).
        """
        present = np.flatnonzero(self.counts)
        for g in present.tolist():
            if _cancelled(self.weight_sums[g], self.totals[g], self.grams[g]):
                self._sum_again(g, slabs)
        weight = self.weight_sums[present]
        offsets = np.zeros((present.size, self.totals.shape[1]))
        for i, g in enumerate(present.tolist()):
            if weight[i] == 0.0:  # every row weighs 0: no mean, no scatter
                self.grams[g] = 0.0
                continue
            offsets[i] = self.totals[g] / weight[i]
            scatter_from_lower(self.grams[g], self.totals[g], offsets[i])
        scatter = self.grams if present.size == self.counts.size else self.grams[present]
        return present, self.counts[present], weight, self.shifts[present], offsets, scatter

    def _sum_again(self, g: int, slabs: Callable[[], Iterable[Slab]]) -> None:
        """Group g's sums recomputed over every slab about its weighted mean from the first sums."""
        self.shifts[g] += self.totals[g] / self.weight_sums[g]
        self.grams[g], self.totals[g], self.weight_sums[g] = 0.0, 0.0, 0.0
        step = self._step
        for x, codes, weights in slabs():
            rows = np.flatnonzero(np.asarray(codes) == g)
            if rows.size:
                buffer = np.empty((min(step, rows.size), x.shape[1]))
                self.weight_sums[g] += accumulate_rows(
                    x, rows, 0, rows.size, self.shifts[g], weights, step, buffer, self.grams[g], self.totals[g]
                )


def _cancelled(weight_sum: float, total: np.ndarray, gram: np.ndarray) -> bool:
    """Whether S = G − s sᵀ / W lost more digits than the shift rule allows (some G_jj > 100 S_jj)."""
    if weight_sum <= 0.0:
        return False
    diagonal = np.diagonal(gram)
    return bool(np.any(diagonal > CANCELLATION_LIMIT * (diagonal - total * total / weight_sum)))
