"""Vanilla PCA from group moments: the baseline every fairness report compares against."""

from __future__ import annotations

import numpy as np

from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import top_eigenvectors

__all__ = ["solve"]


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
) -> FairProjection:
    """Plain PCA (method ``"pca"``): maximise the variance of all rows pooled.

    Solves  max_V tr(Vᵀ Σ_tot V)  s.t. VᵀV = I_r,  with Σ_tot the covariance of all rows about
    the global mean (spec/seeds-000-001.md §A.2.6: the vanilla baseline of Samadi et al.'s
    figures). By Ky Fan's theorem V holds the top-r eigenvectors of Σ_tot; this is exactly
    what scikit-learn's ``PCA(svd_solver="covariance_eigh")`` computes, from moments instead
    of rows. ``center`` only selects which per-group moments the reported losses use;
    ``random_state`` is accepted for the common signature and unused (the solution is
    deterministic, signs fixed by :func:`~fairpca_dist.solvers.stiefel.fix_signs`).
    """
    eigenvalues, components = top_eigenvectors(moments.total_covariance(), n_components)
    return make_projection(
        moments,
        components,
        method="pca",
        n_components=n_components,
        center=center,
        objective_history=[float(eigenvalues.sum())],
        n_iter=1,
        status="closed_form",
    )
