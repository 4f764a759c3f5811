"""The pipeline flow with its source and runs on a real S3 server (tests/s3_server.py), on the
threaded in-process cluster, against the library run on the local disk. (On separate worker
processes that share no disk with the driver: tests/integration/test_no_shared_disk.py.)"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import InputError, load_model
from fairpca_dist.fitting import fit_table
from fairpca_dist.flows.pipeline import pipeline
from fairpca_dist.io.ingest import ingest_table
from fairpca_dist.io.storage import locate
from fairpca_dist.io.versions import POINTER, committed
from fairpca_dist.projection import project_table

pytestmark = pytest.mark.usefixtures("prefect_harness", "s3")


@pytest.fixture
def source(s3_bucket: str, tmp_path) -> tuple[str, str]:
    """A CSV with a binary target, in the bucket and on the local disk."""
    x, labels = grouped_data(n_rows=1200, n_features=5, n_groups=2, seed=11)
    frame = pd.DataFrame(x, columns=[f"x{j}" for j in range(5)])
    frame["group"], frame["row_id"] = labels, np.arange(len(frame))
    frame["label"] = (frame["x0"] > frame["x0"].median()).astype(int)
    local = tmp_path / "source.csv"
    frame.to_csv(local, index=False)
    frame.to_csv(f"{s3_bucket}/input/source.csv", index=False)
    return f"{s3_bucket}/input/source.csv", str(local)


def _committed_parquet(url: str) -> pd.DataFrame:
    version = committed(locate(url))
    parts = [entry for entry in version.listdir() if entry.name.endswith(".parquet")]
    return pd.concat([pd.read_parquet(p.dask_url) for p in parts]).sort_values("row_id", ignore_index=True)


def test_pipeline_on_s3_lands_in_the_bucket_and_equals_a_local_run(s3, s3_bucket, source, tmp_path, monkeypatch):
    remote, local = source
    monkeypatch.chdir(tmp_path)
    result = pipeline(
        source=remote,
        sensitive_feature=["group"],
        runs_dir=f"{s3_bucket}/runs",
        run_id="r1",
        key_columns=["row_id"],
        target="label",
        features=[f"x{j}" for j in range(5)],
        n_components=2,
    )
    run = f"{s3_bucket}/runs/r1"
    assert result["run_dir"] == run
    keys = s3.keys(s3_bucket.removeprefix("s3://"))
    for output in ("table", "model", "projected", "report"):
        assert f"runs/r1/{output}/{POINTER}" in keys, output
    table_moments = [k for k in keys if k.startswith("runs/r1/table/") and "/moments/" in k]
    assert table_moments and not any(k.startswith("runs/.moments-cache/") for k in keys)  # the fit read no rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.csv"]  # nothing under the working folder

    ingest_table(
        local,
        tmp_path / "table",
        sensitive_feature="group",
        key_columns=["row_id"],
        pass_through=["label"],
        features=[f"x{j}" for j in range(5)],
    )
    direct = fit_table(tmp_path / "table", tmp_path / "model", n_components=2, standardize=True)
    project_table(tmp_path / "model", tmp_path / "table", tmp_path / "projected", pass_through=["row_id", "label"])
    model = load_model(f"{run}/model")
    np.testing.assert_allclose(model.components, direct.components, atol=1e-12)
    pd.testing.assert_frame_equal(
        _committed_parquet(f"{run}/projected"), _committed_parquet(str(tmp_path / "projected")), atol=1e-12
    )
    report = json.loads((committed(locate(f"{run}/report")) / "report.json").read_text())
    assert report["model"]["method"] == "fair-eig"


def test_a_failed_run_on_s3_leaves_nothing_in_its_run_folder(s3, s3_bucket, source):
    remote, _ = source
    with pytest.raises(InputError, match="nope"):
        pipeline(
            source=remote,
            sensitive_feature=["group"],
            runs_dir=f"{s3_bucket}/runs",
            run_id="bad",
            key_columns=["row_id"],
            target="nope",
        )
    assert not s3.keys(s3_bucket.removeprefix("s3://"), "runs/bad")


def test_credentials_are_refused_as_flow_parameters(s3_bucket, source):
    remote, _ = source
    with pytest.raises(InputError, match="'secret' holds a credential") as raised:
        pipeline(
            source=remote,
            sensitive_feature=["group"],
            runs_dir=f"{s3_bucket}/runs",
            run_id="r2",
            storage_options={"secret": "hunter2-secret"},
        )
    assert "hunter2" not in str(raised.value)
