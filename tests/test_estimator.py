"""FairPCA as a scikit-learn transformer."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import sklearn
from conftest import grouped_data
from dask.callbacks import Callback
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from fairpca_dist import SOLVERS, FairPCA, GroupError, GroupMoments, InputError, SchemaError, fit_projection
from fairpca_dist.assessment import metrics
from fairpca_dist.engine.datapasses import ArrayPasses


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
    with pytest.raises(SchemaError, match=r"names column\(s\) \['sex'\] that X does not have \(X has no column names"):
        FairPCA(n_components=2).fit(x, sensitive_features="sex")
    frame = pd.DataFrame(x, columns=list("abc")).assign(sex=labels)
    with pytest.raises(SchemaError, match=r"\['sexx'\] that X does not have \(columns: \['a', 'b', 'c', 'sex'\]\)"):
        FairPCA(n_components=2).fit(frame, sensitive_features="sexx")


@pytest.mark.filterwarnings("ignore::fairpca_dist.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::fairpca_dist.exceptions.ModelWarning")
@pytest.mark.parametrize("method", sorted(SOLVERS))
def test_every_registered_method_fits_and_transforms(method):
    """The estimator takes every method of the registry, the row-reading ones included (it
    builds their passes itself), and equals fit_projection on the same rows."""
    x, labels = grouped_data(n_rows=300, n_features=4, n_groups=2, seed=11)
    options = {
        "mmd": {"estimator": "rff", "n_random_features": 50, "max_iter": 3},
        "mm-robust": {"max_iter": 10},
        "fnpm": {"n_unfair": 1},  # p = 4: N of the default 2 + 1 directions leaves 1 for r = 2
        "fnpm-streaming": {"n_unfair": 1},
    }.get(method, {})
    fpca = FairPCA(n_components=2, method=method, random_state=0, method_options=options).fit(
        x, sensitive_features=labels
    )
    z = fpca.transform(x)
    assert z.shape[0] == 300 and np.isfinite(z).all()
    moments = GroupMoments.from_arrays(x, labels)
    passes = ArrayPasses(x, labels, moments.groups) if SOLVERS[method].reads_rows(options) else None
    alone = fit_projection(moments, 2, method=method, random_state=0, passes=passes, **options)
    np.testing.assert_allclose(fpca.components_, alone.components.T, atol=1e-8)


# ----------------------------------------------------------------------------- method_options
def test_method_options_are_one_parameter():
    estimator = FairPCA(2, method="samadi-mw", method_options={"tol": 1e-3, "max_iter": 50})
    assert estimator.get_params()["method_options"] == {"tol": 1e-3, "max_iter": 50}
    assert set(estimator.get_params()) == {
        "n_components",
        "method",
        "method_options",
        "center",
        "standardize",
        "random_state",
    }
    copy = clone(estimator)
    assert copy.get_params() == estimator.get_params() and copy.method_options is not estimator.method_options
    x, labels = grouped_data(n_rows=300, n_features=4)
    fitted = estimator.fit(x, sensitive_features=labels)
    assert fitted.projection_.options["tol"] == 1e-3 and fitted.projection_.options["max_iter"] == 50


def test_old_keyword_options_raise_type_error_with_the_remedy():
    with pytest.raises(
        TypeError, match=r"unexpected keyword argument\(s\) \['tol'\]: method options go in method_options"
    ):
        FairPCA(method="samadi-mw", tol=1e-3)
    with pytest.raises(ValueError, match=r"Invalid parameter 'tol'.*set_params\(method_options="):
        FairPCA(method="samadi-mw").set_params(tol=1e-3)
    with pytest.raises(ValueError, match="Invalid parameter 'colour'"):
        FairPCA().set_params(colour=1)


def test_set_params_method_after_options_of_another_method():
    x, labels = grouped_data(n_rows=300, n_features=4, n_groups=2)
    estimator = FairPCA(2, method="samadi-mw", method_options={"eta": 0.5})
    estimator.set_params(method="fair-eig")
    with pytest.raises(
        InputError,
        match=r"method_options has option\(s\) \['eta'\] that method 'fair-eig' does not take; "
        r"its options \(with defaults\): tol=1e-08, max_iter=100",
    ):
        estimator.fit(x, sensitive_features=labels)
    estimator.set_params(method_options={"tol": 1e-10}).fit(x, sensitive_features=labels)
    assert estimator.projection_.method == "fair-eig" and estimator.projection_.options["tol"] == 1e-10
    with pytest.raises(InputError, match="method 'pca' does not take; its options \\(with defaults\\): none"):
        FairPCA(2, method_options={"tol": 1e-3}).fit(x, sensitive_features=labels)
    with pytest.raises(InputError, match="method_options must be a dict"):
        FairPCA(2, method_options=[("tol", 1e-3)]).fit(x, sensitive_features=labels)


def test_set_params_one_option_at_a_time():
    estimator = FairPCA(method="samadi-mw", method_options={"tol": 1e-3})
    given = estimator.method_options
    estimator.set_params(method_options__max_iter=7, n_components=2)
    assert estimator.method_options == {"tol": 1e-3, "max_iter": 7} and estimator.n_components == 2
    assert given == {"tol": 1e-3}  # the caller's dict is not changed


# ----------------------------------------------------------------------------- grid search
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_grid_search_over_method_options_with_routed_groups(n_jobs):
    x, labels = grouped_data(n_rows=400, n_features=5, n_groups=2, seed=3)
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = (
            FairPCA(2, method="samadi-mw")
            .set_fit_request(sensitive_features=True)
            .set_score_request(sensitive_features=True)
        )
        search = GridSearchCV(
            estimator,
            {"method_options": [{"tol": 1e-3}, {"tol": 1e-6}]},
            cv=KFold(3, shuffle=True, random_state=0),
            n_jobs=n_jobs,
        )
        search.fit(x, sensitive_features=labels)
    assert [p["method_options"] for p in search.cv_results_["params"]] == [{"tol": 1e-3}, {"tol": 1e-6}]
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert (search.cv_results_["mean_test_score"] <= 0).all()  # minus the max group loss
    best = search.best_estimator_
    assert best.projection_.options["tol"] in (1e-3, 1e-6) and best.n_components_ == 2
    # the score is the method's own criterion on the rows, higher is better
    np.testing.assert_allclose(best.score(x, sensitive_features=labels), -best.group_losses_.max(), rtol=1e-9)


def test_grid_search_over_one_option_and_a_scoring():
    x, labels = grouped_data(n_rows=300, n_features=4, n_groups=2, seed=4)
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(
            FairPCA(2, method="samadi-mw").set_fit_request(sensitive_features=True),
            {"method_options__tol": [1e-3, 1e-6]},
            scoring=lambda estimator, X, y=None: float(estimator.explained_variance_ratio_.sum()),
            cv=3,
        )
        search.fit(x, sensitive_features=labels)
    assert search.best_estimator_.method_options["tol"] in (1e-3, 1e-6)


def test_grid_search_without_routing_passes_the_groups_to_fit():
    x, labels = grouped_data(n_rows=300, n_features=4, n_groups=2, seed=4)
    search = GridSearchCV(
        FairPCA(2, method="samadi-mw"),
        {"method_options": [{"tol": 1e-3}, {"tol": 1e-6}]},
        scoring=lambda estimator, X, y=None: float(estimator.explained_variance_ratio_.sum()),
        cv=3,
        error_score="raise",
    )
    search.fit(x, sensitive_features=labels)
    assert search.best_estimator_.moments_.n_samples == 300


def test_score_by_each_criterion():
    x, labels = grouped_data(n_rows=400, n_features=4, n_groups=2, seed=5)
    pca = FairPCA(2).fit(x, sensitive_features=labels)
    np.testing.assert_allclose(pca.score(x, sensitive_features=labels), pca.explained_variance_ratio_.sum(), rtol=1e-9)
    mm = FairPCA(2, method="mm").fit(x, sensitive_features=labels)
    working = mm.moments_.rescaled(mm.scale_)
    variance = metrics.group_variance_about(working, mm.components_.T, working.centers("group"))
    np.testing.assert_allclose(mm.score(x, sensitive_features=labels), variance.min(), rtol=1e-9)
    with pytest.raises(InputError, match=r"groups \['g0'\] differ from the groups of the fit \['g0', 'g1'\]"):
        mm.score(x[labels == "g0"], sensitive_features=labels[labels == "g0"])
    with pytest.raises(InputError, match="FairPCA.score requires sensitive_features"):
        mm.score(x)


# ----------------------------------------------------------------------------- partial_fit
def _same_subspace(a, b, atol=1e-10):
    np.testing.assert_allclose(a.components_.T @ a.components_, b.components_.T @ b.components_, atol=atol)


def _same_moments(a, b, rtol=1e-10):
    assert a.groups == b.groups and a.feature_names == b.feature_names
    np.testing.assert_array_equal(a.count, b.count)
    np.testing.assert_allclose(a.global_mean, b.global_mean, rtol=rtol)
    np.testing.assert_allclose(a.mean, b.mean, rtol=rtol)
    np.testing.assert_allclose(a.scatter_about("group"), b.scatter_about("group"), rtol=rtol, atol=1e-9)


@pytest.mark.parametrize(("method", "n_groups"), [("pca", 3), ("fair-eig", 2)])
@pytest.mark.parametrize("standardize", [False, True])
def test_partial_fit_over_three_batches_equals_fit(method, n_groups, standardize):
    x, labels = grouped_data(n_rows=900, n_features=5, n_groups=n_groups, seed=7)
    order = np.argsort(labels == "g1", kind="stable")  # g1's rows only in the last batches
    x, labels = x[order], labels[order]
    batches = np.array_split(np.arange(900), 3)
    assert "g1" not in set(labels[batches[0]]) or n_groups == 3
    estimator = FairPCA(2, method=method, standardize=standardize)
    for rows in batches:
        estimator.partial_fit(x[rows], sensitive_features=labels[rows])
    once = FairPCA(2, method=method, standardize=standardize).fit(x, sensitive_features=labels)
    _same_moments(estimator.moments_, once.moments_)
    _same_subspace(estimator, once)
    np.testing.assert_allclose(estimator.mean_, once.mean_, rtol=1e-12)
    np.testing.assert_allclose(estimator.scale_, once.scale_, rtol=1e-12)
    np.testing.assert_allclose(estimator.group_losses_, once.group_losses_, atol=1e-10)
    np.testing.assert_allclose(estimator.explained_variance_ratio_.sum(), once.explained_variance_ratio_.sum())
    np.testing.assert_allclose(np.abs(estimator.transform(x)), np.abs(once.transform(x)), atol=1e-8)


def test_partial_fit_with_a_group_unseen_in_the_first_batch():
    x, labels = grouped_data(n_rows=600, n_features=4, n_groups=3, seed=8)
    order = np.argsort(labels, kind="stable")  # g0 rows, then g1, then g2
    x, labels = x[order], labels[order]
    frame = pd.DataFrame(x, columns=list("abcd")).assign(sex=labels)
    estimator = FairPCA(2, method="samadi-mw", method_options={"tol": 1e-9})
    first = frame[frame.sex == "g0"]
    estimator.partial_fit(first, sensitive_features="sex")  # one group: moments kept, not fitted yet
    assert estimator.moments_.groups == ("g0",) and not hasattr(estimator, "components_")
    with pytest.raises(NotFittedError, match="partial_fit has accumulated moments .*only group 'g0'"):
        estimator.transform(first)
    estimator.partial_fit(frame[frame.sex == "g1"], sensitive_features="sex")
    assert list(estimator.groups_) == ["g0", "g1"]
    estimator.partial_fit(frame[frame.sex == "g2"], sensitive_features="sex")
    once = FairPCA(2, method="samadi-mw", method_options={"tol": 1e-9}).fit(frame, sensitive_features="sex")
    _same_moments(estimator.moments_, once.moments_)
    assert list(estimator.feature_names_in_) == list("abcd")
    assert estimator.projection_.group_columns == ("sex",)
    np.testing.assert_allclose(estimator.group_losses_.max(), once.group_losses_.max(), atol=1e-7)
    # labels given apart from a frame that still holds the group column: the column is not a feature
    assert np.isfinite(estimator.score(frame, sensitive_features=frame["sex"].to_numpy()))
    estimator.partial_fit(frame.iloc[:10], sensitive_features=frame["sex"].iloc[:10].to_numpy())


def test_partial_fit_after_fit_adds_rows_and_checks_features():
    x, labels = grouped_data(n_rows=600, n_features=4, n_groups=2, seed=9)
    estimator = FairPCA(2).fit(x[:300], sensitive_features=labels[:300])
    estimator.partial_fit(x[300:], sensitive_features=labels[300:])
    _same_subspace(estimator, FairPCA(2).fit(x, sensitive_features=labels))
    with pytest.raises(ValueError, match="features"):
        estimator.partial_fit(x[:, :3], sensitive_features=labels)
    with pytest.raises(InputError, match="partial_fit requires sensitive_features"):
        estimator.partial_fit(x)
    assert estimator.moments_.n_samples == 600  # failed batches add nothing


def test_partial_fit_with_dask_batches():
    x, labels = grouped_data(n_rows=600, n_features=4, n_groups=2, seed=10)
    frame = pd.DataFrame(x, columns=list("abcd")).assign(g=labels)
    estimator = FairPCA(2, method="fair-eig")
    for part in np.array_split(np.arange(600), 3):
        estimator.partial_fit(dd.from_pandas(frame.iloc[part], npartitions=2), sensitive_features="g")
    once = FairPCA(2, method="fair-eig").fit(frame, sensitive_features="g")
    _same_moments(estimator.moments_, once.moments_)
    _same_subspace(estimator, once)


def test_partial_fit_with_a_dask_batch_of_one_group():
    x, labels = grouped_data(n_rows=300, n_features=3, n_groups=2, seed=12)
    order = np.argsort(labels, kind="stable")
    frame = pd.DataFrame(x[order], columns=list("abc")).assign(g=labels[order])
    estimator = FairPCA(2, method="fair-eig")
    for part in np.array_split(np.arange(300), 3):  # the first batch holds only g0
        estimator.partial_fit(dd.from_pandas(frame.iloc[part], npartitions=2), sensitive_features="g")
    _same_subspace(estimator, FairPCA(2, method="fair-eig").fit(frame, sensitive_features="g"))


def test_partial_fit_refuses_methods_that_read_the_rows():
    x, labels = grouped_data(n_rows=200, n_features=4, n_groups=2)
    with pytest.raises(InputError, match="method 'mm-robust' reads the rows at every iteration, and partial_fit"):
        FairPCA(2, method="mm-robust").partial_fit(x, sensitive_features=labels)


def test_partial_fit_request_routes_groups():
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = FairPCA(2).set_partial_fit_request(sensitive_features=True)
        consumed = estimator.get_metadata_routing().consumes("partial_fit", ["sensitive_features"])
    assert consumed == {"sensitive_features"}


# ----------------------------------------------------------------------------- set_output with dask
class _CountTasks(Callback):
    def __init__(self):
        super().__init__()
        self.tasks = 0

    def _pretask(self, key, dsk, state):
        self.tasks += 1


@pytest.mark.parametrize("kind", ["array", "frame"])
def test_set_output_pandas_keeps_dask_input_lazy(kind):
    x, labels = grouped_data(n_rows=400, n_features=3, n_groups=2)
    fpca = FairPCA(2).fit(x, sensitive_features=labels).set_output(transform="pandas")
    lazy_input = (
        da.from_array(x, chunks=(100, 3))
        if kind == "array"
        else dd.from_pandas(pd.DataFrame(x, columns=["x0", "x1", "x2"]), npartitions=4)
    )
    if kind == "frame":
        fpca = FairPCA(2).fit(lazy_input.compute(), sensitive_features=labels).set_output(transform="pandas")
    with _CountTasks() as counter:
        out = fpca.transform(lazy_input)
        assert isinstance(out, dd.DataFrame) and dask.is_dask_collection(out)
        assert list(out.columns) == ["fairpca0", "fairpca1"]
        assert counter.tasks == 0
        computed = out.compute()
    assert counter.tasks > 0
    assert isinstance(computed, pd.DataFrame) and computed.shape == (400, 2)
    np.testing.assert_allclose(
        computed.to_numpy(), fpca.transform(x if kind == "array" else lazy_input.compute()).to_numpy()
    )


def test_fit_transform_with_pandas_output_keeps_dask_lazy():
    x, labels = grouped_data(n_rows=400, n_features=3, n_groups=2)
    frame = dd.from_pandas(pd.DataFrame(x, columns=list("abc")).assign(g=labels), npartitions=2)
    out = FairPCA(2).set_output(transform="pandas").fit_transform(frame, sensitive_features="g")
    assert isinstance(out, dd.DataFrame) and list(out.columns) == ["fairpca0", "fairpca1"]
    # the default output of a dask array stays a dask array
    assert isinstance(FairPCA(2).fit(x, sensitive_features=labels).transform(da.from_array(x)), da.Array)


def test_polars_output_of_dask_input_is_refused():
    x, labels = grouped_data(n_rows=100, n_features=3, n_groups=2)
    fpca = FairPCA(2).fit(x, sensitive_features=labels)
    fpca._sklearn_output_config = {"transform": "polars"}  # what set_output(transform="polars") records
    with pytest.raises(InputError, match="would compute every row of the dask input"):
        fpca.transform(da.from_array(x))


def test_private_set_output_helpers_exist():
    """FairPCA relies on two private helpers of sklearn.utils._set_output; fail loudly if they go."""
    from sklearn.utils import _set_output

    assert callable(_set_output._get_output_config) and callable(_set_output._wrap_data_with_container)


# ----------------------------------------------------------------------------- the guide page
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "pages" / "guide" / "estimator.md"


def _guide_blocks() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return [textwrap.dedent(code) for _, code in re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.S | re.M)]


@pytest.mark.parametrize("index", range(len(_guide_blocks())))
def test_the_guide_page_examples_run_as_written(index):
    """Each ```python block of docs/pages/guide/estimator.md runs on its own (in a fresh namespace)."""
    exec(compile(_guide_blocks()[index], f"{GUIDE.name}[{index}]", "exec"), {"__name__": "__guide__"})
