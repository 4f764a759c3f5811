"""Worker memory: Parquet row groups too large for one task are read in slices, and a pass that
a cluster's workers cannot hold is refused before it starts, with the memory it needs.

Every cluster here is a real ``distributed.LocalCluster`` of worker processes with a real memory
limit (the nanny pauses a worker at 80 % of it and kills it at 95 %). The table of the
acceptance case is one Parquet file of 1,048,576-row groups (pandas' and pyarrow's default),
400 MiB decoded per row group at p = 50: more than a task of a 1 GB worker can decode at once.
Waits for an answer are bounded (60 s), so a pass that would pause forever fails the test
instead of hanging it.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable
from typing import Any

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import Client, LocalCluster

from fairpca_dist import GroupMoments, compute_moments
from fairpca_dist.cli import main
from fairpca_dist.engine.memory import frame_partition_size, pass_size, worker_memory
from fairpca_dist.engine.passes import run_graph
from fairpca_dist.engine.sources import map_partitions, open_table
from fairpca_dist.exceptions import ResourceError, ServiceError

ROWS, P, ROW_GROUP = 1_100_000, 50, 1_048_576
FEATURES = [f"x{j}" for j in range(P)]
ANSWER_WITHIN = 60  # seconds


@pytest.fixture(scope="module")
def big_row_groups(tmp_path_factory) -> tuple[str, GroupMoments]:
    """One Parquet file of 1.1M rows x 50 float64 features + an int64 group in 1,048,576-row
    groups, and its moments computed in memory with numpy."""
    rng = np.random.default_rng(29)
    groups = rng.integers(0, 3, ROWS)
    x = rng.standard_normal((ROWS, P)) * (1.0 + 0.5 * groups[:, None]) + 1e3 * groups[:, None]
    table = pa.Table.from_arrays([*(pa.array(x[:, j]) for j in range(P)), pa.array(groups)], names=[*FEATURES, "group"])
    path = tmp_path_factory.mktemp("memory") / "pandas_default_row_groups.parquet"
    pq.write_table(table, path, row_group_size=ROW_GROUP)
    assert pq.ParquetFile(path).metadata.row_group(0).num_rows == ROW_GROUP
    return str(path), GroupMoments.from_codes(x, groups, (0, 1, 2), feature_names=FEATURES)


def _cluster(memory_limit: str, n_workers: int = 2) -> tuple[LocalCluster, Client]:
    cluster = LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, memory_limit=memory_limit, dashboard_address=":0"
    )
    return cluster, Client(cluster, set_as_default=False)


@pytest.fixture(scope="module")
def floor() -> int:
    """A worker's floor on this machine (its memory once the libraries of a pass are imported, as
    the check measures it; it differs between machines: ≈ 260 MB on one, 365 MB on another), from
    which the refusal tests choose memory limits that make their premise hold here."""
    cluster, client = _cluster("1GB", n_workers=1)
    with cluster, client:
        return max(worker.floor for worker in worker_memory(client))


def _fractions() -> tuple[float, float]:
    """The fractions of its memory limit at which distributed pauses a worker and kills it."""
    return (
        float(dask.config.get("distributed.worker.memory.pause")),
        float(dask.config.get("distributed.worker.memory.terminate")),
    )


def _answer(run: Callable[[], Any]) -> Any:
    """``run()``'s result or error, which must come within :data:`ANSWER_WITHIN` seconds."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = run()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(ANSWER_WITHIN)
    assert not thread.is_alive(), f"no answer within {ANSWER_WITHIN} s (the workers paused, or kept being killed)"
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_large_row_groups_are_read_in_slices_equal_to_the_rows(tmp_path):
    # Row groups larger than the partition budget become partitions of row slices; the slices,
    # in order, are the file's rows with the dtypes dask reads (text group labels included).
    rng = np.random.default_rng(0)
    n = 10_000
    frame = pd.DataFrame(rng.standard_normal((n, 4)), columns=list("abcd")).assign(
        group=rng.choice(["f", "m", "x"], n), count=rng.integers(0, 9, n)
    )
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=4096)  # 3 row groups
    options = {"blocksize": "32 KiB"}  # a row group is ~200 KiB decoded
    table = open_table(str(path), sensitive_feature="group", read_options=options)
    assert table.n_partitions > 3
    read = table.frame.compute().reset_index(drop=True)
    pd.testing.assert_frame_equal(read, pd.read_parquet(path).astype(read.dtypes.to_dict()))
    assert (
        read.dtypes.to_dict()
        == open_table(
            str(path), sensitive_feature="group", read_options={"split_row_groups": True}
        ).frame.dtypes.to_dict()
    )
    moments = compute_moments(str(path), sensitive_feature="group", features=list("abcd"), read_options=options)
    codes, labels = pd.factorize(frame["group"], sort=True)
    expected = GroupMoments.from_codes(frame[list("abcd")].to_numpy(), codes, tuple(labels), feature_names=list("abcd"))
    np.testing.assert_allclose(moments.scatter, expected.scatter, rtol=1e-10)
    np.testing.assert_allclose(moments.mean, expected.mean, rtol=1e-12)


def test_every_pass_carries_the_size_of_its_largest_partition(big_row_groups):
    path, _ = big_row_groups
    sliced = open_table(path, sensitive_feature="group")
    whole = open_table(path, sensitive_feature="group", read_options={"split_row_groups": True})
    assert whole.n_partitions == 2 and sliced.n_partitions > 2
    size = pass_size(sliced.map_chunks(len))
    assert size == frame_partition_size(sliced.frame[sliced.columns])
    assert size.sliced and size.n_columns == P + 1 and size.decoded_bytes <= 64 * 2**20
    assert pass_size(whole.map_partitions(len)).rows == ROW_GROUP
    array = open_table(np.zeros((1000, 3)), sensitive_feature=np.zeros(1000), chunk_rows=300)
    assert pass_size(array.map_chunks(len)).rows == 300
    rows = pd.DataFrame(np.zeros((1000, 3)), columns=list("abc")).assign(g=0)
    in_memory = open_table(rows, sensitive_feature="g", chunk_rows=300)  # partitions of 300, 300, 300, 100 rows
    assert pass_size(in_memory.map_chunks(len)).rows == 300


def test_one_gigabyte_workers_run_a_file_of_million_row_groups(big_row_groups):
    # The acceptance case of issue 29: pandas' default row groups on workers of 1 GB. Before,
    # the worker decoding a row group was killed until distributed gave up (KilledWorker).
    path, expected = big_row_groups
    cluster, client = _cluster("1GB")
    with cluster, client:
        pids = client.run(os.getpid)
        moments = _answer(lambda: compute_moments(path, sensitive_feature="group", client=client))
        assert client.run(os.getpid) == pids  # no worker was restarted for its memory
    np.testing.assert_array_equal(moments.count, expected.count)
    np.testing.assert_allclose(moments.mean, expected.mean, rtol=1e-12)
    np.testing.assert_allclose(moments.scatter, expected.scatter, rtol=1e-9)


def test_workers_too_small_for_a_partition_are_refused_with_the_memory_needed(big_row_groups, floor, tmp_path, capsys):
    # Workers whose libraries fit under the pause threshold, but not with a partition of the
    # default 64 MiB: their threshold is halfway between the floor plus what a partition of half
    # its rows needs and the floor plus what it needs (≈ 630 MB workers for a floor of 260 MB, 760
    # MB for 365 MB). Before, the workers were killed until distributed gave up (KilledWorker).
    # The advice works: with the partition size it names, the pass runs.
    path, expected = big_row_groups
    table = open_table(path, sensitive_feature="group")
    size = pass_size(table.map_chunks(len))
    pause, _ = _fractions()
    limit = round((floor + (size.need() + size.need(size.rows // 2)) / 2) / pause / 1e6)  # MB
    assert floor + size.need(size.rows // 2) < pause * limit * 1e6 < floor + size.need()
    cluster, client = _cluster(f"{limit}MB")
    with cluster, client:
        with pytest.raises(ResourceError) as refused:
            _answer(lambda: compute_moments(path, sensitive_feature="group", client=client))
        message = str(refused.value)
        assert message.startswith("a pass needs ≈") and f"a memory limit of {limit} MB" in message
        assert "(the largest: 131,072 rows × 51 columns, 53 MB decoded)" in message  # the partition it sized
        required = re.search(r"memory limit of at least ([\d.]+) (MB|GB) \(dask worker --memory-limit", message)
        assert required and float(required[1]) * (1e9 if required[2] == "GB" else 1e6) > limit * 1e6
        blocksize = re.search(r"read_options=\{'blocksize': '(\d+ MiB)'\}", message)
        assert blocksize, message
        # the command line: one line, exit 2, nothing written
        out = tmp_path / "ingested"
        code = _answer(
            lambda: main(
                ["ingest", path, str(out), "--sensitive-feature", "group", "--dask-address", cluster.scheduler_address]
            )
        )
        stderr = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(stderr) == 1, stderr
        assert stderr[0].startswith("fairpca: error: a pass needs ≈") and "Traceback" not in stderr[0]
        assert not out.exists()
        pids = client.run(os.getpid)
        moments = _answer(
            lambda: compute_moments(
                path, sensitive_feature="group", client=client, read_options={"blocksize": blocksize[1]}
            )
        )
        assert client.run(os.getpid) == pids
    np.testing.assert_allclose(moments.scatter, expected.scatter, rtol=1e-9)


def test_workers_whose_libraries_fill_the_pause_threshold_are_refused(big_row_groups, floor):
    # Workers that pause below the floor (the memory a worker uses once pandas, pyarrow and
    # dask.dataframe are imported) and are killed above it: their limit is halfway between the
    # floor / 0.95 and the floor / 0.8 (≈ 300 MB workers for a floor of 260 MB, 420 MB for 365
    # MB). Before, both workers paused and the pass waited forever.
    path, _ = big_row_groups
    pause, terminate = _fractions()
    limit = math.floor(floor * (1 / pause + 1 / terminate) / 2 / 1e6)  # MB
    assert pause * limit * 1e6 < floor < terminate * limit * 1e6
    cluster, client = _cluster(f"{limit}MB")
    with cluster, client:
        with pytest.raises(
            ResourceError,
            match=rf"a memory limit of {limit} MB cannot run a pass: a worker uses "
            r"\d+ MB once the libraries of a pass are loaded .* wait forever; "
            r"start workers with a memory limit of at least",
        ):
            _answer(lambda: compute_moments(path, sensitive_feature="group", client=client))


def _use_memory(part: pd.DataFrame, partition: Any, n_bytes: int) -> int:
    return int(np.ones(n_bytes // 8).sum())  # more than the worker may hold: the nanny kills it


def _exit(part: pd.DataFrame, partition: Any) -> None:
    os._exit(1)  # a worker process that dies for another reason than memory


def test_a_killed_worker_becomes_an_error_a_person_can_act_on(tmp_path):
    # What the estimate cannot see (here a task's own allocation) still ends in one clear error:
    # workers killed for memory give a ResourceError naming their limit, workers dying otherwise
    # a ServiceError pointing at their logs.
    path = tmp_path / "small.parquet"
    pd.DataFrame({"a": np.arange(10.0), "group": 0}).to_parquet(path)
    frame = open_table(str(path), sensitive_feature="group").frame
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):  # give up after 2 deaths, not 4
        cluster, client = _cluster("600MB")
    with cluster, client:
        with pytest.raises(
            ResourceError,
            match=r"running partition 0 died 2 times, killed by their nannies for "
            r"exceeding their memory limit \(the last had a memory limit of "
            r"600 MB\)",
        ):
            _answer(lambda: run_graph(map_partitions(frame, _use_memory, 2 * 10**9), client=client))
        with pytest.raises(ServiceError, match=r"died \d+ times.*look in the workers' logs"):
            _answer(lambda: run_graph(map_partitions(frame, _exit), client=client))
