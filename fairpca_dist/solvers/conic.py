"""cvxpy's conic solvers as the solvers call them: one tolerance under each solver's own option
names, and cvxpy's warnings and errors turned into the library's.

cvxpy warns "Solution may be inaccurate" when a solver stops at reduced accuracy, with advice
(``verbose=True``, other settings) a user of this library cannot act on. The callers judge the
returned status, and where they have one their certificate, and warn in their own words. A
solver that stops without a solution (cvxpy's status ``solver_error``: Clarabel's
``NumericalError``/``InsufficientProgress``, SCS's ``Failed``/``Indeterminate``) raises a
:class:`~fairpca_dist.exceptions.SolverError` that says so, without cvxpy's advice.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from fairpca_dist.exceptions import SolverError
from fairpca_dist.extras import require

__all__ = ["tolerance_settings", "solve"]


def tolerance_settings(name: str, tolerance: float | None) -> dict[str, float]:
    """``tolerance`` as SCS's ``eps_abs``/``eps_rel`` or Clarabel's gap and feasibility
    tolerances; ``{}`` (the solver's defaults) for None."""
    if tolerance is None:
        return {}
    keys = ("eps_abs", "eps_rel") if name == "SCS" else ("tol_gap_abs", "tol_gap_rel", "tol_feas")
    return dict.fromkeys(keys, tolerance)


def solve(problem: Any, name: str, settings: Mapping[str, float], *, what: str) -> str:
    """``problem.solve(solver=name, **settings)``; returns ``problem.status``. cvxpy's
    inaccuracy warning is silenced (see the module docstring) and its ``SolverError`` becomes a
    :class:`~fairpca_dist.exceptions.SolverError` naming ``what``."""
    cp = require("cvxpy", extra="conic", feature=f"the conic solver {name}")

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
            problem.solve(solver=name, **settings)
    except cp.error.SolverError as error:
        raise SolverError(f"{what} {name} failed: {_reason(str(error), name)}") from error
    return str(problem.status)


def _reason(text: str, name: str) -> str:
    """cvxpy's error in words a user of the library can act on: its "Solver 'X' failed. Try
    another solver, or solve with verbose=True …" names no reason (the solver's status is not
    passed on); other errors (a solver not installed) are kept."""
    if text.startswith(f"Solver '{name}' failed."):
        return (
            "it stopped without a solution (cvxpy's status 'solver_error': a numerical failure or too little progress)"
        )
    return text
