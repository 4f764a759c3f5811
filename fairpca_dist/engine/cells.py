"""Cells: group moments per cell of rows, so one pass serves every split and fold.

A *cell* is a set of rows named by a label: the value of a column (``cells="fold"``), or a
reproducible pseudo-random number in ``0 … n_cells−1`` drawn from a hash of key columns
(:class:`HashCells`). ``compute_moments(..., cells=...)`` keeps a :class:`GroupMoments` per
cell (:class:`CellMoments`), still in one pass: each row's pair (cell, group) is coded as
``cell · k + group`` and the grouped kernel runs on those codes unchanged. Because Chan's merge
is exact, the statistics of any union of cells are a ``+`` of cells, so a train/test split, the
folds of a cross-validation and repeated random splits need no further pass over the rows
(spec/seeds-002-003.md §0.2):

>>> import numpy as np
>>> import pandas as pd
>>> from fairpca_dist import HashCells, compute_moments
>>> rng = np.random.default_rng(0)
>>> frame = pd.DataFrame({"id": np.arange(400), "a": rng.normal(size=400), "b": rng.normal(size=400)})
>>> frame["sex"] = np.tile(["f", "m"], 200)
>>> by_cell = compute_moments(frame, sensitive_feature="sex", key_columns=["id"], cells=HashCells(("id",), n_cells=10))
>>> train, test = by_cell.union(range(7)), by_cell.union(range(7, 10))  # a 70/30 split
>>> int(train.count.sum() + test.count.sum())
400
>>> fold_training_sets = [by_cell.complement(fold) for fold in ([0, 1], [2, 3], [4, 5], [6, 7], [8, 9])]

Splits are unions of whole cells, so their sizes are multiples of 1/n_cells of the rows (in
expectation, for hash cells). Memory: one p×p matrix per cell and group.

This module uses numpy and pandas only (no dask); the pass itself lives in ``passes.py``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import cast

import numpy as np
import pandas as pd

from fairpca_dist.engine.moments import GroupMoments, label_from_json, label_to_json, sorted_labels
from fairpca_dist.exceptions import GroupError, InputError, SchemaError
from fairpca_dist.io.storage import Location, locate
from fairpca_dist.wording import differences, label_text, listed

__all__ = ["HashCells", "CellMoments", "pair_codes"]

_FORMAT_VERSION = 1
_KIND = "cell_moments"


# ----------------------------------------------------------------------------- hash cells
@dataclass(frozen=True)
class HashCells:
    """Rows assigned to ``n_cells`` cells by a seeded hash of their ``key_columns`` values.

    The cell of a row depends only on its key values and ``seed``: the same rows get the same
    cells whatever the partitioning, the row order, the file format (Parquet, CSV, in memory)
    or the machine, so no split column has to be written into the table.

    Parameters
    ----------
    key_columns : tuple of str
        Columns whose values identify a row (e.g. a customer id). They are left out of the
        default feature set (list them in ``features`` to use them as features too). An empty
        tuple hashes every feature and sensitive column (each sorted by name): deterministic
        without a key column, but rows equal in all of them (duplicates) always share a cell —
        they can never be split between train and test — and the cells change when the feature
        selection does.
    n_cells : int
        Number of cells, ≥ 2. Splits are unions of cells, so fractions come in steps of
        1/n_cells (e.g. 10 cells for 70/30 splits and 5-fold CV in steps of 10 %).
    seed : int
        Different seeds give independent assignments (repeated random splits).

    Notes
    -----
    The hash per row: h₀ = K(seed); for each key column in order, h ← mix(h ⊕ hash(value)), with
    ``mix`` the SplitMix64 finaliser; the cell is h mod n_cells. Values hash by kind, after a
    canonical form: integers, booleans and integral floats by their integer value (``3``,
    ``3.0`` and ``np.int32(3)`` share a cell), other floats by their float64 bits, datetimes by
    their UTC nanoseconds, everything else by its text through
    ``pandas.util.hash_array`` (SipHash keyed by the seed). A key column must therefore hold
    the same values in every source. Missing key values are refused. The assignment is fixed
    by this library's version (a test pins known cell ids).
    """

    key_columns: tuple[str, ...]
    n_cells: int
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.key_columns, str):
            keys: tuple = (self.key_columns,)
        elif isinstance(self.key_columns, Iterable):
            keys = tuple(self.key_columns)
        else:
            raise InputError(f"HashCells key_columns must be a tuple of column names, got {self.key_columns!r}")
        bad = [key for key in keys if not isinstance(key, str)]
        if bad:
            raise InputError(f"HashCells key_columns must be column names (str), got {bad!r}")
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise InputError(f"HashCells key_columns lists {repeated} more than once")
        object.__setattr__(self, "key_columns", keys)
        if isinstance(self.n_cells, bool) or not isinstance(self.n_cells, (int, np.integer)) or self.n_cells < 2:
            raise InputError(f"HashCells n_cells={self.n_cells!r} must be an integer >= 2")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise InputError(f"HashCells seed={self.seed!r} must be an integer")
        object.__setattr__(self, "n_cells", int(self.n_cells))
        object.__setattr__(self, "seed", int(self.seed))

    def assign(self, columns: pd.DataFrame, *, where: str = "") -> np.ndarray:
        """The cell id (0 … n_cells−1) of every row of ``columns``, hashing its columns in order.

        Parameters
        ----------
        columns : pandas.DataFrame
            The key columns of some rows (see the class's Notes for how values hash).
        where : str, default ""
            Completes error messages, e.g. ``" in partition 3"``.

        Returns
        -------
        ndarray of shape (n_rows,), int64

        Raises
        ------
        InputError
            No column to hash, or a missing key value.

        Examples
        --------
        >>> import pandas as pd
        >>> from fairpca_dist import HashCells
        >>> ids = pd.DataFrame({"id": [1, 2, 3, 1]})
        >>> cells = HashCells(("id",), n_cells=10).assign(ids)
        >>> int(cells[0]) == int(cells[3])  # same key, same cell
        True
        """
        if columns.shape[1] == 0:
            raise InputError("HashCells needs at least one column to hash")
        digest = hashlib.sha256(f"fairpca_dist.HashCells/{self.seed}".encode()).digest()
        hashed = np.full(len(columns), int.from_bytes(digest[:8], "little"), dtype=np.uint64)
        hash_key = digest[8:16].hex()  # 16 characters, as pandas' SipHash wants
        with np.errstate(over="ignore"):
            for name in columns.columns:
                hashed = _mix(hashed ^ _column_hash(columns[name], str(name), hash_key, where))
            return (hashed % np.uint64(self.n_cells)).astype(np.intp)

    def to_json(self) -> dict[str, object]:
        return {"key_columns": list(self.key_columns), "n_cells": self.n_cells, "seed": self.seed}


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64: a bijection of uint64 whose every output bit depends on every input bit."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _column_hash(values: pd.Series, name: str, hash_key: str, where: str) -> np.ndarray:
    """uint64 per value, from the value's canonical form (see :class:`HashCells` Notes)."""
    missing = values.isna()
    if missing.any():
        raise InputError(
            f"HashCells key column {name!r} has {int(missing.sum())} missing value(s){where}; "
            "every row needs a key value to get a cell (fill them, or hash other columns)"
        )
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        values = values.astype(dtype.categories.dtype)
        dtype = values.dtype
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        if pd.api.types.is_unsigned_integer_dtype(dtype):
            bits = values.to_numpy(dtype=np.uint64)
        else:
            bits = values.to_numpy(dtype=np.int64).view(np.uint64)
    elif pd.api.types.is_float_dtype(dtype):
        numbers = values.to_numpy(dtype=np.float64)
        bits = numbers.view(np.uint64).copy()
        with np.errstate(invalid="ignore"):
            integral = np.isfinite(numbers) & (np.trunc(numbers) == numbers) & (np.abs(numbers) < 2.0**63)
        bits[integral] = numbers[integral].astype(np.int64).view(np.uint64)
    elif pd.api.types.is_datetime64_any_dtype(dtype):
        stamps = pd.DatetimeIndex(values)
        bits = (stamps.tz_convert(None) if stamps.tz is not None else stamps).as_unit("ns").asi8.view(np.uint64)
    elif pd.api.types.is_timedelta64_dtype(dtype):
        bits = pd.TimedeltaIndex(values).as_unit("ns").asi8.view(np.uint64)
    else:
        text = np.asarray(values.astype(str), dtype=object)
        return pd.util.hash_array(text, hash_key=hash_key, categorize=True)
    return pd.util.hash_array(np.ascontiguousarray(bits), categorize=False)


# ----------------------------------------------------------------------------- per-cell moments
def pair_codes(cell_codes: np.ndarray, group_codes: np.ndarray, n_groups: int) -> np.ndarray:
    """One code per (cell, group) pair, ``cell · n_groups + group``: the grouped kernel run on
    these codes gives the statistics of every pair at once (:meth:`CellMoments.from_pairs`)."""
    return np.asarray(cell_codes, dtype=np.intp) * n_groups + np.asarray(group_codes, dtype=np.intp)


Assignment = HashCells | str | None


def _assigned_by(assignment: Assignment) -> str:
    """How rows were assigned to cells, in a few words (the key columns listed briefly)."""
    if isinstance(assignment, HashCells):
        keys = listed(assignment.key_columns) if assignment.key_columns else "every feature and sensitive column"
        return f"hash of {keys}, seed {assignment.seed}"
    return f"column {assignment!r}" if isinstance(assignment, str) else "labels given per row"


class CellMoments(Mapping[Hashable, GroupMoments]):
    """Group moments per cell: an ordered mapping cell label → :class:`GroupMoments`.

    Every cell holds the same groups (``groups``) and features; a group without rows in a cell
    has ``count`` 0 and zero statistics there (merging ignores such entries, so unions stay
    exact). Use :meth:`union` / :meth:`complement` / :meth:`total` for statistics ready to fit
    or score; ``self[cell]`` is the raw statistics of one cell.

    Parameters
    ----------
    by_cell : mapping of cell label → GroupMoments
        Statistics of disjoint row sets.
    feature_names : sequence of str, optional
        Required when ``by_cell`` is empty.
    assignment : HashCells, str or None
        How rows were assigned to cells (the hash spec, the cells column, or None for labels
        given per row); saved with the statistics, and merging requires equal assignments.
    cells : iterable of labels, optional
        Every cell label; those missing from ``by_cell`` are cells without rows (hash cells
        that drew no row of a small table).

    Attributes
    ----------
    cells : tuple of hashable
        Cell labels in sorted order.
    groups : tuple of hashable, length k
    feature_names : tuple of str, length p
    count : ndarray of shape (n_cells, k), int64
        Rows per cell and group.
    weight : ndarray of shape (n_cells, k)
        Sample weight per cell and group.
    """

    def __init__(
        self,
        by_cell: Mapping[Hashable, GroupMoments],
        *,
        feature_names: Sequence[str] | None = None,
        assignment: Assignment = None,
        cells: Iterable[Hashable] | None = None,
    ) -> None:
        parts = {_label(cell): moments for cell, moments in by_cell.items()}
        names = {moments.feature_names for moments in parts.values()}
        if feature_names is not None:
            names.add(tuple(feature_names))
        if len(names) > 1:
            raise SchemaError(f"cells hold moments over different features: {sorted(map(list, names))}")
        if not names:
            raise InputError("CellMoments without cells needs feature_names")
        self.feature_names: tuple[str, ...] = names.pop()
        self.assignment: Assignment = assignment
        labels = list(parts) if cells is None else [_label(cell) for cell in cells]
        missing = [cell for cell in parts if cell not in labels]
        if missing:
            raise InputError(f"cells {missing!r} have moments but are not among cells={labels!r}")
        self.cells: tuple[Hashable, ...] = sorted_labels(labels)
        self.groups: tuple[Hashable, ...] = sorted_labels([g for moments in parts.values() for g in moments.groups])
        self._by_cell = {
            cell: _padded(parts[cell] if cell in parts else GroupMoments.empty(self.feature_names), self.groups)
            for cell in self.cells
        }

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls, feature_names: Sequence[str], *, assignment: Assignment = None) -> CellMoments:
        """The identity of ``+``: no cells.

        Parameters
        ----------
        feature_names : sequence of str
        assignment : HashCells, str or None, optional
            How rows are assigned to cells.

        Returns
        -------
        CellMoments
        """
        return cls({}, feature_names=feature_names, assignment=assignment)

    @classmethod
    def from_pairs(
        cls,
        moments: GroupMoments,
        cells: Sequence[Hashable],
        groups: Sequence[Hashable],
        *,
        assignment: Assignment = None,
    ) -> CellMoments:
        """Split the moments of :func:`pair_codes` into cells.

        Parameters
        ----------
        moments : GroupMoments
            Moments whose group labels are pair codes c = cell · k + group (those with rows).
        cells : sequence of hashable
            Pair code c belongs to cell ``cells[c // k]`` ...
        groups : sequence of hashable
            ... and to group ``groups[c % k]`` (k = ``len(groups)``).
        assignment : HashCells, str or None, optional
            How rows were assigned to cells.

        Returns
        -------
        CellMoments
        """
        k = len(groups)
        codes = cast("tuple[int, ...]", moments.groups)  # the pair codes
        members: dict[Hashable, list[int]] = {}
        for index, code in enumerate(codes):
            members.setdefault(_label(cells[int(code) // k]), []).append(index)
        by_cell = {
            cell: GroupMoments(
                groups=tuple(_label(groups[int(codes[i]) % k]) for i in index),
                count=moments.count[index],
                weight=moments.weight[index],
                mean_offset=moments.mean_offset[index],
                scatter=moments.scatter[index],
                feature_names=moments.feature_names,
                origin=moments.origin[index],
            )
            for cell, index in members.items()
        }
        return cls(by_cell, feature_names=moments.feature_names, assignment=assignment)

    @classmethod
    def from_codes(
        cls,
        x: np.ndarray,
        cell_codes: np.ndarray,
        cells: Sequence[Hashable],
        group_codes: np.ndarray,
        groups: Sequence[Hashable],
        *,
        weights: np.ndarray | None = None,
        feature_names: Sequence[str] | None = None,
        assignment: Assignment = None,
    ) -> CellMoments:
        """Statistics of in-memory rows per cell and group, from codes into ``cells`` and ``groups``.

        The numpy path of what ``compute_moments(..., cells=...)`` does per chunk.

        Parameters
        ----------
        x : ndarray of shape (n_rows, p)
            Finite numeric rows.
        cell_codes, group_codes : ndarray of shape (n_rows,), int
            Indices into ``cells`` and ``groups`` of each row.
        cells, groups : sequence of hashable
            The labels the codes refer to.
        weights : ndarray of shape (n_rows,), optional
            Non-negative sample weights.
        feature_names : sequence of str, optional
            Defaults to ``x0 … x{p−1}``.
        assignment : HashCells, str or None, optional
            How rows were assigned to cells.

        Returns
        -------
        CellMoments
        """
        pairs = pair_codes(cell_codes, group_codes, len(groups))
        moments = GroupMoments.from_codes(
            x, pairs, range(len(cells) * len(groups)), weights=weights, feature_names=feature_names
        )
        return cls.from_pairs(moments, cells, groups, assignment=assignment)

    @classmethod
    def from_arrays(
        cls,
        x: np.ndarray,
        cell_labels: Sequence[Hashable] | np.ndarray,
        group_labels: Sequence[Hashable] | np.ndarray,
        *,
        weights: np.ndarray | None = None,
        feature_names: Sequence[str] | None = None,
    ) -> CellMoments:
        """Statistics of in-memory rows with one cell label and one group label per row.

        Parameters
        ----------
        x : ndarray of shape (n_rows, p)
            Finite numeric rows.
        cell_labels, group_labels : sequence of hashable, length n_rows
            The cell and the group of each row.
        weights : ndarray of shape (n_rows,), optional
            Non-negative sample weights.
        feature_names : sequence of str, optional
            Defaults to ``x0 … x{p−1}``.

        Returns
        -------
        CellMoments

        Raises
        ------
        InputError
            The labels do not have one entry per row.

        Examples
        --------
        >>> import numpy as np
        >>> from fairpca_dist import CellMoments
        >>> x = np.arange(16.0).reshape(8, 2)
        >>> cells = CellMoments.from_arrays(x, [0, 0, 1, 1, 2, 2, 3, 3], list("abababab"))
        >>> cells.cells, cells.groups
        ((0, 1, 2, 3), ('a', 'b'))
        >>> cells.union([0, 1]).count.tolist()
        [2, 2]
        """
        cell_codes, cells = pd.factorize(np.asarray(cell_labels, dtype=object))
        group_codes, groups = pd.factorize(np.asarray(group_labels, dtype=object))
        if len(cell_codes) != np.shape(x)[0] or len(group_codes) != np.shape(x)[0]:
            raise InputError(
                f"{len(cell_codes)} cell labels and {len(group_codes)} group labels for {np.shape(x)[0]} rows"
            )
        for role, codes in (("cell", cell_codes), ("group", group_codes)):
            if (codes < 0).any():
                raise InputError(f"{int((codes < 0).sum())} missing {role} label(s): every row needs one")
        return cls.from_codes(
            x, cell_codes, list(cells), group_codes, list(groups), weights=weights, feature_names=feature_names
        )

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, cell: Hashable) -> GroupMoments:
        try:
            return self._by_cell[_label(cell)]
        except (KeyError, TypeError):
            raise KeyError(f"no cell {cell!r}; the cells are {_show(self.cells)}") from None

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.cells)

    def __len__(self) -> int:
        return len(self.cells)

    def __repr__(self) -> str:
        """One line: cells, rows, features, the groups (a few, then how many more) and the assignment."""
        return (
            f"CellMoments({self.n_cells} cells, {self.n_samples:,} rows, {self.n_features} features, "
            f"{self.n_groups} groups ({listed(self.groups, show=label_text)}), "
            f"cells by {_assigned_by(self.assignment)})"
        )

    @property
    def n_cells(self) -> int:
        return len(self.cells)

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_samples(self) -> int:
        return int(self.count.sum())

    @property
    def count(self) -> np.ndarray:
        return self._stacked("count", (self.n_groups,), np.int64)

    @property
    def weight(self) -> np.ndarray:
        return self._stacked("weight", (self.n_groups,), np.float64)

    def _stacked(self, field: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        if not self.cells:
            return np.zeros((0, *shape), dtype=dtype)
        return np.stack([getattr(self._by_cell[cell], field) for cell in self.cells])

    # ------------------------------------------------------------------ unions
    def union(self, cells: Iterable[Hashable] | Hashable, *, min_group_size: int = 2) -> GroupMoments:
        """Exact statistics of the rows of ``cells`` (Chan's merge of the cells, in cell order).

        Parameters
        ----------
        cells : iterable of cell labels, or one label
            The cells to merge (a single label may be given as is).
        min_group_size : int, default 2
            Every group must have at least this many rows in the union (the check
            :func:`~fairpca_dist.fit_projection` makes).

        Returns
        -------
        GroupMoments

        Raises
        ------
        GroupError
            Naming the cells and each group with fewer than ``min_group_size`` rows (or zero
            weight) in their union.
        InputError
            Unknown or repeated cells.
        """
        chosen = self._chosen(cells)
        return self._merged(chosen, min_group_size, f"cell(s) {_show(chosen)}")

    def complement(self, cells: Iterable[Hashable] | Hashable, *, min_group_size: int = 2) -> GroupMoments:
        """Statistics of every row outside ``cells`` (e.g. the training rows of a CV fold).

        Parameters
        ----------
        cells : iterable of cell labels, or one label
            The cells to leave out.
        min_group_size : int, default 2
            As for :meth:`union`.

        Returns
        -------
        GroupMoments

        Raises
        ------
        GroupError, InputError
            As for :meth:`union`.
        """
        held_out = self._chosen(cells)
        rest = tuple(cell for cell in self.cells if cell not in held_out)
        if not rest:
            raise InputError(f"the complement of cell(s) {_show(held_out)} is empty: they are all the cells")
        return self._merged(rest, min_group_size, f"cell(s) {_show(rest)} (all but {_show(held_out)})")

    def total(self) -> GroupMoments:
        """Statistics of all rows (every cell merged).

        Returns
        -------
        GroupMoments
        """
        if not self.cells:
            raise GroupError("these cell moments hold no rows at all")
        return self._merged(self.cells, 1, "all cells")

    def _chosen(self, cells: Iterable[Hashable] | Hashable) -> tuple[Hashable, ...]:
        """The requested cells, validated, in this object's cell order."""
        listed_cells: Iterable[Hashable]
        if self._is_one_label(cells):  # a label (a tuple label is iterable too)
            listed_cells = [cast(Hashable, cells)]
        else:
            listed_cells = cast(Iterable[Hashable], cells)
        requested = [_label(cell) for cell in listed_cells]
        if not requested:
            raise InputError("no cells given: name at least one cell")
        unknown = [cell for cell in requested if cell not in self._by_cell]
        if unknown:
            raise InputError(f"unknown cell(s) {_show(unknown)}; the cells are {_show(self.cells)}")
        repeated = sorted_labels([cell for cell in requested if requested.count(cell) > 1])
        if repeated:
            raise InputError(f"cell(s) {list(repeated)} listed more than once: their rows would count twice")
        wanted = set(requested)
        return tuple(cell for cell in self.cells if cell in wanted)

    def _is_one_label(self, cells: object) -> bool:
        if isinstance(cells, (str, bytes)) or not isinstance(cells, Iterable):
            return True
        if not isinstance(cells, Hashable):  # a list, a set, a dict view: a collection of labels
            return False
        try:
            return _label(cells) in self._by_cell  # a tuple label
        except TypeError:  # a set, a dict view: unhashable, so a collection of labels
            return False

    def _merged(self, chosen: Sequence[Hashable], min_group_size: int, description: str) -> GroupMoments:
        if isinstance(min_group_size, bool) or not isinstance(min_group_size, (int, np.integer)) or min_group_size < 1:
            raise InputError(f"min_group_size={min_group_size!r} must be an integer >= 1")
        count = functools.reduce(operator.add, (self._by_cell[cell].count for cell in chosen))
        weight = functools.reduce(operator.add, (self._by_cell[cell].weight for cell in chosen))
        short = [f"{g!r}: {int(n)} row(s)" for g, n in zip(self.groups, count, strict=True) if n < min_group_size]
        if short:
            raise GroupError(
                f"{description} hold too few rows of group(s) {', '.join(short)} "
                f"(at least {min_group_size} needed); use more cells, or fewer and larger ones"
            )
        light = [g for g, w in zip(self.groups, weight, strict=True) if w <= 0]
        if light:
            raise GroupError(f"{description} give group(s) {light} zero total sample weight")
        merged: GroupMoments = functools.reduce(operator.add, (self._by_cell[cell] for cell in chosen))
        return merged.check_groups(min_group_size)

    # ------------------------------------------------------------------ merging
    def __add__(self, other: CellMoments) -> CellMoments:
        """Exact merge of cell statistics of disjoint row sets (e.g. two chunks): cells present
        in both are merged group by group (Chan), the others are kept."""
        if not isinstance(other, CellMoments):
            return NotImplemented
        if other.feature_names != self.feature_names:
            raise SchemaError(
                "cannot merge cell moments over different features: "
                + differences("the first", self.feature_names, "the second", other.feature_names)
            )
        if other.assignment != self.assignment:
            raise InputError(
                f"cannot merge cells assigned by {self.assignment!r} with cells assigned by {other.assignment!r}"
            )
        merged = dict(self._by_cell)
        for cell, moments in other._by_cell.items():
            merged[cell] = merged[cell] + moments if cell in merged else moments
        return CellMoments(merged, feature_names=self.feature_names, assignment=self.assignment)

    # ------------------------------------------------------------------ identity and persistence
    def fingerprint(self) -> str:
        """SHA-256 of the statistics (cell and group labels, names, every cell's arrays).

        Returns
        -------
        str
            64 hexadecimal digits.
        """
        digest = hashlib.sha256()
        labels = [[label_to_json(c) for c in self.cells], [label_to_json(g) for g in self.groups]]
        digest.update(json.dumps([*labels, list(self.feature_names)]).encode())
        for cell in self.cells:
            moments = self._by_cell[cell]
            for array in (moments.count, moments.weight, moments.mean, moments.scatter):
                digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()

    def save(self, path: str | PathLike[str] | Location) -> None:
        """Write to ``path`` as npz: the arrays stacked by cell and a JSON header; no pickle.

        The arrays are ``count`` (c, k), ``weight`` (c, k), ``mean_offset`` and ``origin``
        (c, k, p) and ``scatter`` (c, k, p, p); the header names the cells, groups, features and
        the assignment.

        Parameters
        ----------
        path : str, path-like or Location
            A file path or a URL.
        """
        header = {
            "format_version": _FORMAT_VERSION,
            "kind": _KIND,
            "cells": [label_to_json(c) for c in self.cells],
            "groups": [label_to_json(g) for g in self.groups],
            "feature_names": list(self.feature_names),
            "assignment": _assignment_to_json(self.assignment),
        }
        k, p = self.n_groups, self.n_features
        with locate(path).open("wb") as f:
            np.savez(
                f,
                header=np.array(json.dumps(header)),
                count=self.count,
                weight=self.weight,
                mean_offset=self._stacked("mean_offset", (k, p), np.float64),
                scatter=self._stacked("scatter", (k, p, p), np.float64),
                origin=self._stacked("origin", (k, p), np.float64),
            )

    @classmethod
    def load(cls, path: str | PathLike[str] | Location) -> CellMoments:
        """Read what :meth:`save` wrote.

        Parameters
        ----------
        path : str, path-like or Location
            A file path or a URL.

        Returns
        -------
        CellMoments

        Raises
        ------
        InputError
            Not a cell-moments file, or of an unknown format version.
        """
        with locate(path).open("rb") as f, np.load(f, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if header.get("kind") != _KIND:
                raise InputError(f"{path}: not per-cell moments (GroupMoments.load reads plain moments files)")
            if header.get("format_version") != _FORMAT_VERSION:
                raise InputError(f"{path}: unsupported cell moments format {header.get('format_version')!r}")
            cells = [label_from_json(c) for c in header["cells"]]
            groups = tuple(label_from_json(g) for g in header["groups"])
            names = tuple(header["feature_names"])
            arrays = {name: data[name] for name in ("count", "weight", "mean_offset", "scatter", "origin")}
        by_cell = {
            cell: GroupMoments(
                groups=groups,
                count=arrays["count"][i].astype(np.int64),
                weight=arrays["weight"][i].astype(np.float64),
                mean_offset=arrays["mean_offset"][i].astype(np.float64),
                scatter=arrays["scatter"][i].astype(np.float64),
                feature_names=names,
                origin=arrays["origin"][i].astype(np.float64),
            )
            for i, cell in enumerate(cells)
        }
        return cls(by_cell, feature_names=names, assignment=_assignment_from_json(header["assignment"]))


def _label(label: Hashable) -> Hashable:
    return sorted_labels([label])[0]


def _show(labels: Sequence[Hashable], limit: int = 12) -> str:
    shown = ", ".join(repr(label) for label in list(labels)[:limit])
    return f"[{shown}{', …' if len(labels) > limit else ''}]"


def _padded(moments: GroupMoments, groups: tuple[Hashable, ...]) -> GroupMoments:
    """``moments`` over exactly ``groups``; groups it lacks get count 0 and zero statistics."""
    if moments.groups == groups:
        return moments
    k, p = len(groups), moments.n_features
    count, weight = np.zeros(k, dtype=np.int64), np.zeros(k)
    mean_offset, scatter, origin = np.zeros((k, p)), np.zeros((k, p, p)), np.zeros((k, p))
    for j, group in enumerate(moments.groups):
        i = groups.index(group)
        count[i], weight[i] = moments.count[j], moments.weight[j]
        mean_offset[i], scatter[i], origin[i] = moments.mean_offset[j], moments.scatter[j], moments.origin[j]
    return GroupMoments(groups, count, weight, mean_offset, scatter, moments.feature_names, origin)


def _assignment_to_json(assignment: Assignment) -> object:
    if isinstance(assignment, HashCells):
        return {"hash_cells": assignment.to_json()}
    if isinstance(assignment, str):
        return {"column": assignment}
    return None


def _assignment_from_json(value: object) -> Assignment:
    if isinstance(value, dict) and "hash_cells" in value:
        spec = value["hash_cells"]
        return HashCells(tuple(spec["key_columns"]), spec["n_cells"], spec["seed"])
    if isinstance(value, dict) and "column" in value:
        return str(value["column"])
    return None
