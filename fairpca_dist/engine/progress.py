"""A progress bar for a pass over rows, on either scheduler.

One tqdm bar counts the finished tasks of the pass (one per partition, plus the merges):
dask's threaded scheduler reports them through a scheduler callback, a ``distributed``
cluster through its scheduler's progress feed (the machinery behind
``distributed.progress``). The bar is drawn on standard error only when that is a terminal
(tqdm's ``disable=None``) and disappears when the pass ends, so logs and pipes stay clean;
the caller reports the result.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from dask.callbacks import Callback
from tqdm.auto import tqdm

__all__ = ["progress_bar", "threaded_progress", "wait_with_progress"]


def progress_bar(label: str, *, file: TextIO | None = None, disable: bool | None = None) -> tqdm:
    """An empty bar for a pass called ``label``; its total is set once the graph is known.
    ``disable=None``: drawn only on a terminal."""
    return tqdm(
        total=0,
        desc=f"  {label}",
        unit="task",
        leave=False,
        dynamic_ncols=True,
        file=file if file is not None else sys.stderr,
        disable=disable,
    )


class _ThreadedBar(Callback):
    """Advance ``bar`` as dask's local scheduler finishes tasks."""

    def __init__(self, bar: tqdm) -> None:
        super().__init__()
        self._bar = bar

    def _start_state(self, dsk: Any, state: dict[str, Any]) -> None:
        self._bar.total = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
        self._bar.refresh()

    def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
        self._bar.update(1)  # redrawn at most every 0.1 s

    def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
        self._bar.refresh()


@contextlib.contextmanager
def threaded_progress(label: str, **bar_options: Any) -> Iterator[tqdm]:
    """Within this context, passes on dask's local schedulers advance one bar."""
    with progress_bar(label, **bar_options) as bar, _ThreadedBar(bar):
        yield bar


def wait_with_progress(futures: Any, client: Any, label: str, **bar_options: Any) -> None:
    """Block until ``futures`` (and every task they depend on) are done on ``client``'s
    cluster, drawing the bar from the scheduler's progress feed (every 100 ms)."""
    from distributed.diagnostics.progressbar import ProgressBar

    class _DistributedBar(ProgressBar):
        def _draw_bar(self, remaining: int, all: int, **kwargs: Any) -> None:  # noqa: A002 - distributed's name
            bar.total = all
            bar.n = all - remaining
            bar.refresh()

    with progress_bar(label, **bar_options) as bar:
        feed = _DistributedBar(futures if isinstance(futures, list) else [futures], scheduler=client.scheduler.address)
        client.sync(feed.listen)
