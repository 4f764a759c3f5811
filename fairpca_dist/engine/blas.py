"""BLAS on one thread while row blocks are processed: many small products (a p × b block times
a b × D one), which a multi-threaded BLAS only slows down: its threads spin and, on a shared
machine, wait for cores (a 50 × 327 by 327 × 100 product per block: 14 s against 0.26 s for
200k rows on 2 busy cores). Dask workers run with one BLAS thread already; this covers the
threaded scheduler and the in-memory passes."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator

from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread"]


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """While inside, the BLAS libraries loaded in this process use one thread."""
    with _controller_after_imports(len(sys.modules)).limit(limits=1, user_api="blas"):
        yield


@functools.lru_cache(maxsize=1)
def _controller_after_imports(n_modules: int) -> ThreadpoolController:
    """The BLAS libraries loaded in this process. Scanning the loaded shared objects costs
    ~5 ms, which every pass would otherwise pay, so the scan is redone only after modules were
    imported (an import is what loads another BLAS; one loaded by hand with ``ctypes`` is not
    seen until the next import — numpy's own BLAS is always in the scan)."""
    return ThreadpoolController()
