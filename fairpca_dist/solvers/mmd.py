"""MMD-constrained fair PCA (method ``"mmd"``): Lee, Kim, Olfat, Hasegawa-Johnson & Yoo,
"Fast and Efficient MMD-based Fair PCA via Optimization over Stiefel Manifold" (AAAI 2022;
spec seed-004.md).

The problem (the paper's Eq. 8, §5; Definition 8)::

    minimise over V ∈ St(p, r)   f(V) = −tr(VᵀΣV) / tr Σ
    subject to                   h_ab(V) = MMD²(projected group a, projected group b) ≤ τ

Σ is the pooled covariance about the global mean; f is normalised by tr Σ as in the authors'
code (the paper's f is unnormalised: this changes the scale of ρ and of the inner tolerances ε by
tr Σ, spec E6). h is the biased V-statistic of the chosen kernel (:mod:`fairpca_dist.engine.kernels`).
With k > 2 groups every pair a < b is constrained (a documented generalisation: the paper has
two groups); the penalty is ρ Σ_{a<b} h_ab and "feasible" means max_{a<b} h_ab ≤ τ.

Algorithm (the paper's Algorithm 1, REPMS with the plain penalty: h ≥ 0 and smooth, so no
smoothing; spec §0.1, §2.2). For k = 0, 1, …, ``max_iter``:

1. V_{k+1} ≈ argmin f + ρ_k Σ h_ab by Riemannian L-BFGS from V_k
   (:func:`~fairpca_dist.solvers.stiefel.minimize_lbfgs`: the paper used ROPTLIB's cautious
   RBFGS; ours is its limited-memory form), stopping at ‖grad‖ ≤ ε_k or ``max_inner`` steps;
2. return V_{k+1} ("proper" termination, status ``"converged"``) when ‖V_{k+1} − V_k‖_F ≤
   ``step_tol``, ε_k ≤ ε_min and max h ≤ τ: the paper's rule, which "forces the algorithm to
   continue … until the desired level of fairness is achieved";
3. ε_{k+1} = max(ε_min, θ_ε ε_k), θ_ε = (ε_min/ε_0)^{1/5}; when max h > τ, ρ_{k+1} = θ_ρ ρ_k,
   clamped at ρ_max (``rho_update="paper"``), or, as the authors' code does, not clamped and the
   run stops once ρ > ρ_max (``rho_update="code"``).

When PCA already meets τ it is the answer (the unconstrained maximum of f is feasible), and it
is returned without the loop (``feasible_pca=True``, default). The paper's loop would not return
it: ρ_0 = 1/Σ h(V_pca) is then large and the penalised minimiser gives up variance for nothing
(the paper's Synthetic #1, 20,000 rows per group, quadratic kernel, τ = 0.01: 0.684 of the
variance kept instead of PCA's 0.970, at an MMD² of 1.5e-4 where 6.5e-4 was allowed).
``feasible_pca=False`` runs the paper's loop regardless.

The loop also ends when an outer iteration leaves everything as it was (no inner step, ρ at
ρ_max, ε at ε_min): every further iteration would repeat it (the paper's loop would run on to
``max_iter``; on COMPAS with d = 10 that is ~60 identical iterations).

A run that ends without meeting τ is what the paper calls an improper termination: status
``"constraint_unmet"`` and a :class:`~fairpca_dist.exceptions.ConvergenceWarning`, the last
iterate returned (as the code does). One that meets τ but not the step test has status
``"max_iter"``.

Defaults not in the paper are the code's (spec §2.5, §2.6): ρ_0 = 1 / Σ h_ab(V_pca); the start
``"aux-mmd"``: the best of 11 random orthonormal matrices by explained variance, then
minimising Σ h_ab alone (Eq. 10). ``"pca"`` and ``"random"`` starts, or an array, are offered.

Kernels and estimators (``kernel``, ``estimator``):

* ``"rbf"`` (the paper's): bandwidth σ from the median heuristic on the rows projected by PCA
  (``bandwidth="code"``: σ = √(median squared distance / 2), the authors' code; ``"paper"``:
  the median distance; spec E3), on a stratified subsample of at most ``bandwidth_rows`` rows
  per group (the code uses every row: the median of N² distances is not additive), fixed for the
  run; or ``sigma`` given. It needs the rows (``passes``):

  - ``"exact"``: every pair of rows, in kernel blocks of ``block_rows`` (memory O(block²),
    never N²); per evaluation one pass projects the rows, the blocks run on the driver in r
    dimensions, and one pass forms Zᵀ S. O(N²r) work: realistic to N ≈ 10⁵;
  - ``"rff"``: ``n_random_features`` random Fourier features fixed for the run (a seed from
    ``random_state``); value and gradient from per-group sums, one pass per evaluation, O(N);
  - ``"sample"``: a fixed stratified subsample of at most ``sample_rows`` rows per group, held
    in memory, exact on it.

  Large tables (``rff_solve``; the sample path). A fit takes hundreds to thousands of
  evaluations (578–5445 on Adult), so with one pass per evaluation a table of 10⁷ rows is out of
  reach. ``rff_solve="sample"`` keeps the algorithm above but solves each inner sub-problem
  (step 1, and the ``"aux-mmd"`` start) on an in-memory stratified sample of at most
  ``rff_sample_rows`` rows per group (drawn once: two passes on a table), with the same random
  features, and evaluates h on every row exactly where the outer loop decides: at PCA (ρ_0 and
  ``feasible_pca``) and at the end of each outer iteration (ρ's update, the termination test).
  Those are value-only passes (the cosine sums: no sines, no p × D products). So ρ grows until τ
  holds on ALL rows by the estimator the method uses, a ``"converged"`` status certifies max h ≤
  τ there, and the pass count is 2 + 1 + the outer iterations (10 on the 10M × 20 benchmark,
  ``benchmarks/results/mmd_sample.md``; a fit on every row makes as many passes as evaluations).
  Only the inner minimisers carry sampling error: the fit maximises f − ρ h_S instead of f − ρ
  h, whose minimisers differ by O(ρ‖∇(h − h_S)‖) (h_S's null bias (1/m_a + 1/m_b)(1 − κ) is
  nearly constant in V and moves nothing); the result differs from the fit on every row by that,
  not in what it certifies: in the tests the explained variance is within 6 % of that fit's
  (0.4–4.4 % over three seeds, 2,000 rows per group of 12,000), either side, as the nonconvex
  penalty loop may end at another local solution. Correcting the sample's h to match h on every
  row in value and gradient at each outer iterate (h_S + [h − h_S](V_k) + ⟨∇(h − h_S)(V_k), V −
  V_k⟩, a DANE-style correction) was tried and diverges: at large ρ the linear term of the
  sampling noise dominates f and pulls V across the manifold (40,000 rows × 20, 2,000 per group,
  D = 100: steps ‖ΔV‖ ≈ 2 at every outer iteration, ρ to ρ_max, τ never met), so the full passes
  decide and do not steer. σ (when not given) comes from a subsample of the sample, drawn in
  memory (two passes saved). ``"full"`` is the paper's algorithm on every row (one pass per
  evaluation; what the comparisons with the paper use); ``"auto"`` (default) takes the sample
  path when the table is large: more than :data:`LARGE_TABLE_FACTOR` (2) times the rows the
  sample would hold (Σ_g min(n_g, ``rff_sample_rows``); with two groups of 20,000 rows or more:
  above 80,000 rows), where a sample evaluation costs at most half a pass. The sample holds k ×
  ``rff_sample_rows`` × p floats in memory (3.2 MB per group at p = 20; lower it for very wide
  tables). ``certificate`` then holds ``sample_rows`` (the sample's size),
  ``n_sample_evaluations``, and for every RBF fit ``n_passes`` (passes over the rows, the
  samples' included: two per sample on a table, one with
  :class:`~fairpca_dist.engine.datapasses.ArrayPasses`), ``mmd2`` (h on every row at the
  solution) and ``constraint_met`` (1.0 when it is ≤ τ).

* ``"linear"`` and ``"quadratic"`` (k(u, v) = (uᵀv + ``offset``)²): exact from the group moments,
  no rows read. They compare only the first two moments (the paper's Synthetic #1 defeats them).

The RBF estimator's null bias (spec §1.3, E2): for two samples of one distribution,
E h = (1/m + 1/n)(1 − κ) with κ the mean kernel value between distinct rows. A τ below that floor
(computed at the PCA projection on the bandwidth subsample, ``certificate["null_bias_floor"]``)
can only be met by collapsing the projected spread against the fixed σ, so a
:class:`~fairpca_dist.exceptions.ModelWarning` names both numbers.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fairpca_dist.engine.datapasses import DataPasses
from fairpca_dist.engine.kernels import (
    DEFAULT_BLOCK_ROWS,
    PRECISIONS,
    RandomFeatures,
    median_bandwidth,
    moment_mmd2,
    null_bias,
    pairwise_rbf,
    pairwise_rff,
    rbf_blocks,
)
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import ConvergenceWarning, InputError, ModelWarning
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import minimize_lbfgs, qr_retraction, random_orthonormal, top_eigenvectors

__all__ = ["KERNELS", "ESTIMATORS", "STARTS", "RHO_UPDATES", "RFF_SOLVES", "solve", "rows_needed", "sample_solve"]

KERNELS = ("rbf", "linear", "quadratic")
ESTIMATORS = ("exact", "rff", "sample")
STARTS = ("aux-mmd", "pca", "random")
RHO_UPDATES = ("paper", "code")
BANDWIDTHS = ("code", "paper")
RFF_SOLVES = ("auto", "sample", "full")
LARGE_TABLE_FACTOR = 2  # "auto": the sample path when the table holds more than this × the sample's rows
DEFAULT_RFF_SAMPLE_ROWS = 20_000
_AUX_CANDIDATES = 11  # the code's start: 1 + 10 random orthonormal matrices


def rows_needed(options: dict) -> bool:
    """Whether a fit with these options reads the rows (the RBF kernel does; the others not)."""
    return options.get("kernel", "rbf") == "rbf"


def criterion_key(options: dict) -> str:
    """The criterion a fit with these options bounds (:data:`fairpca_dist.assessment.scoring.CRITERIA`):
    the RBF-kernel MMD² for the RBF kernel; for the linear and quadratic kernels the linear MMD²
    (the quadratic kernel's MMD² adds the second moments to that mean gap)."""
    return "rbf_mmd2" if rows_needed(options) else "mmd2_linear"


Evaluation = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
Values = Callable[[np.ndarray], np.ndarray]


@dataclass
class _Constraint:
    """h_ab(V) for every pair of groups and their gradients (n_pairs, p, r), counting the
    evaluations. The last one is remembered: the outer loop asks again at the point the inner
    solver ended on, which for the RBF kernel would cost another pass over the rows."""

    evaluate: Evaluation
    n_evaluations: int = 0
    _last: tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None = None

    def __call__(self, components: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._last is not None and np.array_equal(self._last[0], components):
            return self._last[1]
        self.n_evaluations += 1
        result = self.evaluate(components)
        self._last = (components.copy(), result)
        return result


def sample_solve(options: dict, moments: GroupMoments) -> bool:
    """Whether a fit with these options solves its sub-problems on a sample (module docstring,
    "Large tables"): ``rff_solve="sample"``, or ``"auto"`` (the default) with the RBF kernel, the
    ``"rff"`` estimator and a large table, one holding more than :data:`LARGE_TABLE_FACTOR` times
    the rows of the sample (Σ_g min(n_g, ``rff_sample_rows``)). :class:`InputError` for
    ``rff_solve="sample"`` with another kernel or estimator."""
    mode = options.get("rff_solve", "auto")
    rff = options.get("kernel", "rbf") == "rbf" and options.get("estimator", "exact") == "rff"
    if mode == "sample" and not rff:
        raise InputError("rff_solve='sample' needs kernel='rbf' and estimator='rff'")
    if mode != "auto" or not rff:
        return mode == "sample"
    sampled = np.minimum(moments.count, options.get("rff_sample_rows", DEFAULT_RFF_SAMPLE_ROWS)).sum()
    return bool(moments.count.sum() > LARGE_TABLE_FACTOR * sampled)


@dataclass
class _Check:
    """h_ab(V) for every pair where the outer loop tests it (values only), counting the tests."""

    values: Values
    n_evaluations: int = 0

    def __call__(self, components: np.ndarray) -> np.ndarray:
        self.n_evaluations += 1
        return self.values(components)


def _moment_constraint(moments: GroupMoments, pairs: list[tuple[int, int]], kernel: str, offset: float) -> Evaluation:
    means = moments.mean_gaps()  # rows centred at the global mean, as the code does
    second = moments.covariance("global")  # uncentred second moments of the centred rows

    def evaluate(components: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts = [moment_mmd2(means, second, components, pair, kernel=kernel, offset=offset) for pair in pairs]
        return np.array([v for v, _ in parts]), np.stack([g for _, g in parts])

    return evaluate


def _exact_constraint(
    passes: DataPasses, origin: np.ndarray, pairs: list[tuple[int, int]], sigma: float, block_rows: int
) -> Evaluation:
    def evaluate(components: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, s = pairwise_rbf(*passes.projected(components, origin), pairs, sigma, block_rows=block_rows)
        back = passes.backprojected(_gradient(s), origin)  # one pass for every pair
        r = components.shape[1]
        return values, -2.0 / sigma**2 * back.reshape(back.shape[0], len(pairs), r).transpose(1, 0, 2)

    return evaluate


def _rff_constraint(
    passes: DataPasses, origin: np.ndarray, pairs: list[tuple[int, int]], features: RandomFeatures
) -> Evaluation:
    def evaluate(components: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, gradients = pairwise_rff(passes.rff_sums(components, origin, features), pairs, features)
        return values, _gradient(gradients)

    return evaluate


def _rff_values(
    passes: DataPasses, origin: np.ndarray, pairs: list[tuple[int, int]], features: RandomFeatures
) -> Values:
    """h_ab(V) alone (the cosine sums: no sines, no products), one pass."""

    def values(components: np.ndarray) -> np.ndarray:
        sums = passes.rff_sums_many([(components, features)], origin, gradient=False)[0]
        return pairwise_rff(sums, pairs, features)[0]

    return values


def _gradient(array: np.ndarray | None) -> np.ndarray:
    """The gradient part of a kernel evaluation asked with its gradient (never None then)."""
    if array is None:
        raise ValueError("a kernel evaluation asked with its gradient returned none")
    return array


@dataclass
class _Log:
    """Per outer iteration: f, max h, ρ, ε, ‖V_{k+1} − V_k‖_F, inner steps."""

    objective: list[float] = field(default_factory=list)
    mmd2: list[float] = field(default_factory=list)
    rho: list[float] = field(default_factory=list)
    eps: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)
    inner: list[int] = field(default_factory=list)

    def add(self, objective: float, mmd2: float, rho: float, eps: float, step: float, inner: int) -> None:
        for name, value in zip(
            ("objective", "mmd2", "rho", "eps", "step", "inner"), (objective, mmd2, rho, eps, step, inner), strict=True
        ):
            getattr(self, name).append(value)


def _check_options(
    tau: float,
    kernel: str,
    estimator: str,
    start: object,
    rho_update: str,
    bandwidth: str,
    rff_precision: str,
    rff_solve: str,
    feasible_pca: object,
    numbers: dict[str, tuple[float, bool]],
    integers: dict[str, int],
) -> None:
    checks.number("tau", tau, strict=True)
    checks.choice("kernel", kernel, KERNELS)
    checks.choice("estimator", estimator, ESTIMATORS)
    checks.choice("rho_update", rho_update, RHO_UPDATES)
    checks.choice("bandwidth", bandwidth, BANDWIDTHS)
    checks.choice("rff_precision", rff_precision, PRECISIONS)
    checks.choice("rff_solve", rff_solve, RFF_SOLVES)
    if not isinstance(start, np.ndarray):
        checks.choice("start", start, STARTS)
    checks.flag("feasible_pca", feasible_pca)
    for name, (value, strict) in numbers.items():
        checks.number(name, value, strict=strict)
    for name, value in integers.items():
        checks.integer(name, value)


def _start(
    start: str | np.ndarray,
    pca: np.ndarray,
    total: np.ndarray,
    penalty: Evaluation,
    rng: np.random.Generator,
    max_inner: int,
    eps_min: float,
) -> np.ndarray:
    p, r = pca.shape
    if isinstance(start, np.ndarray):
        if start.shape != (p, r) or not np.isfinite(start).all():
            raise InputError(f"start must be a finite ({p}, {r}) array, got shape {start.shape}")
        return qr_retraction(start)
    if start == "pca":
        return pca
    candidates = [random_orthonormal(rng, p, r) for _ in range(_AUX_CANDIDATES)]
    best = max(candidates, key=lambda v: float(np.sum(v * (total @ v))))
    if start == "random":
        return candidates[0]

    def aux(v: np.ndarray) -> tuple[float, np.ndarray]:  # Eq. 10: min Σ h_ab alone
        values, gradients = penalty(v)
        return float(values.sum()), gradients.sum(axis=0)

    return minimize_lbfgs(aux, best, gradient_tol=eps_min, max_iter=max_inner).point


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    passes: DataPasses | None = None,
    tau: float = 1e-3,
    kernel: str = "rbf",
    estimator: str = "exact",
    sigma: float | None = None,
    bandwidth: str = "code",
    bandwidth_rows: int = 2000,
    n_random_features: int = 1000,
    rff_precision: str = "single",
    rff_solve: str = "auto",
    rff_sample_rows: int = DEFAULT_RFF_SAMPLE_ROWS,
    sample_rows: int = 2000,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    offset: float = 1.0,
    start: str | np.ndarray = "aux-mmd",
    rho0: float | None = None,
    rho_factor: float = 2.0,
    rho_max: float = 1e10,
    rho_update: str = "paper",
    eps0: float = 1e-1,
    eps_min: float = 1e-6,
    step_tol: float = 1e-6,
    max_iter: int = 100,
    max_inner: int = 300,
    feasible_pca: bool = True,
) -> FairProjection:
    """MMD-constrained fair PCA by REPMS (module docstring; Lee et al. 2022, Algorithm 1).

    Parameters
    ----------
    passes : DataPasses
        The rows, for ``kernel="rbf"`` (read at every evaluation, or sampled once).
    tau : float
        τ > 0: the largest MMD² allowed between any two projected groups.
    kernel : {"rbf", "linear", "quadratic"}
    estimator : {"exact", "rff", "sample"}
        How the RBF MMD² is computed (module docstring); reported in ``options``.
    sigma : float, optional
        RBF bandwidth; by default the median heuristic (``bandwidth``, ``bandwidth_rows``).
    n_random_features, sample_rows, block_rows : int
        D of ``"rff"``; rows per group of ``"sample"``; rows per kernel block of ``"exact"``.
    rff_precision : {"single", "double"}
        The random features' cos and sin in float32 (default: about a third of the time of a
        float64 pass, whose trigonometry is scalar; h moves by ~1e-8 relative, far below the
        estimator's O(1/√D) error) or in float64 (:class:`~fairpca_dist.engine.kernels.RandomFeatures`).
    rff_solve : {"auto", "sample", "full"}
        With ``estimator="rff"``: the inner sub-problems on an in-memory sample of at most
        ``rff_sample_rows`` rows per group, h on every row where the outer loop decides
        (``"sample"``), one pass per evaluation (``"full"``, the paper's), or ``"sample"`` on a
        large table (``"auto"``, :func:`sample_solve`; module docstring, "Large tables").
    rff_sample_rows : int
        Rows per group of that sample.
    offset : float
        c of the quadratic kernel (uᵀv + c)².
    start : {"aux-mmd", "pca", "random"} or ndarray of shape (n_features, n_components)
    rho0 : float, optional
        ρ_0; default 1 / Σ h_ab(V_pca) (the code's).
    rho_factor, rho_max, rho_update : θ_ρ, ρ_max, and "paper" (clamp) or "code" (stop above).
    eps0, eps_min : inner gradient tolerances ε_0 and ε_min (θ_ε = (ε_min/ε_0)^{1/5}).
    step_tol : d_min, the largest ‖V_{k+1} − V_k‖_F of a proper termination.
    max_iter, max_inner : K outer iterations (the loop runs k = 0..K), L-BFGS steps per sub-problem.
    feasible_pca : bool
        Return PCA when it meets τ (module docstring); False runs the paper's loop regardless.

    Returns
    -------
    FairProjection
        ``certificate``: ``mmd2`` (max over pairs at the solution), ``tau``, ``explained_variance``
        (−f), ``constraint_met`` (1.0 when ``mmd2`` ≤ τ), ``rho`` (final), ``sigma`` and
        ``null_bias_floor`` (RBF), ``n_evaluations`` of the constraint on every row, ``n_passes``
        over the rows (RBF), and on the sample path ``sample_rows`` and ``n_sample_evaluations``;
        ``details["log"]``: f, max h (on every row), ρ, ε, step and inner steps per outer iteration.
    """
    numbers = {
        "rho_factor": (rho_factor, True),
        "rho_max": (rho_max, True),
        "eps0": (eps0, True),
        "eps_min": (eps_min, True),
        "step_tol": (step_tol, False),
        "offset": (offset, False),
    }
    if sigma is not None:
        numbers["sigma"] = (sigma, True)
    if rho0 is not None:
        numbers["rho0"] = (rho0, True)
    _check_options(
        tau,
        kernel,
        estimator,
        start,
        rho_update,
        bandwidth,
        rff_precision,
        rff_solve,
        feasible_pca,
        numbers,
        {
            "bandwidth_rows": bandwidth_rows,
            "n_random_features": n_random_features,
            "sample_rows": sample_rows,
            "rff_sample_rows": rff_sample_rows,
            "block_rows": block_rows,
            "max_iter": max_iter,
            "max_inner": max_inner,
        },
    )
    if moments.n_groups < 2:
        raise InputError(f"mmd compares groups: got {moments.n_groups} group ({moments.groups})")
    if kernel == "rbf" and passes is None:
        raise InputError(
            "kernel='rbf' reads the rows: pass passes= (or use kernel='linear' / 'quadratic', "
            "which need only the moments)"
        )
    on_sample = sample_solve(
        {"rff_solve": rff_solve, "kernel": kernel, "estimator": estimator, "rff_sample_rows": rff_sample_rows}, moments
    )
    first_pass = 0 if passes is None else passes.n_passes

    def options_used() -> dict:  # every option as given (a refit, e.g. the report's curves, repeats it)
        return {
            "tau": tau,
            "kernel": kernel,
            "estimator": estimator,
            "sigma": sigma,
            "bandwidth": bandwidth,
            "bandwidth_rows": bandwidth_rows,
            "n_random_features": n_random_features,
            "rff_precision": rff_precision,
            "rff_solve": rff_solve,
            "rff_sample_rows": rff_sample_rows,
            "sample_rows": sample_rows,
            "block_rows": block_rows,
            "offset": offset,
            "rho0": rho0,
            "rho_factor": rho_factor,
            "rho_max": rho_max,
            "rho_update": rho_update,
            "eps0": eps0,
            "eps_min": eps_min,
            "step_tol": step_tol,
            "max_iter": max_iter,
            "max_inner": max_inner,
            "feasible_pca": feasible_pca,
            **({"start": start} if isinstance(start, str) else {}),
        }

    rng = np.random.default_rng(random_state)
    total = moments.total_covariance()
    trace = float(np.trace(total))
    if not trace > 0:
        raise InputError("the rows have zero variance: there is nothing to project")
    _, pca = top_eigenvectors(total, n_components)
    pairs = list(itertools.combinations(range(moments.n_groups), 2))
    certificate: dict[str, float] = {"tau": float(tau)}

    values: Values | None = None
    if kernel == "rbf":
        assert passes is not None
        evaluate, values, found = _rbf_constraint(
            passes,
            moments,
            pca,
            pairs,
            rng,
            estimator=estimator,
            sigma=sigma,
            bandwidth=bandwidth,
            bandwidth_rows=bandwidth_rows,
            n_random_features=n_random_features,
            rff_precision=rff_precision,
            sample_rows=sample_rows,
            block_rows=block_rows,
            solve_rows=rff_sample_rows if on_sample else None,
        )
        certificate.update(found)
        if tau < found["null_bias_floor"]:
            warnings.warn(
                f"mmd: tau={tau:g} is below the estimator's null-bias floor "
                f"{found['null_bias_floor']:.3g} (the MMD² of two samples of one distribution "
                "of these sizes): it can only be met by collapsing the projected spread",
                ModelWarning,
                stacklevel=3,
            )
    else:
        evaluate = _moment_constraint(moments, pairs, kernel, offset)
    # the inner sub-problems minimise f + ρ Σ h over `penalty`: h on every row, or on the sample
    # (the sample path), where the outer loop's tests ask `check` for h on every row (values only)
    penalty = _Constraint(evaluate)
    check = _Check(lambda v: penalty(v)[0]) if values is None else _Check(values)

    def tally() -> dict[str, float]:  # what the fit cost: evaluations of h, and passes over the rows
        if values is None:
            counts = {"n_evaluations": float(penalty.n_evaluations)}
        else:
            counts = {"n_evaluations": float(check.n_evaluations), "n_sample_evaluations": float(penalty.n_evaluations)}
        if passes is not None:
            counts["n_passes"] = float(passes.n_passes - first_pass)
        return counts

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        sv = total @ v
        return -float(np.sum(v * sv)) / trace, -2.0 / trace * sv

    at_pca = check(pca)
    if rho0 is None:
        rho0 = 1.0 / float(at_pca.sum()) if at_pca.sum() > 0 else 1.0
    if feasible_pca and float(at_pca.max()) <= tau:
        log = _Log()
        log.add(objective(pca)[0], float(at_pca.max()), float(rho0), 0.0, 0.0, 0)
        return _result(
            moments,
            pca,
            n_components,
            center,
            "converged",
            log,
            certificate,
            tally(),
            float(rho0),
            options_used(),
            n_iter=0,
        )
    components = _start(start, pca, total, penalty, rng, max_inner, eps_min)
    theta_eps = (eps_min / eps0) ** (1.0 / 5.0) if eps_min < eps0 else 1.0
    rho, eps = float(rho0), float(eps0)
    log = _Log()
    status = "max_iter"

    def penalised(v: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = objective(v)
        h, dh = penalty(v)
        return value + rho * float(h.sum()), gradient + rho * dh.sum(axis=0)

    for _ in range(max_iter + 1):
        inner = minimize_lbfgs(penalised, components, gradient_tol=eps, max_iter=max_inner)
        step = float(np.linalg.norm(inner.point - components))
        components = inner.point
        worst = float(check(components).max())  # the sample path's one pass of the iteration
        log.add(objective(components)[0], worst, rho, eps, step, inner.n_iter)
        violated = worst > tau
        if step <= step_tol and eps <= eps_min * (1 + 1e-12) and not violated:
            status = "converged"
            break
        if rho_update == "code" and rho > rho_max:
            break
        next_eps = max(eps_min, theta_eps * eps)
        next_rho = (rho * rho_factor if rho_update == "code" else min(rho * rho_factor, rho_max)) if violated else rho
        if step == 0.0 and (next_eps, next_rho) == (eps, rho):
            break  # a fixed point of the loop (ρ at ρ_max, ε at ε_min, no inner step): it would repeat this iteration
        eps, rho = next_eps, next_rho
    if status != "converged" and log.mmd2[-1] > tau:
        status = "constraint_unmet"
        warnings.warn(
            f"mmd: ended without meeting tau={tau:g} (MMD² {log.mmd2[-1]:.3g} after {len(log.mmd2)} "
            f"outer iterations, rho {rho:.3g}): the paper's improper termination",
            ConvergenceWarning,
            stacklevel=3,
        )
    elif status == "max_iter":
        warnings.warn(
            f"mmd: stopped at max_iter={max_iter} before the step test (tau is met)", ConvergenceWarning, stacklevel=3
        )
    return _result(
        moments,
        components,
        n_components,
        center,
        status,
        log,
        certificate,
        tally(),
        rho,
        options_used(),
        n_iter=len(log.objective),
    )


def _result(
    moments: GroupMoments,
    components: np.ndarray,
    n_components: int,
    center: Center,
    status: str,
    log: _Log,
    certificate: dict[str, float],
    counts: dict[str, float],
    rho: float,
    options: dict,
    *,
    n_iter: int,
) -> FairProjection:
    certificate = {
        **certificate,
        "mmd2": log.mmd2[-1],
        "constraint_met": float(log.mmd2[-1] <= certificate["tau"]),
        "explained_variance": -log.objective[-1],
        "rho": rho,
        **counts,
    }
    return make_projection(
        moments,
        components,
        method="mmd",
        n_components=n_components,
        center=center,
        objective_history=log.objective,
        n_iter=n_iter,
        status=status,
        certificate=certificate,
        options=options,
        details={"log": log.__dict__},
    )


def _rbf_constraint(
    passes: DataPasses,
    moments: GroupMoments,
    pca: np.ndarray,
    pairs: list[tuple[int, int]],
    rng: np.random.Generator,
    *,
    estimator: str,
    sigma: float | None,
    bandwidth: str,
    bandwidth_rows: int,
    n_random_features: int,
    rff_precision: str,
    sample_rows: int,
    block_rows: int,
    solve_rows: int | None,
) -> tuple[Evaluation, Values | None, dict[str, float]]:
    """The RBF evaluation the options ask for, with σ (the median heuristic on a per-group
    sample at the PCA projection unless given) and the null-bias floor on that sample.

    With ``solve_rows`` (the sample path, rff only) the evaluation is on an in-memory sample of
    at most ``solve_rows`` rows per group (``found["sample_rows"]`` its size), and h's values
    on every row come second (the same random features); the sample is drawn with the seed the
    bandwidth sample would have had, and the bandwidth sample is
    then drawn from it in memory (a uniform subset of a uniform sample is a uniform sample: two
    passes saved). The random state is consumed as without it: with ``sigma`` given, both paths
    draw the same features."""
    origin = moments.global_mean
    seed = int(rng.integers(2**32))
    solve_sample = None if solve_rows is None else passes.sample(solve_rows, seed)
    sampled = passes.sample(bandwidth_rows, seed) if solve_sample is None else solve_sample.sample(bandwidth_rows, seed)
    if sigma is None:
        sigma = median_bandwidth(sampled.projected(pca, origin)[0], mode=bandwidth)
    found = {"sigma": float(sigma), "null_bias_floor": _null_bias_floor(sampled, pca, origin, sigma, moments, pairs)}
    if estimator == "exact":
        return _exact_constraint(passes, origin, pairs, sigma, block_rows), None, found
    if estimator == "sample":
        subset = passes.sample(sample_rows, int(rng.integers(2**32)))
        return _exact_constraint(subset, origin, pairs, sigma, block_rows), None, found
    features = RandomFeatures.draw(pca.shape[1], n_random_features, sigma, rng, precision=rff_precision)
    if solve_sample is None:
        return _rff_constraint(passes, origin, pairs, features), None, found
    found["sample_rows"] = float(solve_sample.x.shape[0])
    return _rff_constraint(solve_sample, origin, pairs, features), _rff_values(passes, origin, pairs, features), found


def _null_bias_floor(
    sampled: DataPasses,
    pca: np.ndarray,
    origin: np.ndarray,
    sigma: float,
    moments: GroupMoments,
    pairs: list[tuple[int, int]],
) -> float:
    """max over pairs of (1 − ū_a)/n_a + (1 − ū_b)/n_b (spec §1.3): ū_g the mean RBF kernel
    value between distinct rows of group g at the PCA projection, on the sample (kernel blocks:
    Σ_ij K_ij = wᵀKw with w = 1), n_g the group's full size."""
    projected, codes, _ = sampled.projected(pca, origin)
    offdiagonal = np.ones(moments.n_groups)
    for g in range(moments.n_groups):
        n = int(np.sum(codes == g))
        if n > 1:
            total, _ = rbf_blocks(projected[codes == g], np.ones(n), sigma)
            offdiagonal[g] = (total - n) / (n * (n - 1))
    sizes = moments.weight
    return max(null_bias((sizes[a], sizes[b]), (offdiagonal[a], offdiagonal[b])) for a, b in pairs)
