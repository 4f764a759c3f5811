"""The pipeline's Dask task runner.

It lives in a module of its own, importable by name, because prefect-dask sends the task
runner to the workers with each task: a class defined in a flow file that a deployment loads
as a script (``pipeline.py``, module ``pipeline``) cannot be unpickled there.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any
from uuid import UUID, uuid4

from distributed import Future
from prefect.task_engine import run_task_sync
from prefect.utilities.engine import collect_task_run_inputs_sync
from prefect_dask import DaskTaskRunner
from prefect_dask.task_runners import PrefectDaskFuture

__all__ = ["QuietDaskTaskRunner"]

_CONTEXTS: dict[UUID, contextvars.Context] = {}  # task run id -> the context it was submitted in (same process)


def _run_in_submitted_context(task_run_id: UUID, **run: Any) -> Any:
    """Run ``run_task_sync(task_run_id=task_run_id, **run)`` in the context the task was submitted in
    (on a worker thread of the process that submitted it: :meth:`QuietDaskTaskRunner.submit`).
    Module-level, so that Dask can pickle it by reference."""
    engine: Any = run_task_sync  # its overloads (result or state) are not ParamSpec-friendly
    return _CONTEXTS.pop(task_run_id).run(engine, task_run_id=task_run_id, **run)


class QuietDaskTaskRunner(DaskTaskRunner):
    """prefect-dask's task runner, with two differences.

    Its shutdown after a failed or interrupted step does not warn: as the cluster in this
    process closes under tasks still running, distributed warns of each task it cancels and each
    result it loses, lines about the shutdown, not about its cause.

    On a cluster whose workers are threads of this process (the pipeline's default: a
    ``LocalCluster`` with ``processes=False``, reached over ``inproc://``), a task runs in a copy of
    the context it was submitted in, as Prefect's own thread-pool runner runs it. prefect-dask
    serializes that context at each submission and rebuilds it on the worker, for workers that may
    be other processes or machines: Prefect's whole settings object written out and validated
    again from its sources (environment, profile, ``.env``), and the task and its arguments
    hashed for a Dask key, 0.1-0.15 s of a core per task, which a small run (the demo: four tasks
    of 0.05-1.3 s) spends on the command's critical path. The task run is the same (same engine,
    parameters, dependencies, retries, states and logs in the API); with a cluster elsewhere
    (``address``) or an asynchronous task, prefect-dask's way is kept.
    """

    def submit(  # type: ignore[override]  # prefect-dask's overloads (sync and async tasks): one signature here
        self,
        task: Any,
        parameters: dict[str, Any],
        wait_for: Any = None,
        dependencies: dict[str, set[Any]] | None = None,
    ) -> PrefectDaskFuture[Any]:
        client = self.client  # creates the cluster, or connects, on first use
        address = client.scheduler.address if client.scheduler is not None else ""
        if task.isasync or not str(address).startswith("inproc://"):
            return super().submit(task, parameters, wait_for, dependencies)
        parameters = self._optimize_futures(parameters)
        wait_for = self._optimize_futures(wait_for) if wait_for else None
        # as prefect-dask's PrefectDaskClient.submit: what the task waits for, as Prefect records it
        inputs = {name: collect_task_run_inputs_sync(value, future_cls=Future) for name, value in parameters.items()}
        if dependencies:
            inputs = {name: found.union(dependencies.get(name, set())) for name, found in inputs.items()}
        task_run_id = uuid4()
        _CONTEXTS[task_run_id] = contextvars.copy_context()
        try:
            # Dask resolves futures among the keyword arguments before the call, as for prefect-dask
            future = client.submit(
                _run_in_submitted_context,
                task_run_id,
                task=task,
                parameters=parameters,
                wait_for=wait_for,
                dependencies=inputs,
                return_type="state",
                key=f"{task.name}-{task_run_id.hex}",
                pure=False,
            )
        except BaseException:
            _CONTEXTS.pop(task_run_id, None)
            raise
        self._in_context.add(task_run_id)
        future.task_run_id = task_run_id  # as prefect-dask's: a later task's inputs name this run
        return PrefectDaskFuture[Any](wrapped_future=future, task_run_id=task_run_id)

    @property
    def _in_context(self) -> set[UUID]:
        """The task runs submitted by :meth:`submit` in their context (to forget those that never ran)."""
        if "_submitted_in_context" not in self.__dict__:
            self._submitted_in_context: set[UUID] = set()
        return self._submitted_in_context

    def __exit__(self, *exc_info: Any) -> None:
        for task_run_id in self._in_context:  # those that ran took their context out already
            _CONTEXTS.pop(task_run_id, None)
        self._in_context.clear()
        if exc_info[0] is None:
            return super().__exit__(*exc_info)
        logger = logging.getLogger("distributed")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            return super().__exit__(*exc_info)
        finally:
            logger.setLevel(level)
