"""The pipeline's fused passes against the unfused library functions.

Ingest computes the moments of each file and a row sample while it writes the table; the
projection's write-back computes the report's random-feature sums. Everything they give must
equal what the separate passes give: the moments a fit would compute reading the files, the
sample a pass over the table draws, the report's numbers (to 1e-10) and the projected bytes.
"""

from __future__ import annotations

import functools
import itertools
import operator
import shutil

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import grouped_data

from fairpca_dist.assessment import report as report_module
from fairpca_dist.assessment.report import RBFSums
from fairpca_dist.engine.passes import row_keys, run_graph, table_sample, tree_sum
from fairpca_dist.engine.sampling import KEY_COLUMN, KEY_ENTROPY, RowSample, SampleSpec
from fairpca_dist.exceptions import InputError
from fairpca_dist.fitting import (
    cached_table_moments,
    check_report_target,
    fit_table,
    report_rff_work,
    write_table_report,
)
from fairpca_dist.io.ingest import SAMPLE_FILE, ingest_table, read_table_sample
from fairpca_dist.projection import project_table


@pytest.fixture()
def source(tmp_path):
    """A Parquet folder of 4 files: 3 groups (one small), 6 features, a binary target."""
    x, labels = grouped_data(n_rows=2400, n_features=6, n_groups=3, offset=50.0, seed=3)
    labels = np.where(np.arange(len(labels)) % 17 == 0, "rare", labels)
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(x, columns=[f"x{j}" for j in range(6)]).assign(g=labels, y=rng.integers(0, 2, len(labels)))
    folder = tmp_path / "source"
    folder.mkdir()
    for i in range(4):
        frame.iloc[i * 600 : (i + 1) * 600].to_parquet(folder / f"part-{i}.parquet", index=False)
    return folder


def _numbers(value, path=""):
    """Every number of a JSON value by its path (to compare two reports)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _numbers(item, f"{path}/{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _numbers(item, f"{path}/{i}").items()}
    return {path: value}


def test_ingest_writes_the_moments_a_fit_reads_instead_of_the_rows(source, tmp_path):
    ingest_table(source, tmp_path / "table", sensitive_feature="g", pass_through=["y"])
    assert len(list((tmp_path / "table" / "moments").iterdir())) == 4  # one per file
    roles = {"sensitive_feature": ["g"], "features": [f"x{j}" for j in range(6)]}
    fused, fingerprint, read = cached_table_moments(tmp_path / "table", tmp_path / "cache", **roles)
    assert read == 0 and not (tmp_path / "cache").exists()  # every file's moments came from ingest
    shutil.rmtree(tmp_path / "table" / "moments")
    fresh, same, read = cached_table_moments(tmp_path / "table", tmp_path / "cache", **roles)
    assert read == 4 and same == fingerprint
    np.testing.assert_array_equal(fused.count, fresh.count)
    np.testing.assert_allclose(fused.mean, fresh.mean, rtol=1e-12, atol=0)
    np.testing.assert_allclose(fused.scatter, fresh.scatter, rtol=1e-10, atol=1e-10 * np.abs(fresh.scatter).max())
    # other roles are not the ones ingest computed: read from the rows
    _, _, read = cached_table_moments(tmp_path / "table", tmp_path / "cache", sensitive_feature=["g"], features=["x0"])
    assert read == 4


def test_ingest_again_without_an_empty_column_keeps_only_the_moments_of_its_files(tmp_path):
    """The second pass (without a column empty in every row) writes other files under other
    keys: the first pass's moments, written by the tasks beside their files, are removed."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(rng.normal(size=(60, 2)), columns=["a", "b"]).assign(empty=np.nan, g=["u", "v"] * 30)
    ingest_table(dd.from_pandas(frame, npartitions=2), tmp_path / "table", sensitive_feature="g")
    assert len(list((tmp_path / "table" / "moments").iterdir())) == 2
    moments, _, read = cached_table_moments(tmp_path / "table", None, sensitive_feature=["g"], features=["a", "b"])
    assert read == 0 and moments.n_samples == 60


def test_a_fit_of_an_ingested_table_writes_nothing_beside_it(source, tmp_path):
    ingest_table(source, tmp_path / "table", sensitive_feature="g")
    fit_table(tmp_path / "table", tmp_path / "model", method="pca", n_components=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "source", "table"]  # no moments computed


def test_values_whose_squares_overflow_are_ingested_and_the_fit_says_why(tmp_path):
    frame = pd.DataFrame({"a": [1e300, 2.0, 3.0, 4.0], "b": [1.0, 2.0, 0.5, 3.0], "g": ["u", "u", "v", "v"]})
    frame.to_parquet(tmp_path / "source.parquet")
    ingest_table(tmp_path / "source.parquet", tmp_path / "table", sensitive_feature="g")
    assert not list((tmp_path / "table" / "moments").iterdir())
    with pytest.raises(InputError, match="overflow float64 when squared"):
        fit_table(tmp_path / "table", tmp_path / "model", method="pca", n_components=1)


def test_the_sample_ingest_draws_is_the_one_a_pass_over_the_table_draws(source, tmp_path):
    ingest_table(source, tmp_path / "table", sensitive_feature="g", pass_through=["y"])
    spec = SampleSpec(("x0", "x3", "g", "y"), ("g",), max_rows=500, rows_per_group=40, seed=0)
    stored = read_table_sample(tmp_path / "table", spec)
    drawn = table_sample(sorted(str(f) for f in (tmp_path / "table" / "parts").iterdir()), spec)
    assert stored is not None and len(stored.rows) >= 500
    pd.testing.assert_frame_equal(stored.rows, drawn.rows, check_dtype=False)
    # a spec the stored sample does not cover is drawn by a pass
    assert read_table_sample(tmp_path / "table", SampleSpec(spec.columns, ("g",), max_rows=10**6)) is None
    assert read_table_sample(tmp_path / "table", SampleSpec(spec.columns, ("g",), seed=1)) is None


def test_priority_samples_merge_exactly_and_are_uniform():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"v": np.arange(10_000), "g": rng.choice(["a", "b", "c"], 10_000, p=[0.9, 0.09, 0.01])})
    spec = SampleSpec(("v", "g"), ("g",), max_rows=300, rows_per_group=20, seed=7)
    parts = [spec.of_rows(frame.iloc[i : i + 1000], spec.keys(i // 1000)) for i in range(0, 10_000, 1000)]
    left = parts[0]
    for part in parts[1:]:
        left = left + part
    right = parts[-1]
    for part in reversed(parts[:-1]):
        right = part + right
    with dask.config.set(scheduler="sync"):
        tree = run_graph(tree_sum([dask.delayed(p) for p in parts], 3))
    pd.testing.assert_frame_equal(left.rows, right.rows)
    pd.testing.assert_frame_equal(left.rows, tree.rows)
    # the 300 smallest keys overall, and 20 per group, of all 10,000 keys
    keys = np.concatenate([np.random.default_rng([KEY_ENTROPY, 7, i]).random(1000) for i in range(10)])
    assert np.array_equal(np.sort(left.uniform(300)["v"]), np.sort(np.argsort(keys)[:300]))
    for group in "abc":
        mine = frame.index[frame["g"] == group].to_numpy()
        expected = np.sort(mine[np.argsort(keys[mine])[:20]])
        assert np.array_equal(np.sort(left.per_group(20).query("g == @group")["v"]), expected)
    assert left.rows[KEY_COLUMN].is_monotonic_increasing
    # uniform: every row as likely (a chi-square check over many seeds would be slow; the mean
    # position of a 300-row sample is within 4 standard errors of the middle)
    positions = left.uniform(300)["v"].to_numpy()
    assert abs(positions.mean() - 4999.5) < 4 * 2887 / np.sqrt(300)


def test_a_partition_keeps_only_the_keys_its_share_can_need_and_the_merge_says_if_that_was_exact():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"v": np.arange(40_000), "g": rng.choice(["a", "b", "c"], 40_000, p=[0.9, 0.098, 0.002])})
    spec = SampleSpec(("v", "g"), ("g",), max_rows=500, rows_per_group=50, seed=2)

    def merged(bounds: list[int], share: bool) -> RowSample:
        parts = [
            spec.of_rows(frame.iloc[a:b], spec.keys(i), share=1 / (len(bounds) - 1) if share else None)
            for i, (a, b) in enumerate(itertools.pairwise(bounds))
        ]
        return functools.reduce(operator.add, parts)

    even = list(range(0, 40_001, 4000))  # ten equal partitions
    cut, whole = merged(even, True), merged(even, False)
    assert cut.exact() and whole.exact() and cut.floor < 1  # rows were left out, none that was needed
    pd.testing.assert_frame_equal(cut.rows, whole.rows)
    assert (cut.rows["g"] == "c").sum() == min(50, (frame["g"] == "c").sum())  # the small group: every row it needs
    skewed = [0, 36_000, *range(36_400, 40_001, 400)]  # one partition of 90 % the rows, said to hold 10 %
    assert not merged(skewed, True).exact()
    assert merged(skewed, False).exact()


def test_the_keys_are_independent_of_a_table_generated_with_numpys_seeds_per_file():
    """Files whose groups were drawn by ``default_rng([0, file]).choice`` (the way the benchmarks
    and many users make synthetic tables): keys seeded by (seed, file) alone were those very
    uniforms, and the sample held the first group only."""
    shares = [0.5, 0.3, 0.15, 0.05]
    files = [pd.DataFrame({"g": np.random.default_rng([0, i]).choice(4, size=20_000, p=shares)}) for i in range(4)]
    spec = SampleSpec(("g",), ("g",), max_rows=4000, rows_per_group=100)
    sample = functools.reduce(operator.add, [spec.of_rows(f, spec.keys(i), share=0.25) for i, f in enumerate(files)])
    assert sample.exact()
    counts = sample.uniform(4000)["g"].value_counts().reindex(range(4), fill_value=0).to_numpy()
    expected = 4000 * np.array(shares)
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))


def test_a_smaller_spec_is_a_prefix_of_the_sample():
    frame = pd.DataFrame({"v": np.arange(2000.0), "w": 1.0, "g": np.arange(2000) % 3})
    big = SampleSpec(("v", "w", "g"), ("g",), max_rows=400, rows_per_group=50)
    small = SampleSpec(("v", "g"), ("g",), max_rows=100, rows_per_group=10)
    sample = big.of_rows(frame, big.keys(0))
    pd.testing.assert_frame_equal(sample.restricted(small).rows, small.of_rows(frame, small.keys(0)).rows)
    # keys drawn batch by batch are those drawn at once
    keys = big.keys(0)
    batched = big.of_rows(frame.iloc[:700], keys) + big.of_rows(frame.iloc[700:], keys)
    pd.testing.assert_frame_equal(batched.rows, sample.rows)
    assert isinstance(sample.restricted(small), RowSample)


@pytest.mark.parametrize("rbf_mmd, subsample", [("rff", False), ("rff", True), ("auto", False)])
def test_the_fused_pipeline_equals_the_unfused_functions(source, tmp_path, monkeypatch, rbf_mmd, subsample):
    """ingest (moments, sample) → fit (cache) → project (+ rff sums) → report (from them), against
    the same library calls that read the rows for each of them; with ``subsample`` the random-feature
    sums are of a stratified subsample (a table larger than RBF_RFF_MAX_ROWS, here made small)."""
    if subsample:
        monkeypatch.setattr(report_module, "RBF_RFF_MAX_ROWS", 1000)
        monkeypatch.setattr(report_module, "RBF_RFF_GROUP_ROWS", 150)
    fused, unfused = tmp_path / "fused", tmp_path / "unfused"
    cache = fused / "cache"
    ingest_table(source, fused / "table", sensitive_feature="g", pass_through=["y"])
    fit_table(fused / "table", fused / "model", method="samadi-mw", n_components=2, standardize=True, cache_dir=cache)
    planned = report_rff_work(fused / "model", fused / "table", rbf_mmd=rbf_mmd)
    assert (planned is None) == (rbf_mmd == "auto")  # 2,400 rows: "auto" is the exact MMD², no sums to ride
    plan, work = planned or (None, None)
    projected = project_table(fused / "model", fused / "table", fused / "projected", pass_through=["y"], rff=work)
    sums = None if plan is None else RBFSums(plan, projected.rff_sums)
    fused_report, _ = write_table_report(
        fused / "model", fused / "table", fused / "report", target="y", rbf_mmd=rbf_mmd, rbf_sums=sums
    )

    unfused.mkdir()
    shutil.copytree(fused / "table", unfused / "table")
    (unfused / "table" / SAMPLE_FILE).unlink()  # the report draws its sample by a pass
    shutil.rmtree(unfused / "table" / "moments")  # the fit computes the moments by a pass
    fit_table(
        unfused / "table",
        unfused / "model",
        method="samadi-mw",
        n_components=2,
        standardize=True,
        cache_dir=unfused / "c",
    )
    project_table(unfused / "model", unfused / "table", unfused / "projected", pass_through=["y"])
    unfused_report, _ = write_table_report(
        unfused / "model", unfused / "table", unfused / "report", target="y", rbf_mmd=rbf_mmd
    )

    mine, theirs = _numbers(fused_report), _numbers(unfused_report)
    assert mine.keys() == theirs.keys()
    for key, value in theirs.items():
        if isinstance(value, float):
            assert mine[key] == pytest.approx(value, rel=1e-10, abs=1e-12), key
        else:
            assert mine[key] == value, key
    assert fused_report["rbf_mmd"]["estimator"] == ("rff" if rbf_mmd == "rff" else "exact")
    if rbf_mmd == "rff":
        counts = np.array([group["count"] for group in fused_report["data"]["groups"]], dtype=float)
        summed = np.array(fused_report["rbf_mmd"]["rows_summed"])
        if subsample:  # about max(1000 / 2400, 150 / n_g) of each group's rows, every row of the small group
            rates = np.minimum(1, np.maximum(1000 / counts.sum(), 150 / counts))
            assert np.all(np.abs(summed - rates * counts) < 5 * np.sqrt(rates * counts) + 1)
            assert summed.sum() < 0.7 * counts.sum()
        else:
            np.testing.assert_array_equal(summed, counts)
    assert "skipped" not in fused_report["downstream"]
    for name in sorted(p.name for p in (unfused / "projected").glob("*.parquet")):
        assert pq.read_table(fused / "projected" / name).equals(pq.read_table(unfused / "projected" / name))


def test_sums_planned_for_another_model_are_refused(source, tmp_path):
    ingest_table(source, tmp_path / "table", sensitive_feature="g", pass_through=["y"])
    for name, method in (("model", "samadi-mw"), ("other", "pca")):
        fit_table(tmp_path / "table", tmp_path / name, method=method, n_components=2, standardize=True)
    planned = report_rff_work(tmp_path / "model", tmp_path / "table", rbf_mmd="rff")
    assert planned is not None
    plan, work = planned
    projected = project_table(tmp_path / "model", tmp_path / "table", tmp_path / "projected", rff=work)
    with pytest.raises(InputError, match="computed for other projections"):
        write_table_report(
            tmp_path / "other", tmp_path / "table", tmp_path / "report", rbf_sums=RBFSums(plan, projected.rff_sums)
        )


def test_row_keys_depend_on_the_values_alone():
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(4000, 3))
    keys = row_keys(rows)
    np.testing.assert_array_equal(np.concatenate([row_keys(rows[:1234]), row_keys(rows[1234:])]), keys)
    np.testing.assert_array_equal(row_keys(np.asfortranarray(rows[::-1])), keys[::-1])
    assert keys.min() >= 0 and keys.max() < 1
    assert abs(keys.mean() - 0.5) < 4 * np.sqrt(1 / 12 / 4000)  # uniform
    assert np.histogram(keys, bins=10, range=(0, 1))[0].min() > 300  # 400 expected per bin
    assert row_keys(rows[[5, 5]]).tolist() == [keys[5], keys[5]]
    assert len(np.unique(row_keys(np.eye(50)))) == 50  # rows that differ in one value


@pytest.mark.parametrize(
    "target",
    [
        [0, 1] * 600,  # binary: passes
        [0, 1, 2] * 400,  # three classes
        [0] * 1199 + [1],  # a class of one row
        [0.0, 1.0, np.nan] * 400,  # missing labels
        list(range(1200)),  # more distinct values than a partition counts: the check's own pass
    ],
    ids=["binary", "three-classes", "one-row-class", "missing", "many-values"],
)
def test_the_target_counted_by_ingest_is_checked_as_a_pass_over_the_table_checks_it(tmp_path, monkeypatch, target):
    frame = pd.DataFrame({"x": np.arange(1200.0), "z": np.arange(1200.0) % 7, "g": ["u", "v"] * 600, "y": target})
    monkeypatch.setattr("fairpca_dist.io.ingest.COUNTED_VALUES", 100)  # partitions of 300 rows
    result = ingest_table(dd.from_pandas(frame, npartitions=4), tmp_path / "table", sensitive_feature="g",
                          pass_through=["y"], count_values=["y"])  # fmt: skip
    counted = result.value_counts.get("y")
    assert (counted is None) == (len(set(target)) > 100)
    outcomes = []
    for counts in (counted, None):  # fused, then the pass of its own
        try:
            check_report_target(tmp_path / "table", "y", counts=counts)
            outcomes.append("passes")
        except InputError as error:
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0] == "passes") == (target == [0, 1] * 600)


def test_only_columns_kept_beside_the_features_are_counted(source, tmp_path):
    with pytest.raises(InputError, match=r"count_values \['x0'\] must be among"):
        ingest_table(source, tmp_path / "table", sensitive_feature="g", pass_through=["y"], count_values=["x0"])
    assert not (tmp_path / "table").exists()
