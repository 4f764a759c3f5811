"""FNPM by block power iterations over the rows (method ``"fnpm-streaming"``): the solution of
:mod:`fairpca_dist.solvers.fnpm` without any p × p matrix (Lee, Cho, Yun & Yun, NeurIPS 2023:
the fair noisy power method; code HanseulJo/fair-streaming-pca, ``FairPCA.fit_streaming``).

What it computes is ``"fnpm"``'s: V = the top-r eigenvectors of Π Σ Π, Π = I − t N Nᵀ, N the
unfair subspace of the mean difference f = μ₁ − μ₀ and the m directions where Q = Σ₁ − Σ₀ is
largest in magnitude (see that module for the definitions and the public code's errors, which
are corrected here the same way). The group means come from the moments (k × p numbers); every
product with a covariance comes from the rows. Each iteration reads the rows once,
through :meth:`~fairpca_dist.engine.datapasses.DataPasses.scatter_products` (the one entry point
of every pass), at U = [W_t, f/‖f‖, V_t] (p × q, W_t of m + s columns, V_t of r + s):

    S_g U = Σ_{i∈g} w_i (x_i − μ_g)(x_i − μ_g)ᵀ U      (k × p × q numbers per partition),

from which, on the driver, Σ_g U = S_g U / (w_g − 1), Q U = Σ₁U − Σ₀U and
Σ U = (Σ_g S_g U + w_g δ_g δ_gᵀ U) / Σ_g w_g (δ_g = μ_g − μ). Then

1. *the unfair subspace*: the Ritz pairs (θ, W_t y) of Q on span W_t (eigh of W_tᵀ Q W_t), by
   decreasing |θ|; of the first m, those with |θ| above the rounding level (``"fnpm"``'s
   tolerance) are the covariance directions, and N_t = [W_t Y, g/‖g‖] with f orthogonalised
   against them as ``"fnpm"`` does. W_{t+1} = orth(Q W_t Y): a block power step on Q, which
   converges to the eigenvectors of largest |λ| (the code's ``jnp.linalg.qr(Q @ W)``);
2. *the PCA*: N_t lies in span [W_t, f], so Σ N_t = (Σ [W_t, f]) C with N_t = [W_t, f] C, and
   Π_t Σ Π_t V_t = Π_t (Σ V_t − t Σ N_t (N_tᵀ V_t)) needs no other pass. The Ritz pairs of
   Π_t Σ Π_t on span V_t give this pass's V (the top r) and, multiplied once more, the next
   block V_{t+1} = orth(Π_t Σ Π_t V_t Z) (with t = 1 projected by Π_t and orthonormalised again,
   so that V_{t+1} ⊥ N_t to rounding).

The s extra columns (``oversample``, default 5, clipped to the room there is) make the rates
|λ_{m+s+1}(Q)| / |λ_m(Q)| and λ_{r+s+1} / λ_r instead of the code's |λ_{m+1}| / |λ_m| and
λ_{r+1} / λ_r (on the tests' 8-feature table, |λ₃| / |λ₂| = 0.97: 400 passes left the code's
block 6·10⁻⁶ from the limit). The two power iterations run side by side: the PCA step uses the
current N_t, so a fit needs as many passes as the slower of the two, not their sum (the code
runs ``n_iter_unfair`` passes, then ``n_iter_pca``). Convergence is tested on the subspaces,
not on a count: the sine of the largest principal angle between consecutive results,
‖B − A(AᵀB)‖₂, for N and for V, both ≤ ``tol``. The iteration converges linearly, so a step of
size ``tol`` leaves the result within about tol · ρ / (1 − ρ) of the limit (ρ the slower rate);
where a rate is near 1 (nearly tied eigenvalues) the fit stops at ``max_iter`` with status
``"max_iter"``.

The result is the V of the last pass: its certificate (‖Vᵀf‖, ‖VᵀQV‖₂, the explained variance)
comes from that pass exactly, and V ⊥ N_{t−1} ∋ f (t = 1), so the projected mean gap is zero to
rounding from the second pass on. ``warm_start`` (p × r, e.g. a previous model's components on
the same features) replaces the random start of V; W always starts at random. Before the first
pass only f is known, so r ≤ p − 1 is checked then and r ≤ p − dim N after each pass. Memory:
k × p × q numbers per partition and on the driver; the iterations use only the counts, means and
diagonals of the moments (the group losses in the result are still computed from the moments
given).

On a wide table the moments keep only their diagonal (:attr:`GroupMoments.is_diagonal`: the
counts, means and diagonals are all the iterations use), and the group losses of the result,
which :func:`~fairpca_dist.solvers.result.make_projection` takes from Σ_g otherwise, come from the
rows too: each pass also multiplies, per group, a block B_g of r + s columns, a block power
iteration on Σ_g (about the model's centre) whose top-r Ritz values give β_g(r), and gives
tr(VᵀΣ_gV) at the pass's V; loss_g = β_g(r) − tr(VᵀΣ_gV) and err_g = tr Σ_g − tr(VᵀΣ_gV) (tr Σ_g
from the diagonals). V's test decides the status; the passes then go on (up to ``max_iter``) until
every β_g moves by at most ``tol`` (relative), ``details["best_settled"]`` says whether they did;
q grows by k(r + s) columns.

Where both run, the result is ``"fnpm"``'s subspace to the tolerance above
(tests/solvers/test_fnpm_streaming.py). The public code's streaming form differs from its own
offline one by 4–83° of subspace angle after its default 10 + 10 iterations on the tables of the
side-by-side run (tests/solvers/fixtures/fnpm_peer.json): few fixed iterations, blocks of
exactly m and r columns, and Q from second moments about the origin.
"""

from __future__ import annotations

import numpy as np

from fairpca_dist.assessment import metrics
from fairpca_dist.engine.datapasses import DataPasses
from fairpca_dist.engine.moments import Center, GroupMoments
from fairpca_dist.exceptions import InputError
from fairpca_dist.solvers import checks
from fairpca_dist.solvers.fnpm import (
    UnfairSubspace,
    certificate_of,
    check_problem,
    check_room,
    covariance_directions,
    details_of,
    mean_difference,
    mean_tolerance,
    unfair_subspace,
    zero_tolerance,
)
from fairpca_dist.solvers.result import FairProjection, make_projection
from fairpca_dist.solvers.stiefel import fix_signs, random_orthonormal

__all__ = ["solve", "subspace_change"]


def subspace_change(before: np.ndarray, after: np.ndarray) -> float:
    """sin of the largest principal angle between span(``before``) and span(``after``), both
    orthonormal p × d: ‖B − A(AᵀB)‖₂, O(p d²), no p × p projector; 1 when the dimensions differ."""
    if before.shape != after.shape:
        return 1.0
    if before.shape[1] == 0:
        return 0.0
    return float(np.linalg.norm(after - before @ (before.T @ after), ord=2))


def _orthonormal(block: np.ndarray) -> np.ndarray:
    """The Q factor of a p × d block with the signs of diag(R) made positive (a continuous map)."""
    q, r = np.linalg.qr(block)
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _start(warm_start: object, rng: np.random.Generator, n_features: int, n_components: int, width: int) -> np.ndarray:
    """V₀ (p × width): ``warm_start`` (p × r) and random columns after it, or all random."""
    if warm_start is None:
        return random_orthonormal(rng, n_features, width)
    start = np.asarray(warm_start, dtype=np.float64)
    if start.shape != (n_features, n_components) or not np.all(np.isfinite(start)):
        raise InputError(
            f"warm_start must be a finite (n_features, n_components) = ({n_features}, {n_components}) array, "
            f"got shape {start.shape}"
        )
    if np.linalg.matrix_rank(start) < n_components:
        raise InputError(f"warm_start has rank {np.linalg.matrix_rank(start)} < n_components={n_components}")
    return np.column_stack([start, rng.standard_normal((n_features, width - n_components))])


def _project_out(block: np.ndarray, basis: np.ndarray, tradeoff: float) -> np.ndarray:
    """Π B = B − t N (Nᵀ B)."""
    return block - tradeoff * basis @ (basis.T @ block)


def _ritz(block: np.ndarray, product: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rayleigh–Ritz on span(``block``) (orthonormal) given ``product`` = M·block for a symmetric M:
    the Ritz values and the rotations Y (block·Y are the Ritz vectors), by decreasing |value|."""
    values, rotations = np.linalg.eigh((block.T @ product + product.T @ block) / 2)
    order = np.argsort(-np.abs(values), kind="stable")
    return values[order], rotations[:, order]


def solve(
    moments: GroupMoments,
    n_components: int,
    *,
    passes: DataPasses | None = None,
    random_state: int | np.random.Generator | None = None,
    center: Center = "group",
    n_unfair: int = 2,
    constraint: str = "all",
    tradeoff: float = 1.0,
    tol: float = 1e-8,
    max_iter: int = 200,
    oversample: int = 5,
    warm_start: np.ndarray | None = None,
) -> FairProjection:
    """``"fnpm"``'s projection by block power iterations, one pass over the rows per iteration
    (module docstring).

    Parameters
    ----------
    passes : DataPasses
        The rows the moments came from (in the moments' units). Required.
    n_unfair : int
        m, the directions of Q = Σ₁ − Σ₀ (largest |eigenvalue|) in N; zero eigenvalues are left
        out (as ``"fnpm"``).
    constraint : {"all", "mean", "covariance"}
        What N holds: both, the mean difference only, or Q's directions only.
    tradeoff : float
        t ∈ [0, 1] in Π = I − t N Nᵀ: 1 projects N out, 0 is plain PCA.
    tol : float
        Stop when consecutive iterates of N and of V are within ``tol`` (sine of the largest
        principal angle).
    max_iter : int
        Passes at most (≥ 2).
    oversample : int
        s, extra columns of each block (m + s for Q, r + s for the PCA; clipped to the room
        there is): the rates become |λ_{m+s+1}| / |λ_m| and λ_{r+s+1} / λ_r. 0: the code's blocks.
    warm_start : ndarray of shape (n_features, n_components), optional
        A start for V (e.g. a previous fit's ``components``); random (``random_state``) otherwise.
    random_state
        Seeds the random starts of W (drawn first) and V.

    Returns
    -------
    FairProjection
        ``certificate``: ``"fnpm"``'s (``projected_mean_gap``, ``projected_covariance_gap``,
        ``explained_variance_ratio``, at the returned V, from the last pass) and ``passes``.
        ``objective_history``: tr(VᵀΣV) at each pass's V. ``details``: ``"fnpm"``'s, plus
        ``unfair_change`` and ``components_change`` per pass (the convergence test's values).
    """
    n_unfair, constraint, tradeoff, _ = check_problem(moments, "fnpm-streaming", n_unfair, constraint, tradeoff, False)
    tol = checks.number("tol", tol, strict=True)
    max_iter = checks.integer("max_iter", max_iter, minimum=2)
    oversample = checks.integer("oversample", oversample, minimum=0)
    passes = checks.rows("fnpm-streaming", passes, moments.groups)
    p, r = moments.n_features, n_components
    rng = np.random.default_rng(random_state)
    m = 0 if constraint == "mean" else min(n_unfair, p)
    difference = mean_difference(moments)
    tolerance, negligible = zero_tolerance(moments), mean_tolerance(moments)
    mean_unit, _ = unfair_subspace(np.zeros((p, 0)), _mean_or_none(difference, constraint), negligible=negligible)
    check_room(r, p, mean_unit.shape[1], constraint, tradeoff)  # N's dimension is known after the first pass
    directions = random_orthonormal(rng, p, m + min(oversample, p - m) if m else 0)
    room = p - min(p, m + mean_unit.shape[1]) if tradeoff == 1.0 else p  # N has at most m + 1 columns
    width = r + max(0, min(oversample, room - r))
    block_v = _orthonormal(_project_out(_start(warm_start, rng, p, r, width), mean_unit, tradeoff))
    per_group = _GroupSpectra.start(moments, center, rng, r, oversample) if moments.is_diagonal else None
    deviations = moments.means_about(moments.global_mean)
    divisor = (moments.weight - 1.0)[:, None, None]
    passes_before = passes.n_passes
    history: list[float] = []
    unfair_changes: list[float] = []
    components_changes: list[float] = []
    previous: tuple[np.ndarray, np.ndarray] | None = None
    status = "max_iter"
    for _ in range(max_iter):
        known = np.column_stack([directions, mean_unit])
        block = np.column_stack([known, block_v, *([] if per_group is None else per_group.blocks)])
        products = passes.scatter_products(block, moments.mean).b  # S_g U: (2, p, q), one pass
        at_block = slice(known.shape[1], known.shape[1] + block_v.shape[1])  # the columns of V_t
        weighted = moments.weight[:, None, None] * deviations[:, :, None] * (deviations @ block)[:, None, :]
        spread = (products + weighted).sum(axis=0) / moments.weight.sum()  # Σ U
        group_products = products / divisor  # Σ_g U
        # 1. the unfair subspace: Ritz pairs of Q on span W
        q_directions = group_products[1][:, : directions.shape[1]] - group_products[0][:, : directions.shape[1]]
        values, rotations = _ritz(directions, q_directions)
        kept, eigenvalues, zeros = covariance_directions(values, directions @ rotations, m, tolerance)
        basis, with_mean = unfair_subspace(kept, _mean_or_none(difference, constraint), negligible=negligible)
        check_room(r, p, basis.shape[1], constraint, tradeoff)
        # 2. the PCA: Ritz pairs of Π Σ Π on span V; N = known C lies in span [W, f], so Σ N = (Σ known) C
        coefficients = np.linalg.lstsq(known, basis, rcond=None)[0]
        overlap = basis.T @ block_v
        sigma_shrunk = spread[:, at_block] - tradeoff * (spread[:, : known.shape[1]] @ coefficients) @ overlap
        _, turn = _ritz(block_v, _project_out(sigma_shrunk, basis, tradeoff))  # ΠΣΠ ⪰ 0: |λ| order is λ order
        components = block_v @ turn[:, :r]
        at_components = spread[:, at_block] @ turn[:, :r]  # Σ V
        history.append(float(np.trace(components.T @ at_components)))
        certificate = certificate_of(
            components,
            difference,
            group_products[:, :, at_block] @ turn[:, :r],
            _total_trace(moments),
            history[-1],
        )
        unfair = UnfairSubspace(basis, eigenvalues, zeros, with_mean)
        unfair_changes.append(1.0 if previous is None else subspace_change(previous[0], basis))
        components_changes.append(1.0 if previous is None else subspace_change(previous[1], components))
        previous = (basis, components)
        spectra_settled = True
        if per_group is not None:
            at_v = products[:, :, at_block] @ turn[:, :r]  # S_g V
            spectra_settled = per_group.update(products[:, :, at_block.stop :], components, at_v, tol)
        # V's test decides the status, as from the p × p moments; on a wide table the passes go on,
        # up to max_iter, until the β_g of the group losses settle too (details["best_settled"])
        status = "converged" if unfair_changes[-1] <= tol and components_changes[-1] <= tol else "max_iter"
        if status == "converged" and spectra_settled:
            break
        # the next blocks: a power step on each, in Ritz order
        block_v = _orthonormal(_project_out(sigma_shrunk @ turn, basis, tradeoff))
        if tradeoff == 1.0:  # V ⊥ N to rounding
            block_v = _orthonormal(_project_out(block_v, basis, 1.0))
        if m:
            directions = _orthonormal(q_directions @ rotations)
    details = details_of(unfair)
    details.update(unfair_change=unfair_changes, components_change=components_changes)
    if per_group is not None:
        details.update(best_change=per_group.changes, best_settled=per_group.changes[-1] <= tol)
    return make_projection(
        moments,
        fix_signs(components),
        method="fnpm-streaming",
        n_components=n_components,
        center=center,
        objective_history=history,
        n_iter=len(history),
        status=status,
        certificate={**certificate, "passes": float(passes.n_passes - passes_before)},
        options={
            "n_unfair": n_unfair,
            "constraint": constraint,
            "tradeoff": tradeoff,
            "tol": tol,
            "max_iter": max_iter,
            "oversample": oversample,
            "warm_start": warm_start,
        },
        details=details,
        best=None if per_group is None else per_group.best,
        kept=None if per_group is None else per_group.kept,
    )


class _GroupSpectra:
    """What the group losses need when the moments keep only their diagonal (a wide table):
    per group g, a block power iteration on C_g = S_g + w_g d_g d_gᵀ (d_g = μ_g − c_g, the
    model's centre) in the same passes, whose top-r Ritz values give β_g(r) = Σ_{i≤r} λ_i(C_g)/w_g,
    and tr(VᵀC_gV)/w_g at each pass's V. Rayleigh–Ritz runs on span [B_g, V] (C_g V is in the
    pass too), so β̂_g ≥ tr(VᵀC_gV)/w_g: no loss below zero. Ritz values converge at the square of
    the blocks' rate, so the test is |Δβ_g| ≤ tol·β_g; each block has r + s columns (s =
    ``oversample``)."""

    def __init__(self, moments: GroupMoments, center: Center, blocks: list[np.ndarray], n_components: int) -> None:
        self.weight = moments.weight
        self.offsets = metrics.center_offsets(moments, center)
        self.blocks = blocks
        self.n_components = n_components
        self.best = np.full(moments.n_groups, np.nan)
        self.kept = np.full(moments.n_groups, np.nan)
        self.changes: list[float] = []

    @classmethod
    def start(
        cls, moments: GroupMoments, center: Center, rng: np.random.Generator, n_components: int, oversample: int
    ) -> _GroupSpectra:
        width = min(n_components + oversample, moments.n_features)
        blocks = [random_orthonormal(rng, moments.n_features, width) for _ in moments.groups]
        return cls(moments, center, blocks, n_components)

    def _covariance_times(self, g: int, scatter_times: np.ndarray, block: np.ndarray) -> np.ndarray:
        """Σ_g B = (S_g B + w_g d_g (d_gᵀ B)) / w_g."""
        offset = self.offsets[g]
        return scatter_times / self.weight[g] + np.outer(offset, offset @ block)

    def update(self, products: np.ndarray, components: np.ndarray, at_components: np.ndarray, tol: float) -> bool:
        """Take one pass's S_g B_g (``products``: (k, p, k·width), the blocks side by side) and
        S_g V (``at_components``): β_g, tr(VᵀΣ_gV), the next blocks; whether every β_g moved
        by at most ``tol`` relative."""
        width = self.blocks[0].shape[1]
        before = self.best.copy()
        for g, block in enumerate(self.blocks):
            at_v = self._covariance_times(g, at_components[g], components)  # Σ_g V
            self.kept[g] = np.trace(components.T @ at_v)
            # Rayleigh–Ritz on span [B_g, V] (Σ_g V is in the pass too): β̂_g ≥ tr(VᵀΣ_gV), no negative loss
            both = np.column_stack([block, components])
            basis, triangle = np.linalg.qr(both)
            times = np.column_stack(
                [self._covariance_times(g, products[g][:, g * width : (g + 1) * width], block), at_v]
            )
            times = np.linalg.solve(triangle.T, times.T).T  # Σ_g Q = Σ_g [B_g, V] R⁻¹
            values, rotations = _ritz(basis, times)
            self.best[g] = values[: self.n_components].sum()
            self.blocks[g] = _orthonormal((times @ rotations)[:, :width])
        change = float(np.max(np.abs(self.best - before) / np.maximum(np.abs(self.best), np.finfo(float).tiny)))
        self.changes.append(1.0 if np.isnan(change) else change)
        return self.changes[-1] <= tol


def _mean_or_none(difference: np.ndarray, constraint: str) -> np.ndarray | None:
    return None if constraint == "covariance" else difference


def _total_trace(moments: GroupMoments) -> float:
    """tr Σ from the diagonals of the moments (k × p numbers)."""
    deviations = moments.means_about(moments.global_mean)
    diagonal = moments.scatter_diagonal.sum() + float(moments.weight @ (deviations**2).sum(axis=1))
    return diagonal / float(moments.weight.sum())
