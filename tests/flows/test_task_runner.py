"""The pipeline's task runner: Prefect tasks on threads of the flow's process, in the context
they were submitted in, recorded as Prefect records them (state, inputs); their Dask graphs on
the runner's cluster, whose workers never run a Prefect task. And the library's tasks in a flow
of the user's on prefect-dask's runner, where they run on a worker and use its cluster."""

from __future__ import annotations

import contextvars
import os
import pickle
import threading
import time
from typing import Any

import dask
import pytest
from distributed import LocalCluster, get_worker
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import TaskRunResult
from prefect.context import FlowRunContext

from fairpca_dist.flows.task_runner import DriverTaskRunner
from fairpca_dist.flows.tasks import dask_client

pytestmark = pytest.mark.usefixtures("prefect_harness")

_MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


def _where() -> str:
    """The worker that runs it, or "no worker"."""
    try:
        return str(get_worker().address)
    except ValueError:
        return "no worker"


@task
def _seen(value: Any) -> dict[str, Any]:
    """Where the task ran, what it saw of its submitter's context, and where its graph ran."""
    with dask_client() as client:
        graph = dask.delayed(_where)()
        ran_at = graph.compute() if client is None else client.compute(graph).result()
    thread = threading.current_thread().name
    return {"value": value, "mark": _MARK.get(), "thread": thread, "pid": os.getpid(), "graph": ran_at}


@flow
def _two_tasks() -> tuple[Any, Any, list[Any]]:
    _MARK.set("the flow's")
    first = _seen.submit(1)
    second = _seen.submit(first)  # a future among the parameters: the runner passes its result
    return first.result(), second.result(), [first.task_run_id, second.task_run_id]


def _run_on(runner: DriverTaskRunner) -> tuple[Any, Any, list[Any]]:
    return _two_tasks.with_options(task_runner=runner)()


def _recorded(ids: list[Any]) -> list[Any]:
    with get_client(sync_client=True) as client:
        return [client.read_task_run(task_run_id) for task_run_id in ids]


def test_tasks_run_on_threads_of_the_flow_and_their_graphs_on_the_local_cluster():
    first, second, ids = _run_on(DriverTaskRunner())
    main = threading.main_thread().name
    for seen in (first, second):
        assert seen["mark"] == "the flow's" and seen["thread"] != main  # a thread of the runner's, in context
        assert seen["graph"].startswith("inproc://")  # a worker of the cluster of threads in this process
    assert first["value"] == 1 and second["value"] == first
    runs = _recorded(ids)
    assert [run.state.is_completed() for run in runs] == [True, True]
    assert runs[1].task_inputs["value"] == [TaskRunResult(id=ids[0])]


def test_with_an_address_the_graphs_run_on_that_cluster_and_no_task_on_its_workers():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        first, second, _ = _run_on(DriverTaskRunner(cluster.scheduler_address))
        with cluster.get_client() as client:
            workers = set(client.scheduler_info()["workers"])
    assert {first["graph"], second["graph"]} <= workers  # the graphs: on the cluster's worker processes
    for seen in (first, second):  # the tasks: in this process, on a thread of the runner's, in context
        assert seen["pid"] == os.getpid() and seen["thread"] != threading.main_thread().name
        assert seen["mark"] == "the flow's"


@flow(task_runner=DriverTaskRunner())
def _on_the_runs_cluster(address: str) -> dict[str, Any]:
    FlowRunContext.get().task_runner.use(address)  # as the pipeline does with its dask_address
    return _seen.submit(1).result()


def test_a_flow_run_names_its_cluster_to_its_runner_before_its_first_task():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        seen = _on_the_runs_cluster(cluster.scheduler_address)
        with cluster.get_client() as client:
            workers = set(client.scheduler_info()["workers"])
    assert seen["graph"] in workers and seen["pid"] == os.getpid()
    assert _on_the_runs_cluster.task_runner.address is None  # the run's copy was told, not the flow's runner
    runner = DriverTaskRunner()
    with runner:
        _ = runner.client  # its local cluster
        runner.use(None)  # nothing to change
        with pytest.raises(RuntimeError, match="already run on its local cluster"):
            runner.use("tcp://10.0.0.5:8786")


@task
def _waits_on_its_graph(started: Any) -> None:
    with dask_client() as client:
        futures = client.map(time.sleep, [0.2] * 600, pure=False)  # a minute's passes on 2 threads
        started.set()
        client.gather(futures)


def test_a_failing_flow_closes_its_cluster_before_waiting_for_its_tasks():
    started = threading.Event()

    @flow(task_runner=DriverTaskRunner())
    def fails_while_a_task_waits() -> None:
        _waits_on_its_graph.submit(started)
        started.wait(30)
        raise RuntimeError("the flow's own failure")

    began = time.perf_counter()
    with pytest.raises(RuntimeError, match="the flow's own failure"):
        fails_while_a_task_waits()
    assert time.perf_counter() - began < 20  # the task's one-minute graph was cancelled, not waited for


def test_the_runner_is_pickled_and_duplicated_with_its_address():
    runner = DriverTaskRunner("tcp://10.0.0.5:8786", max_workers=3)
    again = pickle.loads(pickle.dumps(runner))  # as Prefect sends a flow to another process
    assert again == runner and again.address == "tcp://10.0.0.5:8786"
    assert runner.duplicate() == runner and runner.duplicate() != DriverTaskRunner()
    with pytest.raises(RuntimeError, match="not started"):
        _ = again.client


def test_a_library_task_in_a_prefect_dask_flow_uses_the_workers_cluster():
    from prefect_dask import DaskTaskRunner

    runner = DaskTaskRunner(cluster_kwargs={"n_workers": 1, "threads_per_worker": 1, "processes": False})
    task_at, graph_at = flow(task_runner=runner)(lambda: _places.submit().result())()
    # on a worker of one thread, the task left the thread pool while its graph ran there (no deadlock)
    assert task_at.startswith("inproc://") and graph_at == task_at


@task
def _places() -> tuple[str, str]:
    """Where the task runs and where its graph runs (a task Dask pickles by value: no ContextVar)."""
    with dask_client() as client:
        return _where(), client.compute(dask.delayed(_where)()).result()
