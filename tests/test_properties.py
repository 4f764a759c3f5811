"""Property tests (hypothesis): the moments merge, the solvers' invariants, model round trips.

Invariants every moment-based solver must keep (issue 16), checked on the group losses, which
do not depend on the basis a solver returns:

* feature rotation x → xQ (Q orthogonal): the losses are unchanged and the components rotate;
* row duplication: the moments, and so every fit, are unchanged;
* group relabelling (new names, same order): the losses are unchanged;
* feature permutation: the losses are unchanged and the components' rows permute.

The slower solvers (SDPs, iterative heuristics, the row-reading methods) are checked on the
same invariants with fewer examples, in the settings under which each is equivariant. A random
start does not rotate or permute with the features, so ``mmd`` runs from ``start="pca"`` (its
default ``"aux-mmd"`` picks among random matrices);
``mm-sparse`` starts at random and has no start option: only duplication and relabelling are
checked (its ℓ1 penalty would also be kept by permutations, not by rotations). ``dro``'s
radius ε = α/√N changes with the row count, so duplicated rows are fitted with α·√2 (the same
ε); ``jevd`` runs from its
rotation-equivariant ``eig_sum`` start (the paper's identity start is tied to the feature
basis); ``mmd`` has a fixed bandwidth (the median heuristic counts the zero distances of
duplicated rows). Where the optimal V is not unique the method's objective is compared instead
of the losses (``SLOW``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairpca_dist import GroupMoments, fit_projection, load_model, save_model
from fairpca_dist.assessment import metrics
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.exceptions import ConvergenceWarning, ModelWarning
from fairpca_dist.solvers import SOLVERS

# fast, deterministic moment-based methods with a unique answer on generic data
METHODS = ["pca", "fair-eig", "samadi-mw", "mm", "kleindessner", "jevd-orthogonal"]
PROPERTY = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def grouped_rows(draw, min_rows: int = 12, max_rows: int = 60):
    """Rows of two groups with different means and covariances, p in 3..5."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(min_rows, max_rows))
    p = draw(st.integers(3, 5))
    rng = np.random.default_rng(seed)
    labels = np.array(["a"] * (n // 2) + ["b"] * (n - n // 2))
    x = rng.normal(size=(n, p)) @ rng.normal(size=(p, p))
    x[labels == "b"] = x[labels == "b"] @ rng.normal(size=(p, p)) + rng.normal(scale=2.0, size=p)
    return x, labels, rng


def fit(x: np.ndarray, labels: np.ndarray, method: str, **options):
    """(moments, the fitted model) with two components; the rows go to the methods that read them."""
    moments = GroupMoments.from_arrays(x, labels)
    if SOLVERS[method].reads_rows(options):
        options["passes"] = ArrayPasses(x, labels, moments.groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", ModelWarning)
        return moments, fit_projection(moments, 2, method=method, random_state=0, **options)


def losses(x: np.ndarray, labels: np.ndarray, method: str, **options) -> np.ndarray:
    moments, model = fit(x, labels, method, **options)
    return metrics.group_losses(moments, model.components, n_components=2), model


@PROPERTY
@given(grouped_rows(min_rows=2, max_rows=80), st.data())
def test_merging_moments_of_any_split_equals_the_whole(sample, data):
    x, labels, _ = sample
    cuts = sorted(data.draw(st.lists(st.integers(1, len(x) - 1), max_size=4, unique=True)))
    parts = [
        GroupMoments.from_arrays(x[a:b], labels[a:b])
        for a, b in zip([0, *cuts], [*cuts, len(x)], strict=True)
        if set(labels[a:b]) == {"a", "b"}
    ]
    if not parts:
        return
    covered = sum(part.n_samples for part in parts)
    rows = np.concatenate(
        [np.arange(a, b) for a, b in zip([0, *cuts], [*cuts, len(x)], strict=True) if set(labels[a:b]) == {"a", "b"}]
    )
    whole = GroupMoments.from_arrays(x[rows], labels[rows])
    merged = parts[0]
    for part in reversed(parts[1:]):  # any order
        merged = merged + part
    assert merged.n_samples == covered == whole.n_samples
    np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(merged.scatter, whole.scatter, rtol=1e-9, atol=1e-9 * np.abs(whole.scatter).max())


@pytest.mark.parametrize("method", METHODS)
@PROPERTY
@given(sample=grouped_rows())
def test_feature_rotation_rotates_the_components_and_keeps_the_losses(method, sample):
    x, labels, rng = sample
    q, _ = np.linalg.qr(rng.normal(size=(x.shape[1], x.shape[1])))
    before, model = losses(x, labels, method)
    after, rotated = losses(x @ q, labels, method)
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6 * max(1.0, before.max()))
    if method in ("pca", "kleindessner"):  # closed forms: the subspace itself is unique
        projector = model.components @ model.components.T
        np.testing.assert_allclose(q.T @ projector @ q, rotated.components @ rotated.components.T, atol=1e-6)


@pytest.mark.parametrize("method", METHODS)
@PROPERTY
@given(sample=grouped_rows())
def test_duplicated_rows_relabelled_groups_and_permuted_features_keep_the_losses(method, sample):
    x, labels, rng = sample
    before, _ = losses(x, labels, method)
    twice, _ = losses(np.vstack([x, x]), np.concatenate([labels, labels]), method)
    renamed, _ = losses(x, np.where(labels == "a", "group 1", "group 2"), method)
    order = rng.permutation(x.shape[1])
    permuted, _ = losses(x[:, order], labels, method)
    for other in (twice, renamed, permuted):
        np.testing.assert_allclose(other, before, rtol=1e-5, atol=1e-6 * max(1.0, before.max()))


# slower methods: the options under which each is equivariant (module docstring), the feature
# maps that keep it, what is compared, and its relative tolerance: the losses where the optimal
# V is unique, else the method's objective. Not unique: olfat-sdp's V (the top eigenvectors of P*,
# solved to ~1e-8) moves by 1e-4 along directions of nearly equal value; the ℓ1 criteria of
# mm-robust and mm-sparse are flat at their optimum on few rows (the same objective to 1e-15 with
# losses 10 % apart). mm-robust runs the paper's plain MM steps: the over-relaxed ones can take
# another branch at a tie of the ℓ1 criterion (a row orthogonal to a component) when rounding
# differs, and end at another fixed point (0.4 % lower on one 37-row example). dro's certified
# optimum (the frontier algorithm of two groups) is unique in value, not always in V (where one
# piece is smallest along the boundary, its losses move to second order only).
BOTH, NONE = ("permutation", "rotation"), ()
SLOW = {
    "samadi-sdp": ({}, BOTH, "losses", 1e-4),
    "olfat-sdp": ({}, BOTH, "objective", 1e-5),
    "kleindessner-cov": ({}, BOTH, "losses", 1e-6),
    "mm-sparse": ({}, NONE, "objective", 1e-5),
    "mm-robust": ({"accelerate": False}, BOTH, "objective", 1e-5),
    "dro": ({}, BOTH, "objective", 1e-7),
    "jevd": ({"init": "eig_sum"}, BOTH, "losses", 1e-5),
    "mmd": ({"sigma": 3.0, "start": "pca"}, BOTH, "losses", 1e-4),  # and τ: _mmd_tau
}
SLOW_PROPERTY = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mmd_tau(labels: np.ndarray) -> float:
    """mmd's τ for groups of these sizes m and n: 1.5 (1/m + 1/n), half as large again as the
    bound on the RBF estimator's null-bias floor (1/m + 1/n)(1 − κ) (mmd's module docstring). A τ
    near the floor can only be met by collapsing the projection, where two runs that differ only by
    rounding end apart: with τ = 0.1 on 12 + 13 rows (floor 0.096), one ended with the constraint
    unmet after 101 iterations and 8 of its 23 feature permutations converged elsewhere in 33."""
    _, counts = np.unique(labels, return_counts=True)
    return 1.5 * float(np.sum(1.0 / counts))


@pytest.mark.parametrize("method", SLOW)
@SLOW_PROPERTY
@given(sample=grouped_rows(min_rows=16, max_rows=40))
def test_slower_solvers_keep_their_answer_under_every_invariance(method, sample):
    options, feature_maps, compared, rtol = SLOW[method]
    x, labels, rng = sample
    if method == "mmd":
        options = {**options, "tau": _mmd_tau(labels)}  # the same τ for the duplicated rows: the same MMD²

    def answer(x: np.ndarray, labels: np.ndarray, **options) -> np.ndarray:
        group_losses, model = losses(x, labels, method, **options)
        return group_losses if compared == "losses" else np.array([model.objective_history[-1]])

    before = answer(x, labels, **options)
    twice = {**options, "alpha": 0.15 * np.sqrt(2.0)} if method == "dro" else options  # ε = α/√N
    variants = {
        "duplicated rows": answer(np.vstack([x, x]), np.concatenate([labels, labels]), **twice),
        "relabelled groups": answer(x, np.where(labels == "a", "group 1", "group 2"), **options),
    }
    if "permutation" in feature_maps:
        variants["permuted features"] = answer(x[:, rng.permutation(x.shape[1])], labels, **options)
    if "rotation" in feature_maps:
        q, _ = np.linalg.qr(rng.normal(size=(x.shape[1], x.shape[1])))
        variants["rotated features"] = answer(x @ q, labels, **options)
    scale = max(1.0, float(np.abs(before).max()))
    for name, other in variants.items():
        np.testing.assert_allclose(other, before, rtol=rtol, atol=rtol * scale, err_msg=f"{compared}, {name}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sample=grouped_rows(min_rows=16), method=st.sampled_from(METHODS + list(SLOW)), standardize=st.booleans())
def test_a_saved_model_loads_back_and_projects_the_same(tmp_path_factory, sample, method, standardize):
    x, labels, _ = sample
    options = SLOW[method][0] if method in SLOW else {}
    _, model = fit(x, labels, method, standardize=standardize, **options)
    folder = save_model(model, tmp_path_factory.mktemp("model"))
    loaded = load_model(folder)
    np.testing.assert_array_equal(loaded.components, model.components)
    np.testing.assert_array_equal(loaded.transform(x), model.transform(x))
    assert (loaded.method, loaded.status, loaded.group_labels, loaded.feature_names) == (
        model.method,
        model.status,
        model.group_labels,
        model.feature_names,
    )
