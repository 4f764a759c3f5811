"""Lists in messages a person reads: a few items and a count of the rest, never a wall of text.

Every message that names columns, groups, cells or files goes through :func:`listed`, so an
error on a 500-column table stays one readable line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["listed", "listed_counts"]

LIMIT = 6
"""Items shown before "and N more"."""


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
