"""BLAS for the row kernels: one thread while row blocks are processed, and syrk as a function pointer.

One thread: many small products (a p × b block times
a b × D one), which a multi-threaded BLAS only slows down: its threads spin and, on a shared
machine, wait for cores (a 50 × 327 by 327 × 100 product per block: 14 s against 0.26 s for
200k rows on 2 busy cores). Dask workers run with one BLAS thread already; this covers the
threaded scheduler and the in-memory passes."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys
from collections.abc import Callable, Iterator

import numpy as np
from scipy.linalg import cython_blas
from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread", "fortran_dsyrk", "symmetrized"]


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


# The Fortran BLAS of SciPy, reached through its Cython API (``scipy.linalg.cython_blas``) as a
# plain function pointer: the compiled row loop (engine/gram.py) calls it without the GIL, and the
# result accumulates in place. NumPy's ``b.T @ b`` also runs syrk without the GIL, but allocates a
# p × p result and copies its triangle each call (at p = 2000 and 256-row blocks, as long as the
# product itself), and SciPy's f2py wrapper ``scipy.linalg.blas.dsyrk`` holds the GIL (0.96x on
# 2 threads).
@functools.lru_cache(maxsize=1)
def fortran_dsyrk() -> Callable[..., None]:
    """SciPy's ``dsyrk`` as a ctypes function of ten pointers (uplo, trans, n, k, alpha, a, lda,
    beta, c, ldc; Fortran passes every argument by reference): C ← α A Aᵀ + β C (trans "N") on
    the triangle ``uplo`` of the column-major n × n matrix C, A column-major n × k."""
    capsule = cython_blas.__pyx_capi__["dsyrk"]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    pointer = ctypes.pythonapi.PyCapsule_GetPointer
    pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 10)(pointer(capsule, name(capsule)))


def symmetrized(lower: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose lower triangle is that of ``lower`` (upper triangle ignored)."""
    out = np.tril(lower)
    out += np.tril(lower, -1).T
    return out
