"""The progress bar of a pass counts its tasks to the end, on both schedulers."""

from __future__ import annotations

import io
import re

import dask
import pytest
from distributed import Client, LocalCluster

from fairpca_dist.progress import threaded_progress, wait_with_progress


def _graph(n_partitions: int) -> object:
    parts = [dask.delayed(sum)([i, i]) for i in range(n_partitions)]
    return dask.delayed(sum)(parts)  # n_partitions + 1 tasks


def _final_count(text: str) -> tuple[int, int]:
    done, total = re.findall(r"(\d+)/(\d+)", text)[-1]
    return int(done), int(total)


def test_threaded_bar_counts_every_task():
    buffer = io.StringIO()
    with threaded_progress("moments", file=buffer, disable=False) as bar:
        assert dask.compute(_graph(7), scheduler="threads")[0] == 42
        assert (bar.n, bar.total) == (8, 8)
    assert buffer.getvalue().lstrip("\r").startswith("  moments")
    assert _final_count(buffer.getvalue()) == (8, 8)


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


def test_distributed_bar_follows_the_scheduler_to_the_end(client):
    buffer = io.StringIO()
    future = client.compute(_graph(5))
    wait_with_progress(future, client, "project", file=buffer, disable=False)
    assert future.done() and future.result() == 20
    assert _final_count(buffer.getvalue()) == (6, 6)


def test_bar_is_off_when_standard_error_is_not_a_terminal(capsys):
    with threaded_progress("moments") as bar:
        dask.compute(_graph(3), scheduler="threads")
    assert bar.disable and capsys.readouterr().err == ""
