"""Passes over the rows that a solver requests while it iterates (DESIGN.md, rule 2).

Most methods decide the projection from :class:`~fairpca_dist.engine.moments.GroupMoments` alone.
Robust ℓ1 fair PCA (``mm-robust``; Babu, Stoica & Saini §4.2, spec/seeds-002-003.md §A.5)
cannot: its minorizer at an iterate V needs, for every group g,

    B_g(V) = Σ_{i∈g} w_i y_i sgn(Vᵀy_i)ᵀ   (p × r),      h_g(V) = Σ_{i∈g} w_i ‖Vᵀy_i‖₁,

with y_i = x_i / scale − c_g the row in the solver's units, centred about its group's point
c_g. Both are sums over rows, so one additive pass per iteration gives them (fused: the pass
at V_t yields the objective min_g h_g(V_t) and the minorizer of the next step). The first pass
also draws the in-memory sample of the sample-preconditioned steps
(:meth:`DataPasses.l1_sums_sampled`, :class:`GroupSample`: bottom-k by hash key, mergeable).

MMD-constrained fair PCA with the RBF kernel (``mmd``; Lee et al. 2022, spec seed-004.md §3)
needs the rows at every evaluation too: the projected rows U = ZV (:meth:`DataPasses.projected`,
for the all-pairs kernel blocks of :func:`fairpca_dist.engine.kernels.rbf_blocks`), then Zᵀ S
(:meth:`DataPasses.backprojected`), or the additive random-feature sums
(:meth:`DataPasses.rff_sums`; several projections at once with :meth:`DataPasses.rff_sums_many`),
or a fixed subsample held in memory (:meth:`DataPasses.sample`).
Rows there are z = x / scale − origin: the kernel is translation invariant, and the origin (the
global mean) keeps large common offsets from rounding.

This module holds what a solver may ask (:class:`DataPasses`), the arithmetic on a block of
rows that every implementation shares (:func:`l1_block_sums`, :func:`rff_block_sums_many`; the
kernel arithmetic is in :mod:`fairpca_dist.engine.kernels`), its additive result (:class:`L1Sums`), the
count of passes every implementation keeps (:class:`PassCounter`), and the in-memory
implementation (:class:`ArrayPasses`).
:class:`fairpca_dist.engine.passes.TablePasses` runs the same arithmetic over the partitions of a
table with dask. Nothing here imports dask: solvers import this module.
"""

from __future__ import annotations

import copy
import functools
import operator
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, Self, TypeVar, runtime_checkable

import numpy as np
import pandas as pd

from fairpca_dist.engine.blas import one_blas_thread
from fairpca_dist.engine.kernels import RandomFeatures, RFFSums, backprojection, rff_sums
from fairpca_dist.engine.moments import block_rows
from fairpca_dist.engine.sampling import row_keys
from fairpca_dist.exceptions import GroupError, InputError, SchemaError

__all__ = [
    "DataPasses",
    "L1Sums",
    "l1_block_sums",
    "GroupSample",
    "SampledL1Sums",
    "l1_block_sums_sampled",
    "check_sample_size",
    "ScatterProducts",
    "scatter_block_products",
    "RFFRequest",
    "check_rff_requests",
    "rff_block_sums_many",
    "merge_rff_sums_many",
    "PassCounter",
    "ArrayPasses",
]

RFFRequest = tuple[np.ndarray, RandomFeatures]
"""One projection of :meth:`DataPasses.rff_sums_many`: components V (p × r) and the random
features (r × D frequencies) the rows projected by V go through."""

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
    def zeros(cls, groups: Sequence[Hashable], n_features: int, n_components: int) -> Self:
        return cls(tuple(groups), np.zeros((len(groups), n_features, n_components)), np.zeros(len(groups)))

    def __add__(self, other: L1Sums) -> Self:
        labels = (*self.groups, *(g for g in other.groups if g not in self.groups))
        total = self.zeros(labels, *self.b.shape[1:])
        total.b[: len(self.groups)] += self.b
        total.h[: len(self.groups)] += self.h
        index = [labels.index(g) for g in other.groups]
        np.add.at(total.b, index, other.b)
        np.add.at(total.h, index, other.h)
        return total

    def in_order(self, groups: Sequence[Hashable]) -> Self:
        """The sums for ``groups`` in that order (zeros for a group with no rows here)."""
        out = self.zeros(groups, *self.b.shape[1:])
        for i, g in enumerate(groups):
            if g in self.groups:
                j = self.groups.index(g)
                out.b[i], out.h[i] = self.b[j], self.h[j]
        return out


class ScatterProducts(L1Sums):
    """Per-group scatter products at one U: ``b`` (k, p, q) holds S_g U = Σ_{i∈g} w_i y_i y_iᵀ U
    and ``h`` (k,) holds tr(Uᵀ S_g U) = Σ_{i∈g} w_i ‖Uᵀy_i‖², for the groups ``groups`` in that
    order; merged with ``+`` as :class:`L1Sums` (the same additive shape). The block power
    iterations of ``fnpm-streaming`` ask for them: k × p × q numbers, never a p × p matrix."""


def _grouped_products(
    x: np.ndarray,
    codes: np.ndarray,
    groups: Sequence[Hashable],
    components: np.ndarray,
    centers: dict[Hashable, np.ndarray],
    scale: np.ndarray,
    weights: np.ndarray | None,
    link: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """B_g = Σ_{i∈g} w_i y_i link(Vᵀy_i)ᵀ (k, p, r) for a block of rows ``x`` (original units)
    whose group is ``groups[codes[i]]``, y = x / scale − centers[group]: the per-block work of
    :func:`l1_block_sums` (link = sgn) and :func:`scatter_block_products` (link = identity).

    No gather per group: with a reference point c₀ (the first centre present) and
    d_g = c_g − c₀, each cache-sized sub-block of rows is shifted once, x₀ = x / scale − c₀
    (large common offsets cancel here, as in the moments pass), and

        z = x₀V − (d V)[group],   B_g += x₀ᵀ S_g − d_g (1ᵀS_g),

    where S_g holds the (weighted) link(z) of group g's rows and zeros elsewhere, so one
    p × (k·r) product x₀ᵀ[S_1 … S_k] serves every group.
    """
    k, p, r = len(groups), x.shape[1], components.shape[1]
    present = np.flatnonzero(np.bincount(codes, minlength=k))
    for code in present.tolist():
        if groups[code] not in centers:
            raise GroupError(f"group {groups[code]!r} of the rows is not one of the fitted groups {tuple(centers)}")
    if present.size == 0:
        return np.zeros((k, p, r))
    offsets = np.zeros((k, p))
    offsets[present] = [centers[groups[code]] for code in present.tolist()]
    reference = offsets[present[0]].copy()
    offsets[present] -= reference
    projected_offsets = offsets @ components
    products = np.zeros((p, k * r))
    link_sums = np.zeros(k * r)
    step = block_rows(p)
    for begin in range(0, x.shape[0], step):
        shifted = np.divide(x[begin : begin + step], scale)
        shifted -= reference
        member = codes[begin : begin + step, None] == np.arange(k)  # one-hot group membership
        z = shifted @ components
        z -= member @ projected_offsets
        linked = link(z)
        if weights is not None:
            linked *= weights[begin : begin + step, None]
        spread = (member[:, :, None] * linked[:, None, :]).reshape(-1, k * r)  # [S_1 … S_k]
        products += shifted.T @ spread
        link_sums += spread.sum(axis=0)
    return products.reshape(p, k, r).transpose(1, 0, 2) - offsets[:, :, None] * link_sums.reshape(k, 1, r)


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
    sgn(0) = 0, as the minorizer |z| ≥ z·sgn(z_t) allows (spec §A.5). The products are
    :func:`_grouped_products`'; h needs no sum of its own because w‖z‖₁ = w sgn(z)ᵀVᵀy, so
    h_g = tr(VᵀB_g).
    """
    b = _grouped_products(x, codes, groups, components, centers, scale, weights, np.sign)
    return L1Sums(tuple(groups), b, np.einsum("kpr,pr->k", b, components))


def check_sample_size(max_rows_per_group: int) -> None:
    """:class:`InputError` unless a per-group sample keeps at least 2 rows of each group."""
    if isinstance(max_rows_per_group, bool) or not isinstance(max_rows_per_group, (int, np.integer)):
        raise InputError(f"max_rows_per_group must be an integer, got {max_rows_per_group!r}")
    if max_rows_per_group < 2:
        raise InputError(f"max_rows_per_group must be at least 2, got {max_rows_per_group!r}")


@dataclass(frozen=True)
class GroupSample:
    """A uniform sample of each group's rows, drawn in one pass and merged exactly: bottom-k
    (priority) sampling with hash keys.

    Every row gets the key :func:`~fairpca_dist.engine.sampling.row_keys` (a seeded hash of its
    values, uniform on [0, 1) over distinct rows, whatever partition holds the row), and the
    sample keeps, in each group, the ``size`` rows of smallest key. The k smallest of i.i.d.
    uniform keys are a uniform sample without replacement of k rows, and the k smallest of a
    union are the k smallest of the parts' k smallest: samples of disjoint row sets merge with
    ``+`` (associative, commutative), so a pass keeps one per partition and merges them in its
    tree, and the result does not depend on the partitioning or the order of the merges. Rows
    are kept sorted by (group, key, weight), so the arrays are the same too. Equal rows have equal
    keys: they are kept or left together (the sample stays unbiased; with many duplicates its
    variance grows as a cluster sample's).

    ``x`` holds the rows in the table's own units, ``codes`` their group's index into ``groups``,
    ``weights`` their sample weights (None without), ``keys`` their keys.
    """

    groups: tuple[Hashable, ...]
    size: int
    x: np.ndarray
    codes: np.ndarray
    weights: np.ndarray | None
    keys: np.ndarray

    @classmethod
    def of_rows(
        cls,
        x: np.ndarray,
        codes: np.ndarray,
        groups: Sequence[Hashable],
        weights: np.ndarray | None,
        size: int,
        seed: int,
    ) -> Self:
        """The sample of the rows ``x`` (group ``groups[codes[i]]``) with keys seeded by ``seed``."""
        return cls(tuple(groups), size, x, codes, weights, row_keys(x, seed)).kept()

    def kept(self) -> Self:
        """The ``size`` rows of smallest key of each group, sorted by (group, key, weight): each
        group's rows are cut at its ``size``-th smallest key first (a partial sort, ties kept),
        then only those are sorted."""
        present = np.flatnonzero(np.bincount(self.codes, minlength=len(self.groups)))
        chosen = [np.zeros(0, dtype=np.intp)]
        for code in present.tolist():
            members = np.flatnonzero(self.codes == code)
            if members.size > self.size:
                cut = np.partition(self.keys[members], self.size - 1)[self.size - 1]
                members = members[self.keys[members] <= cut]
            by = self.keys[members] if self.weights is None else (self.weights[members], self.keys[members])
            order = np.argsort(by, kind="stable") if self.weights is None else np.lexsort(by)
            chosen.append(members[order[: self.size]])
        keep = np.concatenate(chosen)
        weights = None if self.weights is None else self.weights[keep]
        return type(self)(self.groups, self.size, self.x[keep], self.codes[keep], weights, self.keys[keep])

    def __add__(self, other: GroupSample) -> Self:
        if (other.groups, other.size) != (self.groups, self.size):
            raise InputError("group samples of different groups or sizes do not merge")
        if (self.weights is None) != (other.weights is None):
            raise InputError("a group sample with sample weights does not merge with one without")
        weights = (
            None if self.weights is None or other.weights is None else np.concatenate([self.weights, other.weights])
        )
        return type(self)(
            self.groups,
            self.size,
            np.concatenate([self.x, other.x]),
            np.concatenate([self.codes, other.codes]),
            weights,
            np.concatenate([self.keys, other.keys]),
        ).kept()

    def passes(self, scale: np.ndarray) -> ArrayPasses:
        """The sampled rows as an :class:`ArrayPasses` in units x / ``scale``."""
        return ArrayPasses(
            self.x, [self.groups[c] for c in self.codes.tolist()], self.groups, weights=self.weights, scale=scale
        )


@dataclass(frozen=True)
class SampledL1Sums:
    """:class:`L1Sums` and a :class:`GroupSample` of the same rows, from one pass; merged with
    ``+`` part by part."""

    sums: L1Sums
    sample: GroupSample

    def __add__(self, other: SampledL1Sums) -> SampledL1Sums:
        return SampledL1Sums(self.sums + other.sums, self.sample + other.sample)


def l1_block_sums_sampled(
    x: np.ndarray,
    codes: np.ndarray,
    groups: Sequence[Hashable],
    components: np.ndarray,
    centers: dict[Hashable, np.ndarray],
    scale: np.ndarray,
    weights: np.ndarray | None,
    max_rows_per_group: int,
    seed: int,
) -> SampledL1Sums:
    """:func:`l1_block_sums` of a block of rows and its :class:`GroupSample` (the per-block work
    of :meth:`DataPasses.l1_sums_sampled`)."""
    return SampledL1Sums(
        l1_block_sums(x, codes, groups, components, centers, scale, weights),
        GroupSample.of_rows(x, codes, groups, weights, max_rows_per_group, seed),
    )


_Sums = TypeVar("_Sums", bound=L1Sums)


def _identity(z: np.ndarray) -> np.ndarray:
    return z


def scatter_block_products(
    x: np.ndarray,
    codes: np.ndarray,
    groups: Sequence[Hashable],
    components: np.ndarray,
    centers: dict[Hashable, np.ndarray],
    scale: np.ndarray,
    weights: np.ndarray | None = None,
) -> ScatterProducts:
    """:class:`ScatterProducts` of a block of rows ``x`` (original units) whose group is
    ``groups[codes[i]]``: y = x / scale − centers[group], B_g += w y (yᵀU), h_g = tr(UᵀB_g)
    (the products are :func:`_grouped_products`')."""
    b = _grouped_products(x, codes, groups, components, centers, scale, weights, _identity)
    return ScatterProducts(tuple(groups), b, np.einsum("kpr,pr->k", b, components))


def check_rff_requests(requests: Sequence[RFFRequest], n_features: int) -> list[RFFRequest]:
    """``requests`` of :meth:`DataPasses.rff_sums_many` with float64 components, checked before
    any pass: a non-empty sequence of (V, features) pairs, V of shape (``n_features``, r) and
    features of r dimensions. :class:`InputError` otherwise."""
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence) or len(requests) == 0:
        raise InputError("rff_sums_many needs a non-empty sequence of (components, RandomFeatures) pairs")
    checked = []
    for i, request in enumerate(requests):
        if not (isinstance(request, (tuple, list)) and len(request) == 2 and isinstance(request[1], RandomFeatures)):
            raise InputError(f"request {i} of rff_sums_many must be a (components, RandomFeatures) pair")
        components, features = np.asarray(request[0], dtype=np.float64), request[1]
        if components.ndim != 2 or components.shape[0] != n_features:
            raise InputError(
                f"components of request {i} must have shape (n_features={n_features}, n_components), "
                f"got {components.shape}"
            )
        if features.frequencies.shape[0] != components.shape[1]:
            raise InputError(
                f"request {i}: random features of {features.frequencies.shape[0]} dimensions "
                f"for {components.shape[1]} components"
            )
        checked.append((components, features))
    return checked


def rff_block_sums_many(
    rows: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    requests: Sequence[RFFRequest],
    weights: np.ndarray | None = None,
    *,
    gradient: bool = True,
) -> list[RFFSums]:
    """:func:`fairpca_dist.engine.kernels.rff_sums` of one block of rows (solver units) for every
    request, in order: the per-block work of :meth:`DataPasses.rff_sums_many`."""
    return [
        rff_sums(rows, codes, n_groups, components, features, weights, gradient=gradient)
        for components, features in requests
    ]


def merge_rff_sums_many(*parts: list[RFFSums]) -> list[RFFSums]:
    """Requestwise ``+`` of :func:`rff_block_sums_many` results of disjoint row sets."""
    return [functools.reduce(operator.add, sums) for sums in zip(*parts, strict=True)]


class PassCounter:
    """How many passes over the rows an object and its views ran (one counter, shared)."""

    def __init__(self) -> None:
        self.count = 0

    def next(self) -> int:
        """Count one more pass; return its number (1 for the first)."""
        self.count += 1
        return self.count


@runtime_checkable
class DataPasses(Protocol):
    """What a solver that needs the rows may ask of them.

    ``groups`` are the labels in the order of the moments the solver was given;
    :meth:`rescaled` presents the rows in the units of rescaled moments (x / scale), as
    :func:`~fairpca_dist.solvers.fit_projection` does for standardised fits.
    """

    groups: tuple[Hashable, ...]

    @property
    def n_passes(self) -> int:
        """Passes over the rows this object and its views (:meth:`rescaled`) have run so far."""
        ...

    def rescaled(self, scale: np.ndarray) -> DataPasses: ...

    def l1_sums(self, components: np.ndarray, centers: np.ndarray) -> L1Sums:
        """B_g and h_g at V = ``components`` (p × r) with rows centred about ``centers``
        (k × p, in the order of :attr:`groups`), one pass over the rows."""
        ...

    def l1_sums_sampled(
        self, components: np.ndarray, centers: np.ndarray, max_rows_per_group: int, seed: int
    ) -> tuple[L1Sums, ArrayPasses]:
        """:meth:`l1_sums` and, from the same ONE pass, a uniform sample of at most
        ``max_rows_per_group`` rows of each group (:class:`GroupSample`: hash keys seeded by
        ``seed``, the same rows whatever the partitioning), in memory, in the same units."""
        ...

    def scatter_products(self, components: np.ndarray, centers: np.ndarray) -> ScatterProducts:
        """S_g U = Σ_{i∈g} w_i y_i y_iᵀ U (k × p × q) at U = ``components`` (p × q) with rows
        y = x / scale − ``centers[g]`` (k × p, in the order of :attr:`groups`), one pass."""
        ...

    def projected(self, components: np.ndarray, origin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """U = ZV (n × r), the rows' group codes into :attr:`groups` and their sample weights
        (None without), rows in a fixed order that :meth:`backprojected` follows; one pass."""
        ...

    def backprojected(self, s: np.ndarray, origin: np.ndarray) -> np.ndarray:
        """Zᵀ S (p × q) for rows S (n × q) in the order of :meth:`projected`; one pass."""
        ...

    def rff_sums(self, components: np.ndarray, origin: np.ndarray, features: RandomFeatures) -> RFFSums:
        """Per-group random-feature sums at V (:func:`fairpca_dist.engine.kernels.rff_sums`); one pass:
        the one-request :meth:`rff_sums_many`."""
        ...

    def rff_sums_many(
        self, requests: Sequence[RFFRequest], origin: np.ndarray, *, gradient: bool = True
    ) -> list[RFFSums]:
        """:meth:`rff_sums` of every (V, features) request, in order, all in ONE pass (each
        block of rows computes every request); without ``gradient``, the cosines only (what
        the value of h needs). Bad requests (:func:`check_rff_requests`) raise
        :class:`InputError` before the pass."""
        ...

    def sample(self, max_rows_per_group: int, seed: int) -> ArrayPasses:
        """At most ``max_rows_per_group`` rows of each group, drawn uniformly without
        replacement (deterministic for a seed), in memory, in the same units."""
        ...


class ArrayPasses:
    """:class:`DataPasses` over rows held in memory: a (n, p) array, one group label per row
    and optional sample weights.

    :attr:`n_passes` counts every request as one pass (:meth:`sample` included), shared with
    :meth:`rescaled` views; the rows :meth:`sample` and :meth:`l1_sums_sampled` return start a
    count of their own.
    """

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
        self._counter = PassCounter()

    @property
    def n_passes(self) -> int:
        """Requests this object and its rescaled views have answered so far."""
        return self._counter.count

    def rescaled(self, scale: np.ndarray) -> ArrayPasses:
        """The same rows in units x / ``scale`` (a view sharing the pass count)."""
        view = copy.copy(self)
        view.scale = np.asarray(scale, dtype=np.float64)
        return view

    def _group_sums(self, block_sums: Callable[..., _Sums], components: np.ndarray, centers: np.ndarray) -> _Sums:
        """``block_sums`` (:func:`l1_block_sums` or :func:`scatter_block_products`) over every
        block of rows, merged: one pass."""
        self._counter.next()
        by_label = dict(zip(self.groups, np.asarray(centers, dtype=np.float64), strict=True))
        components = np.asarray(components, dtype=np.float64)
        with one_blas_thread():  # small products per block, as in a dask task
            return functools.reduce(
                operator.add,
                (
                    block_sums(
                        self.x[block],
                        self.codes[block],
                        self.groups,
                        components,
                        by_label,
                        self.scale,
                        None if self.weights is None else self.weights[block],
                    )
                    for block in (
                        slice(start, start + _BLOCK_ROWS) for start in range(0, max(self.x.shape[0], 1), _BLOCK_ROWS)
                    )
                ),
            )

    def l1_sums(self, components: np.ndarray, centers: np.ndarray) -> L1Sums:
        return self._group_sums(l1_block_sums, components, centers)

    def scatter_products(self, components: np.ndarray, centers: np.ndarray) -> ScatterProducts:
        return self._group_sums(scatter_block_products, components, centers)

    def l1_sums_sampled(
        self, components: np.ndarray, centers: np.ndarray, max_rows_per_group: int, seed: int
    ) -> tuple[L1Sums, ArrayPasses]:
        check_sample_size(max_rows_per_group)
        sums = self._group_sums(l1_block_sums, components, centers)  # the pass
        # the same rows as the per-block samples merged (bottom-k is exact), drawn at once
        sample = GroupSample.of_rows(self.x, self.codes, self.groups, self.weights, max_rows_per_group, seed)
        return sums, sample.passes(self.scale)

    def _blocks(self, origin: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
        """Row ranges and their rows z = x / scale − origin, a bounded block at a time (one
        empty block when there are no rows)."""
        for start in range(0, max(self.x.shape[0], 1), _BLOCK_ROWS):
            block = slice(start, start + _BLOCK_ROWS)
            yield block, self.x[block] / self.scale - origin

    def projected(self, components: np.ndarray, origin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        self._counter.next()
        u = np.empty((self.x.shape[0], components.shape[1]))
        for block, z in self._blocks(origin):
            u[block] = z @ components
        return u, self.codes, self.weights

    def backprojected(self, s: np.ndarray, origin: np.ndarray) -> np.ndarray:
        self._counter.next()
        return sum(
            (backprojection(z, s[block]) for block, z in self._blocks(origin)), np.zeros((self.x.shape[1], s.shape[1]))
        )

    def rff_sums(self, components: np.ndarray, origin: np.ndarray, features: RandomFeatures) -> RFFSums:
        return self.rff_sums_many([(components, features)], origin)[0]

    def rff_sums_many(
        self, requests: Sequence[RFFRequest], origin: np.ndarray, *, gradient: bool = True
    ) -> list[RFFSums]:
        requests = check_rff_requests(requests, self.x.shape[1])
        self._counter.next()
        with one_blas_thread():  # small products per block, as in a dask task
            return merge_rff_sums_many(
                *(
                    rff_block_sums_many(
                        z,
                        self.codes[block],
                        len(self.groups),
                        requests,
                        None if self.weights is None else self.weights[block],
                        gradient=gradient,
                    )
                    for block, z in self._blocks(origin)
                )
            )

    def sample(self, max_rows_per_group: int, seed: int) -> ArrayPasses:
        if max_rows_per_group < 2:
            raise InputError(f"max_rows_per_group must be at least 2, got {max_rows_per_group!r}")
        self._counter.next()
        rng = np.random.default_rng(seed)
        keep = np.sort(
            np.concatenate(
                [
                    rng.choice(rows, size=min(max_rows_per_group, rows.size), replace=False)
                    for rows in (np.flatnonzero(self.codes == g) for g in range(len(self.groups)))
                ]
            )
        )
        subset = copy.copy(self)
        subset.x, subset.codes = self.x[keep], self.codes[keep]
        subset.weights = None if self.weights is None else self.weights[keep]
        subset._counter = PassCounter()
        return subset
