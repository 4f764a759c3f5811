"""Words for a person: lists in messages, and the names of groups.

Every message that names columns, groups, cells or files goes through :func:`listed` (a few
items and a count of the rest), so an error on a 500-column table stays one readable line; every
report, comparison and downstream table names groups through :func:`group_display_names`
(``sex=1 & race=2``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from fairpca_dist.exceptions import GroupError, InputError

__all__ = ["differences", "group_display_names", "label_text", "listed", "listed_counts", "size_text"]

LIMIT = 6
"""Items shown before "and N more"."""


def size_text(n_bytes: float) -> str:
    """Bytes for a person, in the decimal units memory limits are given in (600 MB, 1.07 GB).

    >>> size_text(6.4e9), size_text(2**30), size_text(512)
    ('6.4 GB', '1.07 GB', '1 kB')
    """
    if n_bytes < 1e6:
        return f"{n_bytes / 1e3:.0f} kB"
    return f"{n_bytes / 1e6:.0f} MB" if n_bytes < 1e9 else f"{n_bytes / 1e9:.3g} GB"


def listed(items: Iterable[Any], limit: int = LIMIT, *, show: Callable[[Any], str] = repr) -> str:
    """``"'a', 'b', 'c' and 21 more"``: the first ``limit`` items (each through ``show``), then
    how many were left out; ``"none"`` for no items."""
    items = list(items)
    if not items:
        return "none"
    shown = ", ".join(show(item) for item in items[:limit])
    rest = len(items) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


def listed_counts(counts: Mapping[Any, int], limit: int = LIMIT, *, show: Callable[[Any], str] = str) -> str:
    """``"age: 12, income: 3 and 4 more"``: the largest counts first (ties in the mapping's
    order), at most ``limit`` of them."""
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    return listed(ranked, limit, show=lambda item: f"{show(item[0])}: {item[1]:,}")


def differences(first: str, ours: Sequence[Any], second: str, theirs: Sequence[Any]) -> str:
    """How two lists of names differ, in a few words: ``"only in the model: 'x'; only in the
    moments: 'y', 'z'"``, or, for the same names in another order, ``"the same 3 in another
    order: 'b' where the model has 'a' (position 1)"``. Long lists are shortened by
    :func:`listed`."""
    only_ours = [name for name in ours if name not in set(theirs)]
    only_theirs = [name for name in theirs if name not in set(ours)]
    if not only_ours and not only_theirs:
        # strict=False: the lists may differ in length (names repeated); compare their common start
        position = next(
            (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs))
        )
        if len(ours) != len(theirs):
            return f"{len(ours)} in {first}, {len(theirs)} in {second} (some repeated)"
        return (
            f"the same {len(ours)} in another order: {theirs[position]!r} where {first} has "
            f"{ours[position]!r} (position {position})"
        )
    parts = []
    if only_ours:
        parts.append(f"only in {first}: {listed(only_ours)}")
    if only_theirs:
        parts.append(f"only in {second}: {listed(only_theirs)}")
    return "; ".join(parts)


def group_display_names(
    groups: Sequence[Hashable],
    columns: Sequence[str] = (),
    names: Mapping[Any, str] | None = None,
    *,
    strict: bool = True,
) -> list[str]:
    """How a report names each group: ``column=value`` per sensitive column, joined by ``" & "``
    for intersectional (tuple) labels (``sex=1 & race=2``); the bare values when ``columns`` is
    empty (``1 & 2``). A value that is a whole number is written as one (``1``, not ``1.0``).

    ``names`` maps values to display names: a key is a value (``1``), its text (``"1"``, as
    typed on the command line), or ``"column=value"`` for the value of one column when columns
    share values (``"race=1"``); ``{"1": "female"}`` gives ``sex=female``. A key that names no
    value of any group raises :class:`InputError` (a typo would otherwise pass unseen; with
    ``strict=False`` it is ignored, for a row sample that may lack a group), as does a name that
    is not text; labels of another number of values than ``columns`` (when
    given) raise :class:`GroupError`.
    """
    mismatched = [label for label in groups if len(_parts(label)) != len(columns)]
    if columns and mismatched:
        raise GroupError(
            f"the group column(s) {list(columns)} do not match the group label(s) {listed(mismatched)}: "
            "one value per column"
        )
    names = dict(names or {})
    odd = [key for key, name in names.items() if not isinstance(name, str) or not name]
    if odd:
        raise InputError(f"group_names must map values to non-empty text; not so for {listed(odd)}")
    used: set[Hashable] = set()

    def part(column: str | None, value: Hashable) -> str:
        text = _value_text(value)
        candidates = (f"{column}={text}", value, text) if column else (value, text)
        keys = [key for key in candidates if key in names]
        used.update(keys)
        shown = names[keys[0]] if keys else text
        return f"{column}={shown}" if column else shown

    shown = [
        " & ".join(part(columns[i] if columns else None, value) for i, value in enumerate(_parts(group)))
        for group in groups
    ]
    unused = [key for key in names if key not in used]
    if unused and strict:
        values = [" & ".join(_value_text(value) for value in _parts(group)) for group in groups]
        raise InputError(
            f"group_names {listed(unused)} name no value of the groups "
            f"({listed(values, show=str)}{' by ' + ', '.join(columns) if columns else ''})"
        )
    return shown


def label_text(label: Hashable) -> str:
    """A group label where its columns are not known: ``Black & Married-AF-spouse`` for an
    intersectional (tuple) label, the label's repr (``'g0'``, ``1``) for one value."""
    if isinstance(label, tuple):
        return " & ".join(_value_text(value) for value in label)
    return repr(label)


def _parts(label: Hashable) -> tuple[Hashable, ...]:
    """The values of a group label, one per sensitive column."""
    return label if isinstance(label, tuple) else (label,)


def _value_text(value: Hashable) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
