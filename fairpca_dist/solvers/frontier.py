"""Certified minimisation of a function of two groups' losses over the rank-r projections.

For two groups with positive semidefinite second moments M_0, M_1 (p × p) and orthonormal p × r
V, write L(V) = (L_0, L_1), L_b = tr M_b − tr(VᵀM_bV). Over the Fantope {0 ⪯ P ⪯ I, tr P = r},
the convex hull of the rank-r projections VVᵀ, the same linear map fills a compact convex set
S ⊂ R². Its support point in the direction w(θ) = (cos θ, sin θ), the minimiser of w·L over S,
is L(V_θ) with V_θ the top-r eigenvectors of W_θ = cos θ M_0 + sin θ M_1 (Ky Fan): the extreme
points of S are losses of rank-r projections.

An objective f(L) = max_k f_k(L) whose pieces are concave and increase along (1, 1) at a rate
bounded away from 0 (``dro``'s worst case: rate ≥ 1, dro.py) takes its minimum over S on the
part of S's boundary that faces −(1, 1): from any point of S, moving along −(1, 1) lowers every
piece until it leaves S. That part is the arc of support points for θ ∈ [−π/4, 3π/4], ordered
by θ. Between the support points A and B of θ_a < θ_b the arc lies in the triangle of A, B and
the crossing C of their supporting lines (S is convex), and in the box L_b ≥ L_b(V of group b's
own PCA). Over that polygon f is smallest at a vertex or where two pieces cross on an edge
(concave pieces are smallest at the ends of any segment; an inner point moves along −(1, 1)).

Branch and bound: the lower bound is the least polygon minimum over the arcs (each polygon
moved by a rounding margin along −(1, 1): the losses carry rounding of ~p·ε_mach·tr M, which
√L terms magnify near L = 0), the upper bound the least f(L(V)) over the projections found.
The arc with the least bound is split where its minimum can be: where the pieces largest at
its ends cross, or where the arc is tangent to the largest piece's level set (secant steps in
θ, halving the arc instead where they creep); otherwise at the direction normal to its chord,
where the arc is farthest from the chord.
It stops when the bounds meet to ``tol``. On a flat arc (a segment of the boundary: a tie
λ_r = λ_{r+1} = … of W_θ at its direction, as with discrete or rank-deficient features) the
pieces can cross inside the segment; the projections there lie on the Grassmann geodesic
between the two end bases (:func:`~fairpca_dist.solvers.stiefel.geodesic_root`), as in
``fair-eig``.

Each direction costs one top-r eigendecomposition, by block Lanczos warm-started from the
basis of the nearest direction evaluated (:func:`~fairpca_dist.solvers.stiefel.top_eigenvectors`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from fairpca_dist.assessment.metrics import loss_rounding, losses_from_covariance
from fairpca_dist.solvers.stiefel import geodesic_root, top_eigenvectors

__all__ = ["FrontierResult", "minimize_on_frontier"]

Pieces = Callable[[np.ndarray], np.ndarray]  # losses (..., 2) -> the two pieces' values (..., 2)

_ARC = (-np.pi / 4.0, 3.0 * np.pi / 4.0)  # the directions w(θ) with w_0 + w_1 ≥ 0
_EDGE_SAMPLES = 65  # points per polygon edge at which the pieces' order is checked for crossings
_FLAT = 1e-12  # arcs narrower than this, or whose chord normal is this close to an end, are segments
_NARROW = 1e-4  # below this sin Δθ an arc's polygon is a band along its chord (arc_bound)
_SAME = 1e-13  # support points closer than this (relative to the traces) are one point
_DENSE_ARC = 1e-6  # on arcs narrower than this, eigenvectors to rounding accuracy (LAPACK)


@dataclass
class FrontierResult:
    """The best projection found and its certificate.

    ``components`` (p, r) orthonormal, ``losses`` its L; ``upper`` = f at it; ``lower`` ≤
    f(L(V)) for every orthonormal p × r V; ``least_losses`` (2,): min over V of each L_b (its
    own PCA, Ky Fan); ``history``: the upper bound after each eigendecomposition or geodesic
    search; ``n_directions``: eigendecompositions run; ``stop``: "converged" (gap ≤ tol),
    "max_iter", or "flat_segment" (the least bound is a boundary segment where no projection
    at the pieces' crossing was found)."""

    components: np.ndarray
    losses: np.ndarray
    upper: float
    lower: float
    least_losses: np.ndarray
    stop: str
    history: list[float] = field(default_factory=list)
    n_directions: int = 0


@dataclass
class _Support:
    theta: float
    losses: np.ndarray  # (2,)
    basis: np.ndarray  # (p, r)

    @property
    def direction(self) -> np.ndarray:
        return np.array([np.cos(self.theta), np.sin(self.theta)])


class _Search:
    """The directions evaluated (sorted by θ), the arcs between neighbours and the bounds."""

    def __init__(self, matrices: np.ndarray, n_components: int, pieces: Pieces) -> None:
        self.matrices, self.n_components, self.pieces = matrices, n_components, pieces
        self.traces = np.trace(matrices, axis1=1, axis2=2)
        self.margin = loss_rounding(matrices)  # of the losses tr M − tr(VᵀMV)
        self.supports: list[_Support] = []
        self.flat: set[float] = set()  # left ends θ_a of arcs found to be boundary segments
        self.upper, self.best = np.inf, (np.empty(0), np.empty((0, 0)))
        self.history: list[float] = []
        self.n_directions = 0

    def value(self, losses: np.ndarray) -> np.ndarray:
        return self.pieces(losses).max(axis=-1)

    def losses(self, basis: np.ndarray) -> np.ndarray:
        return losses_from_covariance(self.matrices, self.traces, basis)

    def offer(self, basis: np.ndarray) -> np.ndarray:
        """Record a projection's losses as a candidate for the upper bound; returns them."""
        losses = self.losses(basis)
        value = float(self.value(losses))
        if value < self.upper:
            self.upper, self.best = value, (losses, basis)
        self.history.append(self.upper)
        return losses

    def evaluate(self, theta: float, *, dense: bool = False) -> _Support:
        start = min(self.supports, key=lambda s: abs(s.theta - theta)).basis if self.supports else None
        direction = np.array([np.cos(theta), np.sin(theta)])
        basis = top_eigenvectors(
            np.tensordot(direction, self.matrices, axes=1), self.n_components, start=start, dense=dense
        )[1]
        self.n_directions += 1
        support = _Support(theta, self.offer(basis), basis)
        self.supports.append(support)
        self.supports.sort(key=lambda s: s.theta)
        return support

    def rounding(self) -> float:
        """How much f at the best projection moves when its losses move by the rounding margin
        along −(1, 1), as the bounds' polygons do: the part of the gap the data's precision leaves
        open. It is ~10⁻¹³·f unless a loss is near 0, where √L terms magnify it to ~√margin."""
        losses = self.best[0]
        return float(self.value(losses) - self.value(losses - self.margin))

    def least_losses(self) -> np.ndarray:
        """Each group's least loss (its own PCA: θ = 0 and π/2)."""
        own = {s.theta: s.losses for s in self.supports}
        return np.array([own[0.0][0], own[np.pi / 2.0][1]])

    def arc_bound(self, left: _Support, right: _Support, floors: np.ndarray) -> float:
        """min f over a polygon that holds the arc between two neighbouring support points: the
        triangle of A, B and the crossing C of their supporting lines; on a flat arc the chord
        AB; on an arc narrower than ``_NARROW`` (where C, from two nearly parallel lines, is
        lost to rounding) the band of AB widened by |AB|·sin(Δθ)/2 along −w(θ_mid), which
        holds the triangle (its apex lies |AB| sin α sin β / sin(α + β) ≤ |AB| tan(Δθ/2)/2 off
        the chord, α + β = Δθ). The polygon moves by the rounding margin along −(1, 1) and is
        cut to the box L ≥ ``floors``."""
        a, b = left.losses, right.losses
        width = right.theta - left.theta
        if left.theta in self.flat:
            polygon = [a, b]
        elif np.sin(width) < _NARROW:
            middle = 0.5 * (left.theta + right.theta)
            inward = np.array([np.cos(middle), np.sin(middle)])
            depth = 0.5 * np.sin(width) * np.linalg.norm(b - a)
            polygon = [a, b, b - depth * inward, a - depth * inward]
        else:
            lines = np.array([left.direction, right.direction])
            corner = np.linalg.solve(lines, np.array([left.direction @ a, right.direction @ b]))
            polygon = [a, corner, b]
        return _polygon_minimum(_clip([point - self.margin for point in polygon], floors), self.pieces)


def _clip(polygon: list[np.ndarray], floors: np.ndarray) -> list[np.ndarray]:
    """The polygon (or segment) cut to the box L ≥ floors (Sutherland–Hodgman, one side at a time)."""
    for axis in (0, 1):
        kept: list[np.ndarray] = []
        closed = len(polygon) > 2
        edges = (
            zip(polygon, polygon[1:] + polygon[:1], strict=True)
            if closed
            else zip(polygon[:-1], polygon[1:], strict=True)
        )
        for here, there in edges:
            inside_here, inside_there = here[axis] >= floors[axis], there[axis] >= floors[axis]
            if inside_here:
                kept.append(here)
            if inside_here != inside_there:
                share = (floors[axis] - here[axis]) / (there[axis] - here[axis])
                kept.append(here + share * (there - here))
        if not closed and polygon and polygon[-1][axis] >= floors[axis]:
            kept.append(polygon[-1])
        polygon = _unique(kept)
    return polygon


def _unique(points: list[np.ndarray]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for point in points:
        if not out or not np.array_equal(point, out[-1]):
            out.append(point)
    return out


def _polygon_minimum(polygon: list[np.ndarray], pieces: Pieces) -> float:
    """min over a polygon's boundary (a segment or a point too) of max_k f_k: its vertices and
    the points on its edges where the largest piece changes (the minimum of a maximum of concave
    functions along a segment is at an end or at such a crossing)."""
    if not polygon:
        return np.inf
    edges = (
        list(zip(polygon, polygon[1:] + polygon[:1], strict=True)) if len(polygon) > 2 else [(polygon[0], polygon[-1])]
    )
    best = np.inf
    steps = np.linspace(0.0, 1.0, _EDGE_SAMPLES)
    for start, end in edges:
        points = start + steps[:, None] * (end - start)
        values = pieces(points)
        best = min(best, float(values.max(axis=1)[[0, -1]].min()))
        top = values.argmax(axis=1)
        for i in np.flatnonzero(top[1:] != top[:-1]):
            first, second = top[i], top[i + 1]

            def gap(
                s: float, first: int = first, second: int = second, start: np.ndarray = start, end: np.ndarray = end
            ) -> float:
                value = pieces(start + s * (end - start))
                return float(value[first] - value[second])

            if gap(steps[i]) * gap(steps[i + 1]) > 0.0:
                continue  # a tie within rounding at a sample: its value is counted already
            crossing = scipy.optimize.brentq(gap, steps[i], steps[i + 1], xtol=1e-15)
            best = min(best, float(pieces(start + crossing * (end - start)).max()))
    return best


def _chord_normal(left: _Support, right: _Support) -> float | None:
    """The direction θ ∈ (θ_a, θ_b) normal to the chord AB (where the arc is farthest from the
    chord), or None when there is none (a flat arc: AB lies on a supporting line)."""
    chord = right.losses - left.losses
    for normal in (np.array([-chord[1], chord[0]]), np.array([chord[1], -chord[0]])):
        if np.linalg.norm(normal) == 0.0:
            return None
        theta = float(np.arctan2(normal[1], normal[0]))
        if left.theta + _FLAT < theta < right.theta - _FLAT:
            return theta
    return None


def _split(
    left: _Support, right: _Support, pieces: Pieces, secant: bool = True, bisect: bool = False
) -> tuple[float | None, bool]:
    """Where to refine the arc between two support points (None when it cannot be split), and
    whether that is a secant step held back by the arc's guard.

    When different pieces are largest at the two ends, where they cross (the secant of their
    difference in θ); when the same piece k is, where the arc is tangent to its level set
    (∇f_k ∥ w(θ): the secant of angle(∇f_k(L(θ))) − θ, if it changes sign): the candidates
    for the minimum inside the arc. Either is kept a tenth of the arc from its ends. Steps held
    there say that L(θ) bends sharply on the arc (M_0 and M_1 of very different scales put the
    interesting part of the frontier into a sliver of θ), where the secant would creep by
    tenths; ``bisect`` (the caller's choice after two such steps in a row) halves the arc in θ
    instead. Otherwise, or without ``secant``, the direction normal to the
    chord, which shrinks the arc's polygon fastest and tells a segment of the boundary (the
    support point there lies on the chord)."""
    width = right.theta - left.theta
    if width <= _FLAT:
        return None, False
    values = [pieces(s.losses) for s in (left, right)]
    at_left, at_right = (int(v.argmax()) for v in values)
    if at_left != at_right:
        residuals = [float(v[at_left] - v[at_right]) for v in values]
    else:
        residuals = [_gradient_angle(pieces, s.losses, at_left) - s.theta for s in (left, right)]
    if not secant or residuals[0] * residuals[1] >= 0.0:
        return _chord_normal(left, right), False
    if bisect:
        return left.theta + 0.5 * width, False
    point = left.theta + width * residuals[0] / (residuals[0] - residuals[1])
    guarded = float(np.clip(point, left.theta + 0.1 * width, right.theta - 0.1 * width))
    return guarded, guarded != point


def _gradient_angle(pieces: Pieces, losses: np.ndarray, piece: int) -> float:
    """The angle of ∇f_piece at ``losses``, by central differences (f is cheap: no eigensolver)."""
    step = 1e-6 * np.maximum(np.abs(losses), 1e-12)
    shifted = losses + np.diag(step)[:, None, :] * np.array([1.0, -1.0])[None, :, None]  # (axis, ±, 2)
    values = pieces(shifted)[..., piece]
    gradient = (values[:, 0] - values[:, 1]) / (2.0 * step)
    return float(np.arctan2(gradient[1], gradient[0]))


def _crossing_on_segment(left: _Support, right: _Support, search: _Search) -> np.ndarray | None:
    """On a boundary segment, the projection where the pieces largest at its two ends are equal:
    the two end bases span top-r eigenspaces of the same W_θ, so the Grassmann geodesic between
    them stays on the segment (:func:`~fairpca_dist.solvers.stiefel.geodesic_root`)."""
    at_left, at_right = (int(search.pieces(s.losses).argmax()) for s in (left, right))
    if at_left == at_right:
        return None

    def difference(basis: np.ndarray) -> float:
        values = search.pieces(search.losses(basis))
        return float(values[at_left] - values[at_right])

    return geodesic_root(left.basis, right.basis, difference)


def minimize_on_frontier(
    matrices: np.ndarray, n_components: int, pieces: Pieces, *, tol: float, max_iter: int
) -> FrontierResult:
    """Minimise f(L(V)) = max(pieces(L(V))) over orthonormal p × n_components V (module
    docstring), to a certified relative gap ``tol`` (beyond the objective's own rounding at the
    best projection, :meth:`_Search.rounding`), with at most ``max_iter`` eigendecompositions
    (at least the 4 that start the arc: θ = −π/4, 0, π/2, 3π/4).

    ``matrices``: (2, p, p) positive semidefinite; ``pieces``: two concave functions of the
    losses, increasing along (1, 1), broadcasting over leading axes (the edge search of the
    bounds assumes two: their order changes at most once between neighbouring samples).
    """
    if np.shape(pieces(np.zeros(2))) != (2,):
        raise ValueError("minimize_on_frontier takes exactly two pieces")
    search = _Search(matrices, n_components, pieces)
    for start in (_ARC[0], 0.0, np.pi / 2.0, _ARC[1]):
        search.evaluate(start)
    floors = search.least_losses() - search.margin  # the box's sides, less rounding
    bounds: dict[float, float] = {}  # θ_a of each arc -> its bound
    searched: set[float] = set()  # flat arcs whose crossing has been sought along the geodesic
    stuck: set[float] = set()  # arcs whose last split landed on an end: split at the chord normal
    held: dict[float, int] = {}  # arcs from secant steps held at the guard: how many in a row
    same = _SAME * float(np.abs(search.traces).max())
    while True:
        supports = search.supports
        for left, right in zip(supports[:-1], supports[1:], strict=True):
            if left.theta not in bounds:
                bounds[left.theta] = search.arc_bound(left, right, floors)
        lower = min(bounds.values())
        # the bound moved by the margin, the best value's losses carry as much rounding: 2 × rounding()
        if search.upper - lower <= tol * abs(search.upper) + 2.0 * search.rounding():
            stop = "converged"
            break
        if search.n_directions >= max_iter:
            stop = "max_iter"
            break
        index = next(i for i, s in enumerate(supports[:-1]) if bounds[s.theta] == lower)
        left, right = supports[index], supports[index + 1]
        if left.theta in search.flat:
            if left.theta in searched:
                stop = "flat_segment"  # the least bound is a segment searched already: nothing to refine
                break
            searched.add(left.theta)
            crossing = _crossing_on_segment(left, right, search)
            if crossing is not None:
                search.offer(crossing)
            continue
        del bounds[left.theta]
        in_a_row = held.pop(left.theta, 0)
        theta, guarded = _split(left, right, search.pieces, secant=left.theta not in stuck, bisect=in_a_row >= 2)
        if theta is None:
            search.flat.add(left.theta)
            continue
        new = search.evaluate(theta, dense=right.theta - left.theta < _DENSE_ARC)
        if guarded:  # the secant creeps: after two such steps in a row, the parts are halved
            held.update({left.theta: in_a_row + 1, theta: in_a_row + 1})
        if left.theta in stuck and abs(new.direction @ (new.losses - left.losses)) <= same:
            # split at the chord normal, the new point lies on the chord's line: a boundary segment
            search.flat.update((left.theta, theta))
        elif np.linalg.norm(new.losses - left.losses) <= same:
            stuck.add(theta)  # landed on an end (a vertex holds a range of directions)
        elif np.linalg.norm(new.losses - right.losses) <= same:
            stuck.add(left.theta)
    losses, basis = search.best
    return FrontierResult(
        basis,
        losses,
        float(search.upper),
        float(min(lower, search.upper)),
        search.least_losses(),
        stop,
        search.history,
        search.n_directions,
    )
