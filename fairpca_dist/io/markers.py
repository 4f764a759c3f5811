"""Text in columns of numbers: the missing-value markers of CSV files (UCI's ``?``, ``-``, ``.``).

A CSV column of numbers whose missing values are written as ``?`` is read as text (when the
first rows dask samples hold a ``?``) and would leave the features without a word. A
:class:`TextProfile` of such a column, taken while its rows are read anyway and merged over the
partitions like any other statistic, tells a column of numbers and a few markers from a column of
text, and :func:`na_values_hint` names the reader option that reads the markers as missing (with
the markers the user already gave: :func:`with_markers`). A column that is mostly markers would
reject almost every row once they read as missing: :func:`exclude_hint` offers to leave it out.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fairpca_dist.wording import listed

__all__ = [
    "TextProfile",
    "profile_text",
    "looks_like_a_marker",
    "na_values_hint",
    "with_markers",
    "exclude_hint",
    "MAX_MARKERS",
    "MOSTLY_MARKERS",
    "ALL_MISSING",
    "HEAD_ROWS",
]

MAX_MARKERS = 3
"""A column of numbers holding at most this many distinct other values is read as numbers with
missing-value markers; more make it text."""

MOSTLY_MARKERS = 0.5
"""A column of numbers whose markers are more than this share of its values is "mostly
missing": read with ``na_values``, it would reject most rows, so leaving it out is offered."""

ALL_MISSING = "all missing"
HEAD_ROWS = 1000
"""Rows of a partition profiled first; the others only when these may be numbers and markers."""

_MISSING_WORDS = frozenset({"na", "n/a", "n.a.", "nan", "null", "none", "missing", "unknown", "nd", "n.d."})


def looks_like_a_marker(value: str) -> bool:
    """Blank, punctuation only (``?``, ``-``, ``.``, ``*``, ``--``) or a word for "missing"."""
    text = value.strip()
    return not any(ch.isalnum() for ch in text) or text.lower() in _MISSING_WORDS


@dataclass(frozen=True)
class TextProfile:
    """What the non-missing values of a column read as text are.

    ``numbers``: how many values parse as numbers; ``distinct_numbers``: the most distinct such
    values seen in one partition (a lower bound of the table's count); ``texts``: the other values
    and their counts, or ``None`` when there are more than :data:`MAX_MARKERS` distinct ones.
    Profiles of partitions add up (``+``) to the profile of the table.
    """

    numbers: int = 0
    distinct_numbers: int = 0
    texts: Mapping[str, int] | None = field(default_factory=dict)

    def __add__(self, other: TextProfile) -> TextProfile:
        texts = None
        if self.texts is not None and other.texts is not None:
            texts = dict(Counter(self.texts) + Counter(other.texts))
            texts = texts if len(texts) <= MAX_MARKERS else None
        return TextProfile(self.numbers + other.numbers, max(self.distinct_numbers, other.distinct_numbers), texts)

    @property
    def markers(self) -> tuple[str, ...]:
        """The values that keep a column of numbers from being read as numbers, most frequent
        first: none for a column of text (no numbers, or many other values, or as many distinct
        others as numbers without any looking like a marker: ``yes``, ``no``, ``0``, ``1``)."""
        counts = self.texts
        if self.numbers == 0 or not counts:
            return ()
        texts = sorted(counts, key=lambda text: -counts[text])
        if all(map(looks_like_a_marker, texts)) or self.distinct_numbers > len(texts):
            return tuple(texts)
        return ()

    @property
    def marker_share(self) -> float:
        """The share of the column's non-missing values that are :attr:`markers` (0 without)."""
        counts = self.texts
        marked = sum(counts[text] for text in self.markers) if self.markers and counts is not None else 0
        return marked / (marked + self.numbers) if marked else 0.0

    @property
    def mostly_markers(self) -> bool:
        """Whether markers are more than :data:`MOSTLY_MARKERS` of the column's values."""
        return self.marker_share > MOSTLY_MARKERS

    def reason(self) -> str:
        """Why the column is not a feature, in a few words: ``"numbers but for '?'"`` (``"...
        in 97 % of its values"`` when :attr:`mostly_markers`), ``"numbers stored as text"``,
        ``"all missing"``, ``"all missing: only '?'"`` or ``"not numeric"``."""
        if self.markers:
            share = f" in {self.marker_share:.0%} of its values" if self.mostly_markers else ""
            return f"numbers but for {listed(self.markers)}{share}"
        if self.numbers and self.texts == {}:
            return "numbers stored as text"
        if self.numbers == 0 and self.texts is not None and all(map(looks_like_a_marker, self.texts)):
            return f"{ALL_MISSING}: only {listed(self.texts)}" if self.texts else ALL_MISSING
        return "not numeric"


def profile_text(values: pd.Series) -> TextProfile:
    """The :class:`TextProfile` of one partition's ``values`` (any dtype; missing values are
    not counted): one hash of its distinct values and one parse of each, not of every row. A
    column whose first :data:`HEAD_ROWS` values already hold more than :data:`MAX_MARKERS`
    distinct non-numbers is text, and the rest is not looked at (names, free text: most of the
    text columns of a table)."""
    head = _profile(values.iloc[:HEAD_ROWS])
    return head if head.texts is None or len(values) <= HEAD_ROWS else _profile(values)


def _profile(values: pd.Series) -> TextProfile:
    counts = values.value_counts(dropna=True)
    distinct = pd.Series(counts.index.astype(object), dtype=object)
    parsed = pd.to_numeric(distinct, errors="coerce").notna().to_numpy()
    numbers = counts.to_numpy()[parsed]
    others = counts[~parsed]
    texts = {str(value): int(n) for value, n in others.items()} if len(others) <= MAX_MARKERS else None
    return TextProfile(int(numbers.sum()), int(parsed.sum()), texts)


def with_markers(given: Any, markers: Mapping[str, Sequence[str]]) -> list[Any] | dict[str, list[Any]]:
    """The ``na_values`` option that reads the ``markers`` found per column as missing, and
    everything the user's ``given`` option (None, a value, a list or a dict per column) did:
    a list, or a dict per column when ``given`` is one (``{"b": ["?"]}`` and ``c``'s ``-``
    give ``{"b": ["?"], "c": ["-"]}``)."""
    if isinstance(given, Mapping):
        merged = {str(column): _as_list(values) for column, values in given.items()}
        for column, found in markers.items():
            merged[str(column)] = list(dict.fromkeys([*merged.get(str(column), []), *found]))
        return merged
    return list(dict.fromkeys([*_as_list(given), *(m for found in markers.values() for m in found)]))


def _as_list(values: Any) -> list[Any]:
    if values is None:
        return []
    return [values] if isinstance(values, (str, bytes)) or not isinstance(values, Iterable) else list(values)


def na_values_hint(na_values: Sequence[Any] | Mapping[str, Sequence[Any]]) -> str:
    """``"If '?' marks a missing value: read_options={'na_values': ['?']} (command line:
    --read-option 'na_values=["?"]')"``: the reader option ``na_values`` (a list, or a dict per
    column), to copy as it is (it replaces a ``na_values`` given before: :func:`with_markers`
    keeps what that one read)."""
    lists = na_values.values() if isinstance(na_values, Mapping) else [na_values]
    markers = list(dict.fromkeys(m for values in lists for m in values))
    verb = "marks a missing value" if len(markers) == 1 else "mark missing values"
    option = shlex.quote(f"na_values={json.dumps(na_values)}")
    return (
        f"If {listed(markers, len(markers))} {verb}: read_options={{'na_values': {na_values!r}}} "
        f"(command line: --read-option {option})"
    )


def exclude_hint(columns: Sequence[str]) -> str:
    """``"exclude=['10', '11']; command line: --exclude 10 11"``: the option that leaves
    ``columns`` out of the features."""
    return f"exclude={list(columns)!r}; command line: --exclude {' '.join(map(shlex.quote, columns))}"
