"""FairPCA as a scikit-learn transformer."""

from __future__ import annotations

import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn
from conftest import grouped_data
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator, check_sample_weight_equivalence_on_dense_data

from fairpca_dist import SOLVERS, FairPCA, GroupError, GroupMoments, InputError, SchemaError, fit_projection
from fairpca_dist.assessment import metrics
from fairpca_dist.engine.datapasses import ArrayPasses


class RowGroupedFairPCA(FairPCA):
    """FairPCA whose groups are a deterministic function of each row's values.

    scikit-learn's checks call ``fit(X, y)`` without ``sensitive_features``; deriving the
    groups from the rows themselves lets every check exercise the real fit/transform path.
    Groups follow the rows, so shuffling, subsetting, weighting and repeating rows keep them.
    """

    def fit(self, X, y=None, sample_weight=None):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                x = np.asarray(X, dtype=np.float64)
            groups = (np.floor(np.abs(x).sum(axis=1) * 7.0) % 2).astype(int) if np.isfinite(x).all() else None
        except (TypeError, ValueError):
            groups = None  # let FairPCA's own validation report the bad X
        if groups is not None and groups.shape != (x.shape[0],):
            groups = None
        return super().fit(X, y, sensitive_features=groups, sample_weight=sample_weight)


# Output width with n_components=None is min(n_samples, n_features), as in scikit-learn's PCA,
# and directions of zero variance are arbitrary: the check's 15 rows x 30 features, weighted
# vs repeated, differ in width and in the null space. With n_components set, the same check
# passes (test_sample_weight_equivalence_with_n_components below).
ROW_GROUPED_EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": "n_components=None keeps min(n_samples, n_features) "
    "columns, which differs between weighted and repeated rows",
}


def test_sklearn_checks_with_groups_derived_from_rows():
    results = check_estimator(
        RowGroupedFairPCA(), expected_failed_checks=ROW_GROUPED_EXPECTED_FAILURES, on_fail=None, on_skip=None
    )
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert failed == []
    assert sum(r["status"] == "passed" for r in results) >= 50


def test_sample_weight_equivalence_with_n_components():
    check_sample_weight_equivalence_on_dense_data("RowGroupedFairPCA", RowGroupedFairPCA(n_components=3))


def test_sklearn_checks_on_fairpca_fail_only_for_missing_sensitive_features():
    """Plain ``check_estimator(FairPCA())``: the checks that call ``fit(X, y)`` cannot apply,
    because fitting needs ``sensitive_features``. Each of them must fail with exactly that
    error; every other check (parameters, cloning, input validation for empty, NaN/inf,
    sparse and 1-D data) must pass."""
    results = check_estimator(FairPCA(), on_fail=None, on_skip=None)
    failed = [r for r in results if r["status"] == "failed"]
    passed = [r["check_name"] for r in results if r["status"] == "passed"]
    for result in failed:
        error = result["exception"]
        text = f"{error} {error.__cause__} {error.__context__}"
        assert "requires sensitive_features" in text, (result["check_name"], text)
    assert {
        "check_estimators_empty_data_messages",
        "check_fit1d",
        "check_estimator_sparse_matrix",
        "check_no_attributes_set_in_init",
        "check_parameters_default_constructible",
    } <= set(passed)


def test_pipeline_routes_sensitive_features():
    x, labels = grouped_data(n_rows=300, n_features=6)
    y = (x[:, 0] > np.median(x[:, 0])).astype(int)
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(
            StandardScaler(),
            FairPCA(n_components=3).set_fit_request(sensitive_features=True),
            LogisticRegression(),
        )
        pipe.fit(x, y, sensitive_features=labels)
        assert pipe.score(x, y) > 0.6
    fpca = pipe[1]
    assert fpca.transform(StandardScaler().fit_transform(x)).shape == (300, 3)


def test_matches_library_and_rows():
    x, labels = grouped_data(n_rows=500, n_features=6, offset=10.0)
    fpca = FairPCA(n_components=2).fit(x, sensitive_features=labels)
    assert fpca.components_.shape == (2, 6) and fpca.n_components_ == 2
    np.testing.assert_allclose(fpca.mean_, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(
        fpca.group_losses_, metrics.group_losses_from_rows(x, labels, fpca.components_.T), rtol=1e-8
    )
    np.testing.assert_allclose(
        fpca.group_errors_, metrics.group_errors_from_rows(x, labels, fpca.components_.T), rtol=1e-9
    )
    z = fpca.transform(x)
    np.testing.assert_allclose(z, (x - x.mean(0)) @ fpca.components_.T, atol=1e-10)
    back = fpca.inverse_transform(z)
    np.testing.assert_allclose(back - x.mean(0), (x - x.mean(0)) @ fpca.components_.T @ fpca.components_, atol=1e-9)
    assert list(fpca.groups_) == ["g0", "g1", "g2"]
    assert list(fpca.get_feature_names_out()) == ["fairpca0", "fairpca1"]


def test_dataframe_with_sensitive_column_name_and_standardize():
    x, labels = grouped_data(n_rows=300, n_features=4)
    frame = pd.DataFrame(x * [1, 100, 0.01, 5], columns=list("abcd")).assign(sex=labels)
    fpca = FairPCA(n_components=2, standardize=True).fit(frame, sensitive_features="sex")
    assert list(fpca.feature_names_in_) == list("abcd")
    np.testing.assert_allclose(fpca.scale_, frame[list("abcd")].std(ddof=0).to_numpy(), rtol=1e-12)
    with_column = fpca.transform(frame)
    without = fpca.transform(frame.drop(columns="sex"))
    np.testing.assert_allclose(with_column, without)
    assert fpca.set_output(transform="pandas").transform(frame).columns.tolist() == ["fairpca0", "fairpca1"]


def test_dask_inputs_equal_numpy():
    x, labels = grouped_data(n_rows=2000, n_features=5)
    reference = FairPCA(n_components=2).fit(x, sensitive_features=labels)
    lazy = FairPCA(n_components=2).fit(da.from_array(x, chunks=(300, 5)), sensitive_features=labels)
    np.testing.assert_allclose(lazy.components_, reference.components_, atol=1e-12)
    z = lazy.transform(da.from_array(x, chunks=(300, 5)))
    assert isinstance(z, da.Array)
    np.testing.assert_allclose(z.compute(), reference.transform(x), atol=1e-10)

    frame = dd.from_pandas(pd.DataFrame(x, columns=list("abcde")).assign(g=labels), npartitions=4)
    from_frame = FairPCA(n_components=2).fit(frame, sensitive_features="g")
    np.testing.assert_allclose(from_frame.components_, reference.components_, atol=1e-12)
    projected = from_frame.transform(frame)
    assert isinstance(projected, dd.DataFrame)
    np.testing.assert_allclose(projected.compute().to_numpy(), reference.transform(x), atol=1e-10)


def test_intersectional_groups_from_two_columns():
    x, _ = grouped_data(n_rows=400, n_features=3)
    rng = np.random.default_rng(0)
    groups = np.column_stack([rng.choice(["f", "m"], 400), rng.choice(["young", "old"], 400)])
    fpca = FairPCA(n_components=1).fit(x, sensitive_features=groups)
    assert list(fpca.groups_) == [("f", "old"), ("f", "young"), ("m", "old"), ("m", "young")]


def test_clone_keeps_solver_options():
    estimator = FairPCA(n_components=2, method="pca", center="global")
    assert clone(estimator).get_params() == estimator.get_params()


def test_errors():
    x, labels = grouped_data(n_rows=100, n_features=3)
    with pytest.raises(InputError, match="requires sensitive_features"):
        FairPCA(n_components=2).fit(x)
    with pytest.raises(InputError, match="unknown method 'fair'"):
        FairPCA(method="fair").fit(x, sensitive_features=labels)
    with pytest.raises(InputError, match="n_components=5 must be between 1 and n_features=3"):
        FairPCA(n_components=5).fit(x, sensitive_features=labels)
    with pytest.raises(GroupError, match="1 group"):
        FairPCA(n_components=2).fit(x, sensitive_features=np.zeros(100))
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InputError, match="'x1': 1 \\(NaN\\)"):
        FairPCA(n_components=2).fit(bad, sensitive_features=labels)
    fitted = FairPCA(n_components=2).fit(x, sensitive_features=labels)
    with pytest.raises(ValueError, match="features"):
        fitted.transform(x[:, :2])
    with pytest.raises(SchemaError, match="one label per row"):
        FairPCA(n_components=2).fit(x, sensitive_features=labels[:50])


@pytest.mark.filterwarnings("ignore::fairpca_dist.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::fairpca_dist.exceptions.ModelWarning")
@pytest.mark.parametrize("method", sorted(SOLVERS))
def test_every_registered_method_fits_and_transforms(method):
    """The estimator takes every method of the registry, the row-reading ones included (it
    builds their passes itself), and equals fit_projection on the same rows."""
    x, labels = grouped_data(n_rows=300, n_features=4, n_groups=2, seed=11)
    options = {"mmd": {"estimator": "rff", "n_random_features": 50, "max_iter": 3}, "mm-robust": {"max_iter": 10}}.get(
        method, {}
    )
    fpca = FairPCA(n_components=2, method=method, random_state=0, **options).fit(x, sensitive_features=labels)
    z = fpca.transform(x)
    assert z.shape[0] == 300 and np.isfinite(z).all()
    moments = GroupMoments.from_arrays(x, labels)
    passes = ArrayPasses(x, labels, moments.groups) if SOLVERS[method].reads_rows(options) else None
    alone = fit_projection(moments, 2, method=method, random_state=0, passes=passes, **options)
    np.testing.assert_allclose(fpca.components_, alone.components.T, atol=1e-8)
