"""samadi-sdp with its default settings (a conic solver that fails or is inaccurate falls back
to the next), and the output rank of samadi-sdp and samadi-mw (exactly r where a rank-r
projection is certified), on the real tables where users met them (issue #31) and on fixtures
with closed-form answers. Each result is checked against an independent certificate: fair-eig's
for two groups, the other Samadi solver's for more."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import CREDIT_CSV, DATA_DIR, require_data

from fairpca_dist import GroupMoments, SolverError, fit_projection
from fairpca_dist.exceptions import ConvergenceWarning
from fairpca_dist.solvers import conic
from fairpca_dist.solvers.result import STATUS_MESSAGES
from fairpca_dist.solvers.stiefel import check_orthonormal
from solvers.test_samadi import max_loss, moments_from_covariances, random_moments

SAMADI = ["samadi-sdp", "samadi-mw"]


# ------------------------------------------------------------------ the default solver falls back
@pytest.fixture(scope="module")
def credit_by_default() -> GroupMoments:
    """Default of Credit Card Clients, 30,000 rows grouped by the target (default next month),
    22 features (all but ID, BILL_AMT5 and the target). Standardised, at r = 2, Clarabel stops
    without a solution (its status InsufficientProgress: cvxpy's "Solver 'CLARABEL' failed"), as
    on the 30,000 × 22 table of issue #31; r = 1 and 3 solve."""
    frame = pd.read_csv(require_data(CREDIT_CSV), header=1)
    target = "default payment next month"
    features = [c for c in frame.columns if c not in ("ID", "BILL_AMT5", target)]
    return GroupMoments.from_arrays(
        frame[features].to_numpy(np.float64), frame[target].to_numpy(), feature_names=features
    )


def test_sdp_falls_back_to_scs_where_clarabel_fails_on_a_real_table(credit_by_default):
    result = fit_projection(credit_by_default, 2, method="samadi-sdp", standardize=True)
    attempts = result.details["solver_attempts"]
    assert [(a["solver"], a["status"], a["certified"]) for a in attempts] == [
        ("CLARABEL", "error", False),
        ("SCS", "optimal", True),
    ]
    assert attempts[0]["error"].startswith("SDP solver CLARABEL failed: it stopped without a solution")
    assert result.status == "converged" and result.options["solver"] == "SCS"
    assert result.message == f"{STATUS_MESSAGES['converged']}; {result.details['solver_fallback']}"
    assert result.details["solver_fallback"].endswith("the result is SCS's (solver='auto' falls back)")
    # two groups: the relaxation is tight, and fair-eig certifies the rank-2 optimum
    exact = fit_projection(credit_by_default, 2, method="fair-eig", standardize=True)
    assert result.components.shape[1] == 2
    assert max_loss(result) == pytest.approx(max_loss(exact), rel=1e-6)
    assert result.certificate["lower_bound"] <= exact.certificate["upper_bound"] * (1 + 1e-9)
    assert exact.certificate["lower_bound"] <= max_loss(result) * (1 + 1e-9)
    # the recorded options pose the same problem again, with the solver that solved it
    again = fit_projection(credit_by_default, 2, method="samadi-sdp", standardize=True, **result.options)
    assert len(again.details["solver_attempts"]) == 1
    np.testing.assert_allclose(again.components, result.components, atol=1e-12)


def test_an_explicit_solver_that_fails_names_itself_and_the_others(credit_by_default):
    with pytest.raises(
        SolverError,
        match=r"^samadi-sdp: SDP solver CLARABEL failed: it stopped without a solution "
        r".*; try solver='SCS', or the default solver='auto', which falls back",
    ):
        fit_projection(credit_by_default, 2, method="samadi-sdp", standardize=True, solver="CLARABEL")


def solver_settings(monkeypatch, **settings: dict[str, float]) -> None:
    """Give the named conic solvers these settings in place of their tolerances."""
    original = conic.tolerance_settings
    monkeypatch.setattr(
        conic, "tolerance_settings", lambda name, tolerance: settings.get(name.lower()) or original(name, tolerance)
    )


@pytest.mark.parametrize(
    ("clarabel", "words"),
    [
        ({"max_iter": 3}, "SDP solver CLARABEL ended with status 'user_limit'"),
        (
            dict.fromkeys(("tol_gap_abs", "tol_gap_rel", "tol_feas"), 0.3),
            "CLARABEL met its tolerance (0.3), but the output's largest loss",
        ),
    ],
)
def test_sdp_falls_back_when_clarabel_stops_early_or_is_not_certified(monkeypatch, clarabel, words):
    """Clarabel stopped after 3 iterations (no solution), or at a tolerance so loose that its
    output is 6 % above the certified bound: SCS solves, as samadi-mw certifies."""
    solver_settings(monkeypatch, clarabel=clarabel)
    moments = random_moments(0, 6, 3)
    result = fit_projection(moments, 2, method="samadi-sdp")
    reference = fit_projection(moments, 2, method="samadi-mw", tol=1e-8)
    first, second = result.details["solver_attempts"]
    assert (
        first["solver"] == "CLARABEL"
        and not first["certified"]
        and second == {**second, "solver": "SCS", "certified": True}
    )
    assert result.status == "converged" and result.options["solver"] == "SCS"
    assert result.details["solver_fallback"].startswith(words)
    assert result.certificate["lower_bound"] <= reference.certificate["upper_bound"] * (1 + 1e-9)
    assert reference.certificate["lower_bound"] <= result.certificate["relaxation_value"] * (1 + 1e-6)
    assert max_loss(result) <= reference.certificate["upper_bound"] * (1 + 1e-5)


def test_sdp_returns_the_better_certified_gap_when_no_solver_certifies(monkeypatch):
    solver_settings(
        monkeypatch, clarabel=dict.fromkeys(("tol_gap_abs", "tol_gap_rel", "tol_feas"), 0.3), scs={"max_iters": 2}
    )
    with pytest.warns(
        ConvergenceWarning,
        match=r"^samadi-sdp: CLARABEL met its tolerance \(0.3\), but .*; SCS "
        r"stopped at reduced accuracy \('optimal_inaccurate'.*; CLARABEL's "
        r"output is returned: ",
    ):
        result = fit_projection(random_moments(0, 6, 3), 2, method="samadi-sdp")
    first, second = result.details["solver_attempts"]
    assert first["gap"] < second["gap"] and result.options["solver"] == "CLARABEL"
    assert result.status == "inaccurate" and "solver_fallback" not in result.details


def test_sdp_says_which_solvers_failed_when_none_returns_a_solution(monkeypatch):
    def failing(problem, name, settings, *, what):
        raise SolverError(f"{what} {name} failed: it stopped without a solution")

    monkeypatch.setattr(conic, "solve", failing)
    with pytest.raises(
        SolverError,
        match=r"^samadi-sdp: SDP solver CLARABEL failed: .*; SDP solver SCS failed: .* "
        r"\(samadi-mw solves the same relaxation without a conic solver\)$",
    ):
        fit_projection(random_moments(0, 6, 3), 2, method="samadi-sdp")


# ------------------------------------------------------------------ rank r when the optimum allows it
@pytest.fixture(scope="module")
def adult_by_race() -> GroupMoments:
    """UCI Adult's six numeric columns, standardised, by race (five groups: 27,816 to 271 rows).
    At r = 3 both Samadi solvers returned 4 columns (issue #31's "--n-components 3 on five
    groups"): the LP vertex's fourth weight was a few 1e-6."""
    names = [
        "age",
        "workclass",
        "fnlwgt",
        "education",
        "education-num",
        "marital-status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "capital-gain",
        "capital-loss",
        "hours-per-week",
        "native-country",
        "income",
    ]
    frame = pd.read_csv(
        require_data(DATA_DIR / "adult" / "adult.data"), header=None, names=names, skipinitialspace=True
    )
    numeric = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    moments = GroupMoments.from_arrays(
        frame[numeric].to_numpy(np.float64), frame["race"].to_numpy(), feature_names=numeric
    )
    return moments.rescaled(moments.feature_scale())


def test_five_groups_at_r_3_give_3_columns_with_their_certificate(adult_by_race):
    results = {method: fit_projection(adult_by_race, 3, method=method) for method in SAMADI}
    for method, result in results.items():
        assert result.components.shape[1] == 3 and result.details["rounded_columns"] > 3, method
        tolerance = result.details["rank_tolerance"]
        lower, upper = result.certificate["lower_bound"], result.certificate["upper_bound"]
        assert max(result.details["extra_singular_values"]) < 5e-3
        check_orthonormal(result.components)
        assert result.status == "converged" and result.message == STATUS_MESSAGES["converged"]
        assert upper == result.certificate["rounded_value"] == pytest.approx(max_loss(result), rel=1e-12)
        assert lower <= upper <= lower + tolerance * upper
    # each is a rank-3 projection, so no lower bound on the rank-3 optimum passes its loss
    sdp, mw = results["samadi-sdp"], results["samadi-mw"]
    assert sdp.certificate["lower_bound"] <= max_loss(mw) * (1 + 1e-12)
    assert mw.certificate["lower_bound"] <= max_loss(sdp) * (1 + 1e-12)
    assert max_loss(sdp) == pytest.approx(max_loss(mw), rel=2e-5)


def test_samadi_mw_iterates_on_until_rank_r_is_certified(adult_by_race):
    """When the gap first closes to tol=1e-5 (the fewest oracle calls that converge), the
    mixture rounds to 4 columns whose best rank-3 projection is not yet within tol of the bound;
    at tighter gaps it is, and the default run returns 3 columns."""
    result = fit_projection(adult_by_race, 3, method="samadi-mw")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        runs = (fit_projection(adult_by_race, 3, method="samadi-mw", max_iter=n) for n in range(1, result.n_iter))
        first = next(run for run in runs if run.converged)
    assert result.components.shape[1] == 3 and result.n_iter > first.n_iter
    assert first.components.shape[1] > 3 and "extra_columns_reason" in first.details


def test_skip_lp_keeps_the_wider_map_and_says_why(adult_by_race):
    result = fit_projection(adult_by_race, 3, method="samadi-sdp", skip_lp=True)
    assert result.components.shape[1] > 3
    assert result.details["extra_columns_reason"].startswith(
        "skip_lp=True keeps every direction of the relaxed solution (the authors' code)"
    )


def star() -> GroupMoments:
    """Three groups on lines 60° apart in the plane: at r = 1 the relaxation P = I/2 gives every
    group the loss 1/2, while every line is at least 60° from one of them: OPT_1 = sin²60° = 3/4.
    The extra dimension lowers the largest loss by a third."""
    angles = np.pi * np.arange(3) / 3
    return moments_from_covariances([np.outer([np.cos(a), np.sin(a)], [np.cos(a), np.sin(a)]) for a in angles])


def rank_one_optimum(moments: GroupMoments) -> float:
    """min over lines in the plane of the largest loss, on a grid of 100,000 angles."""
    covariance = moments.covariance()
    angles = np.linspace(0.0, np.pi, 100_000)
    lines = np.stack([np.cos(angles), np.sin(angles)])
    kept = np.einsum("in,gij,jn->gn", lines, covariance, lines)
    best = np.linalg.eigvalsh(covariance)[:, -1]
    return float((best[:, None] - kept).max(axis=0).min())


@pytest.mark.parametrize("method", SAMADI)
def test_a_wider_output_the_optimum_needs_is_kept_and_explained(method):
    moments = star()
    optimum = rank_one_optimum(moments)
    result = fit_projection(moments, 1, method=method)
    assert optimum == pytest.approx(0.75, abs=1e-9)
    assert result.components.shape[1] == 2
    np.testing.assert_allclose(result.group_loss, 0.5, atol=1e-6)
    assert result.certificate["lower_bound"] == pytest.approx(0.5, abs=1e-6)
    assert result.details["rank_r_loss"] >= optimum - 1e-9  # a rank-1 projection: no better than the optimum
    reason = result.details["extra_columns_reason"]
    assert reason.startswith(
        f"the best rank-1 projection found in the output's span has largest loss {result.details['rank_r_loss']:.6g}, "
    )
    assert reason.endswith(
        "above the certified lower bound 0.5 on the rank-1 optimum (the tolerance is 0.001 %), "
        "while the output's largest loss 0.5 is at most that optimum (Samadi et al. 2018, "
        "Theorem 5.2: rank ≤ r + k − 1 = 3)"
    )
    assert result.message == f"{STATUS_MESSAGES['converged']}; 2 columns, not r=1: {reason}"


@pytest.mark.parametrize("method", SAMADI)
def test_f1_two_orthogonal_groups_mix_to_the_rank_one_optimum(method):
    """Spec §C.2 F1: the relaxation's P = I/2 rounds to two fractional weights; their signed mix
    (1, ±1)/√2 is the rank-1 optimum, both losses 1/2."""
    moments = moments_from_covariances([np.diag([1.0, 0.0]), np.diag([0.0, 1.0])], counts=[30, 10])
    result = fit_projection(moments, 1, method=method)
    assert result.components.shape[1] == 1 and result.details["rounded_columns"] == 2
    np.testing.assert_allclose(np.abs(result.components[:, 0]), [2**-0.5] * 2, atol=1e-6)
    np.testing.assert_allclose(result.group_loss, [0.5, 0.5], atol=1e-6)
