"""The contract every registered solver honours (parametrised over the registry)."""

from __future__ import annotations

import inspect
import json
import warnings

import numpy as np
import pytest
from conftest import grouped_data

from fairpca_dist import SOLVERS, FairProjection, GroupMoments, InputError, fit_projection, load_model, save_model
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.solvers.result import STATUS_MESSAGES
from fairpca_dist.solvers.stiefel import check_orthonormal, subspace_distance

METHODS = sorted(SOLVERS)
# Options a method needs on this fixture: 400 rows in two groups put the RBF MMD² of two samples
# of one distribution near 6e-3, above mmd's default tau of 1e-3 (spec seed-004.md E2).
FIXTURE_OPTIONS = {"mmd": {"tau": 0.05}}


def assert_valid_components(result: FairProjection, n_groups: int) -> None:
    """Orthonormal p × r, or (rank-relaxed solvers) p × r' with r < r' ≤ r + k − 1 and
    orthogonal columns of norm ≤ 1 (E = [√λ*_j u_j])."""
    r, columns = result.n_components, result.components.shape[1]
    if columns == r:
        check_orthonormal(result.components)
        return
    assert r < columns <= r + n_groups - 1
    gram = result.components.T @ result.components
    np.testing.assert_allclose(gram, np.diag(np.diag(gram)), atol=1e-10)
    assert np.all(np.diag(gram) <= 1 + 1e-10)


@pytest.fixture(scope="module")
def rows() -> tuple[np.ndarray, np.ndarray]:
    return grouped_data(n_rows=400, n_features=5, n_groups=2, seed=11)


@pytest.fixture(scope="module")
def moments(rows) -> GroupMoments:
    return GroupMoments.from_arrays(*rows)


@pytest.fixture(scope="module")
def fit(rows, moments):
    """fit_projection on the fixture, with the rows for the methods that read them."""

    def fit(method: str, n_components: int = 2, **options) -> FairProjection:
        options = {**FIXTURE_OPTIONS.get(method, {}), **options}
        passes = ArrayPasses(*rows, moments.groups) if SOLVERS[method].reads_rows(options) else None
        return fit_projection(moments, n_components, method=method, passes=passes, **options)

    return fit


@pytest.mark.parametrize("method", METHODS)
def test_signature(method):
    parameters = inspect.signature(SOLVERS[method].solve).parameters
    assert list(parameters)[:2] == ["moments", "n_components"]
    assert parameters["random_state"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["center"].default == "group"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("center", ["group", "global"])
def test_result_fields_and_orthonormality(method, center, moments, fit):
    result = fit(method, center=center, random_state=0)
    assert isinstance(result, FairProjection)
    assert result.components.shape[0] == moments.n_features
    assert_valid_components(result, moments.n_groups)
    assert result.group_labels == moments.groups
    assert result.group_loss.shape == result.group_error.shape == (moments.n_groups,)
    assert np.all(result.group_loss >= -1e-10)
    assert result.status in STATUS_MESSAGES and result.message == STATUS_MESSAGES[result.status]
    assert result.objective_history.ndim == 1 and result.objective_history.size >= 1
    assert result.center == center and result.method == method


@pytest.mark.parametrize("method", METHODS)
def test_unknown_option_lists_valid_ones(method, moments):
    with pytest.raises(InputError, match=rf"unknown option\(s\) \['no_such_option'\] for method '{method}'"):
        fit_projection(moments, 2, method=method, no_such_option=1)


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_under_random_state(method, fit):
    a = fit(method, random_state=3)
    b = fit(method, random_state=3)
    np.testing.assert_array_equal(a.components, b.components)


# At r = p the projection is the identity and every loss is 0; what some methods do instead:
# kleindessner* keep only p − (k − 1) directions, fnpm p − (n_unfair + 1) (default 2 + 1), and
# fnpm-streaming refuses before its first pass, where it knows only the mean direction;
# mm-sparse's surrogate is not tight (a map that is not orthonormal, status not_tight);
# olfat-sdp's mean constraint cannot hold with P = I, nor mmd's constraint with the full data
# (statuses infeasible, constraint_unmet).
REFUSE_FULL_RANK = {"kleindessner": 1, "kleindessner-cov": 1, "fnpm": 3, "fnpm-streaming": 1}
NOT_ORTHONORMAL_AT_FULL_RANK = {"mm-sparse"}


@pytest.mark.parametrize("method", METHODS)
def test_every_method_at_full_rank_keeps_everything_or_says_why(method, fit, moments):
    """n_components = n_features is allowed: the losses are 0 up to rounding (samadi-mw divided
    by its zero first loss here, and crashed on NaN weights)."""
    p = moments.n_features
    if method in REFUSE_FULL_RANK:
        with pytest.raises(
            InputError, match=rf"n_components={p} is more than the {p - REFUSE_FULL_RANK[method]} directions left"
        ):
            fit(method, p, random_state=0)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit(method, p, random_state=0)
    assert result.status in STATUS_MESSAGES and result.components.shape == (p, p)
    if method not in NOT_ORTHONORMAL_AT_FULL_RANK:
        check_orthonormal(result.components)
        np.testing.assert_allclose(result.group_loss, 0.0, atol=1e-10 * np.trace(moments.covariance("group")[0]))


def test_pca_agrees_with_brute_force_on_a_tiny_problem():
    # p = 3, r = 1: the best direction of a grid over the sphere maximises total variance.
    x, labels = grouped_data(n_rows=200, n_features=3, n_groups=2, seed=12)
    moments = GroupMoments.from_arrays(x, labels)
    result = fit_projection(moments, 1, method="pca")
    theta, phi = np.meshgrid(np.linspace(0, np.pi, 400), np.linspace(0, 2 * np.pi, 800))
    grid = np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], -1).reshape(-1, 3)
    variance = np.einsum("ni,ij,nj->n", grid, moments.total_covariance(), grid)
    best = grid[np.argmax(variance)][:, None]
    assert variance.max() <= result.objective_history[-1] + 1e-12
    assert subspace_distance(best, result.components) < 1e-2


def test_unknown_method_and_center(moments):
    with pytest.raises(InputError, match="unknown method 'pcaa'; available"):
        fit_projection(moments, 2, method="pcaa")
    with pytest.raises(InputError, match="center='median'"):
        fit_projection(moments, 2, center="median")


def test_custom_callable_solver(moments):
    def first_axes(moments, n_components, *, random_state=None, center="group"):
        return SOLVERS["pca"].solve(moments, n_components, center=center)

    result = fit_projection(moments, 2, method=first_axes)
    assert result.method == "first_axes"


DETAILS = {
    "dro": {"formula", "radii"},
    "jevd": {"selected", "stop_reason", "init_used", "fallback_reason"},
    "jevd-orthogonal": {"selected", "stop_reason"},
    "mmd": {"log"},
    "kleindessner-cov": {"directions_with_variance", "directions_without_variance", "n_directions_clipped"},
    "fnpm": {"unfair_dimension", "unfair_eigenvalues", "zero_directions_left_out", "mean_direction"},
    "fnpm-streaming": {
        "unfair_dimension",
        "unfair_eigenvalues",
        "zero_directions_left_out",
        "mean_direction",
        "unfair_change",
        "components_change",
    },
    "samadi-sdp": {"solver_attempts"},
    # its rounded mixture is wider than r here, and narrowed to r: the rounding is recorded
    "samadi-mw": {"rounded_columns", "extra_singular_values", "rank_r_loss", "rank_tolerance"},
}


@pytest.mark.parametrize("method", METHODS)
def test_a_saved_models_options_refit_the_same_model(method, fit, tmp_path):
    """``options`` holds exactly options the method accepts (what the solver records on the way
    goes to ``details``), so the options of a saved model pose the same problem again."""
    model = fit(method, random_state=0)
    assert set(model.options) <= SOLVERS[method].options, "a record among the options"
    assert set(model.details) == DETAILS.get(method, set())
    loaded = load_model(save_model(model, tmp_path / "model"))
    assert (loaded.options, loaded.details) == (model.options, model.details)
    again = fit(method, random_state=0, **loaded.options)
    np.testing.assert_allclose(again.components, model.components, rtol=0, atol=1e-12)


def test_a_model_saved_before_details_existed_loads_its_records_as_details(fit, tmp_path):
    """Models of the same format written before ``details`` kept the solver's records among the
    options: loading moves what the method does not accept to ``details``."""
    model = fit("jevd", random_state=0)
    folder = save_model(model, tmp_path / "model")
    record = json.loads((folder / "model.json").read_text())
    record["options"].update(record["diagnostics"].pop("details"))
    (folder / "model.json").write_text(json.dumps(record))
    loaded = load_model(folder)
    assert loaded.options == model.options
    assert loaded.details == model.details and {"selected", "stop_reason", "init_used"} <= set(loaded.details)
