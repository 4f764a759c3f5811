"""The fairness report: its numbers against metrics computed directly (from moments and from
rows), fair vs PCA along r, the downstream check against fairlearn, and the written files."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from conftest import CREDIT_CSV, grouped_data
from fairlearn.metrics import demographic_parity_difference, demographic_parity_ratio
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from fairpca_dist import GroupMoments, InputError, SchemaError, fit_projection, load_model, save_model
from fairpca_dist.assessment import metrics
from fairpca_dist.assessment.downstream import downstream_parity
from fairpca_dist.assessment.report import (
    ARMS,
    FIGURES,
    build_report,
    report_markdown_summary,
    report_table,
    write_report,
)

FEATURES = [f"x{j}" for j in range(6)]
CREDIT_TARGET = "default payment next month"
# spec/anchor-runs.md §1: credit min-max loss at r = 1..10, agreed by three independent solvers.
CREDIT_OPTIMUM = [
    0.031426331,
    0.019248618,
    0.174840998,
    0.085089707,
    0.049009607,
    0.124229467,
    0.217098054,
    0.273444495,
    0.256849922,
    0.211279557,
]


def two_group_frame(n_rows: int = 1200, seed: int = 0) -> pd.DataFrame:
    """Two groups with different means and covariances, a binary target that depends on the
    features and on the group (so the classifiers have something to be unfair about)."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], size=n_rows, p=[0.7, 0.3])
    x = np.empty((n_rows, len(FEATURES)))
    for label, shift in (("a", 0.0), ("b", 1.5)):
        mask = group == label
        x[mask] = rng.normal(size=(mask.sum(), len(FEATURES))) @ rng.normal(size=(len(FEATURES),) * 2) + shift
    frame = pd.DataFrame(x * [1, 10, 100, 1, 1, 1000], columns=FEATURES)  # unequal units: standardise
    frame["group"] = group
    frame["label"] = (x[:, 0] + 0.8 * (group == "b") + rng.normal(size=n_rows) > 0.5).astype(int)
    return frame


def moments_of(frame: pd.DataFrame, features: list[str], group: str) -> GroupMoments:
    return GroupMoments.from_arrays(frame[features].to_numpy(), frame[group].to_numpy(), feature_names=features)


@pytest.fixture(scope="module")
def synthetic():
    frame = two_group_frame()
    moments = moments_of(frame, FEATURES, "group")
    model = fit_projection(moments, 2, method="fair-eig", standardize=True)
    report = build_report(moments, model, max_components=5, sample=frame, target="label")
    return frame, moments, model, report


def pca_at(moments: GroupMoments, model, r: int):
    return fit_projection(moments, r, method="pca", center=model.center, standardize=model.scale)


# ---------------------------------------------------------------------- numbers
def test_model_numbers_equal_metrics(synthetic, tmp_path):
    frame, moments, model, report = synthetic
    stored = json.loads(write_report(report, tmp_path / "report").json.read_text())
    working = moments.rescaled(model.scale)
    rows = (frame[FEATURES].to_numpy() - model.mean) / model.scale
    labels = frame["group"].to_numpy()
    for arm, components in (("fair", model.components), ("pca", pca_at(moments, model, 2).components)):
        at = stored["at_model"][arm]
        direct = {
            "group_error": metrics.group_errors(working, components),
            "group_loss": metrics.group_losses(working, components, n_components=2),
            "group_explained_variance_ratio": metrics.group_explained_variance_ratio(working, components),
            "explained_variance_ratio": metrics.explained_variance_ratio(working, components).sum(),
            "mmd2_linear": metrics.mmd2_linear(working, components),
        }
        for key, value in direct.items():
            np.testing.assert_array_equal(at[key], value, err_msg=f"{arm} {key}")
        assert at["max_loss"] == direct["group_loss"].max() and at["n_components"] == 2
        # independently, literally from the standardised rows
        np.testing.assert_allclose(
            at["group_error"], metrics.group_errors_from_rows(rows, labels, components), rtol=1e-9
        )
        np.testing.assert_allclose(
            at["group_loss"], metrics.group_losses_from_rows(rows, labels, components), rtol=1e-7, atol=1e-10
        )
        np.testing.assert_allclose(
            at["mmd2_linear"], metrics.mmd2_linear_from_rows(rows, labels, components), rtol=1e-7, atol=1e-12
        )
    # the fair model's own diagnostics and the refit at its rank agree with the report
    np.testing.assert_allclose(stored["at_model"]["fair"]["group_loss"], model.group_loss, rtol=1e-10)
    np.testing.assert_allclose(stored["curves"]["fair"][1]["group_loss"], model.group_loss, rtol=1e-10)
    assert stored["data"]["n_samples"] == len(frame) and stored["data"]["feature_names"] == FEATURES
    assert [(g["name"], g["count"]) for g in stored["data"]["groups"]] == sorted(frame["group"].value_counts().items())
    assert stored["model"]["method"] == "fair-eig" and stored["model"]["options"] == model.options
    assert stored["model"]["output_columns"] == ["fairpca0", "fairpca1"]
    assert stored["model"]["certificate"] == model.certificate and stored["model"]["converged"] is True


def test_fair_max_loss_never_above_pca(synthetic):
    _, moments, model, report = synthetic
    curves = report["curves"]
    assert curves["n_components"] == [1, 2, 3, 4, 5]
    for r, pca, fair in zip(curves["n_components"], curves["pca"], curves["fair"], strict=True):
        assert pca["n_components"] == fair["n_components"] == r
        assert fair["max_loss"] <= pca["max_loss"] * (1 + 1e-9) + 1e-12, r
        assert fair["explained_variance_ratio"] <= pca["explained_variance_ratio"] + 1e-12, r  # PCA's optimality
        np.testing.assert_array_equal(pca["group_loss"], pca_at(moments, model, r).group_loss)
    assert any(f["max_loss"] < 0.9 * p["max_loss"] for p, f in zip(curves["pca"], curves["fair"], strict=True))


def test_default_range_of_r_and_skipped_downstream(tmp_path):
    frame = two_group_frame(n_rows=300, seed=1)
    moments = moments_of(frame, FEATURES, "group")
    model = fit_projection(moments, 2, method="pca")
    report = build_report(moments, model, sample=frame)
    assert report["curves"]["n_components"] == list(range(1, len(FEATURES) + 1))  # min(p, max(10, r))
    assert report["downstream"] == {"skipped": "no target given"}
    assert build_report(moments, model, max_components=2)["downstream"] == {"skipped": "no sample and no target given"}
    assert "Skipped: no target given." in write_report(report, tmp_path / "report").markdown.read_text()


# ---------------------------------------------------------------------- downstream
def test_downstream_equals_fairlearn(synthetic):
    frame, _, model, report = synthetic
    downstream = report["downstream"]
    assert downstream["sensitive"] == ["group"] and downstream["positive_class"] == 1
    assert set(downstream["models"]) == set(ARMS)
    for scores in [downstream["reference"], *downstream["models"].values()]:
        for key in ("accuracy", "demographic_parity_difference", "demographic_parity_ratio"):
            assert 0.0 <= scores[key] <= 1.0, key
        rates = scores["selection_rate"].values()
        assert scores["demographic_parity_difference"] == pytest.approx(max(rates) - min(rates), abs=1e-12)
    assert downstream["reference"]["n_inputs"] == len(FEATURES) and downstream["models"]["fair"]["n_inputs"] == 2
    # the documented procedure, by hand
    y = frame["label"].to_numpy()
    train, test = train_test_split(np.arange(len(frame)), test_size=0.3, random_state=0, stratify=y)
    z = model.transform(frame[FEATURES].to_numpy())
    classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(z[train], y[train])
    predicted, groups = classifier.predict(z[test]), frame["group"].to_numpy()[test]
    fair = downstream["models"]["fair"]
    assert fair["accuracy"] == accuracy_score(y[test], predicted)
    assert fair["demographic_parity_difference"] == demographic_parity_difference(
        y[test], predicted, sensitive_features=groups
    )
    assert fair["demographic_parity_ratio"] == demographic_parity_ratio(y[test], predicted, sensitive_features=groups)
    assert (downstream["n_train"], downstream["n_test"]) == (len(train), len(test))


def test_downstream_intersectional_groups(synthetic):
    frame, _, model, _ = synthetic
    sample = frame.assign(age=np.where(np.arange(len(frame)) % 3 == 0, "old", "young"), label=frame["label"] == 1)
    result = downstream_parity(
        sample, features=FEATURES, sensitive=["group", "age"], target="label", models={"fair": model}, random_state=3
    )
    assert result["positive_class"] is True
    scores = result["models"]["fair"]
    assert set(scores["selection_rate"]) == {
        "group=a & age=old",
        "group=a & age=young",
        "group=b & age=old",
        "group=b & age=young",
    }
    # fairlearn intersects the two columns itself: same split, same classifier, same number
    y = sample["label"].to_numpy()
    train, test = train_test_split(np.arange(len(sample)), test_size=0.3, random_state=3, stratify=y)
    z = model.transform(sample[FEATURES].to_numpy())
    predicted = (
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(z[train], y[train]).predict(z[test])
    )
    expected = demographic_parity_difference(y[test], predicted, sensitive_features=sample.iloc[test][["group", "age"]])
    assert scores["demographic_parity_difference"] == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.assign(label=1), "'label' has 1 class"),
        (lambda f: f.assign(label=np.arange(len(f)) % 3), "'label' has 3 class"),
        (lambda f: f.assign(label=np.r_[1, np.zeros(len(f) - 1, dtype=int)]), "at least 2 per class"),
        (lambda f: f.drop(columns="label"), r"lacks column\(s\) \['label'\]"),
        (lambda f: f.drop(columns="x3"), r"lacks column\(s\) \['x3'\]"),
        (lambda f: f.assign(label=np.where(np.arange(len(f)) == 5, np.nan, f["label"])), "missing values"),
        (lambda f: f.assign(x1="text"), "not numeric"),
    ],
)
def test_bad_sample_raises(synthetic, change, message):
    frame, moments, model, _ = synthetic
    bad = change(frame)
    with pytest.raises(InputError, match=message):
        downstream_parity(bad, features=FEATURES, sensitive="group", target="label", models={"fair": model})
    with pytest.raises(InputError, match=message):
        build_report(moments, model, max_components=2, sample=bad, target="label", sensitive="group")


def test_bad_report_arguments_raise(synthetic):
    frame, moments, model, _ = synthetic
    with pytest.raises(InputError, match="max_components=0"):
        build_report(moments, model, max_components=0)
    with pytest.raises(
        InputError,
        match=rf"max_components=1 must be an integer between the model's "
        rf"n_components={model.n_components} and n_features",
    ):
        build_report(moments, model, max_components=1)  # the curves would leave out the model's own r
    with pytest.raises(InputError, match="no sensitive column"):
        downstream_parity(frame, features=FEATURES, sensitive=[], target="label", models={})
    other = moments_of(frame, FEATURES[:5], "group")
    with pytest.raises(SchemaError, match="fitted on other features than the moments have: only in the model: "):
        build_report(other, model)
    with pytest.raises(SchemaError, match="model .fair. was fitted on other features than the sample.s: only in the "):
        downstream_parity(frame, features=FEATURES[:5], sensitive="group", target="label", models={"fair": model})


# ---------------------------------------------------------------------- files
def test_files_and_images(synthetic, tmp_path):
    _, _, _, report = synthetic
    files = write_report(report, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder left
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["report.json", "report.md", "report.html", *(f"{name}.png" for name in FIGURES)]
    )
    assert set(files.figures) == set(FIGURES)
    for path in files.figures.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0
    text = files.json.read_text()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert json.loads(text) == report
    markdown, page = files.markdown.read_text(), files.html.read_text()
    for name in FIGURES:
        assert f"]({name}.png)" in markdown
    assert page.count('src="data:image/png;base64,') == len(FIGURES) and 'src="http' not in page
    for row in report_table(report):
        assert f"| {row['group']} | {row['n']} | {row['error_pca']:.4g} |" in markdown
        assert f"<td>{row['group']}</td><td>{row['n']}</td><td>{row['error_pca']:.4g}</td>" in page
    downstream = report["downstream"]["models"]["fair"]
    assert (
        f"| fair-eig | 2 | {downstream['accuracy']:.4g} | {downstream['demographic_parity_difference']:.4g} |"
        in markdown
    )


def test_rewrites_are_byte_identical_and_nan_is_null(synthetic, tmp_path):
    frame, moments, model, report = synthetic
    first = write_report(report, tmp_path / "a")
    again = build_report(moments, model, max_components=5, sample=frame, target="label")
    second = write_report(again, tmp_path / "b")
    for name in ("json", "markdown", "html"):
        assert getattr(first, name).read_bytes() == getattr(second, name).read_bytes(), name
    third = write_report(report, tmp_path / "a")  # replaces in place
    assert third.json.read_bytes() == second.json.read_bytes()
    with_nan = {
        **report,
        "at_model": {**report["at_model"], "pca": {**report["at_model"]["pca"], "max_loss": float("nan")}},
    }
    text = write_report(with_nan, tmp_path / "nan").json.read_text()
    assert json.loads(text, parse_constant=pytest.fail)["at_model"]["pca"]["max_loss"] is None


def test_full_disk_names_the_report_folder_and_keeps_the_previous_report(synthetic, tmp_path, monkeypatch):
    import errno

    from fairpca_dist import WriteError
    from fairpca_dist.assessment import report as report_module

    _, _, _, report = synthetic
    write_report(report, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}

    def disk_full(report: dict, folder):
        (folder / "report.md").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report_module, "_render", disk_full)
    for target in (tmp_path / "out", tmp_path / "fresh"):
        with pytest.raises(WriteError, match=f"could not write {target}: no space left on the disk") as error:
            write_report(report, target)
        assert error.value.errno == errno.ENOSPC
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_failed_write_keeps_previous_report(synthetic, tmp_path):
    _, _, _, report = synthetic
    files = write_report(report, tmp_path / "out")
    (tmp_path / "out" / "other.txt").write_text("kept")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    broken = {key: value for key, value in report.items() if key != "downstream"}  # fails after the PNGs
    with pytest.raises(KeyError):
        write_report(broken, tmp_path / "out")
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert files.json.exists()


def test_summary_and_table(synthetic):
    _, _, model, report = synthetic
    rows = report_table(report)
    assert [row["group"] for row in rows] == ["a", "b"]
    assert list(rows[0]) == [
        "group",
        "n",
        "error_pca",
        "error_fair",
        "loss_pca",
        "loss_fair",
        "explained_variance_ratio_pca",
        "explained_variance_ratio_fair",
    ]
    assert [row["loss_fair"] for row in rows] == report["at_model"]["fair"]["group_loss"]
    np.testing.assert_allclose([row["loss_fair"] for row in rows], model.group_loss, rtol=1e-10)
    summary = report_markdown_summary(report)
    assert summary.startswith("# Fair PCA report\n")
    assert "| group | n | error (PCA) | error (fair-eig) | loss (PCA) | loss (fair-eig) |" in summary
    own = report["criterion"]  # fair-eig's own criterion, the largest group loss, for both arms
    assert own["key"] == "max_loss" and (own["pca"], own["fair"]) == (
        report["at_model"]["pca"]["max_loss"],
        report["at_model"]["fair"]["max_loss"],
    )
    assert (
        f"fair-eig is judged by its own criterion: max group loss, the largest over the groups of a group's "
        f"reconstruction error minus the smallest error any r-dimensional projection gives that group (Samadi "
        f"et al.'s loss); lower is fairer. PCA {own['pca']:.4g}, fair-eig {own['fair']:.4g} ("
    ) in summary
    assert (
        "| max group loss (fair-eig's own) | ↓ lower |" in summary and "| downstream accuracy | ↑ higher |" in summary
    )
    assert "## " not in summary  # the headline only


# ---------------------------------------------------------------------- real data
def test_credit_report(credit_frame, tmp_path):
    features = [column for column in credit_frame.columns if column != "education"]
    sample = credit_frame.assign(**{CREDIT_TARGET: pd.read_csv(CREDIT_CSV, header=1)[CREDIT_TARGET].to_numpy()})
    moments = moments_of(credit_frame, features, "education")
    model = fit_projection(moments, 2, method="fair-eig", standardize=True, ddof=1)
    report = build_report(moments, model, sample=sample, target=CREDIT_TARGET)
    curves = report["curves"]
    assert curves["n_components"] == list(range(1, 11))
    np.testing.assert_allclose([fair["max_loss"] for fair in curves["fair"]], CREDIT_OPTIMUM, rtol=1e-6)
    for pca, fair in zip(curves["pca"], curves["fair"], strict=True):
        assert fair["max_loss"] <= pca["max_loss"] * (1 + 1e-9)
    working = moments.rescaled(model.scale)
    np.testing.assert_array_equal(
        report["at_model"]["fair"]["group_error"], metrics.group_errors(working, model.components)
    )
    downstream = report["downstream"]
    assert downstream["sensitive"] == ["education"] and downstream["n_test"] == 9000
    for scores in [downstream["reference"], *downstream["models"].values()]:
        assert 0.0 <= scores["demographic_parity_difference"] <= 1.0
        assert 0.0 <= scores["demographic_parity_ratio"] <= 1.0
        assert scores["accuracy"] > 0.75  # the majority class alone gives 0.78
    files = write_report(report, tmp_path / "credit")
    assert "high" in files.markdown.read_text() and files.figures["loss_vs_components"].stat().st_size > 10_000


def test_loaded_model_with_intersectional_groups(tmp_path):
    """A model read back from disk (as the flow does) gives the same report; tuple group
    labels are named "a & b" and the rank-relaxed samadi-sdp output is evaluated at rank r."""
    x, labels = grouped_data(n_rows=600, n_features=5, n_groups=2, seed=7)
    tuples = list(zip(labels, np.where(np.arange(600) % 2 == 0, "u", "v"), strict=True))
    moments = GroupMoments.from_arrays(x, tuples)
    model = fit_projection(moments, 2, method="samadi-sdp", standardize=True)
    loaded = load_model(save_model(model, tmp_path / "model"))
    report = build_report(moments, model, max_components=2)
    assert build_report(moments, loaded, max_components=2) == report
    assert [g["name"] for g in report["data"]["groups"]] == ["g0 & u", "g0 & v", "g1 & u", "g1 & v"]
    assert report["data"]["groups"][0]["label"] == {"tuple": ["g0", "u"]}
    assert len(report["model"]["output_columns"]) == model.components.shape[1]
    working = moments.rescaled(model.scale)
    np.testing.assert_array_equal(
        report["at_model"]["fair"]["group_loss"], metrics.group_losses(working, model.components, n_components=2)
    )
    assert report["curves"]["fair"][1]["max_loss"] <= report["curves"]["pca"][1]["max_loss"] * (1 + 1e-6)


# ---------------------------------------------------------------------- RBF-kernel MMD² over the rows
def test_rbf_mmd_of_both_arms_over_every_row(synthetic, tmp_path, monkeypatch):
    """One σ for both arms (median heuristic at the PCA projection), every pair of rows; the
    same numbers by random features when the table is above the exact limit."""
    from fairpca_dist.assessment import report as report_module
    from fairpca_dist.engine.datapasses import ArrayPasses

    frame, moments, model, _ = synthetic
    passes = ArrayPasses(frame[FEATURES].to_numpy(), frame["group"], moments.groups)
    report = build_report(moments, model, max_components=2, passes=passes)
    rbf = report["rbf_mmd"]
    working, rows = moments.rescaled(model.scale), passes.rescaled(model.scale)
    pca = pca_at(moments, model, 2)
    sigma = metrics.rbf_bandwidth(working, rows, pca.components)
    assert rbf["estimator"] == "exact" and rbf["sigma"] == pytest.approx(sigma, rel=1e-12)
    for arm, projection in (("pca", pca), ("fair", model)):
        u = (frame[FEATURES].to_numpy() / model.scale) @ projection.components
        a, b = u[frame["group"].to_numpy() == "a"], u[frame["group"].to_numpy() == "b"]

        def mean_kernel(p, q):
            return np.exp(-((p[:, None] - q[None]) ** 2).sum(-1) / (2 * sigma**2)).mean()

        dense = mean_kernel(a, a) + mean_kernel(b, b) - 2 * mean_kernel(a, b)
        assert rbf[arm][0][1] == pytest.approx(dense, rel=1e-9) and rbf[arm][1][0] == rbf[arm][0][1]
    assert rbf["fair"][0][1] < rbf["pca"][0][1]  # fair-eig removes the mean gap PCA keeps
    markdown = write_report(report, tmp_path / "r").markdown.read_text()
    assert "## RBF-kernel MMD² between the projected groups" in markdown and "every pair of rows" in markdown

    monkeypatch.setattr(report_module, "RBF_EXACT_MAX_ROWS", 100)
    before = passes.n_passes
    estimated = build_report(moments, model, max_components=2, passes=passes)["rbf_mmd"]
    assert passes.n_passes - before == 2  # σ's sample (one request in memory), then both arms' sums in one
    assert estimated["estimator"] == "rff" and estimated["n_random_features"] == 1000
    assert estimated["fair"][0][1] == pytest.approx(rbf["fair"][0][1], rel=0.2, abs=2e-3)
    assert build_report(moments, model, max_components=2, passes=passes, rbf_mmd="none")["rbf_mmd"] == {
        "skipped": "not asked for (rbf_mmd='none')"
    }


def test_rbf_mmd_of_an_mmd_model_uses_its_sigma(synthetic):
    from fairpca_dist.engine.datapasses import ArrayPasses

    frame = two_group_frame(n_rows=400, seed=1)
    moments = moments_of(frame, FEATURES, "group")
    passes = ArrayPasses(frame[FEATURES].to_numpy(), frame["group"], moments.groups)
    model = fit_projection(moments, 1, method="mmd", standardize=True, passes=passes, tau=0.02, random_state=0)
    assert model.status == "converged" and model.certificate["mmd2"] <= 0.02
    rbf = build_report(moments, model, max_components=1, passes=passes)["rbf_mmd"]
    assert rbf["sigma"] == model.certificate["sigma"] and rbf["sigma_source"] == "the mmd model's"
    assert rbf["fair"][0][1] == pytest.approx(model.certificate["mmd2"], rel=1e-9)  # the solver's own value
    assert rbf["pca"][0][1] > 0.02  # PCA does not meet tau: the fit was constrained


def test_rbf_mmd_settings(synthetic):
    _, moments, model, _ = synthetic
    assert build_report(moments, model, max_components=2)["rbf_mmd"] == {"skipped": "the rows were not given"}
    with pytest.raises(InputError, match="rbf_mmd"):
        build_report(moments, model, max_components=2, rbf_mmd="nystroem")
    with pytest.raises(InputError, match="reads the rows"):
        build_report(moments, model, max_components=2, rbf_mmd="exact")


# ---------------------------------------------------------------------- curves that end early, many groups
def test_curves_stop_where_the_method_cannot_be_fitted(tmp_path):
    """kleindessner-cov with 6 groups and 7 features keeps at most 7 − 5 = 2 directions: the curves
    (asked up to r = 7) stop at r = 2 and say why; the model's own r still works; a failure at or
    below the model's own r is an error."""
    x, labels = grouped_data(n_rows=600, n_features=7, n_groups=6, seed=3)
    moments = GroupMoments.from_arrays(x, labels, feature_names=[f"x{j}" for j in range(7)])
    for r in (1, 2):
        model = fit_projection(moments, r, method="kleindessner-cov", standardize=True)
        report = build_report(moments, model)
        curves = report["curves"]
        assert curves["n_components"] == [1, 2] and len(curves["pca"]) == len(curves["fair"]) == 2
        assert curves["stopped"]["at"] == 3
        assert "n_components=3 is more than the 2 directions left" in curves["stopped"]["reason"]
    text = write_report(report, tmp_path / "report").markdown.read_text()
    assert (
        "The curves end at r = 2: kleindessner-cov could not be fitted at r = 3: n_components=3 is more than "
        "the 2 directions left"
    ) in text
    assert (
        build_report(moments, fit_projection(moments, 2, method="pca"), max_components=3)["curves"]["stopped"] is None
    )
    # a refit below the model's own r (the model itself is scored at its r, not refitted) fails loudly
    with pytest.raises(InputError, match="n_components=3 is more than the 2 directions left"):
        build_report(moments, replace(model, n_components=4), max_components=4)


def many_groups_report(n_groups: int) -> dict:
    x, labels = grouped_data(n_rows=40 * n_groups, n_features=3, n_groups=n_groups, seed=1)
    moments = GroupMoments.from_arrays(x, labels, feature_names=["a", "b", "c"])
    return build_report(moments, fit_projection(moments, 1, method="pca"), max_components=1)


def test_many_groups_show_the_worst_pairs_and_groups_and_the_rest_is_in_the_json(tmp_path):
    report = many_groups_report(32)  # 496 pairs
    text = write_report(report, tmp_path / "report").markdown.read_text()
    names = [group["name"] for group in report["data"]["groups"]]
    mmd = np.array(report["at_model"]["fair"]["mmd2_linear"])
    worst = sorted(((mmd[a, b], names[a], names[b]) for a in range(32) for b in range(a + 1, 32)), reverse=True)[:10]
    section = text[text.index("## Linear-kernel MMD²") : text.index("## RBF-kernel MMD²")]
    assert "The 10 pairs of groups with the largest MMD² under either arm, largest first:" in section
    assert [line.split(" | ")[:2] for line in section.splitlines() if re.match(r"\| g\d", line)] == [
        [f"| {a}", b] for _, a, b in worst
    ]
    assert "… and 486 more pairs (every pair is in report.json)." in section
    losses = sorted(((row["loss_fair"], row["group"]) for row in report_table(report)), reverse=True)[:15]
    summary = report_markdown_summary(report)
    assert "The 15 groups with the largest loss under pca, largest first:" in summary
    assert [line.split(" | ")[0] for line in summary.splitlines() if re.match(r"\| g\d", line)] == [
        f"| {name}" for _, name in losses
    ]
    assert "… and 17 more groups (every group is in report.json)." in summary
    assert len(report_table(report)) == 32 and len(report["at_model"]["pca"]["mmd2_linear"]) == 32
    # up to 30 groups, every group; up to 5 groups (10 pairs), every pair
    assert "more groups" not in report_markdown_summary(many_groups_report(30))
    few = write_report(many_groups_report(5), tmp_path / "few").markdown.read_text()
    section = few[few.index("## Linear-kernel MMD²") : few.index("## RBF-kernel MMD²")]
    assert "more pairs" not in few and len([line for line in section.splitlines() if re.match(r"\| g\d", line)]) == 10


def test_a_worse_parity_from_small_groups_says_how_small(synthetic):
    """The reading's "What got worse" names the smallest group behind a DP difference that rests
    on groups with few test rows."""
    report = json.loads(json.dumps(synthetic[3]))
    row = next(row for row in report["comparison"] if row["key"] == "dp_difference")
    row.update(pca=0.05, fair=0.2, verdict="worse", change=-3.0, degenerate={})
    report["downstream"]["groups_too_small"] = {"group=b": 7, "group=c": 5}
    assert (
        "DP difference (lower is fairer) from 0.05 (PCA) to 0.2 (fair-eig), 300 % worse (from groups with as "
        "few as 5 test rows)"
    ) in report_markdown_summary(report)
    report["downstream"]["groups_too_small"] = {}
    assert "300 % worse." in report_markdown_summary(report)


@pytest.mark.parametrize(
    "share, text",
    [
        (0.9998, "99.98"),
        (1.0, "100"),
        (1.004, "100.4"),
        (0.998, "99.8"),
        (0.99999, "99.999"),
        (2.3249, "232"),
        (0.0677, "6.77"),
        (0.0013, "0.13"),
    ],
)
def test_a_change_reads_100_percent_only_when_exact(share, text):
    from fairpca_dist.assessment.report import _percent

    assert _percent(share) == text
