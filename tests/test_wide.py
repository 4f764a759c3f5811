"""The wide path (issue #34): moments that keep only their diagonal, fnpm-streaming fitted from
them with its group losses from the rows, the report's scores and PCA arm without a p × p
matrix, and the choice of the path. Each is checked against the full-moments path on the same
rows (numpy on the rows for the statistics), the dask passes against the in-memory ones."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairpca_dist import GroupMoments, fit_projection
from fairpca_dist.assessment.report import WIDE_PCA_OPTIONS, WIDE_SKIPPED, _pca
from fairpca_dist.assessment.scoring import score_projection
from fairpca_dist.cli import main
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.engine.passes import compute_file_moments
from fairpca_dist.exceptions import InputError
from fairpca_dist.fitting import fit_table, load_fitted, report_passes, write_table_report
from fairpca_dist.io.ingest import SAMPLE_FILE, ingest_table
from fairpca_dist.params import MOMENTS_BUDGET, check_wide_method, choose_wide
from fairpca_dist.solvers.stiefel import subspace_distance

P = 12


def _rows(seed: int = 0, n: int = 1500, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Two groups whose means differ in 3 features and whose variances differ in one."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, P)) @ rng.normal(size=(P, P)) * 0.5 + offset
    labels = rng.choice(np.array(["a", "b"]), size=n, p=[0.6, 0.4])
    x[labels == "b", :3] += 1.0
    x[labels == "b", 5] *= 2.0
    return x, labels


@pytest.fixture(scope="module")
def rows() -> tuple[np.ndarray, np.ndarray]:
    return _rows()


def _codes(labels: np.ndarray) -> np.ndarray:
    return (labels == "b").astype(np.intp)


# ---------------------------------------------------------------------------- the statistics
@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_diagonal_statistics_equal_numpy_on_the_rows(offset):
    x, labels = _rows(seed=1, offset=offset)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, size=len(x))
    wide = GroupMoments.diagonal_from_codes(x, _codes(labels), ("a", "b"), weights=weights)
    assert wide.is_diagonal and wide.scatter.shape == (2, P)
    for g, label in enumerate(("a", "b")):
        y, w = x[labels == label] - offset, weights[labels == label]  # numpy, about the offset: every digit
        mean = w @ y / w.sum()
        np.testing.assert_allclose(wide.means_about(np.full(P, offset))[g], mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(wide.scatter[g], w @ (y - mean) ** 2, rtol=1e-9)
        assert wide.weight[g] == pytest.approx(w.sum(), rel=1e-14)
        assert wide.count[g] == len(y)


def test_diagonal_merges_equal_one_chunk_and_the_full_diagonal(rows):
    x, labels = rows
    whole = GroupMoments.diagonal_from_codes(x, _codes(labels), ("a", "b"))
    cuts = [0, 1, 400, 401, 1100, len(x)]  # a chunk of one row (one group), uneven others
    merged = GroupMoments.empty([f"x{j}" for j in range(P)], diagonal=True)
    for start, stop in zip(cuts, cuts[1:], strict=False):
        merged = merged + GroupMoments.diagonal_from_codes(x[start:stop], _codes(labels[start:stop]), ("a", "b"))
    full = GroupMoments.from_arrays(x, labels)
    for other in (merged, full.diagonal()):
        np.testing.assert_allclose(other.scatter, whole.scatter, rtol=1e-12)
        np.testing.assert_allclose(other.mean, whole.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(whole.feature_scale(1), full.feature_scale(1), rtol=1e-12)
    np.testing.assert_allclose(
        whole.rescaled(full.feature_scale()).scatter, full.rescaled(full.feature_scale()).diagonal().scatter, rtol=1e-12
    )


def test_the_dask_pass_gives_the_in_memory_diagonal(tmp_path, rows):
    x, labels = rows
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(P)]).assign(group=labels)
    paths = []
    for i, (start, stop) in enumerate([(0, 500), (500, 1001), (1001, len(frame))]):
        paths.append(str(tmp_path / f"part-{i}.parquet"))
        frame.iloc[start:stop].to_parquet(paths[-1])
    parts = compute_file_moments(paths, sensitive_feature="group", features=list(frame.columns[:P]), diagonal=True)
    merged = parts[0] + parts[1] + parts[2]
    assert merged.is_diagonal
    np.testing.assert_allclose(merged.scatter, GroupMoments.from_arrays(x, labels).diagonal().scatter, rtol=1e-12)


def test_a_matrix_of_diagonal_moments_is_refused_by_name(rows):
    moments = GroupMoments.from_arrays(*rows).diagonal()
    with pytest.raises(InputError, match="keep only their diagonal.*fnpm-streaming"):
        moments.covariance()
    with pytest.raises(InputError, match="method 'fair-eig' needs the p × p moments.*fnpm-streaming"):
        fit_projection(moments, 2, method="fair-eig")
    with pytest.raises(InputError, match="cannot merge p × p moments with diagonal-only"):
        _ = GroupMoments.from_arrays(*rows) + moments


# ---------------------------------------------------------------------------- the fit and its scores
@pytest.mark.parametrize("center", ["group", "global", "origin"])
@pytest.mark.parametrize("standardize", [False, True])
def test_wide_fit_equals_the_fit_from_full_moments(rows, center, standardize):
    """Same iterations (the per-group blocks are drawn after V), so the same V; the group errors
    and losses from the rows equal those the full moments give."""
    x, labels = rows
    full = GroupMoments.from_arrays(x, labels)
    fits = [
        fit_projection(
            moments,
            3,
            method="fnpm-streaming",
            passes=ArrayPasses(x, labels, full.groups),
            random_state=1,
            center=center,
            standardize=standardize,
        )
        for moments in (full, full.diagonal())
    ]
    assert all(f.status == "converged" for f in fits)
    assert subspace_distance(fits[0].components, fits[1].components) < 1e-10
    np.testing.assert_allclose(fits[1].group_error, fits[0].group_error, rtol=1e-9)
    np.testing.assert_allclose(fits[1].group_loss, fits[0].group_loss, rtol=1e-7, atol=1e-9)
    assert fits[1].details["best_change"][-1] <= 1e-8


def test_wide_scores_equal_the_scores_from_full_moments(rows):
    x, labels = rows
    full = GroupMoments.from_arrays(x, labels)
    model = fit_projection(
        full.diagonal(), 3, method="fnpm-streaming", passes=ArrayPasses(x, labels, full.groups), center="global"
    )
    wide, exact = score_projection(model, full.diagonal()).as_dict(), score_projection(model, full).as_dict()
    for key, value in exact.items():
        np.testing.assert_allclose(wide[key], value, rtol=1e-7, atol=1e-10, err_msg=key)
    with pytest.raises(InputError, match="scored on the rows it was fitted on only"):
        score_projection(model, full.diagonal(), full.diagonal())


def test_wide_pca_arm_is_pca(rows):
    x, labels = rows
    full = GroupMoments.from_arrays(x, labels)
    model = fit_projection(full.diagonal(), 3, method="fnpm-streaming", passes=ArrayPasses(x, labels, full.groups))
    streamed = _pca(full.diagonal(), model, 3, ArrayPasses(x, labels, full.groups))
    exact = fit_projection(full, 3, method="pca")
    assert streamed.method == "pca" and streamed.details["computed_by"] == "fnpm-streaming"
    assert streamed.details["tradeoff"] == WIDE_PCA_OPTIONS["tradeoff"] == 0.0
    assert subspace_distance(streamed.components, exact.components) < 1e-6
    np.testing.assert_allclose(streamed.group_loss, exact.group_loss, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------------------- the choice
def test_the_wide_path_is_chosen_by_the_budget_or_on_request():
    assert choose_wide(7_000, 2).wide is False  # 0.78 GB
    assert choose_wide(8_000, 2).wide is True  # 1.02 GB
    assert choose_wide(6_000, 4).wide is True  # the groups count
    assert choose_wide(8_000, 2, budget=2 * 10**9).wide is False
    assert choose_wide(10, 2, wide=True).wide and not choose_wide(10**5, 2, wide=False).wide
    assert MOMENTS_BUDGET == 10**9
    assert "20,000 features would take 6.4 GB (budget 1 GB)" in choose_wide(20_000, 2).reason
    with pytest.raises(InputError, match="method 'mm' needs the p × p moments.*--no-wide.*--moments-budget"):
        check_wide_method("mm", choose_wide(20_000, 2))
    with pytest.raises(InputError, match="no method fits a wide table of 3 groups.*merge the groups"):
        check_wide_method("fnpm-streaming", choose_wide(20_000, 3), 3)
    assert check_wide_method("mm", choose_wide(20, 2)).wide is False
    with pytest.raises(InputError, match="positive number of bytes"):
        choose_wide(10, 2, budget=0)
    on_workers = choose_wide(3_000, 2, worker_limit=10**9)  # 144 MB > 1/11 of 1 GB workers
    assert on_workers.wide and "(budget 91 MB: 1/11 of the workers' 1 GB)" in on_workers.reason
    assert not choose_wide(2_000, 2, worker_limit=10**9).wide  # 64 MB
    assert not choose_wide(3_000, 2, worker_limit=10**9, budget=2 * 10**8).wide  # a budget given wins


# ---------------------------------------------------------------------------- the table path
@pytest.fixture(scope="module")
def wide_table(tmp_path_factory, rows):
    x, labels = rows
    folder = tmp_path_factory.mktemp("wide")
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(P)]).assign(sex=labels)
    frame["y"] = np.random.default_rng(5).integers(0, 2, len(frame))
    for i, (start, stop) in enumerate([(0, 500), (500, 1001), (1001, len(frame))]):
        frame.iloc[start:stop].to_parquet(folder / f"source-{i}.parquet")
    tables = {}
    for wide in (False, True):
        table = folder / f"table-{wide}"
        ingest_table(str(folder / "source-*.parquet"), table, sensitive_feature="sex", pass_through=["y"], wide=wide)
        tables[wide] = table
    return folder, tables


def test_wide_ingest_keeps_the_diagonal_and_no_sample(wide_table):
    _, tables = wide_table
    schema = json.loads((tables[True] / "schema.json").read_text())
    assert schema["wide"] is True and "on request" in schema["wide_reason"]
    assert not (tables[True] / SAMPLE_FILE).exists() and (tables[False] / SAMPLE_FILE).exists()
    assert json.loads((tables[False] / "schema.json").read_text())["wide"] is False


def test_wide_table_fit_and_report_equal_the_in_memory_path(wide_table, rows):
    """fit_table on the wide table (dask passes over Parquet) gives the in-memory wide fit; its
    report's scores equal the scores of the same model from the full moments, and its PCA arm
    equals PCA from them."""
    folder, tables = wide_table
    said: list[str] = []
    model = fit_table(
        tables[True], folder / "model", method="fnpm-streaming", n_components=3, random_state=0, announce=said.append
    )
    reason = json.loads((tables[True] / "schema.json").read_text())["wide_reason"]
    assert said == [f"fit: as ingested: {reason}"]
    x, labels = rows
    full = GroupMoments.from_arrays(x, labels, feature_names=[f"f{j}" for j in range(P)])
    memory = fit_projection(
        full.diagonal(),
        3,
        method="fnpm-streaming",
        passes=ArrayPasses(x, labels, full.groups),
        random_state=0,
        standardize=False,
    )
    assert load_fitted(folder / "model")[1].is_diagonal
    assert subspace_distance(model.components, memory.components) < 1e-9
    np.testing.assert_allclose(model.group_loss, memory.group_loss, rtol=1e-7, atol=1e-9)
    report, files = write_table_report(folder / "model", tables[True], folder / "report", target="y")
    assert report["rbf_mmd"] == {"skipped": WIDE_SKIPPED} and report["downstream"] == {"skipped": WIDE_SKIPPED}
    scores = score_projection(model, full)
    for key in ("group_error", "group_loss", "explained_variance_ratio", "are", "mmd2_linear"):
        expected = scores.as_dict()[key]
        np.testing.assert_allclose(report["at_model"]["fair"][key], expected, rtol=1e-7, atol=1e-20, err_msg=key)
    pca = score_projection(fit_projection(full, 3, method="pca"), full)
    np.testing.assert_allclose(report["at_model"]["pca"]["group_loss"], pca.group_loss, rtol=1e-6, atol=1e-9)
    assert files.html.exists() and "not measured on a wide table" in files.markdown.read_text()
    assert report_passes(tables[True], load_fitted(folder / "model")[1]).n_passes == 0


def test_cli_refuses_a_method_that_needs_the_matrix_in_one_line(wide_table, capsys):
    folder, tables = wide_table
    code = main(["fit", str(tables[True]), str(folder / "refused"), "--method", "fair-eig", "--wide"])
    err = capsys.readouterr().err
    assert code != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "method 'fair-eig' needs the p × p moments" in err and "fnpm-streaming" in err
    assert not (folder / "refused").exists()


def test_cli_fit_says_why_it_goes_wide(wide_table, capsys):
    folder, tables = wide_table
    code = main(
        ["fit", str(tables[False]), str(folder / "by-budget"), "--method", "fnpm-streaming", "--moments-budget", "1kB"]
    )
    out = capsys.readouterr().out
    assert code == 0 and "fit: wide table: the p × p moments of 2 groups × 12 features" in out
    assert load_fitted(folder / "by-budget")[1].is_diagonal


def test_a_moments_pass_the_workers_cannot_hold_is_refused_before_it_starts(dask_cluster):
    """On a real cluster: the p × p moments of a table wide enough that a worker would hold more
    than its memory limit (4 partitions' worth for a table of one partition) are refused in one
    line naming the wide path, before any task runs; a narrow table passes the check."""
    from fairpca_dist.engine.passes import compute_moments, smallest_worker_limit
    from fairpca_dist.exceptions import ResourceError

    limit = smallest_worker_limit(dask_cluster)
    assert limit is not None and limit > 0
    p = int(np.sqrt(limit / (8 * 2 * 4))) + 200  # 4 × 8·2·p² bytes > the limit
    frame = pd.DataFrame(np.ones((4, p)), columns=[f"f{j}" for j in range(p)]).assign(g=["a", "b"] * 2)
    with pytest.raises(
        ResourceError, match=rf"moments of {p:,} features take .* more than the workers' memory limit.*--wide"
    ):
        compute_moments(frame, sensitive_feature="g", client=dask_cluster)
    assert (
        compute_moments(frame.iloc[:, :20].assign(g=frame["g"]), sensitive_feature="g", client=dask_cluster).n_features
        == 20
    )


@pytest.mark.parametrize("blocksize", [None, 4 * 8 * 1002])
def test_a_parquet_file_of_many_columns_is_read_row_group_by_row_group_a_few_columns_at_a_time(
    tmp_path, monkeypatch, blocksize
):
    """Above PARQUET_STATISTICS_COLUMNS columns the read is planned without dask's adaptive plan
    (its row-group statistics cost time quadratic in the columns: 7 s a row group at 3,000):
    one partition per row group (slices of one above the blocksize), read by the slice reader
    a bounded number of columns at a time; the same rows in order, the same diagonal moments,
    and the footer every task parses counted in the memory a task needs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairpca_dist.engine import parquet_slices
    from fairpca_dist.engine.memory import NEED_PER_FOOTER_BYTE, frame_partition_size
    from fairpca_dist.engine.sources import PARQUET_STATISTICS_COLUMNS, open_table

    monkeypatch.setattr(parquet_slices, "MAX_COLUMNS_PER_READ", 100)
    p = PARQUET_STATISTICS_COLUMNS + 1
    x = np.random.default_rng(6).normal(size=(30, p))
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(p)]).assign(g=["a", "b", "c"] * 10)
    path = tmp_path / "table" / "part-0.parquet"
    path.parent.mkdir()
    (path.parent / "_SUCCESS").write_text("")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=10)
    options = {} if blocksize is None else {"blocksize": blocksize}
    for source in (path, path.parent):  # a folder is planned by its first file's columns
        table = open_table(str(source), sensitive_feature="g", read_options=options)
        assert table.frame is not None
        if blocksize is None:
            assert table.frame.npartitions == 3
        else:  # slices of at most the blocksize (as the footer counts bytes: with dictionary pages)
            assert table.frame.npartitions > 3 * (10 * 8 * p) // blocksize
        np.testing.assert_array_equal(table.frame[list(table.features)].compute().to_numpy(), x)
    size = frame_partition_size(table.frame)
    footer = pq.ParquetFile(path).metadata.serialized_size
    assert size is not None and size.sliced and size.footer_bytes == footer
    assert size.need() > NEED_PER_FOOTER_BYTE * footer
    moments = GroupMoments.diagonal_from_codes(x, np.arange(30) % 3, ("a", "b", "c"))
    read = compute_file_moments([str(path)], sensitive_feature="g", features=table.features, diagonal=True)
    np.testing.assert_allclose(read[0].scatter, moments.scatter, rtol=1e-12)


def test_subspace_distance_equals_the_norm_of_the_projectors_difference_without_forming_them():
    """‖P_a − P_b‖₂ by the projectors (the reference, p × p) and by the O(p r²) formula, over
    random pairs of any dimensions, near-equal pairs, and equal ones."""
    rng = np.random.default_rng(7)
    for trial in range(200):
        p = int(rng.integers(3, 12))
        a = rng.normal(size=(p, int(rng.integers(1, p))))
        b = rng.normal(size=(p, int(rng.integers(1, p))))
        if trial % 3 == 0:
            b = a + 1e-4 * rng.normal(size=a.shape)
        qa, qb = np.linalg.qr(a)[0], np.linalg.qr(b)[0]
        expected = np.linalg.norm(qa @ qa.T - qb @ qb.T, ord=2)
        assert subspace_distance(a, b) == pytest.approx(expected, abs=1e-12)
    assert subspace_distance(a, a) < 1e-12


def test_the_fit_follows_ingest_both_ways_and_evaluate_refuses_a_wide_table(wide_table, tmp_path):
    """A table ingested narrow is fitted from its p × p moments whatever the budget would say now
    (no row read again), one ingested wide is fitted the wide way; --no-wide overrides; evaluate
    refuses the wide one by name."""
    from fairpca_dist.assessment.table_evaluation import evaluate_table
    from fairpca_dist.fitting import cached_table_moments

    folder, tables = wide_table
    narrow = fit_table(tables[False], tmp_path / "narrow", method="pca", n_components=2)
    assert not load_fitted(tmp_path / "narrow")[1].is_diagonal and narrow.method == "pca"
    forced = fit_table(tables[True], tmp_path / "forced", method="pca", n_components=2, wide=False)
    assert not load_fitted(tmp_path / "forced")[1].is_diagonal and forced.method == "pca"
    with pytest.raises(
        InputError, match="method 'pca' needs the p × p moments.*as ingested.*--no-wide \\(wide=False\\)$"
    ):
        fit_table(tables[True], tmp_path / "refused", method="pca", n_components=2)
    roles = {"sensitive_feature": ["sex"], "features": [f"f{j}" for j in range(P)]}
    assert cached_table_moments(tables[True], None, diagonal=True, **roles)[2] == 0  # ingest's, no rows read
    with pytest.raises(
        InputError,
        match="evaluate and compare: the p × p moments of every cell are needed.*ingest it again with --no-wide",
    ):
        evaluate_table(tables[True], tmp_path / "evaluation", methods=["pca"], n_components=2)
    assert compute_file_moments([], sensitive_feature="sex", features=roles["features"]) == []
