"""The pipeline's Dask task runner.

It lives in a module of its own, importable by name, because prefect-dask sends the task
runner to the workers with each task: a class defined in a flow file that a deployment loads
as a script (``pipeline.py``, module ``pipeline``) cannot be unpickled there.
"""

from __future__ import annotations

import logging
from typing import Any

from prefect_dask import DaskTaskRunner

__all__ = ["QuietDaskTaskRunner"]


class QuietDaskTaskRunner(DaskTaskRunner):
    """prefect-dask's task runner, whose shutdown after a failed or interrupted step does not warn:
    as the cluster in this process closes under tasks still running, distributed warns of each
    task it cancels and each result it loses, lines about the shutdown, not about its cause."""

    def __exit__(self, *exc_info: Any) -> None:
        if exc_info[0] is None:
            return super().__exit__(*exc_info)
        logger = logging.getLogger("distributed")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            return super().__exit__(*exc_info)
        finally:
            logger.setLevel(level)
