"""Per-file cached moments: refits read nothing, new files are read alone, results equal a full pass."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import GroupMoments, compute_moments, load_model
from fairpca_dist.fitting import cached_table_moments, fit_table
from fairpca_dist.io.ingest import ingest_table


def write_parts(folder, frame, rows_per_file, start=0):
    folder.mkdir(exist_ok=True)
    for i in range(0, len(frame), rows_per_file):
        frame.iloc[i : i + rows_per_file].to_parquet(
            folder / f"part-{start + i // rows_per_file:05d}.parquet", index=False
        )


@pytest.fixture()
def frame():
    x, labels = grouped_data(n_rows=3000, n_features=5, n_groups=2, offset=1e6)
    return pd.DataFrame(x, columns=list("abcde")).assign(g=labels)


def test_refit_reads_no_rows_and_new_files_alone(frame, tmp_path):
    table, cache = tmp_path / "table", tmp_path / "cache"
    write_parts(table, frame.iloc[:2000], 500)
    roles = {"sensitive_feature": "g", "features": list("abcde")}
    first, fingerprint, read = cached_table_moments(table, cache, **roles)
    assert read == 4
    again, same_fingerprint, read = cached_table_moments(table, cache, **roles)
    assert read == 0 and same_fingerprint == fingerprint
    np.testing.assert_array_equal(again.scatter, first.scatter)
    write_parts(table, frame.iloc[2000:], 500, start=4)  # the table gained two files
    grown, new_fingerprint, read = cached_table_moments(table, cache, **roles)
    assert read == 2 and new_fingerprint != fingerprint
    full = compute_moments(frame, sensitive_feature="g")
    np.testing.assert_allclose(grown.scatter, full.scatter, rtol=1e-11)
    np.testing.assert_allclose(grown.mean, full.mean, rtol=1e-14)
    np.testing.assert_array_equal(grown.count, full.count)


def test_changed_roles_do_not_reuse_the_cache(frame, tmp_path):
    write_parts(tmp_path / "table", frame, 1000)
    cached_table_moments(tmp_path / "table", tmp_path / "cache", sensitive_feature="g", features=list("abcde"))
    _, _, read = cached_table_moments(
        tmp_path / "table", tmp_path / "cache", sensitive_feature="g", features=list("abc")
    )
    assert read == 3


def test_fit_table_from_ingested_schema(frame, tmp_path):
    frame.to_csv(tmp_path / "source.csv", index=False)
    ingest_table(str(tmp_path / "source.csv"), tmp_path / "table", sensitive_feature="g")
    model = fit_table(tmp_path / "table", tmp_path / "model", method="samadi-mw", n_components=2, standardize=True)
    loaded = load_model(tmp_path / "model")
    np.testing.assert_array_equal(loaded.components, model.components)
    moments = GroupMoments.load(tmp_path / "model" / "moments.npz")
    np.testing.assert_allclose(moments.scatter, compute_moments(frame, sensitive_feature="g").scatter, rtol=1e-10)


def test_killing_a_dask_worker_during_the_pass_gives_identical_moments(tmp_path):
    """A worker process killed mid-pass: the nanny restarts it, the scheduler recomputes the
    lost tasks, and the graph (hence every floating-point merge) is the same."""
    from distributed import Client, LocalCluster

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(1_200_000, 20)), columns=[f"f{j}" for j in range(20)])
    frame["g"] = rng.choice(["a", "b", "c"], size=len(frame))
    write_parts(tmp_path / "table", frame, 30_000)
    reference = compute_moments(str(tmp_path / "table"), sensitive_feature="g")
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(2)
        victim = sorted(client.run(os.getpid).items())[0][1]
        killer = threading.Timer(0.3, os.kill, args=(victim, signal.SIGKILL))
        started = time.perf_counter()
        killer.start()
        moments = compute_moments(str(tmp_path / "table"), sensitive_feature="g", client=client)
        killer.join()
        assert time.perf_counter() - started > 0.3, "the pass ended before the worker was killed"
        assert victim not in client.run(os.getpid).values()
    np.testing.assert_array_equal(moments.count, reference.count)
    np.testing.assert_array_equal(moments.scatter, reference.scatter)
    np.testing.assert_array_equal(moments.mean, reference.mean)
