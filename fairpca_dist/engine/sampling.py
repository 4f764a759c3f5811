"""A uniform sample of a table's rows in one pass, mergeable: priority (bottom-k) sampling.

Every row gets a random key u ~ U[0, 1), drawn by file from the generator seeded with
``(seed, file number)``, one key per row in the file's order (:meth:`SampleSpec.keys`). The sample keeps the
``max_rows`` rows of smallest key overall, and, in each group (the values of the group
columns), the ``rows_per_group`` rows of smallest key in that group. Keeping the k smallest
keys of a set of i.i.d. keys is a uniform sample without replacement of size k, and the k
smallest of a union are the k smallest of the parts' k smallest: partial samples of disjoint
row sets merge exactly (``+``: associative, commutative), so a pass computes one per
partition and merges them in a tree, with memory bounded by one partition plus the sample.

Any smaller sample is a prefix: the ``n ≤ max_rows`` rows of smallest key are a uniform
sample of n rows (:meth:`RowSample.uniform`), the ``m ≤ rows_per_group`` rows of smallest key
in a group a uniform sample of that group (:meth:`RowSample.per_group`). Rows are kept in key
order, so the result does not depend on the order of the merges: the same files and seed give
the same sample whether it is drawn while ingest writes them (file i from partition i) or later
by a pass over the files (:func:`fairpca_dist.engine.passes.table_sample`), however the reader
splits or packs them into partitions.

Where the files are not known (a dask frame, rows in memory), keys can be a hash of the row's
values instead (:func:`row_keys`): the same for a row whatever partition holds it, so a sample of
the rows of smallest key does not depend on the partitioning at all
(:class:`fairpca_dist.engine.datapasses.GroupSample`, the per-group sample of ``mm-robust``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from fairpca_dist.exceptions import InputError

__all__ = ["RowSample", "SampleSpec", "KEY_COLUMN", "KEY_ENTROPY", "MARGIN", "row_keys"]

KEY_COLUMN = "__fairpca_priority__"
"""The column of the sample's keys (a name no table of the library's uses)."""

KEY_ENTROPY = int.from_bytes(b"fairpca_sample", "big")
"""The keys' own entropy beside the seed and the file number: keys seeded by ``(seed, file)``
alone repeated, draw for draw, the uniforms of any table generated file by file with numpy's
``default_rng([0, file])`` (a common way to make synthetic tables; the benchmarks' own do),
so the keys were a function of the rows (a sample of one group only, from groups drawn by
``rng.choice``)."""


_KEY_BLOCK_ROWS = 4096
_MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))  # splitmix64's multipliers
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # splitmix64's increment (odd: distinct seeds, distinct offsets)


def row_keys(values: np.ndarray, seed: int = 0) -> np.ndarray:
    """A number in [0, 1) per row of ``values`` (n × p), a hash of the row's float64 values: the
    bits of column j times an odd constant c_j, summed modulo 2⁶⁴ (rows that differ give
    different sums but for a chance of 2⁻⁶⁴), plus ``seed`` times splitmix64's odd increment,
    then mixed by splitmix64's finaliser. Uniform over distinct rows, equal for equal rows,
    whatever partition holds them; another ``seed`` gives other keys (seed 0 adds nothing)."""
    bits = np.asarray(values, dtype=np.float64).view(np.uint64)
    drawn = np.random.default_rng(0x5EED).integers(0, 2**63, size=bits.shape[1], dtype=np.uint64)
    constants = np.asarray(drawn * np.uint64(2) + np.uint64(1))  # odd
    state = np.zeros(bits.shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        if bits.flags.f_contiguous and not bits.flags.c_contiguous:  # column by column: each is contiguous
            for j in range(bits.shape[1]):
                state += bits[:, j] * constants[j]
        else:  # row blocks that stay in the cache
            for start in range(0, bits.shape[0], _KEY_BLOCK_ROWS):
                block = bits[start : start + _KEY_BLOCK_ROWS]
                np.sum(block * constants, axis=1, dtype=np.uint64, out=state[start : start + block.shape[0]])
        state += np.uint64(seed % 2**64) * _GOLDEN
        state ^= state >> np.uint64(30)
        state *= _MIX[0]
        state ^= state >> np.uint64(27)
        state *= _MIX[1]
        state ^= state >> np.uint64(31)
    return (state >> np.uint64(11)).astype(np.float64) / float(2**53)


@dataclass(frozen=True)
class SampleSpec:
    """What a :class:`RowSample` keeps: ``columns`` (among them the ``group_columns``), the
    ``max_rows`` rows of smallest key and the ``rows_per_group`` of smallest key per group,
    with keys from ``seed``."""

    columns: tuple[str, ...]
    group_columns: tuple[str, ...]
    max_rows: int = 50_000
    rows_per_group: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("max_rows", "rows_per_group"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise InputError(f"{name} of a row sample must be an integer >= 0, got {value!r}")
        missing = [c for c in self.group_columns if c not in self.columns]
        if missing:
            raise InputError(f"the group columns {missing} of a row sample must be among its columns")
        if KEY_COLUMN in self.columns:
            raise InputError(f"a table column may not be named {KEY_COLUMN!r}: the row sample's keys use that name")

    def covers(self, other: SampleSpec) -> bool:
        """Whether a sample drawn by this spec holds the sample ``other`` asks for (a prefix of it)."""
        return (
            set(other.columns) <= set(self.columns)
            and other.group_columns == self.group_columns
            and other.max_rows <= self.max_rows
            and other.rows_per_group <= self.rows_per_group
            and other.seed == self.seed
        )

    def keys(self, index: int) -> np.random.Generator:
        """The generator of the keys of the rows of file (partition) ``index``, drawn in row order,
        seeded with (:data:`KEY_ENTROPY`, ``seed``, ``index``)."""
        return np.random.default_rng([KEY_ENTROPY, self.seed, index])

    def of_rows(
        self,
        part: pd.DataFrame,
        keys: np.random.Generator,
        *,
        share: float | None = None,
        group_codes: tuple[np.ndarray, Sequence[Hashable]] | None = None,
    ) -> RowSample:
        """The sample of consecutive rows ``part``, their keys the next ones ``keys`` gives. Only
        the rows the sample keeps are copied: the ``max_rows`` smallest keys and the
        ``rows_per_group`` smallest of each group, found by partial sorts of the keys.

        ``share``: about which share of the table's rows ``part`` holds (1 / the number of
        partitions), when the partitions' samples are merged after a pass. A row then is not kept
        when its key is above :data:`MARGIN` times what the table's sample can need (the k smallest
        of N keys lie near k / N, and N ≈ len(part) / share): ``max_rows`` overall and
        ``rows_per_group`` of its group. The smallest key left out, overall and per group, is
        recorded, and :meth:`RowSample.exact` says after the merge whether every row the sample
        needed was kept (it fails only for partitions far larger than their share).

        ``group_codes``: each row's group, as codes into the group labels (e.g. those of
        :func:`~fairpca_dist.engine.sources.read_chunk`), when the caller has them already."""
        drawn = keys.random(len(part))
        codes, labels = self._group_codes(part) if group_codes is None else (group_codes[0], list(group_codes[1]))
        floor, group_floors = np.inf, {}
        positions = np.arange(len(part))  # of the rows still candidates, in ``part``
        if share is not None and len(part):
            counts = np.bincount(codes, minlength=len(labels))
            wanted = np.maximum(self.max_rows * share / len(part), self.rows_per_group * share / counts)
            left_out = drawn >= MARGIN * wanted[codes]
            if left_out.any():
                floor = float(drawn[left_out].min())
                smallest = np.full(len(labels), np.inf)
                np.minimum.at(smallest, codes[left_out], drawn[left_out])
                group_floors = {labels[g]: float(smallest[g]) for g in np.flatnonzero(smallest < np.inf).tolist()}
                positions = np.flatnonzero(~left_out)  # the rows themselves are copied only once chosen
                drawn, codes = drawn[positions], codes[positions]
        chosen = [_smallest(drawn, self.max_rows)]
        if self.rows_per_group:
            for group in range(len(labels)):
                members = np.flatnonzero(codes == group)
                chosen.append(members[_smallest(drawn[members], self.rows_per_group)])
        take = np.unique(np.concatenate(chosen))
        rows = part.iloc[positions[take]][list(self.columns)].reset_index(drop=True)
        rows = pd.concat([rows, pd.DataFrame({KEY_COLUMN: drawn[take]})], axis=1)  # one block more, not an insert
        return RowSample(self, rows, floor, group_floors).kept()

    def _group_codes(self, part: pd.DataFrame) -> tuple[np.ndarray, list[Hashable]]:
        """Each row's group code, and the group labels (a value, or a tuple of several columns')."""
        columns = list(self.group_columns)
        codes = part.groupby(columns, sort=False, dropna=False).ngroup().to_numpy()
        firsts = part[columns].drop_duplicates()  # in order of first appearance, as the codes
        labels = [tuple(row) if len(columns) > 1 else row[0] for row in firsts.itertuples(index=False, name=None)]
        return codes, labels


MARGIN = 4.0
"""How far above the keys it can need a partition keeps rows (:meth:`SampleSpec.of_rows` ``share``)."""


def _below(sorted_keys: np.ndarray, k: int, floor: float) -> bool:
    """Whether the k smallest of all keys are among ``sorted_keys`` when no key below ``floor``
    was left out: the k-th of them is below it (or nothing was left out)."""
    return floor == np.inf or (len(sorted_keys) >= k > 0 and sorted_keys[k - 1] < floor) or k == 0


def _smallest(values: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` smallest ``values`` (all of them if fewer), in no order."""
    if k >= len(values):
        return np.arange(len(values))
    return np.argpartition(values, k)[:k] if k else np.zeros(0, dtype=np.intp)


@dataclass(frozen=True)
class RowSample:
    """A priority sample (module docstring): ``rows`` are the kept rows with their key in
    :data:`KEY_COLUMN`, sorted by key."""

    spec: SampleSpec
    rows: pd.DataFrame
    floor: float = np.inf
    group_floors: Mapping[Hashable, float] = field(default_factory=dict)
    """The smallest key of a row left out by a partition's cut (:meth:`SampleSpec.of_rows`
    ``share``), overall and per group; infinite when none was."""

    def __add__(self, other: RowSample) -> RowSample:
        if other.spec != self.spec:
            raise InputError("row samples of different specs do not merge")
        floors = dict(self.group_floors)
        for label, value in other.group_floors.items():
            floors[label] = min(value, floors.get(label, np.inf))
        rows = pd.concat([self.rows, other.rows], ignore_index=True)
        return RowSample(self.spec, rows, min(self.floor, other.floor), floors).kept()

    def kept(self) -> RowSample:
        """The rows the spec keeps, in key order."""
        rows = self.rows.sort_values(KEY_COLUMN, kind="stable", ignore_index=True)
        keep = np.arange(len(rows)) < self.spec.max_rows
        if self.spec.rows_per_group and len(rows):
            keep |= self._group_ranks(rows) < self.spec.rows_per_group
        return replace(self, rows=rows.loc[keep].reset_index(drop=True))

    def exact(self) -> bool:
        """Whether the sample holds every row the spec asks for, i.e. no row a partition's cut
        left out would have been kept: the ``max_rows``-th smallest key is below the smallest
        key left out, and within each group the ``rows_per_group``-th below that group's."""
        keys = self.rows[KEY_COLUMN].to_numpy()
        if not _below(keys, self.spec.max_rows, self.floor):
            return False
        if not self.group_floors:
            return True
        columns = list(self.spec.group_columns)
        for label, floor in self.group_floors.items():
            values = label if isinstance(label, tuple) else (label,)
            mask = np.logical_and.reduce([self.rows[c].to_numpy() == v for c, v in zip(columns, values, strict=True)])
            if not _below(keys[mask], self.spec.rows_per_group, floor):
                return False
        return True

    def _group_ranks(self, rows: pd.DataFrame) -> np.ndarray:
        """The rank of each row (in key order) among the rows of its group."""
        return rows.groupby(list(self.spec.group_columns), sort=False, dropna=False).cumcount().to_numpy()

    def restricted(self, spec: SampleSpec) -> RowSample:
        """The sample a smaller ``spec`` (one this sample's spec covers) keeps: a prefix of this one."""
        if not self.spec.covers(spec):
            raise InputError(f"a row sample of {self.spec} does not hold one of {spec}")
        return RowSample(spec, self.rows[[*spec.columns, KEY_COLUMN]]).kept()

    def uniform(self, n_rows: int, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """A uniform sample of ``n_rows`` rows (all rows if fewer), in key order."""
        if n_rows > self.spec.max_rows:
            raise InputError(f"a sample of {n_rows} rows from one that kept {self.spec.max_rows}")
        return self._columns(self.rows.head(n_rows), columns)

    def per_group(self, n_rows: int, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """A uniform sample of ``n_rows`` rows of each group (all its rows if fewer), in key order."""
        if n_rows > self.spec.rows_per_group:
            raise InputError(f"{n_rows} rows per group from a sample that kept {self.spec.rows_per_group}")
        return self._columns(self.rows.loc[self._group_ranks(self.rows) < n_rows], columns)

    def _columns(self, rows: pd.DataFrame, columns: Sequence[str] | None) -> pd.DataFrame:
        return rows[list(self.spec.columns if columns is None else columns)].reset_index(drop=True)
