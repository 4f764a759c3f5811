"""Shared pieces for points on the Stiefel manifold St(p, r) = {V ∈ R^{p×r} : VᵀV = I_r}.

Every solver returns its components as such a V (or, for Samadi et al.'s rank-relaxed
output, a p×r' map built from one); the helpers here give them one sign convention and one
orthonormality check. The Riemannian pieces (embedded metric; Absil, Mahony & Sepulchre 2008,
§4.1 and Edelman, Arias & Smith 1998 for the geodesic) serve the descent methods (``dro``):
:func:`tangent_projection` (which is also the Riemannian gradient of a Euclidean gradient),
the retractions :func:`qr_retraction` and :func:`polar`, the exact :func:`geodesic`, and
:func:`orthonormality_error`. Each works on one matrix or a stack (..., p, r).
:func:`minimize_lbfgs` is a Riemannian limited-memory BFGS minimiser built on them (the
inner solver of the MMD-constrained fair PCA, spec 004 §2.3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse.linalg

from fairpca_dist.exceptions import InputError, SolverError
from fairpca_dist.solvers import checks

__all__ = [
    "top_eigenvectors",
    "krylov_top_eigenpairs",
    "fix_signs",
    "check_orthonormal",
    "subspace_distance",
    "polar",
    "random_orthonormal",
    "largest_eigenvalue",
    "qr_retraction",
    "tangent_projection",
    "geodesic",
    "orthonormality_error",
    "offdiagonal_energy",
    "geodesic_root",
    "qr_retraction_velocity",
    "LBFGSResult",
    "minimize_lbfgs",
]


def fix_signs(components: np.ndarray) -> np.ndarray:
    """Flip each column so that its largest-magnitude entry is positive (deterministic output)."""
    components = np.array(components, dtype=np.float64)
    rows = np.argmax(np.abs(components), axis=0)
    signs = np.sign(components[rows, np.arange(components.shape[1])])
    signs[signs == 0] = 1.0
    return components * signs


def check_orthonormal(components: np.ndarray, *, atol: float = 1e-8) -> None:
    """Raise :class:`SolverError` unless ``VᵀV = I`` to ``atol`` (a solver's output contract)."""
    gram = components.T @ components
    error = float(np.abs(gram - np.eye(gram.shape[0])).max()) if gram.size else 0.0
    if not np.isfinite(error) or error > atol:
        raise SolverError(f"components are not orthonormal: max |VᵀV − I| = {error:.3g} > {atol:g}")


def subspace_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Spectral norm of the difference of the orthogonal projectors onto span(a) and span(b).

    Equals the sine of the largest principal angle; 0 for equal subspaces, 1 when some
    direction of one is orthogonal to the other. Computed without the p × p projectors (3.2 GB
    each at p = 20,000): ‖P_a − P_b‖₂ = max(‖(I − P_a) Q_b‖₂, ‖(I − P_b) Q_a‖₂), O(p r²).
    """
    qa, _ = np.linalg.qr(a)
    qb, _ = np.linalg.qr(b)
    outside_a = np.linalg.norm(qb - qa @ (qa.T @ qb), ord=2) if qb.shape[1] else 0.0
    outside_b = np.linalg.norm(qa - qb @ (qb.T @ qa), ord=2) if qa.shape[1] else 0.0
    return float(max(outside_a, outside_b))


def polar(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal polar factor of a p × r matrix (p ≥ r) and its singular values.

    With the thin SVD A = P Σ Qᵀ the factor is P Qᵀ: the orthonormal matrix nearest to A
    (Frobenius), the maximiser of tr(AᵀU) over ‖U‖₂ ≤ 1 (von Neumann), equal to
    A (AᵀA)^{-1/2} when A has full column rank. Computed by the SVD, which stays orthonormal
    when A is rank-deficient (the factor is then not unique; callers check the returned
    singular values, in decreasing order).
    """
    left, singular, right_t = np.linalg.svd(matrix, full_matrices=False)
    return left @ right_t, singular


def random_orthonormal(rng: np.random.Generator, n_features: int, n_components: int) -> np.ndarray:
    """A random p × r orthonormal matrix: the Q factor of a standard Gaussian draw.

    Consumes exactly ``n_features * n_components`` normal draws from ``rng``, so a sequence
    of calls on one generator gives reproducible independent starts.
    """
    q, r = np.linalg.qr(rng.standard_normal((n_features, n_components)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def largest_eigenvalue(matrix: np.ndarray) -> float:
    """The largest eigenvalue of a symmetric matrix: Lanczos (ARPACK) above 200 × 200, where a
    full LAPACK decomposition costs ~0.4 s at p = 1764 and Lanczos ~0.02 s; LAPACK below."""
    matrix = (matrix + matrix.T) / 2.0
    p = matrix.shape[0]
    if p <= 200:
        return float(scipy.linalg.eigvalsh(matrix, subset_by_index=(p - 1, p - 1))[0])
    return float(scipy.sparse.linalg.eigsh(matrix, k=1, which="LA", return_eigenvectors=False, tol=1e-10)[0])


def qr_retraction(matrix: np.ndarray) -> np.ndarray:
    """The Q factor of the thin QR of a p × r matrix (or a stack) with diag(R) > 0: the QR
    retraction R_V(Δ) = qf(V + Δ) (Absil et al. (4.8)).

    Computed as X L⁻ᵀ with L the Cholesky factor of XᵀX (the same Q: R = Lᵀ is the unique
    QR factor with a positive diagonal): a few batched r × r operations. (With numpy 2.4 and
    1 BLAS thread, check included, this takes about as long as numpy's batched Householder
    QR on 21 × (22 × 3) — 32 vs 31 µs — less on 21 × (100 × 10), 111 vs 138 µs, more on
    21 × (22 × 19), 211 vs 143 µs.) Its
    orthonormality error is ~ε·κ(X)², and X = V + Δ near the manifold has κ ≈ 1; when XᵀX is
    not numerically positive definite (κ(X) ≳ 10⁷), or the result is off by more than 10⁻¹²,
    Householder QR is used instead."""
    try:
        lower = np.linalg.cholesky(matrix.mT @ matrix)
        q = matrix @ np.linalg.inv(lower).mT
        if orthonormality_error(q) <= 1e-12:
            return q
    except np.linalg.LinAlgError:
        pass
    q, r = np.linalg.qr(matrix)
    signs = np.where(np.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
    return q * signs[..., None, :]


def tangent_projection(point: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Orthogonal projection of D onto the tangent space at V, D − V sym(VᵀD) (embedded
    metric). Applied to a Euclidean gradient it gives the Riemannian gradient."""
    inner = point.mT @ direction
    return direction - point @ ((inner + inner.mT) / 2.0)


def geodesic(point: np.ndarray, direction: np.ndarray, t: float) -> np.ndarray:
    """The geodesic from V with initial velocity Δ at time t, for horizontal Δ (VᵀΔ = 0, as
    every gradient of a function of VVᵀ is): with the thin SVD Δ = QΣWᵀ,
    V(t) = V W cos(tΣ) Wᵀ + Q sin(tΣ) Wᵀ (Edelman et al. 1998, Thm 2.3; the same curve is the
    Grassmann geodesic of span V). The formula stays on the manifold only as far as VᵀV = I
    and VᵀΔ = 0 hold; iterated, its rounding errors grow (10⁻⁵ after 40 steps, O(1) after
    80 on St(22, 19)), so the result is re-orthonormalised (:func:`qr_retraction`), which moves
    it by the rounding error only."""
    q, sigma, wt = np.linalg.svd(direction, full_matrices=False)
    w = np.swapaxes(wt, -1, -2)
    angle = t * sigma[..., None, :]
    moved = (point @ w) * np.cos(angle) + q * np.sin(angle)
    return qr_retraction(moved @ wt)


def orthonormality_error(matrix: np.ndarray) -> float:
    """max |VᵀV − I| over the entries (and over a stack)."""
    gram = np.swapaxes(matrix, -1, -2) @ matrix
    return float(np.abs(gram - np.eye(gram.shape[-1])).max()) if gram.size else 0.0


def offdiagonal_energy(matrices: np.ndarray) -> float:
    """Σ_g ‖offdiag(T_g)‖_F² of one matrix or a stack (..., d, d): the joint-diagonalisation
    criterion (used by the JEVD solvers)."""
    matrices = np.asarray(matrices, dtype=np.float64)
    off = ~np.eye(matrices.shape[-1], dtype=bool)  # summed entry by entry: no cancellation
    return float(np.sum(matrices[..., off] ** 2))


# ------------------------------------------------------------------ top-r eigenpairs
EigenSolver = Literal["auto", "dense", "krylov"]

# Internal switch read by :func:`top_eigenvectors` (not a public option): "auto" takes the
# restarted block Lanczos method from _DENSE_BELOW features on, "dense" always LAPACK (the
# benchmarks force it to time the old path), "krylov" the Lanczos method at every size.
EIGENSOLVER: EigenSolver = "auto"
_DENSE_BELOW = 200  # below this p a LAPACK syevr is faster than the Krylov method
_KRYLOV_TOL = 1e-10  # converged when every ‖M v_i − θ_i v_i‖ ≤ tol · |θ_1|, i ≤ r
_SUBSPACE_TOL = 1e-8  # ... and the top-r subspace to sin∠ ≤ this (Davis–Kahan ‖R‖_F / gap)
_RESIDUAL_FLOOR = 1e-13  # relative residuals below this are rounding: not asked for
_KRYLOV_BLOCKS = 10  # Krylov basis of at most this many blocks before a thick restart
_KRYLOV_RESTARTS = 20


def top_eigenvectors(
    matrix: np.ndarray, n_components: int, *, start: np.ndarray | None = None, dense: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_components`` largest eigenpairs of a symmetric matrix, in decreasing order.

    Returns ``(eigenvalues, V)`` with V (p × r) orthonormal and sign-fixed by :func:`fix_signs`,
    for the symmetric part (M + Mᵀ)/2. From p = 200 on (while the block below stays under p/3)
    a restarted block Lanczos method (:func:`krylov_top_eigenpairs`) computes them from
    matrix-block products, 5–10× faster than LAPACK at p = 1764; ``start`` (p × s, any s, e.g.
    the previous iterate's V when the matrix changed little) seeds its first block. Where it
    does not converge, and below p = 200, LAPACK ``syevr`` with an index range is used
    (:data:`EIGENSOLVER` forces either; ``dense=True`` forces LAPACK for one call, for callers
    that need the subspace to rounding accuracy, ~10⁻¹⁶·|λ₁|/gap). Both give the eigenvalues to ~10⁻¹³·|λ₁| and, where
    λ_r > λ_{r+1}, the same subspace.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    matrix = matrix + matrix.T
    matrix *= 0.5  # in place: one p × p temporary less
    p = matrix.shape[0]
    iterative = EIGENSOLVER == "krylov" or (EIGENSOLVER == "auto" and p >= _DENSE_BELOW)
    if iterative and not dense and 3 * _block_size(n_components) <= p:
        found = krylov_top_eigenpairs(
            matrix, n_components, start=start, tol=_KRYLOV_TOL, max_blocks=_KRYLOV_BLOCKS, max_restarts=_KRYLOV_RESTARTS
        )
        if found is not None:
            return found[0], fix_signs(found[1])
    values, vectors = scipy.linalg.eigh(matrix, subset_by_index=(p - n_components, p - 1), driver="evr")
    return values[::-1], fix_signs(vectors[:, ::-1])


def geodesic_root(
    first: np.ndarray, second: np.ndarray, difference: Callable[[np.ndarray], float]
) -> np.ndarray | None:
    """The basis on the Grassmann geodesic between two bases where ``difference`` is 0.

    With the SVD firstᵀsecond = U cos(Θ) Wᵀ (principal angles Θ), a = first·U and b = second·W
    are the principal vectors (aᵀb = cos Θ), and the unit parts c of b orthogonal to a give the
    geodesic V(t) = a cos(tΘ) + c sin(tΘ), t ∈ [0, 1], from span(first) to span(second)
    (Edelman, Arias & Smith 1998, §2.5.1), orthonormal all along. When both ends span top-r
    eigenspaces of one matrix (the two sides of an eigenvalue crossing, or of a tie of any
    multiplicity), every V(t) lies in their sum, a space of tied eigenvectors and the shared
    ones, so each V(t) is as optimal for that matrix as the ends. Returns V(t*) with
    difference(V(t*)) = 0 (Brent's method, |Δt| ≤ 10⁻¹⁵), or None when the subspaces are equal
    or ``difference`` has one sign at both ends. Used by ``fair-eig`` (equal group losses) and by
    the two-group frontier search (two pieces of an objective crossing on a boundary segment).
    """
    if first.shape[1] == 0:
        return None
    left, cosines, right_t = np.linalg.svd(first.T @ second)
    angles = np.arccos(np.clip(cosines, -1.0, 1.0))
    if angles.max() < 1e-7:
        return None
    a, b = first @ left, second @ right_t.T
    apart = b - a * cosines
    norms = np.linalg.norm(apart, axis=0)
    moving = norms > 1e-12
    apart[:, moving] /= norms[moving]
    apart[:, ~moving] = 0.0

    def basis_at(t: float) -> np.ndarray:
        return a * np.cos(t * angles) + apart * np.sin(t * angles)

    def at(t: float) -> float:
        return difference(basis_at(t))

    if at(0.0) * at(1.0) > 0:
        return None
    return basis_at(scipy.optimize.brentq(at, 0.0, 1.0, xtol=1e-15))


def _block_size(n_components: int) -> int:
    """Block of the Lanczos method: r plus guard vectors, so that a cluster of eigenvalues
    straddling λ_r (an eigenvalue crossing, as at the fair-eig optimum) converges as a whole."""
    return n_components + max(4, n_components // 2)


def krylov_top_eigenpairs(
    matrix: np.ndarray,
    n_components: int,
    *,
    start: np.ndarray | None = None,
    tol: float = _KRYLOV_TOL,
    subspace_tol: float = _SUBSPACE_TOL,
    max_blocks: int = _KRYLOV_BLOCKS,
    max_restarts: int = _KRYLOV_RESTARTS,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Top-r eigenpairs of a symmetric p × p matrix M by thick-restarted block Lanczos, or None.

    With a block of b = r + max(4, ⌊r/2⌋) orthonormal columns X₀ (``start``'s columns first,
    random ones after, from a fixed seed: deterministic), the basis Q = [X₀, X₁, …] spans the
    block Krylov space {X₀, MX₀, M²X₀, …}, X_{j+1} = orth((I − QQᵀ) M X_j) (Gram–Schmidt twice;
    columns that vanish are dropped). After each block, Rayleigh–Ritz: QᵀMQ = S Θ Sᵀ gives Ritz
    pairs (θ_i, v_i = Q s_i), and the method stops when ‖M v_i − θ_i v_i‖ ≤ ``tol``·|θ₁| for
    i ≤ r and the residual block R (p × r) has ‖R‖_F ≤ ``subspace_tol``·(θ_r − θ_{r+1}), which
    bounds the sine of the largest angle to the exact top-r subspace (Davis–Kahan sin Θ
    theorem with the Ritz gap). When the second test asks for residuals below 10⁻¹³·|θ₁|
    (λ_r and λ_{r+1} closer than ~10⁻⁵·|λ₁|, as next to an eigenvalue crossing) it returns
    None at once: only a dense solver resolves that subspace. At the stop each θ_i is within
    ‖r_i‖²/gap of an eigenvalue (quadratic accuracy) and, Ritz values being bounded by the
    eigenvalues (Cauchy interlacing), 0 ≤ Σ_{i≤r} λ_i − Σ_{i≤r} θ_i ≲ Σ ‖r_i‖²/gap ≤
    10⁻²⁰·r·λ₁²/gap: the dual bounds built on these sums stay valid. When the
    basis holds ``max_blocks`` blocks it is restarted from the top-b Ritz vectors and their
    images MQs_i (no product recomputed). Each step costs one product M·X (p² b flops, a
    BLAS-3 call) and O(p·dim Q·b) for the orthogonalisation and the Ritz vectors.
    Returns ``(θ₁ ≥ … ≥ θ_r, V)`` or None when the residuals did not reach ``tol`` within
    ``max_restarts`` restarts (callers then use a dense solver). No check that every top
    eigenvector had a component in X₀ — the random columns make missing one probability zero.
    """
    p = matrix.shape[0]
    block = min(_block_size(n_components), p)
    seed = np.random.default_rng(0).standard_normal((p, block))
    if start is not None:
        start = np.asarray(start, dtype=np.float64)
        if start.ndim != 2 or start.shape[0] != p or not np.all(np.isfinite(start)):
            raise InputError(f"start must be a finite {p} × s matrix, got shape {start.shape}")
        seed[:, : min(start.shape[1], block)] = start[:, :block]
    basis, _ = np.linalg.qr(seed)
    image = matrix @ basis
    projected = basis.T @ image  # QᵀMQ, grown block by block
    scale = 0.0
    for _ in range(max_restarts + 1):
        while True:
            ritz_values, coefficients = np.linalg.eigh((projected + projected.T) / 2.0)
            ritz_values, coefficients = ritz_values[::-1], coefficients[:, ::-1]
            scale = max(scale, abs(float(ritz_values[0])), np.finfo(float).tiny)
            top = coefficients[:, :n_components]
            vectors = basis @ top
            residual = np.linalg.norm(image @ top - vectors * ritz_values[:n_components], axis=0)
            if residual.max() <= tol * scale:
                # values converged; the subspace too once ‖R‖_F / (θ_r − θ_{r+1}) ≤ subspace_tol
                needed = subspace_tol * float(ritz_values[n_components - 1] - ritz_values[n_components])
                if np.linalg.norm(residual) <= needed:
                    return ritz_values[:n_components].copy(), vectors
                if needed < _RESIDUAL_FLOOR * scale:
                    return None  # λ_r ≈ λ_{r+1}: the subspace is below what residuals can resolve
            if basis.shape[1] + block > min(p, max_blocks * block):
                break
            grown = _extend(basis, image[:, -block:], tol * scale)
            if grown is None:
                break
            grown_image = matrix @ grown
            cross = basis.T @ grown_image
            projected = np.block([[projected, cross], [cross.T, grown.T @ grown_image]])
            basis = np.hstack([basis, grown])
            image = np.hstack([image, grown_image])
        keep = coefficients[:, :block]
        basis, image = basis @ keep, image @ keep
        projected = np.diag(ritz_values[:block])
    return None


def _extend(basis: np.ndarray, block: np.ndarray, floor: float) -> np.ndarray | None:
    """orth((I − QQᵀ) Y): the next Lanczos block, its columns below ``floor`` dropped."""
    block = block - basis @ (basis.T @ block)
    block = block - basis @ (basis.T @ block)
    q, r = np.linalg.qr(block)
    kept = np.abs(np.diag(r)) > floor
    if not kept.any():
        return None
    q = q[:, kept]
    q = q - basis @ (basis.T @ q)
    q, _ = np.linalg.qr(q)
    return q


# ------------------------------------------------------------------ Riemannian L-BFGS
Cost = Callable[[np.ndarray], tuple[float, np.ndarray]]
StopReason = Literal["gradient", "max_iter", "no_progress"]

_MIN_COSINE = 1e-8  # an L-BFGS direction at a smaller angle cosine to −grad is not "descent"
_ROUNDING = 1e-12  # a predicted decrease below this × |f| is at the cost's rounding level


@dataclass(frozen=True)
class LBFGSResult:
    """The outcome of :func:`minimize_lbfgs`.

    ``point`` is the last iterate (orthonormal to 10⁻¹⁰), ``value`` the cost there,
    ``gradient`` the Riemannian gradient P_V(∇f(V)) there and ``gradient_norm`` its Frobenius
    norm. ``n_iter`` counts accepted steps, ``n_evaluations`` calls of the cost (the start and
    every line-search trial). ``reason`` says why it stopped: ``"gradient"`` (‖grad f‖ ≤
    gradient_tol), ``"max_iter"`` or ``"no_progress"`` (no step along −grad decreased the cost,
    which happens at the cost's rounding level or with a gradient that does not match the
    value). ``values`` and ``gradient_norms`` hold f and ‖grad f‖ at every iterate, the start
    included (n_iter + 1 entries; ``values`` decreasing, but for changes at the rounding
    level of f, below 10⁻¹²·|f|, see :func:`minimize_lbfgs`).
    """

    point: np.ndarray
    value: float
    gradient: np.ndarray
    gradient_norm: float
    n_iter: int
    n_evaluations: int
    reason: StopReason
    values: tuple[float, ...]
    gradient_norms: tuple[float, ...]

    @property
    def converged(self) -> bool:
        """Whether the gradient tolerance was met."""
        return self.reason == "gradient"


@dataclass(frozen=True)
class _Trial:
    """A line-search point R_V(tη) with its cost, Riemannian gradient and φ'(t)."""

    step: float
    point: np.ndarray
    value: float
    gradient: np.ndarray
    slope: float


def qr_retraction_velocity(matrix: np.ndarray, q: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """d/dt qf(X + tẊ) at t = 0, given Q = qf(X): the differential of the QR retraction,
    D qf(X)[Ẋ] = Q ρ_skew(QᵀẊR⁻¹) + (I − QQᵀ)ẊR⁻¹ with R = QᵀX and ρ_skew(A) the strictly
    lower triangle of A minus its transpose (Absil et al. 2008, Example 8.1.5). With
    X = V + tη it is the velocity of the retraction curve t ↦ R_V(tη), a tangent vector at Q;
    at t = 0 it is η itself."""
    upper = np.triu(q.T @ matrix)
    scaled = scipy.linalg.solve_triangular(upper, direction.T, trans="T").T  # Ẋ R⁻¹
    inner = q.T @ scaled
    lower = np.tril(inner, -1)
    return q @ (lower - lower.T - inner) + scaled


def _evaluate(cost: Cost, point: np.ndarray) -> tuple[float, np.ndarray | None]:
    """f(V) and the Riemannian gradient P_V(∇f(V)); (inf, None) when either is not finite."""
    value, euclidean = cost(point)
    euclidean = np.asarray(euclidean, dtype=np.float64)
    if euclidean.shape != point.shape:
        raise InputError(f"cost must return a gradient of shape {point.shape}, got {euclidean.shape}")
    value = float(value)
    if not (np.isfinite(value) and np.all(np.isfinite(euclidean))):
        return np.inf, None
    return value, tangent_projection(point, euclidean)


def _wolfe_search(
    cost: Cost,
    point: np.ndarray,
    value: float,
    direction: np.ndarray,
    slope: float,
    step: float,
    armijo: float,
    wolfe: float,
    max_evaluations: int,
) -> tuple[_Trial | None, int]:
    """A step t along the retraction curve φ(t) = f(R_V(tη)) meeting the weak Wolfe conditions
    φ(t) ≤ φ(0) + c₁tφ'(0) and φ'(t) ≥ c₂φ'(0), with φ'(t) = ⟨grad f(R_V(tη)), d/dt R_V(tη)⟩
    exact (:func:`qr_retraction_velocity`); found by bisection and doubling (Lewis & Overton
    2013). Where the decrease c₁t|φ'(0)| is below the rounding level of f
    (``_ROUNDING``·|f|), sufficient decrease is read from the derivative instead, by Hager &
    Zhang's (2005) approximate Wolfe test φ'(t) ≤ (2c₁ − 1)φ'(0) (exact for a quadratic φ),
    with φ(t) ≤ φ(0) + ``_ROUNDING``·|φ(0)|.
    Returns the accepted trial (or, after ``max_evaluations`` trials, the longest one with
    sufficient decrease, or None when none had it) and the number of cost evaluations."""
    lower, upper = 0.0, np.inf
    fallback = None
    rounding = _ROUNDING * abs(value)
    for evaluation in range(1, max_evaluations + 1):
        moved = point + step * direction
        candidate = qr_retraction(moved)
        new_value, gradient = _evaluate(cost, candidate)
        decrease = False
        if gradient is not None:
            new_slope = float(np.sum(gradient * qr_retraction_velocity(moved, candidate, direction)))
            decrease = new_value <= value + armijo * step * slope
            if not decrease and new_value <= value + rounding and -armijo * step * slope <= rounding:
                decrease = new_slope <= (2.0 * armijo - 1.0) * slope
        if not decrease:
            upper = step
        elif gradient is not None:  # always: a decrease is only read with the gradient
            trial = _Trial(step, candidate, new_value, gradient, new_slope)
            if new_slope >= wolfe * slope:
                return trial, evaluation
            lower, fallback = step, trial
        step = (lower + upper) / 2.0 if np.isfinite(upper) else 2.0 * step
    return fallback, max_evaluations


def _lbfgs_direction(gradient: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray, float, float]]) -> np.ndarray:
    """−H grad f by the two-loop recursion (Nocedal & Wright 2006, Alg. 7.4) on the stored
    pairs (s, y, ρ = 1/⟨s, y⟩, γ = ⟨s, y⟩/⟨y, y⟩), oldest first, all transported to the current
    tangent space; H₀ = γ I from the newest pair. ρ and γ are those of the pair when stored."""
    q = gradient.copy()
    alphas = []
    for s, y, rho, _ in reversed(pairs):
        alpha = rho * float(np.sum(s * q))
        q -= alpha * y
        alphas.append(alpha)
    r = pairs[-1][3] * q
    for (s, y, rho, _), alpha in zip(pairs, reversed(alphas), strict=True):
        r += (alpha - rho * float(np.sum(y * r))) * s
    return -r


def _check_start(start: np.ndarray) -> np.ndarray:
    """A finite p × r (p ≥ r ≥ 1) matrix orthonormal to 10⁻⁸, re-orthonormalised by QR."""
    point = np.asarray(start, dtype=np.float64)
    if point.ndim != 2 or not 1 <= point.shape[1] <= point.shape[0] or not np.all(np.isfinite(point)):
        raise InputError(f"start must be a finite p × r matrix with p >= r >= 1, got shape {point.shape}")
    error = orthonormality_error(point)
    if error > 1e-8:
        raise InputError(f"start must be orthonormal: max |VᵀV − I| = {error:.3g} > 1e-08")
    return qr_retraction(point)


def minimize_lbfgs(
    cost: Cost,
    start: np.ndarray,
    *,
    gradient_tol: float,
    max_iter: int = 300,
    memory: int = 10,
    cautious: float = 1e-4,
    armijo: float = 1e-4,
    wolfe: float = 0.9,
    max_line_search: int = 30,
) -> LBFGSResult:
    """Minimise f over St(p, r) by a cautious Riemannian limited-memory BFGS method.

    ``cost(V)`` returns f(V) and the Euclidean gradient ∇f(V) (p × r); the Riemannian
    gradient is its tangent projection grad f(V) = P_V(∇f(V)) (embedded metric). Each
    iteration:

    1. direction η = −H grad f by the two-loop recursion over the last ``memory`` pairs with
       H₀ = γI, γ = ⟨s, y⟩/⟨y, y⟩ of the newest pair; −grad f when there are no pairs or when
       η is not a descent direction (⟨grad f, η⟩ > −10⁻⁸‖grad f‖‖η‖; the pairs are then
       dropped);
    2. a weak Wolfe line search along the QR retraction t ↦ qf(V + tη) (c₁ = ``armijo``,
       c₂ = ``wolfe``), first trial t = 1 (t = min(1, 1/‖grad f‖) along −grad f, a step of
       length ≤ 1); if it fails along the L-BFGS direction the pairs are dropped and −grad f
       is tried; if that fails too the run stops with ``"no_progress"``;
    3. with V₊ = qf(V + tη), vector transport by projection T(ξ) = P_{V₊}(ξ):
       s = T(tη), y = grad f(V₊) − T(grad f(V)), and every stored pair is transported to
       T_{V₊}St;
    4. the cautious update of Huang, Absil & Gallivan (2018, SIAM J. Optim. 28(1)): the pair
       is stored only if ⟨y, s⟩/‖s‖² ≥ ϑ(‖grad f(V)‖) with ϑ(τ) = ``cautious``·τ, which keeps
       H positive definite without a locking condition or a differentiated retraction; ρ and
       γ of a pair are those computed when it was stored.

    It stops when ‖grad f(V)‖_F ≤ ``gradient_tol`` (``"gradient"``; checked first, so also at
    the start), after ``max_iter`` steps (``"max_iter"``), or with ``"no_progress"``. The cost
    values of the iterates decrease (Armijo) except at the rounding level of f, where a step
    is accepted on the slope and f may rise by at most 10⁻¹²·|f|; every point passed to
    ``cost`` (trials included) is a QR factor, orthonormal to rounding. The paper (spec 004 §2.3) used ROPTLIB's dense
    cautious RBFGS with a gradient-norm stop ε_k and 300 iterations; this is its
    limited-memory counterpart (ROPTLIB's LRBFGS). Deterministic.

    Raises :class:`InputError` for a bad argument (naming it) or a start that is not
    orthonormal, :class:`SolverError` when f or ∇f is not finite at the start.
    """
    gradient_tol = checks.number("gradient_tol", gradient_tol, strict=True)
    max_iter = checks.integer("max_iter", max_iter)
    memory = checks.integer("memory", memory)
    cautious = checks.number("cautious", cautious)
    armijo = checks.number("armijo", armijo, strict=True)
    wolfe = checks.number("wolfe", wolfe, strict=True)
    if not armijo < wolfe < 1.0:
        raise InputError(
            f"armijo and wolfe must satisfy 0 < armijo < wolfe < 1, got armijo={armijo!r}, wolfe={wolfe!r}"
        )
    max_line_search = checks.integer("max_line_search", max_line_search)
    if not callable(cost):
        raise InputError(f"cost must be callable, got {cost!r}")
    point = _check_start(start)
    value, gradient = _evaluate(cost, point)
    if gradient is None:
        raise SolverError("the cost or its gradient is not finite at the start")
    norm = float(np.linalg.norm(gradient))
    values, norms = [value], [norm]
    pairs: list[tuple[np.ndarray, np.ndarray, float, float]] = []
    n_evaluations = 1
    while True:
        if norm <= gradient_tol:
            reason: StopReason = "gradient"
            break
        if len(values) > max_iter:
            reason = "max_iter"
            break
        trial = None
        if pairs:
            direction = tangent_projection(point, _lbfgs_direction(gradient, pairs))
            slope = float(np.sum(gradient * direction))
            if np.isfinite(slope) and slope <= -_MIN_COSINE * norm * float(np.linalg.norm(direction)):
                trial, used = _wolfe_search(cost, point, value, direction, slope, 1.0, armijo, wolfe, max_line_search)
                n_evaluations += used
        if trial is None:
            pairs.clear()
            direction, slope = -gradient, -(norm**2)
            trial, used = _wolfe_search(
                cost, point, value, direction, slope, min(1.0, 1.0 / norm), armijo, wolfe, max_line_search
            )
            n_evaluations += used
        if trial is None or np.array_equal(trial.point, point):
            reason = "no_progress"
            break
        new = trial.point
        s = tangent_projection(new, trial.step * direction)
        y = trial.gradient - tangent_projection(new, gradient)
        pairs = [(tangent_projection(new, ps), tangent_projection(new, py), rho, gamma) for ps, py, rho, gamma in pairs]
        sy = float(np.sum(s * y))
        if sy > 0.0 and sy >= cautious * norm * float(np.sum(s * s)):
            pairs.append((s, y, 1.0 / sy, sy / float(np.sum(y * y))))
            del pairs[:-memory]
        point, value, gradient = new, trial.value, trial.gradient
        norm = float(np.linalg.norm(gradient))
        values.append(value)
        norms.append(norm)
    return LBFGSResult(
        point=point,
        value=value,
        gradient=gradient,
        gradient_norm=norm,
        n_iter=len(values) - 1,
        n_evaluations=n_evaluations,
        reason=reason,
        values=tuple(values),
        gradient_norms=tuple(norms),
    )
