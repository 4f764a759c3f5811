"""Per-group sufficient statistics of a table: counts, means and centred scatter matrices.

Every fair-PCA criterion in this library is a function of, per group g,

    n_g  (rows; with sample weights also w_g = Σ w),
    μ_g = Σ w x / w_g,
    S_g = Σ w (x − μ_g)(x − μ_g)ᵀ            (p × p, centred about the group's own mean).

Partial statistics of disjoint row sets merge exactly with Chan, Golub & LeVeque's pairwise
update (spec/seeds-000-001.md §0.5):

    w = w_a + w_b,   δ = μ_b − μ_a,   μ = μ_a + δ w_b / w,   S = S_a + S_b + (w_a w_b / w) δδᵀ.

The update is associative, so any partitioning and any reduction tree give the same result up to
rounding, and it never forms raw sums of squares: data with column means of 1e8 give the same
answer as centred data. This module is numpy only (no dask, no prefect).

A *wide* table (k·p² float64 beyond memory: p = 20,000 is 3.2 GB per group) keeps only the
diagonal of each S_g (:meth:`GroupMoments.diagonal`, :meth:`GroupMoments.diagonal_from_codes`):
k × p numbers that merge by the diagonal of the same update. Counts, means, per-feature variances
and tr S_g come from them; everything that needs a p × p matrix (a covariance, its eigenvectors)
refuses them and names the method that does without (``fnpm-streaming``, which reads the rows).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from typing import TYPE_CHECKING, Literal

import numpy as np

from fairpca_dist.exceptions import GroupError, InputError, SchemaError
from fairpca_dist.io.storage import Location, locate
from fairpca_dist.wording import differences, label_text, listed, size_text

if TYPE_CHECKING:
    from fairpca_dist.engine.group_sums import Slab

__all__ = [
    "GroupMoments",
    "Center",
    "sorted_labels",
    "label_to_json",
    "label_from_json",
    "MANY_GROUPS",
    "BINNING_ADVICE",
]

Center = Literal["group", "global", "origin"]

MANY_GROUPS = 20
"""More groups than this, some of them of a row or so, mark a sensitive feature that is a
number (an age, an amount) rather than a category: :data:`BINNING_ADVICE` says what to do."""

BINNING_ADVICE = "a sensitive feature of many values (a number such as an age?) needs binning into groups first"
"""The advice of every check that finds a sensitive feature of too many values (:meth:`GroupMoments.check_groups`,
:func:`fairpca_dist.params.check_source_table`)."""

SPARSE_ADVICE = (
    "intersections of several sensitive columns leave some combinations with (almost) no rows: merge rare "
    "categories, or use fewer sensitive columns"
)
"""The advice of :meth:`GroupMoments.check_groups` for too small intersectional (tuple) groups."""

_CENTERS = ("group", "global", "origin")
_FORMAT_VERSION = 1


def _as_python_label(label: object) -> Hashable:
    """Numpy scalars -> Python scalars, lists and array rows -> tuples (intersectional groups),
    so labels compare, hash and serialise alike."""
    if isinstance(label, np.generic):
        return label.item()
    if isinstance(label, (tuple, list, np.ndarray)):
        return tuple(_as_python_label(v) for v in label)
    return label


def sorted_labels(labels: Sequence[Hashable]) -> tuple[Hashable, ...]:
    """Deterministic order for group labels: natural order when comparable, else by type and repr."""
    unique = list(dict.fromkeys(_as_python_label(label) for label in labels))
    try:
        return tuple(sorted(unique))  # type: ignore[type-var]
    except TypeError:
        return tuple(sorted(unique, key=lambda label: (type(label).__name__, repr(label))))


def block_rows(n_features: int) -> int:
    """Rows per sub-block of the row passes: ~400 KB of float64 stays in L2 cache while it is
    shifted, summed and fed to BLAS (1024 rows at p = 50 measured fastest, between 256 and 16384)."""
    return int(np.clip(409_600 // (8 * max(n_features, 1)), 256, 65536))


def _chunk_arguments(
    x: np.ndarray, codes: np.ndarray, feature_names: Sequence[str] | None
) -> tuple[tuple[str, ...], np.ndarray]:
    """The feature names (``x0 … x{p−1}`` by default) and the codes as intp, one per row of ``x``
    (:class:`InputError` otherwise), of :meth:`GroupMoments.from_codes` and its diagonal form."""
    names = tuple(feature_names) if feature_names is not None else tuple(f"x{j}" for j in range(x.shape[1]))
    codes = np.asarray(codes, dtype=np.intp)
    if codes.shape != (x.shape[0],):
        raise InputError(f"codes has shape {codes.shape}, expected ({x.shape[0]},)")
    return names, codes


@dataclass(frozen=True, eq=False)
class GroupMoments:
    """Counts, means and centred scatter matrices of k groups of p-dimensional rows.

    Means are stored as ``origin + mean_offset``: a reference point per group (the centre its
    rows were accumulated about) plus a small offset. Chan's merge needs the difference of two
    means of a group; with column means of 1e8 that difference would lose eight digits if each
    mean were rounded to float64 first, and one reference point for all groups would do the same
    for a group far from the others. Differences between groups use :meth:`means_about`.

    Attributes
    ----------
    groups : tuple of hashable, length k
        Group labels in a deterministic order (sorted when comparable). Intersectional groups
        (several sensitive columns) are tuples.
    count : ndarray of shape (k,), int64
        Rows per group.
    weight : ndarray of shape (k,), float64
        Sum of sample weights per group (equal to ``count`` when unweighted). Every derived
        quantity uses ``weight``.
    mean_offset : ndarray of shape (k, p)
        μ_g − origin_g.
    scatter : ndarray of shape (k, p, p), or (k, p)
        S_g = Σ w (x − μ_g)(x − μ_g)ᵀ, symmetric positive semi-definite; or its diagonal only,
        Σ w (x − μ_g)², for a wide table (:attr:`is_diagonal`).
    feature_names : tuple of str, length p
    origin : ndarray of shape (k, p)
        The reference point of each group's mean (zeros unless given; a (p,) array is shared
        by all groups).
    """

    groups: tuple[Hashable, ...]
    count: np.ndarray
    weight: np.ndarray
    mean_offset: np.ndarray
    scatter: np.ndarray
    feature_names: tuple[str, ...]
    origin: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        k, p = len(self.groups), len(self.feature_names)
        if self.origin is None:
            object.__setattr__(self, "origin", np.zeros((k, p)))
        elif np.shape(self.origin) == (p,):
            object.__setattr__(self, "origin", np.tile(np.asarray(self.origin, dtype=np.float64), (k, 1)))
        shapes = {
            "count": (self.count.shape, (k,)),
            "weight": (self.weight.shape, (k,)),
            "mean_offset": (self.mean_offset.shape, (k, p)),
            "scatter": (self.scatter.shape, (k, p) if self.scatter.ndim == 2 else (k, p, p)),
            "origin": (self.origin.shape, (k, p)),
        }
        for name, (found, expected) in shapes.items():
            if found != expected:
                raise InputError(
                    f"GroupMoments.{name} has shape {found}, expected {expected} for {k} groups and {p} features"
                )

    def __repr__(self) -> str:
        """One line: rows, features and the groups with their row counts (not the arrays)."""
        groups = listed(
            zip(self.groups, self.count, strict=True), show=lambda group: f"{label_text(group[0])}: {int(group[1]):,}"
        )
        kind = ", diagonal only" if self.is_diagonal else ""
        shape = f"{self.n_samples:,} rows, {self.n_features} features{kind}, {self.n_groups} groups"
        return f"GroupMoments({shape} ({groups}))"

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls, feature_names: Sequence[str], *, diagonal: bool = False) -> GroupMoments:
        """The identity of ``+``: no groups, no rows.

        Parameters
        ----------
        feature_names : sequence of str
            The p feature names.
        diagonal : bool, default False
            The identity of the diagonal-only form (:attr:`is_diagonal`).

        Returns
        -------
        GroupMoments
            Moments of k = 0 groups; ``m + GroupMoments.empty(names) == m``.
        """
        p = len(feature_names)
        return cls(
            groups=(),
            count=np.zeros(0, dtype=np.int64),
            weight=np.zeros(0),
            mean_offset=np.zeros((0, p)),
            scatter=np.zeros((0, p) if diagonal else (0, p, p)),
            feature_names=tuple(feature_names),
        )

    @classmethod
    def from_codes(
        cls,
        x: np.ndarray,
        codes: np.ndarray,
        groups: Sequence[Hashable],
        *,
        weights: np.ndarray | None = None,
        feature_names: Sequence[str] | None = None,
    ) -> GroupMoments:
        """Statistics of one chunk of rows.

        Parameters
        ----------
        x : ndarray of shape (n_rows, p)
            Finite numeric rows (validation is the caller's job).
        codes : ndarray of shape (n_rows,), int
            ``codes[i]`` is the index into ``groups`` of row i.
        groups : sequence of hashable
            The labels that ``codes`` refer to; labels without rows are left out.
        weights : ndarray of shape (n_rows,), optional
            Non-negative sample weights.
        feature_names : sequence of str, optional
            Defaults to ``x0 … x{p−1}``.

        Returns
        -------
        GroupMoments
            The groups that have rows, in sorted order.

        Raises
        ------
        InputError
            ``codes`` does not have one entry per row.

        Notes
        -----
        Compiled loops (:mod:`fairpca_dist.engine.gram`, no GIL held) sum cache-sized
        sub-blocks of each group's rows and add them to its Gram matrix, by BLAS syrk in place
        (or, for at most :data:`~fairpca_dist.engine.gram.NARROW_FEATURES` features, by tiled
        dot products of transposed sub-blocks): the flops of one ungrouped Gram in all. Rows
        grouped by the sensitive column are read where they lie; interleaved groups cost one
        copy of the rows (:mod:`fairpca_dist.engine.group_sums` says which path runs when, and
        the shift rule that keeps the sums exact; measured in ``benchmarks/profile_kernel.py``).
        This is :meth:`from_slabs` with the whole chunk as one slab.
        """
        # Row gathers and in-place row blocks need C-ordered float64: np.take of rows from a
        # Fortran-ordered array (what DataFrame.to_numpy returns) is ~50x slower than one
        # contiguous copy first. The passes hand over such slabs already (no copy here).
        x = np.ascontiguousarray(x, dtype=np.float64)
        names, codes = _chunk_arguments(x, codes, feature_names)
        if weights is not None:
            weights = np.ascontiguousarray(weights, dtype=np.float64)
        return cls.from_slabs(lambda: [(x, codes, weights)], groups, feature_names=names)

    @classmethod
    def from_slabs(
        cls, slabs: Callable[[], Iterable[Slab]], groups: Sequence[Hashable], *, feature_names: Sequence[str]
    ) -> GroupMoments:
        """Statistics of one chunk of rows that arrives in slabs (a partition converted to
        float64 a bounded slab at a time): every slab adds to the same per-group sums, which are
        finished once (:class:`~fairpca_dist.engine.group_sums.GroupSums`), instead of a
        :class:`GroupMoments` per slab and k·p² of merging each.

        Parameters
        ----------
        slabs : callable
            Returns the slabs ``(x, codes, weights)`` as an iterable: x C-ordered float64
            (n, p), codes (n,) indices into ``groups``, weights (n,) or None. Called once, and
            once more if a group's sums cancelled (its rows are summed again about its mean).
        groups : sequence of hashable
            The labels that the codes refer to; labels without rows are left out.
        feature_names : sequence of str
            The p feature names.

        Returns
        -------
        GroupMoments
            The groups that have rows, in sorted order; :meth:`empty` when no slab has rows.

        Raises
        ------
        InputError
            Codes of another length than their slab's rows, or outside ``groups``.
        """
        from fairpca_dist.engine.group_sums import GroupSums  # compiled: loaded on first use

        names = tuple(feature_names)
        sums = GroupSums(len(groups), len(names))
        for x, codes, weights in slabs():
            sums.add(x, codes, weights)
            del x  # freed before the next slab is converted: it reuses the memory (no fresh pages)
        present, count, weight, origin, mean_offset, scatter = sums.finish(slabs)
        if present.size == 0:
            return cls.empty(names)
        unsorted = cls(
            groups=tuple(_as_python_label(groups[g]) for g in present.tolist()),
            count=count,
            weight=weight,
            mean_offset=mean_offset,
            scatter=scatter,
            feature_names=names,
            origin=origin,
        )
        return unsorted._reordered(sorted_labels(unsorted.groups))

    @classmethod
    def diagonal_from_codes(
        cls,
        x: np.ndarray,
        codes: np.ndarray,
        groups: Sequence[Hashable],
        *,
        weights: np.ndarray | None = None,
        feature_names: Sequence[str] | None = None,
    ) -> GroupMoments:
        """The diagonal-only statistics (:attr:`is_diagonal`) of one chunk of rows: counts,
        weights, means and Σ w (x − μ_g)² per group, O(k·p) numbers at any p.

        The arguments are those of :meth:`from_codes`. Each group's mean is taken about its
        first row (the origin), and the squares about that mean: two sweeps over the group's
        rows, no raw sums of squares (exact at column means of 1e8).

        Returns
        -------
        GroupMoments
            The groups that have rows, in sorted order, with ``scatter`` of shape (k, p).
        """
        x = np.asarray(x, dtype=np.float64)
        p = x.shape[1]
        names, codes = _chunk_arguments(x, codes, feature_names)
        present = np.flatnonzero(np.bincount(codes, minlength=len(groups)))
        if present.size == 0:
            return cls.empty(names, diagonal=True)
        count = np.zeros(present.size, dtype=np.int64)
        weight, origin = np.zeros(present.size), np.zeros((present.size, p))
        mean_offset, scatter = np.zeros((present.size, p)), np.zeros((present.size, p))
        for i, g in enumerate(present):
            rows = np.flatnonzero(codes == g)
            w = np.ones(rows.size) if weights is None else np.asarray(weights, dtype=np.float64)[rows]
            origin[i] = x[rows[0]]
            shifted = x[rows] - origin[i]
            count[i], weight[i] = rows.size, w.sum()
            mean_offset[i] = w @ shifted / weight[i] if weight[i] > 0 else 0.0
            scatter[i] = w @ (shifted - mean_offset[i]) ** 2
        unsorted = cls(
            groups=tuple(_as_python_label(groups[int(g)]) for g in present),
            count=count,
            weight=weight,
            mean_offset=mean_offset,
            scatter=scatter,
            feature_names=names,
            origin=origin,
        )
        return unsorted._reordered(sorted_labels(unsorted.groups))

    @property
    def is_diagonal(self) -> bool:
        """True when only the diagonal of each S_g is kept (a wide table): ``scatter`` is (k, p)."""
        return self.scatter.ndim == 2

    @property
    def scatter_diagonal(self) -> np.ndarray:
        """diag S_g = Σ w (x − μ_g)², shape (k, p), of either form."""
        return self.scatter if self.is_diagonal else np.einsum("kii->ki", self.scatter).copy()

    def diagonal(self) -> GroupMoments:
        """These moments with only the diagonal of each S_g kept (what a wide table's pass
        computes, :meth:`diagonal_from_codes`)."""
        return replace(self, scatter=self.scatter_diagonal)

    def _full(self, what: str) -> np.ndarray:
        """``scatter``, or an :class:`InputError` naming ``what`` needs it, for the diagonal form."""
        if self.is_diagonal:
            raise InputError(
                f"{what} needs the p × p moments, and these keep only their diagonal (a wide table of "
                f"{self.n_features:,} features: the p × p moments would be "
                f"{size_text(8.0 * self.n_groups * self.n_features**2)}); fit method "
                "'fnpm-streaming', which reads the rows instead"
            )
        return self.scatter

    @classmethod
    def from_arrays(
        cls,
        x: np.ndarray,
        labels: Sequence[Hashable] | np.ndarray,
        *,
        weights: np.ndarray | None = None,
        feature_names: Sequence[str] | None = None,
    ) -> GroupMoments:
        """Statistics of in-memory rows with one label per row (the numpy reference path).

        Parameters
        ----------
        x : ndarray of shape (n_rows, p)
            Finite numeric rows.
        labels : sequence of hashable, length n_rows
            The group of each row.
        weights : ndarray of shape (n_rows,), optional
            Non-negative sample weights.
        feature_names : sequence of str, optional
            Defaults to ``x0 … x{p−1}``.

        Returns
        -------
        GroupMoments
            One group per distinct label, in sorted order.

        Examples
        --------
        >>> import numpy as np
        >>> from fairpca_dist import GroupMoments
        >>> x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0], [7.0, 2.0]])
        >>> m = GroupMoments.from_arrays(x, ["a", "a", "b", "b"], feature_names=["u", "v"])
        >>> m.groups, m.count.tolist(), m.mean.tolist()
        (('a', 'b'), [2, 2], [[2.0, 3.0], [6.0, 1.0]])
        >>> half = GroupMoments.from_arrays(x[:2], ["a", "a"], feature_names=["u", "v"])
        >>> rest = GroupMoments.from_arrays(x[2:], ["b", "b"], feature_names=["u", "v"])
        >>> np.allclose((half + rest).scatter, m.scatter)  # an exact merge
        True
        """
        label_list = [_as_python_label(v) for v in labels]
        groups = sorted_labels(label_list)
        position = {g: i for i, g in enumerate(groups)}
        codes = np.fromiter((position[v] for v in label_list), dtype=np.intp, count=len(label_list))
        return cls.from_codes(x, codes, groups, weights=weights, feature_names=feature_names)

    def _reordered(self, groups: Sequence[Hashable]) -> GroupMoments:
        index = [self.groups.index(g) for g in groups]
        if index == list(range(len(self.groups))):  # in order already: no copy (k p × p floats)
            return self
        return replace(
            self,
            groups=tuple(groups),
            count=self.count[index],
            weight=self.weight[index],
            mean_offset=self.mean_offset[index],
            scatter=self.scatter[index],
            origin=self.origin[index],
        )

    def means_about(self, point: np.ndarray) -> np.ndarray:
        """The group means relative to ``point``, μ_g − point, as (origin_g − point) + offset_g.

        The differences between groups are exact when ``point`` is near the origins (e.g.
        ``origin[0]``), even for column means of 1e8.

        Parameters
        ----------
        point : ndarray of shape (p,)
            The reference point.

        Returns
        -------
        ndarray of shape (k, p)
        """
        return (self.origin - point) + self.mean_offset

    # ------------------------------------------------------------------ merging
    def __add__(self, other: GroupMoments) -> GroupMoments:
        """Exact merge of statistics of disjoint row sets (Chan et al. pairwise update)."""
        if not isinstance(other, GroupMoments):
            return NotImplemented
        if other.feature_names != self.feature_names:
            raise SchemaError(
                "cannot merge moments over different features: "
                + differences("the first", self.feature_names, "the second", other.feature_names)
            )
        if not self.groups:
            return other
        if not other.groups:
            return self
        if other.is_diagonal != self.is_diagonal:
            raise InputError("cannot merge p × p moments with diagonal-only ones: take .diagonal() of the first")
        groups = sorted_labels(self.groups + other.groups)
        k, p = len(groups), self.n_features
        count = np.zeros(k, dtype=np.int64)
        weight = np.zeros(k)
        mean_offset = np.zeros((k, p))
        scatter = np.zeros((k, *self.scatter.shape[1:]))
        origin = np.zeros((k, p))
        correction = np.empty(self.scatter.shape[1:])  # one p × p temporary for every group
        for i, g in enumerate(groups):
            sides = [
                (m.count[j], m.weight[j], m.origin[j], m.mean_offset[j], m.scatter[j])
                for m in (self, other)
                if g in m.groups
                for j in [m.groups.index(g)]
                # A group without rows on one side (a cell that lacks it, see cells.py) adds
                # nothing; its zero origin must not become the reference of the merged mean.
                if m.count[j] > 0
            ]
            if not sides:
                continue
            if len(sides) == 1:
                count[i], weight[i], origin[i], mean_offset[i], scatter[i] = sides[0]
                continue
            (na, wa, oa, ma, sa), (nb, wb, ob, mb, sb) = sides
            w = wa + wb
            delta = (ob - oa) + mb - ma  # both origins sit near the group's mean: exact
            share = wb / w if w > 0 else 0.0
            count[i] = na + nb
            weight[i] = w
            origin[i] = oa
            mean_offset[i] = ma + delta * share
            # S_a + S_b + (δδᵀ)(w_a w_b / w), written in place (at p = 2,000 each p × p
            # temporary is 32 MB of fresh pages)
            np.add(sa, sb, out=scatter[i])
            if self.is_diagonal:
                np.square(delta, out=correction)
            else:
                np.multiply.outer(delta, delta, out=correction)
            correction *= wa * share
            scatter[i] += correction
        return GroupMoments(groups, count, weight, mean_offset, scatter, self.feature_names, origin)

    # ------------------------------------------------------------------ sizes
    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_samples(self) -> int:
        return int(self.count.sum())

    # ------------------------------------------------------------------ derived matrices
    @property
    def mean(self) -> np.ndarray:
        """Group means μ_g, shape (k, p)."""
        return self.origin + self.mean_offset

    @property
    def global_mean(self) -> np.ndarray:
        """μ = Σ_g w_g μ_g / Σ_g w_g, shape (p,)."""
        reference, _, global_offset = self._about_first_origin()
        return reference + global_offset

    def mean_gaps(self) -> np.ndarray:
        """μ_g − μ, each group's mean relative to the global mean, shape (k, p), from offsets
        about one point near the means: the gaps keep every digit whatever the column means
        (``mean - global_mean`` rounds each to the columns' magnitude, ~1e-10 at means of 1e6,
        and the k gaps, which sum to zero with the weights, no longer span a subspace of rank
        k − 1: a null space of them then loses a direction)."""
        _, relative, global_offset = self._about_first_origin()
        return relative - global_offset

    def _about_first_origin(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(o, μ_g − o, μ − o) with o = ``origin[0]``: group and global means as small offsets
        from one point near them, so their differences keep every digit."""
        reference = self.origin[0]
        relative = self.means_about(reference)
        return reference, relative, self.weight @ relative / self.weight.sum()

    def centers(self, center: Center = "group") -> np.ndarray:
        """The point each group's rows are centred about.

        Parameters
        ----------
        center : {"group", "global", "origin"}, default "group"
            Each group's own mean, the global mean, or zero.

        Returns
        -------
        ndarray of shape (k, p)
        """
        if center not in _CENTERS:
            raise InputError(f"center={center!r} is not one of {_CENTERS}")
        if center == "group":
            return self.mean
        point = self.global_mean if center == "global" else np.zeros(self.n_features)
        return np.tile(point, (self.n_groups, 1))

    def scatter_about(self, center: Center = "group") -> np.ndarray:
        """Per-group scatter C_g = Σ w (x − c_g)(x − c_g)ᵀ about the centre c_g of ``center``.

        ``center="group"``: c_g = μ_g (C_g = S_g); ``"global"``: c_g = μ, so
        C_g = S_g + w_g (μ_g − μ)(μ_g − μ)ᵀ; ``"origin"``: c_g = 0, C_g = S_g + w_g μ_g μ_gᵀ.

        Parameters
        ----------
        center : {"group", "global", "origin"}, default "group"

        Returns
        -------
        ndarray of shape (k, p, p)

        Raises
        ------
        InputError
            ``center`` is not one of the three.
        """
        if center not in _CENTERS:
            raise InputError(f"center={center!r} is not one of {_CENTERS}")
        scatter = self._full("the per-group scatter")
        if center == "group":
            return scatter.copy()
        if center == "global":
            _, relative, global_offset = self._about_first_origin()
            offset = relative - global_offset
        else:
            offset = self.mean
        return scatter + self.weight[:, None, None] * offset[:, :, None] * offset[:, None, :]

    def covariance(self, center: Center = "group") -> np.ndarray:
        """Per-group second moment per unit weight, Σ_g = C_g / w_g (see :meth:`scatter_about`).

        With ``center="group"`` this is each group's (biased, divisor w_g) covariance.

        Parameters
        ----------
        center : {"group", "global", "origin"}, default "group"

        Returns
        -------
        ndarray of shape (k, p, p)
        """
        return self.scatter_about(center) / self.weight[:, None, None]

    def total_scatter(self) -> np.ndarray:
        """Scatter of all rows about the global mean, Σ_g S_g + w_g (μ_g − μ)(μ_g − μ)ᵀ.

        Returns
        -------
        ndarray of shape (p, p)
        """
        return self.scatter_about("global").sum(axis=0)

    def total_covariance(self, ddof: int = 0) -> np.ndarray:
        """Covariance of all rows pooled, :meth:`total_scatter` / (Σ w − ddof).

        Parameters
        ----------
        ddof : int, default 0
            Delta degrees of freedom.

        Returns
        -------
        ndarray of shape (p, p)
        """
        return self.total_scatter() / (self.weight.sum() - ddof)

    def feature_scale(self, ddof: int = 0, *, constant: Literal["raise", "keep"] = "raise") -> np.ndarray:
        """Per-feature standard deviation of all rows pooled (the standardisation scale).

        ``ddof=1`` gives MATLAB ``std`` parity, as in Samadi et al.'s Credit preprocessing.
        A constant column (its scale would be 0, or within rounding of its mean) raises
        :class:`SchemaError` naming every such column, or with ``constant="keep"`` gets scale 1
        (left as it is: a column that happens to be constant on one part of a table, e.g. a rare
        indicator in a small training split). A column whose values differ (a nonzero variance,
        or group means that differ) but whose variance is below float64's smallest normal
        number (values below ~1e-154: their squares are 0 or lose their digits) has no reliable
        scale: it raises :class:`SchemaError` saying to rescale it, or keeps scale 1 as above.

        Parameters
        ----------
        ddof : int, default 0
            Delta degrees of freedom.
        constant : {"raise", "keep"}, default "raise"
            What a constant column gets: an error, or scale 1.

        Returns
        -------
        ndarray of shape (p,)
            Positive scales.

        Raises
        ------
        SchemaError
            With ``constant="raise"``: constant columns, or columns whose variance underflows.
        """
        gaps = self.mean_gaps()
        total = self.scatter_diagonal.sum(axis=0) + self.weight @ gaps**2  # diag of total_scatter()
        variance = np.clip(total / (self.weight.sum() - ddof), 0.0, None)
        scale = np.sqrt(variance)
        varies = (variance > 0.0) | (np.ptp(self.mean, axis=0) > 0.0)
        underflow = varies & (variance < np.finfo(np.float64).tiny)
        tiny = ~underflow & (scale <= np.finfo(np.float64).eps * np.abs(self.global_mean))
        if constant == "keep":
            return np.where(tiny | underflow, 1.0, scale)
        if underflow.any():
            size = np.maximum(scale, np.abs(self.mean).max(axis=0))
            columns = [(self.feature_names[j], size[j]) for j in np.flatnonzero(underflow)]
            found = ", ".join(f"{name!r} (values of order {value:.1e})" for name, value in columns)
            factors = ", ".join(f"{name!r} by 1e{-int(np.floor(np.log10(value))):+d}" for name, value in columns)
            raise SchemaError(
                f"cannot standardise: feature(s) {found} vary, but their variance underflows float64 (squares of "
                f"values below ~1e-154 are 0 or lose their digits); rescale them first (multiply {factors}), "
                "or fit with standardize=False (--no-standardize)"
            )
        if tiny.any():
            names = [self.feature_names[j] for j in np.flatnonzero(tiny)]
            raise SchemaError(
                f"cannot standardise: feature(s) {names} have zero variance (constant columns); "
                f"leave them out (exclude={names}; command line: --exclude {' '.join(names)}) "
                "or fit with standardize=False (--no-standardize)"
            )
        return scale

    def rescaled(self, scale: np.ndarray) -> GroupMoments:
        """Moments of the rows divided feature-wise by ``scale`` (x ↦ D x, D = diag(1/scale)).

        Parameters
        ----------
        scale : ndarray of shape (p,)
            Positive scales, e.g. :meth:`feature_scale`.

        Returns
        -------
        GroupMoments

        Raises
        ------
        InputError
            ``scale`` is not p positive numbers.
        """
        scale = np.asarray(scale, dtype=np.float64)
        if scale.shape != (self.n_features,) or not np.all(scale > 0):
            raise InputError(f"scale must be {self.n_features} positive numbers, got {scale!r}")
        inv = 1.0 / scale
        return replace(
            self,
            mean_offset=self.mean_offset * inv,
            scatter=self.scatter * inv**2
            if self.is_diagonal
            else self.scatter * inv[None, :, None] * inv[None, None, :],
            origin=self.origin * inv,
        )

    # ------------------------------------------------------------------ checks
    def check_groups(self, min_group_size: int = 2) -> GroupMoments:
        """Check that there are at least 2 groups of at least ``min_group_size`` rows each.

        Parameters
        ----------
        min_group_size : int, default 2

        Returns
        -------
        GroupMoments
            ``self``, for chaining.

        Raises
        ------
        GroupError
            Fewer than 2 groups, a group with too few rows (named, with its count), or a group
            whose sample weights sum to zero.
        """
        if self.n_groups < 2:
            found = f"only group {label_text(self.groups[0])}" if self.groups else "no rows at all"
            raise GroupError(
                f"the sensitive feature defines {self.n_groups} group(s) ({found}); fair PCA needs at least 2 groups"
            )
        small = {g: int(n) for g, n in zip(self.groups, self.count, strict=True) if n < min_group_size}
        if small:
            detail = ", ".join(f"{label_text(g)}: {n} row(s)" for g, n in list(small.items())[:10]) + (
                ", …" if len(small) > 10 else ""
            )
            if any(isinstance(g, tuple) for g in small):  # a combination of columns, not a column of many values
                advice = f"; {SPARSE_ADVICE}"
            else:
                advice = f"; {self.n_groups} groups in all: {BINNING_ADVICE}" if self.n_groups > MANY_GROUPS else ""
            raise GroupError(f"{len(small)} group(s) with fewer than {min_group_size} rows: {detail}{advice}")
        empty = [g for g, w in zip(self.groups, self.weight, strict=True) if w <= 0]
        if empty:
            raise GroupError(f"groups with zero total sample weight: [{', '.join(map(label_text, empty))}]")
        return self

    def fingerprint(self) -> str:
        """SHA-256 of the statistics (labels, names and arrays): identifies the fitted data.

        Returns
        -------
        str
            64 hexadecimal digits.
        """
        digest = hashlib.sha256()
        digest.update(json.dumps([[label_to_json(g) for g in self.groups], list(self.feature_names)]).encode())
        for array in (self.count, self.weight, self.mean, self.scatter):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | PathLike[str] | Location) -> None:
        """Write the moments to ``path`` as npz: the arrays and a JSON header, no pickle.

        Parameters
        ----------
        path : str, path-like or Location
            A file path or a URL (``s3://…``).
        """
        header = {
            "format_version": _FORMAT_VERSION,
            "groups": [label_to_json(g) for g in self.groups],
            "feature_names": list(self.feature_names),
        }
        with locate(path).open("wb") as f:
            np.savez(
                f,
                header=np.array(json.dumps(header)),
                count=self.count,
                weight=self.weight,
                mean_offset=self.mean_offset,
                scatter=self.scatter,
                origin=self.origin,
            )

    @classmethod
    def load(cls, path: str | PathLike[str] | Location) -> GroupMoments:
        """Read what :meth:`save` wrote.

        Parameters
        ----------
        path : str, path-like or Location
            A file path or a URL.

        Returns
        -------
        GroupMoments

        Raises
        ------
        InputError
            Not a moments file, or of an unknown format version.
        """
        with locate(path).open("rb") as f, np.load(f, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if "kind" in header:
                raise InputError(f"{path}: holds {header['kind']!r}, not GroupMoments (CellMoments.load reads cells)")
            if header.get("format_version") != _FORMAT_VERSION:
                raise InputError(f"{path}: unsupported moments format {header.get('format_version')!r}")
            return cls(
                groups=tuple(label_from_json(g) for g in header["groups"]),
                count=data["count"].astype(np.int64),
                weight=data["weight"].astype(np.float64),
                mean_offset=data["mean_offset"].astype(np.float64),
                scatter=data["scatter"].astype(np.float64),
                feature_names=tuple(header["feature_names"]),
                origin=data["origin"].astype(np.float64),
            )


def label_to_json(label: Hashable) -> object:
    if isinstance(label, tuple):
        return {"tuple": [label_to_json(v) for v in label]}
    if label is None or isinstance(label, (bool, int, float, str)):
        return label
    raise InputError(f"group label {label!r} of type {type(label).__name__} cannot be saved")


def label_from_json(value: object) -> Hashable:
    if isinstance(value, dict):
        return tuple(label_from_json(v) for v in value["tuple"])
    return value
