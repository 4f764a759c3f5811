"""The progress bar of a pass counts its tasks to the end, on both schedulers."""

from __future__ import annotations

import io
import re

import dask
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from fairpca_dist import GroupMoments
from fairpca_dist.engine.progress import threaded_progress, wait_with_progress


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
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as c,
    ):
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


def test_row_passes_of_a_fit_are_numbered_and_shown(monkeypatch):
    """A fit that reads the rows many times shows each pass with its number and kind; rescaled
    views (standardised fits) continue the count."""
    import dask.dataframe as dd

    from fairpca_dist.engine import passes as passes_module
    from fairpca_dist.engine.kernels import RandomFeatures

    frame = pd.DataFrame({"a": np.arange(40.0), "b": np.arange(40.0) ** 0.5, "g": ["x", "y"] * 20})
    moments = GroupMoments.from_arrays(frame[["a", "b"]].to_numpy(), frame["g"], feature_names=["a", "b"])
    rows = passes_module.table_passes(
        dd.from_pandas(frame, npartitions=3), moments, sensitive_feature="g", progress=True
    )
    shown = []
    run_graph = passes_module.run_graph
    monkeypatch.setattr(
        passes_module,
        "run_graph",
        lambda graph, **kw: shown.append((kw["label"], kw["progress"])) or run_graph(graph, **kw),
    )
    v, origin = np.eye(2)[:, :1], np.zeros(2)
    rows.projected(v, origin)
    view = rows.rescaled(np.full(2, 2.0))
    view.backprojected(np.ones((40, 1)), origin)
    view.rff_sums(v, origin, RandomFeatures.draw(1, 5, 1.0, np.random.default_rng(0)))
    assert shown == [
        ("pass 1 over the rows: projection", True),
        ("pass 2 over the rows: kernel gradient", True),
        ("pass 3 over the rows: random-feature sums", True),
    ]
