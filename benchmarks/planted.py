"""The synthetic two-group table with a planted fair subspace that the FNPM benchmarks fit
(``bench_fnpm.py``, ``bench_fnpm_wide.py``), and the subspace error its sample size allows.

With F (p × 3), u and W (p × 2) orthonormal together (a random draw), every row is

    x = F a + 0.3 e   (a ~ N(0, diag(9, 7, 5)), e ~ N(0, I_p)),  plus, in group g1 (40 % of rows),
    2.5 u + W b,   b ~ N(0, diag(16, 12)):

the groups differ in mean along u and in covariance along W, and the W directions carry more
variance than F's weakest one, so plain PCA (top 3 of Σ: 9, 7 and 0.4 · 16 = 6.4) takes W's first
direction instead of F's third, while ``fnpm`` (``constraint="all"``, m = 2, r = 3) must find F:
the *planted fair subspace*.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fairpca_dist.solvers.stiefel import random_orthonormal

FAIR_VARIANCES = (9.0, 7.0, 5.0)
UNFAIR_VARIANCES = (16.0, 12.0)  # in group g1 only
NOISE = 0.3  # standard deviation of the isotropic noise
SHIFT = 2.5  # the mean difference, along u
SECOND_SHARE = 0.4  # of the rows in group g1
N_UNFAIR, R = len(UNFAIR_VARIANCES), len(FAIR_VARIANCES)


def planted(p: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """F (p × 3), u (p,), W (p × 2), orthonormal together."""
    basis = random_orthonormal(np.random.default_rng(seed), p, 6)
    return basis[:, :3], basis[:, 3], basis[:, 4:]


def write_table(
    folder: Path, rows: int, p: int, rows_per_file: int, seed: int, row_group_rows: int | None = None
) -> None:
    """``rows`` rows of the planted model in Parquet files of ``rows_per_file`` rows
    (``part-NNNN.parquet``, columns ``f0 … f{p-1}`` and ``group``; row groups of
    ``row_group_rows``, default one per file), one file in memory at a time."""
    fair, u, w = planted(p, seed)
    names = [f"f{j}" for j in range(p)]
    for index, start in enumerate(range(0, rows, rows_per_file)):
        n = min(rows_per_file, rows - start)
        rng = np.random.default_rng([seed, index])
        second = rng.random(n) < SECOND_SHARE
        x = (rng.standard_normal((n, 3)) * np.sqrt(FAIR_VARIANCES)) @ fair.T + NOISE * rng.standard_normal((n, p))
        unfair = rng.standard_normal((int(second.sum()), 2)) * np.sqrt(UNFAIR_VARIANCES)
        x[second] += SHIFT * u + unfair @ w.T
        x = np.asfortranarray(x)  # contiguous columns: pyarrow takes each without a strided copy
        columns = [pa.array(x[:, j]) for j in range(p)] + [pa.array(np.where(second, "g1", "g0"))]
        pq.write_table(
            pa.Table.from_arrays(columns, names=[*names, "group"]),
            folder / f"part-{index:04d}.parquet",
            row_group_size=row_group_rows,
        )


def expected_error(rows: int, p: int) -> dict[str, float]:
    """The sine of the largest principal angle between F and the fnpm subspace that ``rows``
    rows allow, to first order in 1/n (n = ``rows``, σ² = 0.09 the noise variance):

    - *noise*: each sample eigenvector of a spike of variance ℓ above noise σ² leans out of F
      by sin² ≈ (p − 6)/n · σ² (ℓ + σ²) / ℓ² (first-order perturbation, the sum over the p − 6 noise
      directions of σ² (ℓ + σ²) / (n ℓ²); the spiked-covariance limit of Paul 2007 to first order
      in p/n); the weakest direction, ℓ = 5, leans most;
    - *tilt of N*: the fitted V is orthogonal to the estimated unfair directions, which lean into F
      by sampling: the mean difference by Σ_i ℓ_i (1/n₀ + 1/n₁) / ‖f‖² (its F part over its
      length), Q's eigenvectors (16 and 12, from group g1's rows) by Σ_i ℓ_i / n₁ · Σ_j 1/λ_j.

    ``low`` is the noise term alone, ``high`` adds both tilts in full (they spread over the
    three directions of F, so the largest angle takes part of them)."""
    n0, n1 = (1 - SECOND_SHARE) * rows, SECOND_SHARE * rows
    noise_var, weakest, fair_total = NOISE**2, min(FAIR_VARIANCES), sum(FAIR_VARIANCES)
    leaning = (p - 6) / rows * noise_var * (weakest + noise_var) / weakest**2
    mean_gap = SHIFT**2 + p * noise_var * (1 / n0 + 1 / n1)  # ‖f̂‖², noise included
    mean_tilt = fair_total * (1 / n0 + 1 / n1) / mean_gap
    covariance_tilt = fair_total / n1 * sum(1 / v for v in UNFAIR_VARIANCES)
    return {"low": math.sqrt(leaning), "high": math.sqrt(leaning + mean_tilt + covariance_tilt)}
