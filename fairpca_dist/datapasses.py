"""Passes over the rows that a solver requests while it iterates (DESIGN.md, rule 2).

Most methods decide the projection from :class:`~fairpca_dist.moments.GroupMoments` alone.
Robust ℓ1 fair PCA (``mm-robust``; Babu, Stoica & Saini §4.2, spec/seeds-002-003.md §A.5)
cannot: its minorizer at an iterate V needs, for every group g,

    B_g(V) = Σ_{i∈g} w_i y_i sgn(Vᵀy_i)ᵀ   (p × r),      h_g(V) = Σ_{i∈g} w_i ‖Vᵀy_i‖₁,

with y_i = x_i / scale − c_g the row in the solver's units, centred about its group's point
c_g. Both are sums over rows, so one additive pass per iteration gives them (fused: the pass
at V_t yields the objective min_g h_g(V_t) and the minorizer of the next step).

This module holds what a solver may ask (:class:`DataPasses`), the arithmetic on a block of
rows that every implementation shares (:func:`l1_block_sums`), its additive result
(:class:`L1Sums`), and the in-memory implementation (:class:`ArrayPasses`).
:class:`fairpca_dist.passes.TablePasses` runs the same arithmetic over the partitions of a
table with dask. Nothing here imports dask: solvers import this module.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from fairpca_dist.exceptions import GroupError, SchemaError
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
