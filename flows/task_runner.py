"""The pipeline's task runner: Prefect tasks on threads of the flow-run process (the driver),
their Dask graphs on a cluster.

A task of the pipeline calls one library function, which plans its passes over rows, hands
them to Dask and waits: the rows are read by the cluster's workers, and everything the task
does itself (schema checks, the solver on p × p statistics, the report) is driver work
(DESIGN: "everything that decides the projection runs on the driver"). So the tasks run where
the flow runs, on Prefect's thread-pool runner, and only the passes go to the cluster. The
workers need neither Prefect nor a route to its API: they import the library's pass modules,
not Prefect's client and settings (2-3 s of a core and ~0.2 GB of peak memory per worker process). A worker
lost mid-step costs its partitions, which Dask recomputes, not the step. A task's failure
state, logs and retries are Prefect's own, recorded from this process.

It lives in a module of its own, importable by name, because Prefect pickles a flow's task
runner with the flow when it runs a flow in another process; a class defined in a flow file
that a deployment loads as a script (``pipeline.py``, module ``pipeline``) cannot be
unpickled there.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from fairpca_dist.engine.cluster import connect

__all__ = ["DriverTaskRunner"]

LOCAL_CLUSTER: dict[str, Any] = {"n_workers": 1, "threads_per_worker": 2, "processes": False, "dashboard_address": ":0"}
"""The cluster of a pipeline without a scheduler address: threads of this process (no worker
processes to start, and no extra temporary Prefect servers in ephemeral mode)."""


class DriverTaskRunner(ThreadPoolTaskRunner):
    """Prefect's thread-pool task runner, with a Dask cluster for the tasks' passes.

    Parameters
    ----------
    address : str, optional
        The Dask scheduler the passes run on (``tcp://host:8786``), connected on first use of
        :attr:`client` and checked to answer (:func:`fairpca_dist.engine.cluster.connect`).
        Default: a ``LocalCluster`` of threads in this process (:data:`LOCAL_CLUSTER`). A flow
        whose scheduler is a parameter of its runs names it with :meth:`use`.
    max_workers : int, default 4
        Threads for tasks: the pipeline runs its steps one after another.

    Notes
    -----
    A task reaches the cluster through the runner of its flow run
    (:func:`fairpca_dist.flows.tasks.dask_client`). When the flow ends with an error or an
    interrupt, the runner closes its client, and with it the cluster of this process, before it
    waits for its threads: a task waiting on its passes then fails at once (their futures are
    cancelled) instead of running to its end; distributed's warnings about that shutdown
    (each task it cancels) are not shown, being about the shutdown, not its cause.
    """

    def __init__(self, address: str | None = None, *, max_workers: int = 4) -> None:
        super().__init__(max_workers=max_workers)
        self.address = address or None
        self._cluster: contextlib.ExitStack | None = None
        self._client: Any = None
        self._client_lock = threading.Lock()

    def duplicate(self) -> DriverTaskRunner:
        return type(self)(self.address, max_workers=self._max_workers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DriverTaskRunner) and (self.address, self._max_workers) == (
            other.address,
            other._max_workers,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value as Prefect's runners are

    def use(self, address: str | None) -> None:
        """Run the passes on the scheduler at ``address`` (None: the runner's own, or the local
        cluster): for a flow whose runs name their scheduler (the pipeline's ``dask_address``),
        called by the flow before its first task. The flow's runner is its run's own copy
        (Prefect runs each flow run with a duplicate), so runs do not share an address."""
        with self._client_lock:
            if address and address != self.address:
                if self._client is not None:
                    raise RuntimeError(f"the runner's passes already run on {self.address or 'its local cluster'}")
                self.address = address

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` of the tasks' passes: connected (or the local cluster
        started) on first use, closed when the runner exits."""
        with self._client_lock:
            if self._client is None:
                if self._cluster is None:
                    raise RuntimeError("the task runner is not started")
                if self.address:
                    self._client = self._cluster.enter_context(connect(self.address))
                else:
                    from distributed import Client, LocalCluster

                    cluster = self._cluster.enter_context(LocalCluster(**LOCAL_CLUSTER))
                    self._client = self._cluster.enter_context(Client(cluster, set_as_default=False))
            return self._client

    def __enter__(self) -> DriverTaskRunner:
        super().__enter__()
        self._cluster = contextlib.ExitStack()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        cluster, self._cluster, self._client = self._cluster, None, None
        try:
            if cluster is not None:
                if exc_info[0] is None:
                    cluster.close()
                else:
                    logger = logging.getLogger("distributed")
                    level = logger.level
                    logger.setLevel(logging.ERROR)
                    try:
                        cluster.close()
                    finally:
                        logger.setLevel(level)
        finally:
            super().__exit__(*exc_info)

    def __getstate__(self) -> dict[str, Any]:
        # pickled with its flow, before it starts (Prefect's runner drops its own lock the same way)
        state = super().__getstate__()
        for name in ("_cluster", "_client", "_client_lock"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._cluster, self._client, self._client_lock = None, None, threading.Lock()
