"""Every writer on an object store (a real S3 server, tests/s3_server.py), against the same
writer on the local disk: the outputs are equal, land in the bucket and nowhere else, are
committed whole (a versioned folder and its ``_CURRENT`` pointer: fairpca_dist.io.versions), a
failed write leaves the previous output, two writers never mix, and each fault is one clear
error naming the URL (never a secret), with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import fit_projection, load_model, save_model
from fairpca_dist.exceptions import InputError, OutputBusyError, OutputPathError, ServiceError, WriteError
from fairpca_dist.fitting import fit_table, load_fitted
from fairpca_dist.io.ingest import ingest_table, read_schema
from fairpca_dist.io.storage import locate
from fairpca_dist.io.versions import POINTER, committed, is_version_name
from fairpca_dist.projection import project_table

pytestmark = pytest.mark.usefixtures("s3")


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    x, labels = grouped_data(n_rows=900, n_features=4, n_groups=2, seed=3)
    out = pd.DataFrame(x, columns=[f"x{j}" for j in range(4)])
    out["group"] = labels
    out["row_id"] = np.arange(len(out))
    return out


@pytest.fixture
def source(frame: pd.DataFrame, s3_bucket: str, tmp_path) -> tuple[str, str]:
    """The same table as three Parquet files, in the bucket and on the local disk."""
    remote, local = f"{s3_bucket}/source", tmp_path / "source"
    local.mkdir()
    for i, part in enumerate(_thirds(frame)):
        part.to_parquet(local / f"part-{i}.parquet", index=False)
        part.to_parquet(f"{remote}/part-{i}.parquet", index=False)
    return remote, str(local)


def _thirds(frame: pd.DataFrame) -> list[pd.DataFrame]:
    bounds = np.linspace(0, len(frame), 4).astype(int)
    return [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _bucket(url: str) -> str:
    return url.removeprefix("s3://").split("/", 1)[0]


def _projected(folder: str) -> pd.DataFrame:
    """The committed projection at ``folder`` (local or URL), rows in key order."""
    version = committed(locate(folder))
    parts = sorted(entry for entry in version.listdir() if entry.name.endswith(".parquet"))
    frames = [pd.read_parquet(entry.dask_url, storage_options=entry.storage_options or None) for entry in parts]
    return pd.concat(frames, ignore_index=True).sort_values("row_id", ignore_index=True)


def test_model_round_trip_equals_local(s3, s3_bucket, tmp_path, frame):
    from fairpca_dist import compute_moments

    moments = compute_moments(frame, sensitive_feature="group", features=[f"x{j}" for j in range(4)])
    model = fit_projection(moments, 2, method="fair-eig")
    save_model(model, f"{s3_bucket}/model")
    save_model(model, tmp_path / "model")
    remote, local = load_model(f"{s3_bucket}/model"), load_model(tmp_path / "model")
    np.testing.assert_array_equal(remote.components, local.components)
    assert remote.group_labels == local.group_labels
    keys = s3.keys(_bucket(s3_bucket))
    assert f"model/{POINTER}" in keys and len({k.split("/")[1] for k in keys if k != f"model/{POINTER}"}) == 1
    save_model(model, f"{s3_bucket}/model")  # replacing it: one version left, the new one
    versions = {k.split("/")[1] for k in s3.keys(_bucket(s3_bucket), "model/v-")}
    assert len(versions) == 1 and all(is_version_name(v) for v in versions)


def test_pipeline_steps_on_s3_equal_local(s3, s3_bucket, source, tmp_path):
    remote, local = source
    outputs = {}
    for name, base, src in (("s3", s3_bucket, remote), ("local", str(tmp_path), local)):
        ingest_table(src, f"{base}/table", sensitive_feature="group", key_columns=["row_id"])
        model = fit_table(f"{base}/table", f"{base}/model", method="fair-eig", n_components=2)
        project_table(f"{base}/model", f"{base}/table", f"{base}/projected", pass_through=["row_id"])
        outputs[name] = (model, _projected(f"{base}/projected"), read_schema(f"{base}/table"))
    (m_s3, p_s3, schema_s3), (m_local, p_local, schema_local) = outputs["s3"], outputs["local"]
    np.testing.assert_allclose(m_s3.components, m_local.components, atol=1e-12)
    pd.testing.assert_frame_equal(p_s3, p_local, atol=1e-12)
    assert schema_s3["rows"] == schema_local["rows"] == 900
    reloaded, moments = load_fitted(f"{s3_bucket}/model")
    np.testing.assert_array_equal(reloaded.components, m_s3.components)
    keys = s3.keys(_bucket(s3_bucket))
    for output in ("table", "model", "projected"):
        assert f"{output}/{POINTER}" in keys
    assert any(k.startswith("table/") and "/moments/" in k for k in keys)  # ingest's, which the fit read
    assert not any(k.startswith(".moments-cache/") for k in keys)
    fit_table(f"{s3_bucket}/table", f"{s3_bucket}/model-2", n_components=1, sensitive_feature="group", features=["x0"])
    assert any(k.startswith(".moments-cache/") for k in s3.keys(_bucket(s3_bucket)))  # other roles: cached there


def test_a_plain_reader_of_the_prefix_sees_the_committed_output(s3_bucket, source):
    remote, _ = source
    ingest_table(remote, f"{s3_bucket}/table", sensitive_feature="group", key_columns=["row_id"])
    fit_table(f"{s3_bucket}/table", f"{s3_bucket}/model", n_components=2)
    for _ in range(2):  # the second write replaces the first: one version remains
        project_table(f"{s3_bucket}/model", f"{s3_bucket}/table", f"{s3_bucket}/projected", pass_through=["row_id"])
    import dask.dataframe as dd

    plain = dd.read_parquet(f"{s3_bucket}/projected").compute().sort_values("row_id", ignore_index=True)
    pd.testing.assert_frame_equal(plain, _projected(f"{s3_bucket}/projected"))


def test_a_failed_write_leaves_the_previous_output_and_the_next_cleans_up(s3, s3_bucket, source, frame):
    remote, _ = source
    ingest_table(remote, f"{s3_bucket}/table", sensitive_feature="group", key_columns=["row_id"])
    fit_table(f"{s3_bucket}/table", f"{s3_bucket}/model", n_components=2)
    out = f"{s3_bucket}/projected"
    project_table(f"{s3_bucket}/model", f"{s3_bucket}/table", out, pass_through=["row_id"])
    before = _projected(out)
    pointer = locate(f"{out}/{POINTER}").read_text()
    bad = frame.copy()
    bad.loc[700, "x1"] = np.nan  # one partition of three fails, after the others wrote their parts
    bad_source = f"{s3_bucket}/bad"
    for i, part in enumerate(_thirds(bad)):
        part.to_parquet(f"{bad_source}/part-{i}.parquet", index=False)
    with pytest.raises(InputError, match="x1"):
        project_table(f"{s3_bucket}/model", bad_source, out, pass_through=["row_id"])
    assert locate(f"{out}/{POINTER}").read_text() == pointer
    pd.testing.assert_frame_equal(_projected(out), before)
    assert len({k.split("/")[1] for k in s3.keys(_bucket(s3_bucket), "projected/v-")}) == 1  # its version removed
    # a writer killed before its cleanup leaves a version no pointer names: the next writer removes it
    dead = locate(f"{out}/v-0123456789ab/part-00000.parquet")
    dead.write_bytes(b"left by a killed writer")
    time.sleep(1.1)  # the store dates objects to the second: one of the commit's second may be a live writer's
    project_table(f"{s3_bucket}/model", f"{s3_bucket}/table", out, pass_through=["row_id"])
    assert not dead.exists()
    pd.testing.assert_frame_equal(_projected(out), before)


def test_two_writers_at_once_never_mix(s3, s3_bucket, source):
    remote, _ = source
    ingest_table(remote, f"{s3_bucket}/table", sensitive_feature="group", key_columns=["row_id"])
    fit_table(f"{s3_bucket}/table", f"{s3_bucket}/model", n_components=2)
    out, outcomes, start = f"{s3_bucket}/projected", [], threading.Barrier(2)

    def write(pass_through: list[str]) -> None:
        start.wait()
        try:
            outcomes.append(project_table(f"{s3_bucket}/model", f"{s3_bucket}/table", out, pass_through=pass_through))
        except OutputBusyError as error:
            outcomes.append(error)

    writers = [threading.Thread(target=write, args=(columns,)) for columns in (["row_id"], ["row_id", "group"])]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert any(not isinstance(o, Exception) for o in outcomes)
    result = _projected(out)
    marker = json.loads((committed(locate(out)) / "_SUCCESS").read_text())
    assert list(result.columns) == marker["columns"] and len(result) == marker["rows"] == 900  # one writer's, whole


def test_a_writer_outrun_by_another_is_refused_at_its_commit(s3, s3_bucket):
    """The store's conditional write decides: the first commit wins, the other is refused
    and its version removed; the output is the winner's, whole."""
    from fairpca_dist.io.versions import versioned_directory

    out = locate(f"{s3_bucket}/out")
    with pytest.raises(OutputBusyError, match="another run"):
        with versioned_directory(out, marker="_SUCCESS") as slow:
            (slow / "part-0.parquet").write_bytes(b"slow")
            with versioned_directory(out, marker="_SUCCESS") as fast:
                (fast / "part-0.parquet").write_bytes(b"fast")
                (fast / "_SUCCESS").write_text("{}")
            (slow / "_SUCCESS").write_text("{}")
    assert (committed(out) / "part-0.parquet").read_bytes() == b"fast"
    assert s3.keys(_bucket(s3_bucket)) == sorted(
        [f"out/{POINTER}", f"out/{fast.name}/_SUCCESS", f"out/{fast.name}/part-0.parquet"]
    )


def test_on_a_store_without_conditional_writes_the_pointer_is_reread_before_the_commit(frame):
    """memory:// (no If-Match): the same promises, by re-reading the pointer just before it is
    written; a model saved there loads equal."""
    from fairpca_dist import compute_moments
    from fairpca_dist.io.versions import versioned_directory

    out = locate(f"memory://fairpca-tests/{os.getpid()}-{threading.get_ident()}/out")
    with pytest.raises(OutputBusyError):
        with versioned_directory(out, marker="_SUCCESS") as slow:
            with versioned_directory(out, marker="_SUCCESS") as fast:
                (fast / "_SUCCESS").write_text("fast")
            (slow / "_SUCCESS").write_text("slow")
    assert (committed(out) / "_SUCCESS").read_text() == "fast" and not slow.exists()
    model = fit_projection(compute_moments(frame, sensitive_feature="group", features=["x0", "x1", "x2"]), 2)
    save_model(model, f"{out.parent.url}/model")
    save_model(model, f"{out.parent.url}/model")
    np.testing.assert_array_equal(load_model(f"{out.parent.url}/model").components, model.components)
    assert len([e for e in locate(f"{out.parent.url}/model").listdir() if is_version_name(e.name)]) == 1
    out.parent.remove()


def test_a_commit_whose_answer_was_lost_stands(s3, s3_bucket, frame, monkeypatch):
    """The pointer's PUT reached the store but its answer was lost, and the retry failed its
    condition (botocore retries a PutObject after a timeout): the commit stands, the version
    it names is kept, and the model loads."""
    import s3fs

    from fairpca_dist import compute_moments

    model = fit_projection(compute_moments(frame, sensitive_feature="group", features=["x0", "x1"]), 1)
    sent = s3fs.S3FileSystem.call_s3

    def answer_lost(self, method, *args, **kwargs):
        if method == "put_object" and kwargs.get("Key", "").endswith(POINTER):
            sent(self, method, *args, **kwargs)  # it lands; the caller never hears: it sends again
        return sent(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "call_s3", answer_lost)
    for _ in range(2):  # a first commit (If-None-Match), then a replacement (If-Match)
        save_model(model, f"{s3_bucket}/model")
        np.testing.assert_array_equal(load_model(f"{s3_bucket}/model").components, model.components)


def test_a_table_at_a_bucket_root_is_fitted_and_its_cache_skipped_with_a_warning(s3, s3_bucket, source):
    """The bucket's root is the table: a cache beside it would lie inside it (and before, went
    to a bucket named '.moments-cache'); it is skipped, saying where one can go."""
    remote, _ = source
    root = f"s3://{s3.new_bucket()}"
    ingest_table(remote, root, sensitive_feature="group", key_columns=["row_id"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the table's own moments (ingest's): nothing to cache
        fit_table(root, f"{s3_bucket}/model", n_components=2)
    roles = {"sensitive_feature": "group", "features": ["x0", "x1"]}  # moments the table does not hold
    with pytest.warns(UserWarning, match="not cached: it is a bucket's root"):
        fit_table(root, f"{s3_bucket}/model", n_components=2, **roles)
    fit_table(root, f"{s3_bucket}/model", n_components=2, cache_dir=f"{s3_bucket}/cache", **roles)
    assert any(k.startswith("cache/") for k in s3.keys(_bucket(s3_bucket)))


def test_file_urls_are_local_paths(source, tmp_path):
    _, local = source
    table = ingest_table(
        f"file://{local}", f"file://{tmp_path}/table", sensitive_feature="group", key_columns=["row_id"]
    ).table_dir
    assert table == tmp_path / "table"
    fit_table(table, f"file://{tmp_path}/model", n_components=2)
    project_table(f"file://{tmp_path}/model", table, f"file://{tmp_path}/projected", pass_through=["row_id"])
    assert (tmp_path / "projected" / "_SUCCESS").is_file()
    with pytest.raises(OutputPathError):  # a file:// glob stands for its files, as a plain one does
        ingest_table(f"file://{tmp_path}/projected/*.parquet", tmp_path / "projected", sensitive_feature="row_id")
    assert (tmp_path / "projected" / "_SUCCESS").is_file()


def test_evaluate_and_compare_on_s3(s3, s3_bucket, source):
    from fairpca_dist.assessment.table_comparison import compare_table
    from fairpca_dist.assessment.table_evaluation import evaluate_table

    remote, _ = source
    ingest_table(remote, f"{s3_bucket}/table", sensitive_feature="group", key_columns=["row_id"])
    evaluation = evaluate_table(
        f"{s3_bucket}/table", f"{s3_bucket}/evaluation", ["pca", "fair-eig"], n_components=2, n_splits=2
    )
    comparison = compare_table(
        f"{s3_bucket}/table", f"{s3_bucket}/comparison", n_components=2, methods=["pca", "fair-eig"], rbf_mmd=False
    )
    document = json.loads((committed(locate(f"{s3_bucket}/evaluation")) / "evaluation.json").read_text())
    assert document["source"] == f"{s3_bucket}/table" and document == {
        "source": document["source"],
        **json.loads(json.dumps(evaluation.to_dict())),
    }
    assert (committed(locate(f"{s3_bucket}/comparison")) / "comparison.html").isfile() and comparison.candidates
    keys = s3.keys(_bucket(s3_bucket))
    assert any(k.startswith(".moments-cache/cells-") for k in keys)  # the cell moments are cached in the bucket


@pytest.mark.parametrize(
    "fault", ["missing bucket", "wrong secret", "endpoint down", "unknown scheme", "no package", "foreign folder"]
)
def test_each_fault_is_one_clear_error_and_nothing_is_written(s3, s3_bucket, frame, tmp_path, fault):
    from fairpca_dist import compute_moments

    model = fit_projection(compute_moments(frame, sensitive_feature="group", features=["x0", "x1"]), 1)
    options, url, expected = None, f"{s3_bucket}/model", WriteError
    if fault == "missing bucket":
        url = "s3://no-such-bucket-fairpca/model"
    elif fault == "wrong secret":
        options = {"key": s3.key, "secret": "not-the-secret-abc123", "skip_instance_cache": True}
    elif fault == "endpoint down":
        options = {
            "endpoint_url": "http://127.0.0.1:9",
            "skip_instance_cache": True,
            "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}},
        }
        expected = ServiceError
    elif fault == "unknown scheme":
        url, expected = "s4://bucket/model", InputError
    elif fault == "no package":
        url, expected = "gs://bucket/model", InputError
    elif fault == "foreign folder":
        locate(f"{url}/notes.txt").write_text("mine")
        expected = OutputPathError
    before = s3.keys(_bucket(s3_bucket))
    with pytest.raises(expected) as raised:
        save_model(model, url, storage_options=options)
    message = str(raised.value)
    assert "\n" not in message and url.split("/model")[0] in message and "not-the-secret" not in message
    assert s3.keys(_bucket(s3_bucket)) == before


@pytest.mark.slow  # six commands, 35 s: make bench runs it
def test_the_command_line_writes_to_the_bucket_only(s3, s3_bucket, source, tmp_path):
    remote, _ = source
    env = {**os.environ, **s3.env}
    run = [sys.executable, "-m", "fairpca_dist.cli"]
    steps = [
        ["ingest", remote, f"{s3_bucket}/table", "--sensitive-feature", "group", "--key-columns", "row_id"],
        ["fit", f"{s3_bucket}/table", f"{s3_bucket}/model"],
        ["project", f"{s3_bucket}/model", f"{s3_bucket}/table", f"{s3_bucket}/projected"],
        ["evaluate", f"{s3_bucket}/table", f"{s3_bucket}/evaluation", "--splits", "2", "--method", "pca"],
        [
            "compare",
            f"{s3_bucket}/table",
            f"{s3_bucket}/comparison",
            "--method",
            "pca",
            "--method",
            "fair-eig",
            "--no-rbf-mmd",
        ],
    ]
    for step in steps:
        done = subprocess.run([*run, *step], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == ["source"]  # nothing written under the working folder
    keys = s3.keys(_bucket(s3_bucket))
    for output, marker in (("evaluation", "evaluation.json"), ("comparison", "comparison.json")):
        assert f"{output}/{POINTER}" in keys
        assert (committed(locate(f"{s3_bucket}/{output}")) / marker).isfile()
    denied = subprocess.run(
        [
            *run,
            "project",
            f"{s3_bucket}/model",
            f"{s3_bucket}/table",
            f"{s3_bucket}/other",
            "--storage-option",
            "secret=not-the-secret-xyz",
            "--storage-option",
            f"key={s3.key}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert denied.returncode == 2 and denied.stderr.count("\n") == 1 and "not-the-secret" not in denied.stderr
    assert "access denied" in denied.stderr
