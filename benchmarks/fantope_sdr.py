"""The semidefinite relaxation of max-min variance fair PCA, solved by cvxpy (the baseline of
Babu et al. §5 and the reference for ``mm``'s certificate), shared by the MM benchmarks:

    maximise t  s.t.  tr(R_k P) ≥ t for every group k,  0 ⪯ P ⪯ I,  tr P = r,

on R_k / ρ with ρ = max_k ‖R_k‖₂ (so the solver sees O(1) numbers), value reported in the
units of R_k.
"""

from __future__ import annotations

import time

import numpy as np


def solve_fantope_sdr(matrices: np.ndarray, r: int, *, solver: str = "CLARABEL", eps: float | None = None) -> dict:
    """Build and solve the SDR. Returns ``value``, ``seconds`` (build + solve wall time),
    ``solver_seconds`` (the solver's own), ``rank`` (eigenvalues of P above 1e-4), ``status``.
    ``eps`` sets SCS's ``eps_abs`` and ``eps_rel``."""
    import cvxpy as cp

    rho = max(float(np.linalg.eigvalsh(m)[-1]) for m in matrices)
    p = matrices.shape[1]
    started = time.perf_counter()
    proj = cp.Variable((p, p), symmetric=True)
    level = cp.Variable()
    constraints = [proj >> 0, np.eye(p) - proj >> 0, cp.trace(proj) == r]
    constraints += [cp.trace((m / rho) @ proj) >= level for m in matrices]
    problem = cp.Problem(cp.Maximize(level), constraints)
    problem.solve(solver=solver, **({} if eps is None else {"eps_abs": eps, "eps_rel": eps}))
    seconds = time.perf_counter() - started
    eig = np.linalg.eigvalsh((proj.value + proj.value.T) / 2.0)
    return {
        "value": float(problem.value) * rho,
        "seconds": seconds,
        "solver_seconds": float(problem.solver_stats.solve_time or np.nan),
        "rank": int(np.sum(eig > 1e-4)),
        "status": problem.status,
    }
