"""How the flows fail: what they retry (only what can succeed on retry), the run id, the checks
made before the first pass, and the documented forms of their parameters.

The transient failure is real: a ``distributed`` worker process killed by a worker plugin in
the middle of the fit's moments pass, on a cluster that gives up on a task after one lost
worker (``allowed-failures: 0``), so the task sees ``KilledWorker``. The deterministic ones are
an output under a regular file and a full disk (a Parquet write that raises ENOSPC: a full disk
cannot be made in a test).
"""

from __future__ import annotations

import errno
import hashlib
import shutil
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import grouped_data
from distributed import Client, LocalCluster
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from test_faults import KillOnce

from fairpca_dist import InputError, WriteError
from fairpca_dist.cli import main
from fairpca_dist.fitting import fit_table
from fairpca_dist.flows.pipeline import pipeline
from fairpca_dist.flows.project import project
from fairpca_dist.io.ingest import ingest_table

pytestmark = pytest.mark.usefixtures("prefect_harness")

FEATURES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A table of 6 partitions (ingested from Parquet files) with a binary target ``y``, and a model."""
    folder = tmp_path_factory.mktemp("failures")
    x, labels = grouped_data(n_rows=1200, n_features=4, n_groups=2, seed=7)
    frame = pd.DataFrame(x, columns=FEATURES).assign(id=np.arange(1200), sex=labels, y=np.arange(1200) % 2)
    (folder / "source").mkdir()
    for i, start in enumerate(range(0, len(frame), 200)):
        frame.iloc[start : start + 200].to_parquet(folder / "source" / f"part-{i}.parquet", index=False)
    ingest_table(
        str(folder / "source"), folder / "table", sensitive_feature="sex", features=FEATURES, key_columns=["id"]
    )
    fit_table(folder / "table", folder / "model", n_components=2, cache_dir=folder / "cache")
    return folder


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
    }


def _task_run_counts(state: Any) -> dict[str, int]:
    """How many times each task of the flow run that ended in ``state`` ran."""
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
        )
    return {run.task_key: run.run_count for run in runs}


# ----------------------------------------------------------------------------- retries
def _parent_is_a_file(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("not a folder\n")
    return tmp_path / "a-file" / "projected"


def _disk_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    real = pq.write_table

    def disk_full_at_part_3(table, where, **kwargs):  # where: the open file of a part (its .path)
        if Path(where.path).name == "part-00003.parquet":
            raise OSError(errno.ENOSPC, "No space left on device", where.path)
        return real(table, where, **kwargs)

    monkeypatch.setattr(pq, "write_table", disk_full_at_part_3)
    return tmp_path / "projected"


@pytest.mark.parametrize(
    "make_fault, message",
    [
        (lambda tmp_path, monkeypatch: _parent_is_a_file(tmp_path), "a parent in the path is a file"),
        (_disk_full, "no space left on the disk"),
    ],
    ids=["parent-is-a-file", "disk-full"],
)
def test_a_deterministic_error_fails_the_flow_at_once(work, tmp_path, monkeypatch, make_fault, message):
    """A WriteError (an OSError, not an input error) was retried twice, 5 s and 30 s later."""
    out = make_fault(tmp_path, monkeypatch)
    state = project(model_dir=str(work / "model"), table_dir=str(work / "table"), out_dir=str(out), return_state=True)
    assert state.is_failed()
    with pytest.raises(WriteError, match=message):
        state.result()
    assert list(_task_run_counts(state).values()) == [1]


@pytest.fixture(scope="module")
def fragile_cluster():
    """Two worker processes under nannies, on a scheduler that fails a task (KilledWorker) as
    soon as one worker dies running it."""
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


def test_a_lost_worker_is_retried_and_the_flow_succeeds(work, tmp_path, fragile_cluster, monkeypatch):
    from fairpca_dist.flows import fit as fit_flow_module
    from fairpca_dist.flows.fit import fit
    from fairpca_dist.flows.tasks import fit_task

    monkeypatch.setattr(fit_flow_module, "fit_task", fit_task.with_options(retry_delay_seconds=0))
    table = tmp_path / "table"  # without the moments ingest wrote into it: the fit reads the rows
    shutil.copytree(work / "table", table, ignore=shutil.ignore_patterns("moments"))
    fit_table(table, tmp_path / "reference", n_components=2, standardize=True, cache_dir=tmp_path / "ref-cache")
    fragile_cluster.wait_for_workers(2, timeout=120)
    marker = tmp_path / "killed"
    fragile_cluster.register_plugin(KillOnce(marker, 2), name="kill-once")
    try:
        state = fit(
            table_dir=str(table),
            model_dir=str(tmp_path / "model"),
            n_components=2,
            cache_dir=str(tmp_path / "cache"),
            dask_address=fragile_cluster.scheduler.address,
            return_state=True,
        )
    finally:
        fragile_cluster.unregister_worker_plugin("kill-once")
    assert marker.exists() and state.is_completed()
    assert list(_task_run_counts(state).values()) == [2]  # KilledWorker, then the retry
    assert (tmp_path / "model" / "model.npz").read_bytes() == (tmp_path / "reference" / "model.npz").read_bytes()


# ----------------------------------------------------------------------------- run id
@pytest.mark.parametrize("run_id", ["../../somewhere", "a/b", "..", ".hidden"])
def test_a_run_id_that_is_not_a_plain_name_is_refused_before_anything_is_written(work, tmp_path, run_id):
    runs = tmp_path / "x" / "y" / "runs"
    runs.mkdir(parents=True)
    before = _snapshot(tmp_path)
    with pytest.raises(InputError, match=r"run_id='.*' \(command line: --run-id\) must be a plain folder name"):
        pipeline(source=str(work / "source"), sensitive_feature=["sex"], runs_dir=str(runs), run_id=run_id)
    assert _snapshot(tmp_path) == before


def test_the_demo_refuses_a_run_id_outside_its_runs_folder_before_writing(tmp_path, capsys):
    runs = tmp_path / "x" / "y" / "runs"
    assert main(["demo", "--runs-dir", str(runs), "--run-id", "../../somewhere"]) == 2
    assert capsys.readouterr().err.startswith("fairpca: error: run_id='../../somewhere' (command line: --run-id)")
    assert list(tmp_path.rglob("*")) == []


# ----------------------------------------------------------------------------- early checks
def test_a_target_with_missing_values_fails_the_run_right_after_ingest(work, tmp_path):
    """Found after the fit and the projection before (the report's sample), and the fit had left
    its moments in the runs folder's cache."""
    frame = pd.read_parquet(work / "source")
    frame["y"] = frame["y"].astype("float64")
    frame.loc[[5, 700], "y"] = np.nan
    frame.to_parquet(tmp_path / "source.parquet", index=False)
    runs = tmp_path / "runs"
    with pytest.raises(InputError, match=r"target 'y' is missing in 2 row\(s\) of the ingested table \S+"):
        pipeline(
            source=str(tmp_path / "source.parquet"),
            sensitive_feature=["sex"],
            features=FEATURES,
            target="y",
            runs_dir=str(runs),
            run_id="t",
        )
    assert list(runs.iterdir()) == []  # no run folder, no moments cache: the fit never ran


def test_a_scheduler_that_does_not_answer_fails_the_flow_before_any_task(work, tmp_path):
    import socket

    from fairpca_dist import ServiceError
    from fairpca_dist.flows.fit import fit

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(ServiceError, match=f"no Dask scheduler answers at {address}"):
        fit(str(work / "table"), str(tmp_path / "model"), dask_address=address)
    with pytest.raises(InputError, match="dask address 'tcp://127.0.0.1:99999' has port 99999"):
        project(str(work / "model"), str(work / "table"), str(tmp_path / "out"), dask_address="tcp://127.0.0.1:99999")
    assert list(tmp_path.iterdir()) == []
