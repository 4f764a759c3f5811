"""The pipeline's task runner on a cluster of this process: each task runs in the context it was
submitted in (no serialized context), on a worker thread, and its run is recorded as prefect-dask
records it (state, inputs)."""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import prefect_dask.client
import pytest
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import TaskRunResult

from fairpca_dist.flows import task_runner
from fairpca_dist.flows.task_runner import QuietDaskTaskRunner

pytestmark = pytest.mark.usefixtures("prefect_harness")

_MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


def _mark() -> str:
    """The value of _MARK here (a task reaches the variable through this function: Dask pickles a
    task's function by value, with its globals, and a ContextVar cannot be pickled)."""
    return _MARK.get()


@task
def _seen(value: Any) -> tuple[Any, str, str]:
    return value, _mark(), threading.current_thread().name


@flow(
    task_runner=QuietDaskTaskRunner(
        cluster_kwargs={"n_workers": 1, "threads_per_worker": 2, "processes": False, "dashboard_address": ":0"}
    )
)
def _two_tasks() -> tuple[Any, Any, list[Any]]:
    _MARK.set("the flow's")
    first = _seen.submit(1)
    second = _seen.submit(first)  # a future among the parameters: Dask passes its result
    return first.result(), second.result(), [first.task_run_id, second.task_run_id]


def test_a_task_on_a_cluster_of_this_process_runs_in_its_submitters_context(monkeypatch):
    def serialized(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the context was serialized")

    monkeypatch.setattr(prefect_dask.client, "serialize_context", serialized)
    first, second, ids = _two_tasks()
    assert first[:2] == (1, "the flow's") and "Dask-Default-Threads" in first[2]  # a worker's thread
    assert second[:2] == (first, "the flow's") and "Dask-Default-Threads" in second[2]
    with get_client(sync_client=True) as client:
        runs = [client.read_task_run(task_run_id) for task_run_id in ids]
    assert [run.state.is_completed() for run in runs] == [True, True]
    assert runs[1].task_inputs["value"] == [TaskRunResult(id=ids[0])]
    assert task_runner._CONTEXTS == {}  # each taken by its task
