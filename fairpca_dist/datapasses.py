"""Passes over the rows that a solver requests while it iterates (DESIGN.md, rule 2).

Most methods decide the projection from :class:`~fairpca_dist.moments.GroupMoments` alone.
Robust ℓ1 fair PCA (``mm-robust``; Babu, Stoica & Saini §4.2, spec/seeds-002-003.md §A.5)
cannot: its minorizer at an iterate V needs, for every group g,

    B_g(V) = Σ_{i∈g} w_i y_i sgn(Vᵀy_i)ᵀ   (p × r),      h_g(V) = Σ_{i∈g} w_i ‖Vᵀy_i‖₁,

with y_i = x_i / scale − c_g the row in the solver's units, centred about its group's point
c_g. Both are sums over rows, so one additive pass per iteration gives them (fused: the pass
at V_t yields the objective min_g h_g(V_t) and the minorizer of the next step).

MMD-constrained fair PCA with the RBF kernel (``mmd``; Lee et al. 2022, spec seed-004.md §3)
needs the rows at every evaluation too: the projected rows U = ZV (:meth:`DataPasses.projected`,
for the all-pairs kernel blocks of :func:`fairpca_dist.kernels.rbf_blocks`), then Zᵀ S
(:meth:`DataPasses.backprojected`), or the additive random-feature sums
(:meth:`DataPasses.rff_sums`), or a fixed subsample held in memory (:meth:`DataPasses.sample`).
Rows there are z = x / scale − origin: the kernel is translation invariant, and the origin (the
global mean) keeps large common offsets from rounding.

This module holds what a solver may ask (:class:`DataPasses`), the arithmetic on a block of
rows that every implementation shares (:func:`l1_block_sums`; the kernel arithmetic is in
:mod:`fairpca_dist.kernels`), its additive result (:class:`L1Sums`), and the in-memory
implementation (:class:`ArrayPasses`).
:class:`fairpca_dist.passes.TablePasses` runs the same arithmetic over the partitions of a
table with dask. Nothing here imports dask: solvers import this module.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from fairpca_dist.exceptions import GroupError, InputError, SchemaError
from fairpca_dist.kernels import RandomFeatures, RFFSums, backprojection, rff_sums
from fairpca_dist.moments import block_rows

__all__ = ["DataPasses", "L1Sums", "l1_block_sums", "ArrayPasses"]

_BLOCK_ROWS = 65_536  # rows converted and summed at a time (bounded temporary memory)


@dataclass(frozen=True)
class L1Sums:
    """Per-group ℓ1 sums at one V: ``b`` (k, p, r) holds B_g, ``h`` (k,) holds h_g, for the
    groups ``groups`` in that order. Partial sums of disjoint row sets merge with ``+``
    (groups missing on one side count as zero)."""

    groups: tuple[Hashable, ...]
    b: np.ndarray
    h: np.ndarray

    @classmethod
    def zeros(cls, groups: Sequence[Hashable], n_features: int, n_components: int) -> L1Sums:
        return cls(tuple(groups), np.zeros((len(groups), n_features, n_components)), np.zeros(len(groups)))

    def __add__(self, other: L1Sums) -> L1Sums:
        labels = (*self.groups, *(g for g in other.groups if g not in self.groups))
        total = L1Sums.zeros(labels, *self.b.shape[1:])
        total.b[: len(self.groups)] += self.b
        total.h[: len(self.groups)] += self.h
        index = [labels.index(g) for g in other.groups]
        np.add.at(total.b, index, other.b)
        np.add.at(total.h, index, other.h)
        return total

    def in_order(self, groups: Sequence[Hashable]) -> L1Sums:
        """The sums for ``groups`` in that order (zeros for a group with no rows here)."""
        out = L1Sums.zeros(groups, *self.b.shape[1:])
        for i, g in enumerate(groups):
            if g in self.groups:
                j = self.groups.index(g)
                out.b[i], out.h[i] = self.b[j], self.h[j]
        return out


def l1_block_sums(
    x: np.ndarray,
    codes: np.ndarray,
    groups: Sequence[Hashable],
    components: np.ndarray,
    centers: dict[Hashable, np.ndarray],
    scale: np.ndarray,
    weights: np.ndarray | None = None,
) -> L1Sums:
    """:class:`L1Sums` of a block of rows ``x`` (original units) whose group is
    ``groups[codes[i]]``: y = x / scale − centers[group], z = Vᵀy, B += y sgn(z)ᵀ w, h += w‖z‖₁.
    sgn(0) = 0, as the minorizer |z| ≥ z·sgn(z_t) allows (spec §A.5).

    No gather per group: with a reference point c₀ (the first centre present) and
    d_g = c_g − c₀, each cache-sized sub-block of rows is shifted once, x₀ = x / scale − c₀
    (large common offsets cancel here, as in the moments pass), and

        z = x₀V − (d V)[group],   B_g += x₀ᵀ S_g − d_g (1ᵀS_g),   h_g = tr(VᵀB_g),

    where S_g holds the (weighted) signs of group g's rows and zeros elsewhere, so one
    p × (k·r) product x₀ᵀ[S_1 … S_k] serves every group; h needs no sum of its own because
    w‖z‖₁ = w sgn(z)ᵀVᵀy.
    """
    k, p, r = len(groups), x.shape[1], components.shape[1]
    present = np.flatnonzero(np.bincount(codes, minlength=k))
    for code in present:
        if groups[code] not in centers:
            raise GroupError(f"group {groups[code]!r} of the rows is not one of the fitted groups {tuple(centers)}")
    if present.size == 0:
        return L1Sums.zeros(groups, p, r)
    offsets = np.zeros((k, p))
    offsets[present] = [centers[groups[code]] for code in present]
    reference = offsets[present[0]].copy()
    offsets[present] -= reference
    projected_offsets = offsets @ components
    products = np.zeros((p, k * r))
    sign_sums = np.zeros(k * r)
    step = block_rows(p)
    for begin in range(0, x.shape[0], step):
        shifted = np.divide(x[begin : begin + step], scale)
        shifted -= reference
        member = codes[begin : begin + step, None] == np.arange(k)  # one-hot group membership
        z = shifted @ components
        z -= member @ projected_offsets
        signs = np.sign(z)
        if weights is not None:
            signs *= weights[begin : begin + step, None]
        spread = (member[:, :, None] * signs[:, None, :]).reshape(-1, k * r)  # [S_1 … S_k]
        products += shifted.T @ spread
        sign_sums += spread.sum(axis=0)
    b = products.reshape(p, k, r).transpose(1, 0, 2) - offsets[:, :, None] * sign_sums.reshape(k, 1, r)
    return L1Sums(tuple(groups), b, np.einsum("kpr,pr->k", b, components))


@runtime_checkable
class DataPasses(Protocol):
    """What a solver that needs the rows may ask of them.

    ``groups`` are the labels in the order of the moments the solver was given;
    :meth:`rescaled` presents the rows in the units of rescaled moments (x / scale), as
    :func:`~fairpca_dist.solvers.fit_projection` does for standardised fits.
    """

    groups: tuple[Hashable, ...]

    def rescaled(self, scale: np.ndarray) -> DataPasses: ...

    def l1_sums(self, components: np.ndarray, centers: np.ndarray) -> L1Sums:
        """B_g and h_g at V = ``components`` (p × r) with rows centred about ``centers``
        (k × p, in the order of :attr:`groups`), one pass over the rows."""
        ...

    def projected(self, components: np.ndarray, origin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """U = ZV (n × r), the rows' group codes into :attr:`groups` and their sample weights
        (None without), rows in a fixed order that :meth:`backprojected` follows; one pass."""
        ...

    def backprojected(self, s: np.ndarray, origin: np.ndarray) -> np.ndarray:
        """Zᵀ S (p × q) for rows S (n × q) in the order of :meth:`projected`; one pass."""
        ...

    def rff_sums(self, components: np.ndarray, origin: np.ndarray, features: RandomFeatures) -> RFFSums:
        """Per-group random-feature sums at V (:func:`fairpca_dist.kernels.rff_sums`); one pass."""
        ...

    def sample(self, max_rows_per_group: int, seed: int) -> ArrayPasses:
        """At most ``max_rows_per_group`` rows of each group, drawn uniformly without
        replacement (deterministic for a seed), in memory, in the same units."""
        ...


class ArrayPasses:
    """:class:`DataPasses` over rows held in memory: a (n, p) array, one group label per row
    and optional sample weights."""

    def __init__(
        self,
        x: np.ndarray,
        labels: Sequence[Hashable] | np.ndarray,
        groups: Sequence[Hashable],
        *,
        weights: np.ndarray | None = None,
        scale: np.ndarray | None = None,
    ) -> None:
        self.x = np.asarray(x, dtype=np.float64)
        if self.x.ndim != 2:
            raise SchemaError(f"expected a 2-D array of rows, got shape {self.x.shape}")
        self.groups = tuple(groups)
        values = np.empty(len(labels), dtype=object)
        values[:] = list(labels)  # tuples (intersectional groups) stay single labels
        codes = pd.Index(self.groups, tupleize_cols=False).get_indexer(pd.Index(values, tupleize_cols=False))
        if codes.shape != (self.x.shape[0],):
            raise SchemaError(f"{codes.shape[0]} group labels for {self.x.shape[0]} rows")
        if (codes < 0).any():
            unknown = values[codes < 0][0]
            raise GroupError(f"group label {unknown!r} is not one of the fitted groups {self.groups}")
        self.codes = codes
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.scale = np.ones(self.x.shape[1]) if scale is None else np.asarray(scale, dtype=np.float64)

    def rescaled(self, scale: np.ndarray) -> ArrayPasses:
        view = copy.copy(self)
        view.scale = np.asarray(scale, dtype=np.float64)
        return view

    def l1_sums(self, components: np.ndarray, centers: np.ndarray) -> L1Sums:
        by_label = dict(zip(self.groups, np.asarray(centers, dtype=np.float64)))
        total = L1Sums.zeros(self.groups, self.x.shape[1], components.shape[1])
        for start in range(0, self.x.shape[0], _BLOCK_ROWS):
            block = slice(start, start + _BLOCK_ROWS)
            weights = None if self.weights is None else self.weights[block]
            total = total + l1_block_sums(self.x[block], self.codes[block], self.groups, components, by_label,
                                          self.scale, weights)
        return total

    def _blocks(self, origin: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
        """Row ranges and their rows z = x / scale − origin, a bounded block at a time."""
        for start in range(0, self.x.shape[0], _BLOCK_ROWS):
            block = slice(start, start + _BLOCK_ROWS)
            yield block, self.x[block] / self.scale - origin

    def projected(self, components: np.ndarray, origin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        u = np.empty((self.x.shape[0], components.shape[1]))
        for block, z in self._blocks(origin):
            u[block] = z @ components
        return u, self.codes, self.weights

    def backprojected(self, s: np.ndarray, origin: np.ndarray) -> np.ndarray:
        return sum((backprojection(z, s[block]) for block, z in self._blocks(origin)),
                   np.zeros((self.x.shape[1], s.shape[1])))

    def rff_sums(self, components: np.ndarray, origin: np.ndarray, features: RandomFeatures) -> RFFSums:
        k = len(self.groups)
        total = RFFSums(np.zeros((k, features.n_features)), np.zeros((k, self.x.shape[1], features.n_features)),
                        np.zeros(k))
        for block, z in self._blocks(origin):
            total = total + rff_sums(z, self.codes[block], k, components, features,
                                     None if self.weights is None else self.weights[block])
        return total

    def sample(self, max_rows_per_group: int, seed: int) -> ArrayPasses:
        if max_rows_per_group < 2:
            raise InputError(f"max_rows_per_group must be at least 2, got {max_rows_per_group!r}")
        rng = np.random.default_rng(seed)
        keep = np.sort(np.concatenate([
            rng.choice(rows, size=min(max_rows_per_group, rows.size), replace=False)
            for rows in (np.flatnonzero(self.codes == g) for g in range(len(self.groups)))
        ]))
        subset = copy.copy(self)
        subset.x, subset.codes = self.x[keep], self.codes[keep]
        subset.weights = None if self.weights is None else self.weights[keep]
        return subset
