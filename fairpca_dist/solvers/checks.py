"""Checks of solver options, shared by every solver so that a bad option fails the same way
everywhere: an :class:`~fairpca_dist.exceptions.InputError` that names the option and the
value, raised before any work. Each returns the value in its canonical type."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fairpca_dist.exceptions import InputError

if TYPE_CHECKING:
    from fairpca_dist.engine.datapasses import DataPasses

__all__ = ["number", "integer", "choice", "flag", "rows"]


def number(name: str, value: Any, *, minimum: float = 0.0, strict: bool = False) -> float:
    """A finite real ≥ ``minimum`` (> ``minimum`` with ``strict``); booleans are refused."""
    valid = (
        not isinstance(value, (bool, np.bool_))
        and isinstance(value, (int, float, np.integer, np.floating))
        and bool(np.isfinite(value))
        and (value > minimum if strict else value >= minimum)
    )
    if not valid:
        kind = (
            ("a positive number" if strict else "a non-negative number")
            if minimum == 0
            else f"a finite number {'>' if strict else '>='} {minimum:g}"
        )
        raise InputError(f"{name} must be {kind}, got {value!r}")
    return float(value)


def integer(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer ≥ ``minimum``; booleans and floats are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
        raise InputError(f"{name} must be {kind}, got {value!r}")
    return int(value)


def choice(name: str, value: Any, allowed: Collection[Any]) -> Any:
    """One of ``allowed``."""
    if value not in allowed:
        raise InputError(f"{name}={value!r} is not one of {tuple(allowed)}")
    return value


def flag(name: str, value: Any) -> bool:
    """True or False (numpy booleans too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def rows(method: str, passes: DataPasses | None, groups: Sequence[Hashable]) -> DataPasses:
    """The ``passes`` of a method that reads the rows at every iteration: given, and over the
    moments' ``groups`` in their order."""
    if passes is None:
        raise InputError(
            f"method {method!r} reads the rows at every iteration: pass passes= (e.g. "
            "fairpca_dist.engine.passes.table_passes(data, moments, ...)), or fit with FairPCA or fit_table"
        )
    if tuple(passes.groups) != tuple(groups):
        raise InputError(f"passes are over groups {tuple(passes.groups)}, the moments over {tuple(groups)}")
    return passes
